"""Activation memory of one training step with and without gradient checkpointing (36L-12L model).

Method: every measurement runs in a fresh subprocess (no allocator state carried over). The worker builds the
model and an Adam optimizer, materialises the optimizer state and the gradient buffers with one step on zero
gradients, then reads the resident set size (VmRSS) as the baseline (parameters + gradients + Adam moments),
resets the kernel's peak counter (``echo 5 > /proc/self/clear_refs`` resets VmHWM) and runs one
forward + backward + optimizer step on a fixed batch. Activation memory = peak RSS (VmHWM) - baseline.
Linux only. Sides run interleaved (off, on, off, on, ...); medians over the repeats.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from bench.lib.common import module_command


def _rss_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def worker(args: argparse.Namespace) -> dict:
    import gc

    import torch

    from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration

    torch.manual_seed(0)
    torch.set_num_threads(1)
    config = DeepNMTConfig(
        vocab_size=8000, d_model=args.d_model, encoder_layers=args.encoder_layers,
        decoder_layers=args.decoder_layers, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=4 * args.d_model, decoder_ffn_dim=4 * args.d_model, layer_norm_position="pre",
        dropout=0.1, max_position_embeddings=256,
    )  # fmt: skip
    model = DeepNMTForConditionalGeneration(config).train()
    if args.checkpointing:
        model.gradient_checkpointing_enable()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))
    for parameter in model.parameters():
        parameter.grad = torch.zeros_like(parameter)
    optimizer.step()  # materialise the Adam moments; gradients stay allocated (zero_grad(set_to_none=False))
    optimizer.zero_grad(set_to_none=False)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(2, 7999, (args.batch, args.length), generator=generator)
    labels = torch.randint(2, 7999, (args.batch, args.length), generator=generator)
    gc.collect()
    baseline = _rss_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")
    loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
    loss.backward()
    optimizer.step()
    peak = _rss_kib("VmHWM")
    return {
        "baseline_mib": baseline / 1024,
        "peak_mib": peak / 1024,
        "activation_mib": (peak - baseline) / 1024,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "loss": float(loss),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke mode: 12L-4L, d 128, small batch, 1 repeat"
    )
    parser.add_argument("--repeats", type=int, default=3, help="measurements per side (interleaved)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkpointing", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--encoder-layers", type=int, default=36)
    parser.add_argument("--decoder-layers", type=int, default=12)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16, help="sentence pairs in the step")
    parser.add_argument("--length", type=int, default=64, help="source and target tokens per sentence")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args)))
        return
    if args.quick:
        args.encoder_layers, args.decoder_layers, args.d_model, args.batch, args.length = 12, 4, 128, 8, 32
        args.repeats = 1
    shape = [
        "--encoder-layers", str(args.encoder_layers), "--decoder-layers", str(args.decoder_layers),
        "--d-model", str(args.d_model), "--batch", str(args.batch), "--length", str(args.length),
    ]  # fmt: skip
    runs: dict[str, list[dict]] = {"off": [], "on": []}
    for _ in range(args.repeats):
        for side in ("off", "on"):
            command = module_command("bench.checkpointing_memory", "--worker", *shape) + (
                ["--checkpointing"] if side == "on" else []
            )
            out = subprocess.run(command, capture_output=True, text=True, check=True)
            runs[side].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(side, runs[side][-1], file=sys.stderr)
    medians = {
        side: {
            key: statistics.median(r[key] for r in rows)
            for key in ("baseline_mib", "peak_mib", "activation_mib")
        }
        for side, rows in runs.items()
    }
    from bench.lib.common import markdown_table, ratio, write_results

    reduction = ratio(medians["off"]["activation_mib"], medians["on"]["activation_mib"])
    payload = {
        "model": f"{args.encoder_layers}L-{args.decoder_layers}L pre-LN, d_model {args.d_model}, "
        f"ffn {4 * args.d_model}, vocab 8000",
        "batch": {"sentences": args.batch, "source_tokens": args.length, "target_tokens": args.length},
        "method": "fresh subprocess per run; activation = peak RSS (VmHWM, reset via /proc/self/clear_refs) "
        "during one forward+backward+Adam step minus RSS before it (params + grads + Adam state)",
        "repeats": args.repeats,
        "quick": args.quick,
        "num_parameters": runs["off"][0]["num_parameters"],
        "runs": runs,
        "median": medians,
        "activation_reduction": reduction,
        "goal_2x_met": reduction >= 2.0,
    }
    rows = [
        [side, medians[side]["baseline_mib"], medians[side]["peak_mib"], medians[side]["activation_mib"]]
        for side in ("off", "on")
    ]
    markdown = (
        f"# Gradient checkpointing: activation memory of one training step\n\n{payload['model']}, "
        f"{payload['num_parameters'] / 1e6:.1f} M parameters, batch {args.batch} × {args.length} tokens; "
        f"median of {args.repeats} interleaved runs.\n\nMethod: {payload['method']}.\n\n"
        + markdown_table(["checkpointing", "baseline MiB", "peak MiB", "activation MiB"], rows)
        + f"\n\nActivation memory without / with checkpointing: **{reduction:.2f}×** (goal ≥ 2×: "
        f"{'met' if reduction >= 2 else 'not met'}).\n"
    )
    name = "checkpointing_memory_quick" if args.quick else "checkpointing_memory"
    print(write_results(name, payload, markdown))
    print(markdown)


if __name__ == "__main__":
    main()
