"""Activation memory and step time of DLCL in depth: plain pre-LN vs DLCL before / after issue #25.

Issue #25: DLCL's combination saved `torch.stack(history)` for backward at every layer, so the activations kept
for backward grew quadratically with depth. Now (`layer_aggregation.WeightedSum`) it saves the history entries
themselves. This bench builds pre-norm L-L models (encoder and decoder L layers, L = 12 / 24 / 48 by default),
same seed and batch, on three sides:

- `residual`: the plain pre-LN stack (no DLCL);
- `dlcl_stacked`: DLCL with the combination before issue #25 (stack + tensordot under autograd, patched in);
- `dlcl`: DLCL as the library computes it now.

Memory: the bytes of the distinct tensors one training forward pass saves for backward
(`deep_nmt_hf.training.activation_memory.saved_activation_bytes`: storages counted once, parameters left out),
deterministic, without and with gradient checkpointing. Time: forward + backward of one batch, sides interleaved
(A B C A B C ...) per depth, one untimed warm-up round, median of `--repeats` rounds of process CPU time with one
torch thread (CPU time is what a shared machine disturbs least). The batch is random token ids of a fixed shape:
memory depends on shapes only, and the time comparison needs the same batch on every side, not real text.

    python -m bench.dlcl_memory            # d 256, L 12/24/48 (a few minutes on 2 shared cores)
    python -m bench.dlcl_memory --quick    # smoke run (writes dlcl_memory_quick.*)

Writes bench/results/dlcl_memory.{json,md}.
"""

from __future__ import annotations

import argparse
import time
import types
from typing import Any

from bench.lib.common import interleaved, markdown_table, ratio, write_results

NAME = "dlcl_memory"
SIDES = ("residual", "dlcl_stacked", "dlcl")
MIB = 2**20


def stacked_combine(self, history: list) -> Any:
    """The DLCL combination before issue #25: one tensordot over `torch.stack(history)` under autograd, which
    saves the stacked (row + 1)-entry copy for backward at every row."""
    import torch

    row = len(history) - 1
    start = self.starts[row]
    kept = history[start:]
    weights = self.weight[row, start : row + 1].to(kept[0].dtype)
    combined = torch.tensordot(weights, torch.stack(kept), dims=1)
    if not self.pre_norm and row > 0:
        combined = self.layer_norms[row - 1](combined)
    return combined


def build(side: str, layers: int, args: argparse.Namespace):
    import torch

    from deep_nmt_hf import DLCLConfig, DLCLForConditionalGeneration

    aggregation = "residual" if side == "residual" else "dlcl"
    config = DLCLConfig(
        vocab_size=args.vocab,
        d_model=args.d_model,
        encoder_ffn_dim=4 * args.d_model,
        decoder_ffn_dim=4 * args.d_model,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_layer_aggregation=aggregation,
        decoder_layer_aggregation=aggregation,
        layer_norm_position="pre",
        dropout=0.0,
        max_position_embeddings=256,
        pad_token_id=args.vocab - 1,
        eos_token_id=0,
        decoder_start_token_id=args.vocab - 1,
    )
    torch.manual_seed(0)
    model = DLCLForConditionalGeneration(config).train()
    if side == "dlcl_stacked":
        for stack in (model.model.encoder, model.model.decoder):
            stack.aggregation.combine = types.MethodType(stacked_combine, stack.aggregation)
    return model


def step(model, batch: dict) -> None:
    model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)


