"""One timed training step: the raw loop's stepper, autocast, padding and buckets, FLOPs and the peak rate."""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch

from .models import MAX_POSITIONS, PEAK_BF16, build_model, word_tokenizer


def autocast(device: torch.device, precision: str) -> Any:
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def raw_stepper(
    model: torch.nn.Module, device: torch.device, precision: str
) -> Callable[[dict], torch.Tensor]:
    """forward + backward + clip 1.0 + the optimizer `deep-nmt train` builds (Adam, lr 5e-4, β 0.9/0.98)."""
    from deep_nmt_hf.training.optimizers import optimizer_cls_and_kwargs

    cls, kwargs = optimizer_cls_and_kwargs("adam", 5e-4)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = cls(parameters, **kwargs)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def step(batch: dict) -> torch.Tensor:
        inputs = {k: v for k, v in batch.items() if k != "_target_tokens"}
        with autocast(device, precision):
            out = model(**inputs)
            loss = out["loss"]
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(
    step: Callable[[dict], Any], batches: list[dict], warmup: int, steps: int, device: Any
) -> dict:
    """Warm up, then run `steps` steps between two synchronisations: mean ms per step, target tokens/s."""
    for index in range(warmup):
        step(batches[index % len(batches)])
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    tokens = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for index in range(steps):
        batch = batches[(warmup + index) % len(batches)]
        step(batch)
        tokens += int(batch["_target_tokens"])
    sync(device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {
        "step_ms": 1000 * wall / steps,
        "cpu_ms_per_step": 1000 * cpu / steps,
        "target_tokens_per_s": tokens / wall,
        "peak_memory_mib": peak,
    }


def bench_pad(args: argparse.Namespace, device: torch.device) -> int:
    """The new pipeline's padding multiple on `device` (1: exact lengths)."""
    if args.pad == "auto":
        return 8 if device.type == "cuda" else 1
    if args.pad == "buckets":
        return 8
    return args.pad or 1


def bench_buckets(args: argparse.Namespace, device: torch.device) -> tuple[int, ...] | None:
    """The new pipeline's length buckets on `device` (loader.bucket_lengths: CUDA only; ``--pad buckets``: any)."""
    from deep_nmt_hf.data.batching import length_buckets

    if args.pad == "buckets" or (args.pad == "auto" and device.type == "cuda"):
        return length_buckets(MAX_POSITIONS)
    return None


def device_batches(
    corpus: dict, args: argparse.Namespace, device: torch.device, count: int | None, pad: int | None = None,
    buckets: tuple[int, ...] | None | str = "plan",
) -> list:  # fmt: skip
    """`count` token-budget batches (None: a whole epoch) as the training pipeline makes them (sampler +
    collator), on the device; each carries its target-token count under ``_target_tokens`` (stripped before the
    model sees it). `pad` / `buckets` default to the run's plan (`bench_pad`, `bench_buckets`)."""
    from deep_nmt_hf.data.batching import TokenBudgetBatchSampler
    from deep_nmt_hf.training.loader import training_collator

    if buckets == "plan":
        buckets = bench_buckets(args, device) if pad is None else None
    pad = bench_pad(args, device) if pad is None else pad
    tokenizer = word_tokenizer(args.vocab)
    model = build_model("base-6-6", argparse.Namespace(**{**vars(args), "quick": True}))
    collator = training_collator(
        tokenizer, model, pad_to_multiple_of=pad if pad > 1 else None, buckets=buckets
    )
    lengths = [len(x) for x in corpus["input_ids"]], [len(x) for x in corpus["labels"]]
    sampler = TokenBudgetBatchSampler(
        *lengths, max_tokens=args.max_tokens, seed=1, pad_to_multiple_of=pad, length_buckets=buckets
    )
    batches = []
    for indices in sampler:
        features = [{k: corpus[k][i] for k in ("input_ids", "attention_mask", "labels")} for i in indices]
        batch = {k: v.to(device) for k, v in collator(features).items()}
        batch["_target_tokens"] = int(batch["labels"].ne(-100).sum())
        batches.append(batch)
        if count is not None and len(batches) == count:
            break
    return batches


def step_flops(model: torch.nn.Module, batch: dict) -> float | None:
    from torch.utils.flop_counter import FlopCounterMode

    inputs = {k: v for k, v in batch.items() if k != "_target_tokens"}
    counter = FlopCounterMode(display=False)
    with counter:
        model(**inputs)["loss"].backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def peak_rate(device: torch.device) -> tuple[float | None, str]:
    if device.type != "cuda":
        return None, "no peak table for CPUs"
    name = torch.cuda.get_device_name(device)
    for key, (tflops, source) in PEAK_BF16.items():
        if key in name:
            return tflops * 1e12, source
    return None, f"{name} is not in PEAK_BF16"
