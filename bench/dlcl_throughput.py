"""Training throughput of a deep DLCL model vs the same model with plain residual connections (prenorm-dlcl).

The prenorm-dlcl paper (sec. 5) reports that DLCL adds little training cost. This bench builds a 30L-6L pre-norm
model with DLCL in encoder and decoder (deep_nmt_hf DLCLConfig) and the same model with
`encoder_layer_aggregation = decoder_layer_aggregation = "residual"` (same seed, same shapes, same Multi30k en→de
batches) and times one training round = forward + backward + Adam step over the same `--steps` batches. The two
sides run interleaved (A B A B ...), one untimed warm-up round first; the result is the median over `--repeats`
rounds of tokens/s (non-pad source + target tokens). Goal: DLCL overhead ≤ 10%. A third side (unless
--no-loop-side) is the same DLCL model with the library's previous elementwise combination, for comparison. With `--profile`, one round of
each side also runs under torch.profiler and the top operators by self CPU time are written to the result.

    python bench/dlcl_throughput.py --profile       # d 256, 30L-6L (≈ 5-10 min on 2 heavily shared cores)
    python bench/dlcl_throughput.py --quick         # smoke run (writes dlcl_throughput_quick.*)

Writes bench/results/dlcl_throughput.{json,md}.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from common import (  # noqa: E402
    interleaved,
    markdown_table,
    multi30k_pairs,
    multi30k_tokenizer,
    ops_table,
    profile_ops,
    ratio,
    tokenized_batches,
    write_results,
)

NAME = "dlcl_throughput"


def build(aggregation: str, args: argparse.Namespace, ids: dict[str, int]):
    """The DLCL model (aggregation "dlcl") or the same model with residual connections ("residual")."""
    import torch

    from deep_nmt_hf import DLCLConfig, DLCLForConditionalGeneration

    config = DLCLConfig(
        d_model=args.d_model,
        encoder_ffn_dim=4 * args.d_model,
        decoder_ffn_dim=4 * args.d_model,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        encoder_layers=args.encoder_layers,
        decoder_layers=args.decoder_layers,
        encoder_layer_aggregation=aggregation,
        decoder_layer_aggregation=aggregation,
        max_position_embeddings=256,
        **ids,
    )
    torch.manual_seed(0)
    model = DLCLForConditionalGeneration(config).train()
    return model, torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))


def loop_combine(self, history: list) -> Any:
    """The elementwise DLCL combination the library used before the stacked one (a scalar multiply-add per
    history entry); timed as a third side to show what the change in layer_aggregation.combine bought."""
    row = len(history) - 1
    weights = self.weights()[row]
    start = self.starts[row]
    combined = weights[start] * history[start]
    for k in range(start + 1, row + 1):
        combined = combined + weights[k] * history[k]
    if not self.pre_norm and row > 0:
        combined = self.layer_norms[row - 1](combined)
    return combined


def train_round(model, optimizer, batches: list[dict]) -> None:
    for batch in batches:
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny smoke run (writes dlcl_throughput_quick.*)"
    )
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--encoder-layers", type=int, default=30)
    parser.add_argument("--decoder-layers", type=int, default=6)
    parser.add_argument("--batch-size", type=int, default=16, help="sentence pairs per batch")
    parser.add_argument("--steps", type=int, default=1, help="training steps per timed round")
    parser.add_argument("--repeats", type=int, default=5, help="timed rounds per side (median)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    parser.add_argument("--profile", action="store_true", help="also profile one round of each side")
    parser.add_argument(
        "--no-loop-side",
        dest="loop_side",
        action="store_false",
        help="leave out the third side (DLCL with the previous elementwise combination)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.d_model, args.encoder_layers, args.decoder_layers = 64, 8, 2
        args.batch_size, args.steps, args.repeats = 8, 1, 3

    import torch

    from deep_nmt_hf.tokenization import special_token_ids

    torch.set_num_threads(args.threads)
    tokenizer = multi30k_tokenizer(4000)
    pairs = multi30k_pairs("train", limit=args.batch_size * 100)
    pairs = sorted(pairs, key=lambda p: (len(p[1].split()), len(p[0].split())))
    batches = tokenized_batches(tokenizer, pairs, args.batch_size, 64)
    batches = random.Random(0).sample(batches, args.steps)  # typical lengths, the same for both sides
    tokens = sum(int(b["attention_mask"].sum()) + int((b["labels"] != -100).sum()) for b in batches)
    ids = special_token_ids(tokenizer)

    sides = {name: build(name, args, ids) for name in ("residual", "dlcl")}
    if args.loop_side:
        model, optimizer = build("dlcl", args, ids)
        for side in (model.model.encoder, model.model.decoder):
            side.aggregation.combine = types.MethodType(loop_combine, side.aggregation)
        sides["dlcl_loop"] = (model, optimizer)
    params = {name: sum(p.numel() for p in m.parameters()) for name, (m, _) in sides.items()}
    start = time.perf_counter()
    timing = interleaved(
        {name: (lambda m=m, o=o: train_round(m, o, batches)) for name, (m, o) in sides.items()},
        repeats=args.repeats,
    )
    wall = time.perf_counter() - start
    throughput = {name: tokens / t["median_s"] for name, t in timing.items()}
    overhead = ratio(timing["dlcl"]["median_s"], timing["residual"]["median_s"]) - 1.0
    loop_overhead = (
        ratio(timing["dlcl_loop"]["median_s"], timing["residual"]["median_s"]) - 1.0
        if args.loop_side
        else None
    )
    per_round = [
        d / r - 1.0 for d, r in zip(timing["dlcl"]["times_s"], timing["residual"]["times_s"], strict=True)
    ]
    result: dict[str, Any] = {
        "mode": "quick" if args.quick else "default",
        "settings": {k: v for k, v in vars(args).items() if k != "profile"},
        "tokens_per_round": tokens,
        "parameters": params,
        "timing": timing,
        "tokens_per_second": throughput,
        "dlcl_overhead": overhead,
        "dlcl_overhead_per_round": per_round,
        "dlcl_overhead_median_of_round_ratios": statistics.median(per_round),
        "dlcl_loop_overhead": loop_overhead,
        "goal": "overhead ≤ 10%",
        "goal_met": overhead <= 0.10,
        "wall_seconds": round(wall, 1),
    }
    if args.profile:
        result["profile"] = {
            name: profile_ops(lambda m=m, o=o: train_round(m, o, batches)) for name, (m, o) in sides.items()
        }
    enc, dec = args.encoder_layers, args.decoder_layers
    lines = [
        f"# DLCL training throughput, pre-norm {enc}L-{dec}L, d {args.d_model}",
        "",
        f"Forward + backward + Adam step over {args.steps} Multi30k en→de batches of {args.batch_size} pairs "
        f"({tokens} tokens per round), {args.threads} torch thread(s), interleaved residual / DLCL, median of "
        f"{args.repeats} rounds after one warm-up round.",
        "",
        markdown_table(
            ["model", "parameters", "median s / round", "tokens/s"],
            [[n, params[n], timing[n]["median_s"], throughput[n]] for n in sides],
        ),
        "",
        f"DLCL overhead (median time ratio − 1): **{overhead:+.1%}** "
        f"(per round: {', '.join(f'{x:+.0%}' for x in per_round)}; median of the per-round ratios "
        f"{statistics.median(per_round):+.1%}); goal ≤ 10%: "
        f"{'met' if overhead <= 0.10 else 'missed'}.",
    ]
    if args.loop_side:
        lines.append(
            f"The previous elementwise combination (`dlcl_loop`, one scalar multiply-add per history entry) in "
            f"the same run: **{loop_overhead:+.1%}**."
        )
    if args.profile:
        for name, profile in result["profile"].items():
            lines += ["", f"Top operators, {name} (one round, self CPU time):", "", ops_table(profile)]
    write_results(NAME if not args.quick else f"{NAME}_quick", result, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
