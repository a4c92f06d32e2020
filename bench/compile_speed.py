"""Training-step speed of a `torch.compile`d model against eager on CPU (what `deep-nmt train --torch-compile` does).

Method: per variant, two copies of the same initialised model (same weights), one eager and one wrapped with
`torch.compile` (inductor, default mode: what the Trainer's `torch_compile=True` does), each with its own Adam.
One train step = forward + backward + gradient clipping + Adam step on a fixed padded batch (random token ids,
random padding tails). The compiled side is first compiled on the batch's shape and then on a second shape
(`--second-length`: with varying batch shapes Dynamo recompiles once with dynamic shapes); those first calls
are timed separately (wall and process CPU time; inductor may compile in worker processes, whose CPU time is not
counted). Then the sides run interleaved (eager, compiled, eager, compiled, ...) on one torch thread and each
step is timed by process CPU time, which a shared machine disturbs far less than the wall clock; the result is
the median per side and their ratio. The first step's losses of the two sides are checked to agree (rel 1e-4).
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from typing import Any

from bench.lib.common import interleaved, markdown_table, ratio, write_results

SHAPES = {
    "deep_nmt": {"layer_norm_position": "post"},
    "admin": {},
    "dlcl": {},
}


def _batch(torch: Any, size: int, length: int, vocab: int, seed: int) -> dict:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab - 1, (size, length), generator=generator)
    labels = torch.randint(2, vocab - 1, (size, length), generator=generator)
    lengths = torch.randint(length // 2, length + 1, (size,), generator=generator)
    mask = torch.arange(length)[None, :] < lengths[:, None]
    ids = ids.masked_fill(~mask, vocab - 1)
    return {"input_ids": ids, "attention_mask": mask.long(), "labels": labels.masked_fill(~mask, -100)}


def measure(variant: str, args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from deep_nmt_hf.training import resolve_variant

    config_class, model_class = resolve_variant(variant)
    config = config_class(
        vocab_size=args.vocab, pad_token_id=args.vocab - 1, eos_token_id=0, decoder_start_token_id=args.vocab - 1,
        d_model=args.d_model, encoder_layers=args.encoder_layers, decoder_layers=args.decoder_layers,
        encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=4 * args.d_model,
        decoder_ffn_dim=4 * args.d_model, max_position_embeddings=256, dropout=0.0, attention_dropout=0.0,
        activation_dropout=0.0, **SHAPES[variant],
    )  # fmt: skip
    torch.manual_seed(0)
    eager = model_class(config).train()
    compiled_model = copy.deepcopy(eager)
    compiled = torch.compile(compiled_model)
    batch = _batch(torch, args.batch, args.length, args.vocab, seed=1)
    second = _batch(torch, args.batch, args.second_length, args.vocab, seed=2)

    def stepper(model: Any, parameters: Any) -> Any:
        optimizer = torch.optim.Adam(parameters, lr=1e-4, betas=(0.9, 0.98))

        def step(inputs: dict = batch) -> float:
            loss = model(**inputs).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            return float(loss.detach())

        return step

    eager_step = stepper(eager, list(eager.parameters()))
    compiled_step = stepper(compiled, list(compiled_model.parameters()))
    first_losses = (eager_step(), None)
    compile_times = {}
    for name, inputs in (("first_shape", batch), ("second_shape", second)):
        wall, cpu = time.perf_counter(), time.process_time()
        loss = compiled_step(inputs)
        compile_times[name] = {"wall_s": time.perf_counter() - wall, "cpu_s": time.process_time() - cpu}
        if name == "first_shape":
            first_losses = (first_losses[0], loss)
    if abs(first_losses[1] - first_losses[0]) > 1e-4 * abs(first_losses[0]):
        raise SystemExit(f"error: {variant}: compiled loss {first_losses[1]} != eager loss {first_losses[0]}")
    timings = interleaved(
        {"eager": eager_step, "compiled": compiled_step},
        repeats=args.repeats,
        warmup=args.warmup,
        clock=time.process_time,
    )
    return {
        "variant": variant,
        "num_parameters": sum(p.numel() for p in eager.parameters()),
        "first_step_loss": {"eager": first_losses[0], "compiled": first_losses[1]},
        "compile": compile_times,
        "timings": timings,
        "compiled_over_eager": ratio(timings["compiled"]["median_s"], timings["eager"]["median_s"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke mode: 2-2, d 64, batch 8, 3 repeats")
    parser.add_argument("--variants", nargs="+", default=["deep_nmt", "admin"], choices=sorted(SHAPES))
    parser.add_argument("--encoder-layers", type=int, default=6)
    parser.add_argument("--decoder-layers", type=int, default=6)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--batch", type=int, default=32, help="sentences per batch")
    parser.add_argument("--length", type=int, default=24, help="padded source and target length (tokens)")
    parser.add_argument("--second-length", type=int, default=20, help="a second shape (triggers a recompile)")
    parser.add_argument("--vocab", type=int, default=8000)
    parser.add_argument("--repeats", type=int, default=15, help="timed steps per side (interleaved)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed rounds after compilation")
    parser.add_argument("--out", default="compile_speed", help="result name in bench/results/")
    args = parser.parse_args()
    if args.quick:
        args.encoder_layers = args.decoder_layers = 2
        args.d_model, args.batch, args.repeats, args.warmup = 64, 8, 3, 1
        args.out = args.out + "_quick" if args.out == "compile_speed" else args.out
    # a fresh inductor cache: the compile times are those of a first run, not of cached kernels
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", tempfile.mkdtemp(prefix="compile_speed_inductor_"))
    import torch

    torch.set_num_threads(1)
    results = []
    for variant in args.variants:
        result = measure(variant, args)
        print(
            f"{variant}: compiled/eager step CPU time {result['compiled_over_eager']:.3f} "
            f"(eager {result['timings']['eager']['median_s']:.3f} s, compiled "
            f"{result['timings']['compiled']['median_s']:.3f} s); compile {result['compile']['first_shape']['wall_s']:.0f} s "
            f"+ recompile {result['compile']['second_shape']['wall_s']:.0f} s wall",
            flush=True,
        )
        results.append(result)
        _report(args, results)  # after every variant: a long run keeps what it finished


def _report(args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    rows = []
    for r in results:
        t = r["timings"]
        rows.append(
            [
                r["variant"],
                f"{r['num_parameters'] / 1e6:.1f}M",
                round(t["eager"]["median_s"], 3),
                round(t["compiled"]["median_s"], 3),
                round(r["compiled_over_eager"], 3),
                f"{min(t['compiled']['times_s']) / max(t['eager']['times_s']):.2f}–"
                f"{max(t['compiled']['times_s']) / min(t['eager']['times_s']):.2f}",
                round(r["compile"]["first_shape"]["wall_s"], 1),
                round(r["compile"]["second_shape"]["wall_s"], 1),
            ]
        )
    table = markdown_table(
        [
            "variant", "parameters", "eager step (CPU s)", "compiled step (CPU s)", "compiled / eager",
            "range (extremes)", "compile, first shape (wall s)", "recompile, second shape (wall s)",
        ],
        rows,
    )  # fmt: skip
    shape = (
        f"{args.encoder_layers}-{args.decoder_layers}, d_model {args.d_model}, batch {args.batch} × {args.length} "
        f"tokens (second shape × {args.second_length}), vocabulary {args.vocab}, dropout 0, one torch thread"
    )
    markdown = (
        f"# torch.compile (inductor) against eager: one training step on CPU\n\n{shape}; "
        f"{args.repeats} interleaved steps per side after {args.warmup} untimed rounds, medians of process CPU "
        f"time. Method: `bench/compile_speed.py` docstring.\n\n{table}\n"
    )
    path = write_results(args.out, {"settings": vars(args), "results": results}, markdown)
    print(f"results: {path} and {path.with_suffix('.md')}")


if __name__ == "__main__":
    main()