def saved_mib(model, batch: dict, checkpointing: bool) -> float:
    from deep_nmt_hf.training.activation_memory import saved_activation_bytes

    if checkpointing:
        model.gradient_checkpointing_enable()
    size, loss = saved_activation_bytes(lambda: model(**batch).loss, model)
    loss.backward()
    model.zero_grad(set_to_none=True)
    if checkpointing:
        model.gradient_checkpointing_disable()
    return size / MIB


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run (writes dlcl_memory_quick.*)")
    parser.add_argument("--depths", type=int, nargs="+", default=[12, 24, 48], help="L of the L-L models")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--batch-size", type=int, default=16, help="sentence pairs per batch")
    parser.add_argument("--length", type=int, default=32, help="source and target tokens per sentence")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds per side and depth (median)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    if args.quick:
        args.depths, args.d_model, args.vocab = [4, 8, 16], 32, 64
        args.batch_size, args.length, args.repeats = 4, 8, 1

    import torch

    torch.set_num_threads(args.threads)
    generator = torch.Generator().manual_seed(1)
    shape = (args.batch_size, args.length)
    batch = {
        "input_ids": torch.randint(1, args.vocab - 1, shape, generator=generator),
        "attention_mask": torch.ones(shape, dtype=torch.long),
        "labels": torch.randint(1, args.vocab - 1, shape, generator=generator),
    }
    start = time.perf_counter()
    memory: dict[str, dict[int, dict[str, float]]] = {side: {} for side in SIDES}
    timing: dict[str, dict[int, dict[str, Any]]] = {side: {} for side in SIDES}
    for layers in args.depths:
        models = {side: build(side, layers, args) for side in SIDES}
        for side, model in models.items():
            memory[side][layers] = {
                "saved_mib": saved_mib(model, batch, checkpointing=False),
                "saved_mib_checkpointing": saved_mib(model, batch, checkpointing=True),
            }
        measured = interleaved(
            {side: (lambda m=m: step(m, batch)) for side, m in models.items()},
            repeats=args.repeats,
            clock=time.process_time,
        )
        for side in SIDES:
            timing[side][layers] = measured[side]
        del models
    wall = time.perf_counter() - start

    deep, mid = args.depths[-1], args.depths[-2]
    shallow = args.depths[0]

    def growth(side: str, key: str) -> float:
        """Saved MiB of the deepest model over the next shallower one (2 for linear growth at 48 / 24)."""
        return ratio(memory[side][deep][key], memory[side][mid][key])

    def increments(side: str, key: str) -> float:
        """Extra MiB per layer from `mid` to `deep` over that from `shallow` to `mid` (1 for linear growth)."""
        if len(args.depths) < 3:
            return float("nan")
        upper = (memory[side][deep][key] - memory[side][mid][key]) / (deep - mid)
        lower = (memory[side][mid][key] - memory[side][shallow][key]) / (mid - shallow)
        return ratio(upper, lower)

    summary = {
        side: {
            f"saved_ratio_{deep}_over_{mid}": growth(side, "saved_mib"),
            "per_layer_increment_ratio": increments(side, "saved_mib"),
            f"saved_ratio_{deep}_over_{mid}_checkpointing": growth(side, "saved_mib_checkpointing"),
            f"saved_over_residual_at_{deep}": ratio(
                memory[side][deep]["saved_mib"], memory["residual"][deep]["saved_mib"]
            ),
            f"time_over_residual_at_{deep}": ratio(
                timing[side][deep]["median_s"], timing["residual"][deep]["median_s"]
            ),
        }
        for side in SIDES
    }
    result: dict[str, Any] = {
        "mode": "quick" if args.quick else "default",
        "settings": vars(args),
        "memory_mib": memory,
        "timing": timing,
        "summary": summary,
        "wall_seconds": round(wall, 1),
    }
    rows = [
        [
            side,
            layers,
            memory[side][layers]["saved_mib"],
            memory[side][layers]["saved_mib_checkpointing"],
            timing[side][layers]["median_s"],
        ]
        for layers in args.depths
        for side in SIDES
    ]
    summary_rows = [
        [
            side,
            summary[side][f"saved_ratio_{deep}_over_{mid}"],
            summary[side]["per_layer_increment_ratio"],
            summary[side][f"saved_ratio_{deep}_over_{mid}_checkpointing"],
            summary[side][f"saved_over_residual_at_{deep}"],
            summary[side][f"time_over_residual_at_{deep}"],
        ]
        for side in SIDES
    ]
    lines = [
        f"# DLCL activation memory in depth, pre-norm L-L, d {args.d_model} (issue #25)",
        "",
        f"One batch of {args.batch_size} × {args.length} random tokens (source and target), dropout 0. Saved MiB: "
        "the distinct tensors one training forward pass saves for backward (parameters excluded), without and "
        "with gradient checkpointing. Time: forward + backward, process CPU seconds, "
        f"{args.threads} torch thread(s), sides interleaved per depth, median of {args.repeats} rounds after one "
        "warm-up round. `dlcl_stacked` is the combination before issue #25 (stack + tensordot under autograd).",
        "",
        markdown_table(
            ["side", "L", "saved MiB", "saved MiB, checkpointing", "median CPU s / step"],
            rows,
        ),
        "",
        markdown_table(
            [
                "side",
                f"saved {deep}L / {mid}L",
                f"per-layer increment {mid}→{deep} / {shallow}→{mid}",
                f"saved {deep}L / {mid}L, checkpointing",
                f"saved / residual at {deep}L",
                f"time / residual at {deep}L",
            ],
            summary_rows,
        ),
        "",
        f"Linear growth gives {deep}L / {mid}L ≈ {deep / mid:g} (a little under: embeddings and logits are a "
        "constant part) and a per-layer increment ratio ≈ 1; quadratic growth gives more on both.",
    ]
    write_results(NAME if not args.quick else f"{NAME}_quick", result, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
