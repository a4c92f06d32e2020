"""Phase `split`: a training step's host work, the pipeline before issue #48 against today's, side by side."""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .models import build_model, word_tokenizer
from .results import Results
from .steps import device_batches, raw_stepper, time_steps
from .syncs import SyncCounter
from .trainer_phase import make_trainer


def split_section(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    """The host work of a `deep-nmt train` step, old pipeline against new, measured side by side."""
    from deep_nmt_hf.data.batching import TokenBudgetBatchSampler
    from deep_nmt_hf.training.loader import training_collator

    split: dict[str, Any] = {"model": args.split_variant, "max_tokens": args.max_tokens, "precision": "fp32"}
    results.data["split"] = split
    lengths = [len(x) for x in corpus["input_ids"]], [len(x) for x in corpus["labels"]]
    tokenizer = word_tokenizer(args.vocab)
    model = build_model("base-6-6", argparse.Namespace(**{**vars(args), "quick": True}))

    def loader_part() -> dict:
        out = {}
        for side, pad in (("exact", 1), ("pad8", 8)):
            started = time.perf_counter()
            sampler = TokenBudgetBatchSampler(
                *lengths, max_tokens=args.max_tokens, seed=1, pad_to_multiple_of=pad
            )
            epoch = list(sampler)
            sampler_s = time.perf_counter() - started
            collator = training_collator(
                tokenizer, model, pad_to_multiple_of=None if pad == 1 else pad, buckets=None
            )
            shapes, padded, real = set(), 0, 0
            started = time.perf_counter()
            for indices in epoch[: args.split_collate_batches]:
                features = [
                    {k: corpus[k][i] for k in ("input_ids", "attention_mask", "labels")} for i in indices
                ]
                batch = collator(features)
                shapes.add((tuple(batch["input_ids"].shape), tuple(batch["labels"].shape)))
                padded += batch["labels"].numel()
                real += int(batch["labels"].ne(-100).sum())
            collate_s = time.perf_counter() - started
            counted = min(len(epoch), args.split_collate_batches)
            src_shapes = {(len(b), int(max(-(-lengths[0][i] // pad) * pad for i in b))) for b in epoch}
            tgt_lengths = {int(max(-(-lengths[1][i] // pad) * pad for i in b)) for b in epoch}
            out[side] = {
                "batches_per_epoch": len(epoch),
                "sampler_ms_per_batch": 1000 * sampler_s / len(epoch),
                "collate_ms_per_batch": 1000 * collate_s / counted,
                "distinct_batch_shapes_in_epoch": len(src_shapes),
                "distinct_target_lengths_in_epoch": len(tgt_lengths),
                "target_padding_share": 1 - real / padded,
            }
        return out

    def guarded(key: str, fn: Callable[[], Any]) -> None:
        if results.over_budget():
            split[key] = {"status": f"skipped: over the --budget-s {args.budget_s} s"}
        else:
            try:
                split[key] = fn()
            except Exception as error:  # noqa: BLE001
                split[key] = {"status": f"error: {type(error).__name__}: {str(error)[:300]}"}
        results.write()
        print(json.dumps({"split": {key: split[key]}}, default=str)[:2000], flush=True)

    guarded("loader", loader_part)
    guarded("trainer", lambda: split_trainer(corpus, args, device))


def split_trainer(corpus: dict, args: argparse.Namespace, device: torch.device) -> dict:
    """Old and new Trainer paths (and the raw loop) on the same model and data: syncs per non-logging step by site,
    operators per step, callback ms per step, and step CPU time; the sides alternate `args.split_rounds` times."""
    from torch.profiler import ProfilerActivity, profile
    from transformers import TrainerCallback

    steps = args.split_steps
    out: dict[str, Any] = {"steps": steps, "logging_steps": args.logging_steps}
    batches = device_batches(corpus, args, device, steps)

    class StepLabel(TrainerCallback):
        def __init__(self, counter: SyncCounter) -> None:
            self.counter = counter
            self.ends: list[float] = []
            self.cpu_ends: list[float] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **k: Any) -> None:
            self.counter.label = state.global_step + 1

        def on_step_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
            self.ends.append(time.perf_counter())
            self.cpu_ends.append(time.process_time())

    def run(side: str, profiled: bool) -> dict:
        counter = SyncCounter()
        label = StepLabel(counter)
        with tempfile.TemporaryDirectory() as staging:
            trainer = make_trainer(
                args.split_variant,
                corpus,
                args,
                device,
                "fp32",
                steps,
                Path(staging),
                old=side == "old",
                callbacks=[label],
            )
            handler = trainer.callback_handler
            original, spent = handler.call_event, [0.0]

            def timed_call(event: str, *a: Any, **k: Any) -> Any:
                if event in (
                    "on_init_end",
                    "on_train_begin",
                    "on_train_end",
                ):  # ADMIN profiles at train begin
                    return original(event, *a, **k)
                started = time.perf_counter()
                try:
                    return original(event, *a, **k)
                finally:
                    spent[0] += time.perf_counter() - started

            handler.call_event = timed_call
            with contextlib.ExitStack() as stack:
                prof = stack.enter_context(profile(activities=[ProfilerActivity.CPU])) if profiled else None
                stack.enter_context(counter)
                trainer.train()
        # steps 2 .. steps-1 log nothing (logging_first_step logs step 1, the end of training the last)
        quiet = [s for s in range(2, steps) if s % args.logging_steps]
        per_step = counter.per_label()
        result = {
            "syncs_per_quiet_step": statistics.mean(per_step.get(s, 0) for s in quiet) if quiet else None,
            "sync_sites_quiet_steps": counter.sites(quiet),
            "syncs_whole_run": len(counter.calls),
            "step_cpu_ms_median": 1000
            * statistics.median(b - a for a, b in zip(label.cpu_ends[1:], label.cpu_ends[2:], strict=False)),
            "step_wall_ms_median": 1000
            * statistics.median(b - a for a, b in zip(label.ends[1:], label.ends[2:], strict=False)),
            "callbacks_ms_per_step": 1000 * spent[0] / steps,
        }
        if prof is not None:
            events = prof.key_averages()
            result["aten_ops_per_step"] = sum(e.count for e in events if e.key.startswith("aten::")) / steps
        return result

    for side in ("old", "new"):
        out[side] = run(side, profiled=True)
    walls: dict[str, list[float]] = {"old": [], "new": [], "raw": []}
    cpus: dict[str, list[float]] = {"old": [], "new": [], "raw": []}
    raw_step = raw_stepper(build_model(args.split_variant, args).to(device).train(), device, "fp32")
    for _ in range(args.split_rounds):  # alternate the sides: a shared machine disturbs them alike
        for side in ("old", "new"):
            measured = run(side, profiled=False)
            walls[side].append(measured["step_wall_ms_median"])
            cpus[side].append(measured["step_cpu_ms_median"])
        raw_out = time_steps(raw_step, batches, 1, steps - 1, device)
        walls["raw"].append(raw_out["step_ms"])
        cpus["raw"].append(raw_out["cpu_ms_per_step"])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches:
            raw_step(batch)
    raw_ops = sum(e.count for e in prof.key_averages() if e.key.startswith("aten::")) / len(batches)
    out["raw"] = {"aten_ops_per_step": raw_ops}
    for side in walls:
        out[side]["step_wall_ms_rounds"] = walls[side]
        out[side]["step_cpu_ms_rounds"] = cpus[side]
        out[side]["step_cpu_ms"] = statistics.median(cpus[side])
    for side in ("old", "new"):
        out[side]["cpu_over_raw"] = out[side]["step_cpu_ms"] / out["raw"]["step_cpu_ms"]
    return out
