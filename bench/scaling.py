"""Cost growth: training step and generation time vs encoder depth and vs target length; peak RSS with and
without gradient checkpointing.

Model: our post-LN DeepNMT model (deep_nmt_hf.DeepNMTForConditionalGeneration) at d `--d-model` (FFN 4×d,
d/64 heads), vocabulary 8000, decoder 6 layers. Inputs are random token ids of fixed lengths (so that the
curves show the cost of the shape alone). Times are CPU seconds of this process (`time.process_time`, one
torch thread), medians over `--repeats` runs after a warm-up run:

* depth curve: encoder depth 6, 12, 24, 48 (source and target length `--length`);
* length curve: encoder 6, target length 8 … 64 (training: labels of that length; generation: beam 4, exactly
  that many new tokens);
* memory: one training step (forward + backward + Adam) per encoder depth in a fresh subprocess each, with and
  without gradient checkpointing, measured by bench/checkpointing_memory.py's worker: RSS of parameters,
  gradients and Adam state before the step, then the peak RSS during it (VmHWM, reset first) and the growth
  (the step's activation memory; the memory model uses pre-LN, dropout 0.1).

    python -m bench.scaling            # writes bench/results/scaling.{json,md} and scaling_*.png
    python -m bench.scaling --quick    # smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.lib.common import RESULTS, markdown_table, module_command, write_results

VOCAB = 8000


def make_model(d_model: int, encoder_layers: int, decoder_layers: int = 6):
    from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration

    config = DeepNMTConfig(
        vocab_size=VOCAB,
        d_model=d_model,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        encoder_attention_heads=max(1, d_model // 64),
        decoder_attention_heads=max(1, d_model // 64),
        encoder_ffn_dim=4 * d_model,
        decoder_ffn_dim=4 * d_model,
        label_smoothing=0.1,
        max_position_embeddings=256,
    )
    return DeepNMTForConditionalGeneration(config)


def random_batch(batch: int, source_length: int, target_length: int, seed: int = 0) -> dict[str, Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    # ids 2 .. VOCAB-2: never eos (0), unk (1) or pad (VOCAB-1)
    source = torch.randint(2, VOCAB - 1, (batch, source_length), generator=generator)
    labels = torch.randint(2, VOCAB - 1, (batch, target_length), generator=generator)
    return {"input_ids": source, "attention_mask": torch.ones_like(source), "labels": labels}


def cpu_median(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def step_and_generate(model, batch: dict, new_tokens: int, repeats: int) -> tuple[float, float]:
    """Median CPU seconds of one training step (forward + backward + Adam) and of beam-4 generation."""
    import torch

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))

    def train_step() -> None:
        model.train()
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def generate() -> None:
        model.eval()
        with torch.inference_mode():
            model.generate(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                num_beams=4,
                max_new_tokens=new_tokens,
                min_new_tokens=new_tokens,
                do_sample=False,
            )

    return cpu_median(train_step, repeats), cpu_median(generate, repeats)


def memory_run(args: argparse.Namespace, depth: int, checkpointing: bool) -> dict[str, float]:
    """Peak memory of one training step in a fresh process: the worker of bench/checkpointing_memory.py
    (RSS of parameters + gradients + Adam state before the step, VmHWM reset, peak during the step)."""
    cmd = module_command("bench.checkpointing_memory", "--worker")
    cmd += ["--encoder-layers", str(depth), "--decoder-layers", "6", "--d-model", str(args.d_model)]
    cmd += ["--length", str(args.length), "--batch", str(args.memory_batch)]
    if checkpointing:
        cmd.append("--checkpointing")
    out = subprocess.run(
        cmd, check=True, capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"}
    )
    record = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        "rss_before_step_mb": record["baseline_mib"],
        "peak_rss_mb": record["peak_mib"],
        "step_growth_mb": record["activation_mib"],
    }


def plot(x: list, series: dict[str, list[float]], xlabel: str, ylabel: str, title: str, path: Path) -> None:
    from deep_nmt_hf.science.plots import _pyplot

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for label, values in series.items():
        ax.plot(x, values, marker="o", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.set_xticks(x)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    tmp = path.with_name(path.stem + ".tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    tmp.rename(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: d32, 1 repeat, depths 2 and 4")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--depths", type=int, nargs="*", default=[6, 12, 24, 48])
    parser.add_argument("--target-lengths", type=int, nargs="*", default=[8, 16, 32, 64])
    parser.add_argument(
        "--length", type=int, default=16, help="source (and target) length of the depth curve"
    )
    parser.add_argument("--batch", type=int, default=8, help="sentences per training / generation batch")
    parser.add_argument("--memory-batch", type=int, default=32, help="sentences in the memory measurement")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.quick:
        args.d_model, args.depths, args.target_lengths, args.repeats = 32, [2, 4], [4, 8], 1
        args.memory_batch = 4

    import torch

    torch.set_num_threads(1)
    depth_rows = []
    for depth in args.depths:
        torch.manual_seed(0)
        model = make_model(args.d_model, depth)
        train_s, gen_s = step_and_generate(
            model, random_batch(args.batch, args.length, args.length), args.length, args.repeats
        )
        depth_rows.append({"encoder_depth": depth, "train_step_s": train_s, "generate_s": gen_s})
        print(depth_rows[-1], flush=True)
        del model
    length_rows = []
    torch.manual_seed(0)
    model = make_model(args.d_model, args.depths[0])
    for target_length in args.target_lengths:
        batch = random_batch(args.batch, args.length, target_length)
        train_s, gen_s = step_and_generate(model, batch, target_length, args.repeats)
        length_rows.append({"target_length": target_length, "train_step_s": train_s, "generate_s": gen_s})
        print(length_rows[-1], flush=True)
    del model
    memory_rows = []
    for depth in args.depths:
        for checkpointing in (False, True):
            record = {"encoder_depth": depth, "gradient_checkpointing": checkpointing}
            record |= memory_run(args, depth, checkpointing)
            memory_rows.append(record)
            print(record, flush=True)

    name = "scaling.quick" if args.quick else "scaling"
    RESULTS.mkdir(parents=True, exist_ok=True)
    pngs = {key: RESULTS / f"{name}_{key}.png" for key in ("depth", "length", "memory")}
    depths = [r["encoder_depth"] for r in depth_rows]
    plot(
        depths,
        {
            "training step": [r["train_step_s"] for r in depth_rows],
            "beam-4 generation": [r["generate_s"] for r in depth_rows],
        },
        "encoder depth (decoder 6)",
        "CPU seconds",
        f"d{args.d_model}, batch {args.batch}, length {args.length}",
        pngs["depth"],
    )
    lengths = [r["target_length"] for r in length_rows]
    plot(
        lengths,
        {
            "training step": [r["train_step_s"] for r in length_rows],
            "beam-4 generation": [r["generate_s"] for r in length_rows],
        },
        "target length (tokens)",
        "CPU seconds",
        f"d{args.d_model}, {args.depths[0]}-6, batch {args.batch}, source {args.length}",
        pngs["length"],
    )
    plot(
        depths,
        {
            f"{'with' if flag else 'without'} checkpointing": [
                r["step_growth_mb"] for r in memory_rows if r["gradient_checkpointing"] == flag
            ]
            for flag in (False, True)
        },
        "encoder depth (decoder 6)",
        "peak RSS growth in one step (MB)",
        f"d{args.d_model}, batch {args.memory_batch}×{args.length}",
        pngs["memory"],
    )
    md = (
        "# Cost growth with depth and target length\n\n"
        f"Our post-LN model, d {args.d_model}, FFN {4 * args.d_model}, decoder 6 layers, vocabulary {VOCAB}, random "
        f"token ids. CPU seconds (one torch thread), medians of {args.repeats} after one warm-up. Training step = "
        f"forward + backward + Adam on {args.batch} sentences; generation = beam 4 on the same {args.batch} "
        "sources, exactly as many new tokens as the target length.\n\n"
        f"## Encoder depth (source = target = {args.length} tokens)\n\n"
        + markdown_table(
            ["encoder depth", "train step (s)", "generation (s)"],
            [[r["encoder_depth"], r["train_step_s"], r["generate_s"]] for r in depth_rows],
        )
        + f"\n\n![depth]({pngs['depth'].name})\n\n## Target length (encoder {args.depths[0]}, source {args.length})\n\n"
        + markdown_table(
            ["target length", "train step (s)", "generation (s)"],
            [[r["target_length"], r["train_step_s"], r["generate_s"]] for r in length_rows],
        )
        + f"\n\n![length]({pngs['length'].name})\n\n## Peak RSS of one training step, fresh process per row "
        f"(batch {args.memory_batch} × {args.length} tokens)\n\n"
        + markdown_table(
            [
                "encoder depth",
                "checkpointing",
                "RSS before step (MB)",
                "peak RSS (MB)",
                "growth in step (MB)",
            ],
            [
                [
                    r["encoder_depth"],
                    r["gradient_checkpointing"],
                    round(r["rss_before_step_mb"]),
                    round(r["peak_rss_mb"]),
                    round(r["step_growth_mb"]),
                ]
                for r in memory_rows
            ],
        )
        + f"\n\n![memory]({pngs['memory'].name})\n"
    )
    payload = {
        "settings": vars(args),
        "depth": depth_rows,
        "target_length": length_rows,
        "memory": memory_rows,
    }
    payload["plots"] = [p.name for p in pngs.values()]
    write_results(name, payload, md)
    print(md)


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
