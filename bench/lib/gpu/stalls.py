"""Phase `stalls`: whole epochs per padding plan, precision and cuDNN SDPA setting; the 2x-median statistic."""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .models import MAX_POSITIONS, build_model
from .results import Results
from .steps import device_batches, raw_stepper, sync
from .trainer_phase import make_trainer


def stall_statistics(step_ms: list[float], skip: int = 20) -> dict[str, Any]:
    """Issue #55's per-shape stall goal over one epoch's step times: after the first `skip` steps (all of them
    when there are fewer), no step slower than 2 × the median of those steps."""
    later = step_ms[skip:] if len(step_ms) > skip else step_ms
    median = statistics.median(later)
    slow = [t for t in later if t > 2 * median]
    return {
        "steps": len(step_ms),
        "median_ms": round(median, 2),
        "max_ms_after_first": round(max(later), 2),
        "steps_over_2x_median": len(slow),
        "no_stall": not slow,
        "first_steps_ms": [round(t, 1) for t in step_ms[:5]],
    }


def plan_settings(plan: str) -> tuple[int, tuple[int, ...] | None]:
    """(padding multiple, length buckets) of a stalls-section plan."""
    from deep_nmt_hf.data.batching import length_buckets

    return {"exact": (1, None), "pad8": (8, None), "buckets": (8, length_buckets(MAX_POSITIONS))}[plan]


def epoch_step_times(step: Callable[[dict], Any], batches: list[dict], device: torch.device) -> list[float]:
    """Each step of one pass over `batches`, timed between synchronisations (ms)."""
    times = []
    for batch in batches:
        sync(device)
        started = time.perf_counter()
        step(batch)
        sync(device)
        times.append(1000 * (time.perf_counter() - started))
    return times


class EpochTiming:
    """`TimingCallback` with a device sync after every one of the first `synced` steps (epoch 1: each step's own
    time, stalls included) and after the last; none in between (epoch 2: the steady throughput)."""

    def __new__(cls, synced: int, device: torch.device) -> Any:
        from transformers import TrainerCallback

        class _EpochTiming(TrainerCallback):
            def __init__(self) -> None:
                self.begin: float | None = None
                self.ends: list[float] = []

            def on_train_begin(self, *a: Any, **k: Any) -> None:
                sync(device)
                self.begin = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
                if state.global_step <= synced or state.global_step == state.max_steps:
                    sync(device)
                self.ends.append(time.perf_counter())

        return _EpochTiming()


def stall_rows(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    """Issue #55 item 1, per padding plan (exact lengths, multiples of 8, length buckets) × cuDNN SDPA on / off ×
    precision: the raw loop and `deep-nmt train` over whole epochs of the corpus. Epoch 1 is timed step by step
    (synchronised): the stall statistic (no step > 2 × the median after the first 20); epoch 2 unsynchronised:
    target tokens/s after a full epoch of warm-up. The trainer runs the same plan through its own sampler,
    collator and loader (`--stall-epochs` epochs); its per-step times come from `TimingCallback`."""
    from deep_nmt_hf.data.batching import length_buckets  # noqa: F401  (the plan's buckets, recorded)

    name = args.stall_variant
    for precision in args.precisions:
        for plan in args.stall_plans:
            pad, buckets = plan_settings(plan)
            for cudnn in args.stall_cudnn:
                row = {"model": name, "precision": precision, "plan": plan, "cudnn_sdp": cudnn}

                def measure(
                    precision: str = precision, pad: int = pad, buckets: Any = buckets, cudnn: str = cudnn
                ):
                    torch.backends.cuda.enable_cudnn_sdp(cudnn == "on")
                    try:
                        epoch = device_batches(corpus, args, device, None, pad=pad, buckets=buckets)
                        tokens = sum(int(b["_target_tokens"]) for b in epoch)
                        shapes = {(tuple(b["input_ids"].shape), b["labels"].shape[1]) for b in epoch}
                        raw = raw_stepper(build_model(name, args).to(device).train(), device, precision)
                        first = epoch_step_times(raw, epoch, device)
                        sync(device)
                        started, cpu = time.perf_counter(), time.process_time()
                        for batch in epoch:
                            raw(batch)
                        sync(device)
                        raw_tps = tokens / (time.perf_counter() - started)
                        raw_cpu = 1000 * (time.process_time() - cpu) / tokens * 1000
                        trainer_args = argparse.Namespace(**{**vars(args), "pad": pad if pad > 1 else None})
                        if buckets is not None:
                            trainer_args.pad = "buckets"
                        steps = args.stall_epochs * len(epoch)
                        with tempfile.TemporaryDirectory() as staging:
                            timing = EpochTiming(len(epoch), device)
                            trainer = make_trainer(
                                name, corpus, trainer_args, device, precision, steps, Path(staging),
                                callbacks=[timing],
                            )  # fmt: skip
                            trainer.train()
                        ends = timing.ends
                        steps_ms = [1000 * (b - a) for a, b in zip([timing.begin, *ends], ends, strict=False)]
                        second = (ends[-1] - ends[len(epoch) - 1]) / (len(ends) - len(epoch))
                        trainer_tps = tokens / len(epoch) / second
                        return {
                            "batches_per_epoch": len(epoch),
                            "distinct_batch_shapes": len(shapes),
                            "buckets": list(buckets) if buckets else None,
                            "raw_epoch1": stall_statistics(first),
                            "trainer_epoch1": stall_statistics(steps_ms[: len(epoch)]),
                            "raw_target_tokens_per_s": round(raw_tps),
                            # process CPU time: on a shared CPU steadier than the wall clock
                            "raw_cpu_ms_per_1k_target_tokens": round(raw_cpu, 2),
                            "trainer_target_tokens_per_s": round(trainer_tps),
                            "trainer_over_raw_tokens_per_s": round(trainer_tps / raw_tps, 3),
                        }
                    finally:
                        torch.backends.cuda.enable_cudnn_sdp(args.cudnn_sdp == "on")

                results.add("stalls", row, measure)
