"""Phase `train`: the raw loop per model and precision, eager and compiled."""

from __future__ import annotations

import argparse
import time

import torch

from .models import applied_depth, build_model
from .results import Results
from .steps import device_batches, peak_rate, raw_stepper, step_flops, sync, time_steps


def train_rows(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    batches = device_batches(corpus, args, device, args.warmup + args.steps)
    peak, _ = peak_rate(device)
    names = list(args.variants)
    references = ["marian-6-6"] if "marian-6-6" not in names and not args.no_references else []
    depth_refs = (
        []
        if args.no_references
        else sorted({"torch-pre-ln-{}-{}".format(*applied_depth(n, args)) for n in names})
    )
    base_times: dict[tuple[str, str], float] = {}
    for name in references + names + depth_refs:
        for precision in args.precisions:
            modes = ["eager"] + (
                list(args.compile_modes)
                if name in args.compile_variants or "all" in args.compile_variants
                else []
            )
            for mode in modes:
                row = {
                    "model": name,
                    "precision": precision,
                    "mode": mode,
                    "layers": list(applied_depth(name, args)),
                }

                def measure(name: str = name, precision: str = precision, mode: str = mode) -> dict:
                    if mode != "eager":
                        torch._dynamo.reset()  # a cold compile: no graph of an earlier row reused
                    model = build_model(name, args).to(device).train()
                    parameters = sum(p.numel() for p in model.parameters())
                    flops = (
                        step_flops(model, batches[0])
                        if precision == "fp32" or device.type == "cuda"
                        else None
                    )
                    callable_model = model
                    if mode == "compiled":  # the whole model in one graph (compile time grows with depth)
                        callable_model = torch.compile(model)
                    elif mode == "regions":  # `deep-nmt train --torch-compile` (training/compilation.py)
                        from deep_nmt_hf.training.compilation import compile_regions

                        compile_regions(model)
                    step = raw_stepper(callable_model, device, precision)
                    started = time.perf_counter()
                    step(batches[0])
                    sync(device)
                    first = time.perf_counter() - started
                    # compiled: every batch once before timing (each input form compiles once: mask or none)
                    warmup = args.warmup if mode == "eager" else len(batches)
                    out = time_steps(step, batches, warmup, args.steps, device)
                    out |= {
                        "parameters": parameters,
                        "first_step_s": round(first, 3),
                        "flops_per_step": flops,
                    }
                    if flops and peak:
                        out["share_of_bf16_peak"] = flops / (out["step_ms"] / 1000) / peak
                    return out

                done = results.add("train", row, measure)
                if done.get("step_ms"):
                    base_times[(name, precision, mode)] = done["step_ms"]
                    marian = base_times.get(("marian-6-6", precision, mode))
                    ref = base_times.get(
                        ("torch-pre-ln-{}-{}".format(*applied_depth(name, args)), precision, mode)
                    )
                    done["over_marian_6_6"] = done["step_ms"] / marian if marian else None
                    done["over_nn_transformer"] = done["step_ms"] / ref if ref else None
    # the nn.Transformer references run last: fill the ratios of the rows measured before them
    for row in results.data["train"]:
        if row.get("step_ms") and not row.get("over_nn_transformer"):
            enc, dec = row["layers"]
            ref = base_times.get((f"torch-pre-ln-{enc}-{dec}", row["precision"], row["mode"]))
            row["over_nn_transformer"] = row["step_ms"] / ref if ref else None
    results.write()
