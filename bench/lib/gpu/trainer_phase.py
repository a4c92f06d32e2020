"""Phase `trainer`: the `deep-nmt train` path (DeepNMTTrainer) against the raw loop on the same batches."""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from .models import build_model, word_tokenizer
from .results import Results
from .steps import bench_buckets, bench_pad, device_batches, raw_stepper, sync, time_steps


class TimingCallback:
    """Wall time at every optimizer step's end: one device sync after the warm-up steps and one after the last step,
    none between them. The last step's end is taken before the Trainer's end-of-training checkpoint, which is not a
    step's cost (the first GPU run counted it, and read 3× the raw loop)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from transformers import TrainerCallback

        class _Timing(TrainerCallback):
            def __init__(
                self, warmup: int, device: torch.device, clock: Callable[[], float] = time.perf_counter
            ) -> None:
                self.warmup, self.device, self.clock = warmup, device, clock
                self.begin = None
                self.ends: list[float] = []

            def on_train_begin(self, *a: Any, **k: Any) -> None:
                self.begin = self.clock()

            def on_step_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
                if state.global_step in (self.warmup, state.max_steps):
                    sync(self.device)
                self.ends.append(self.clock())

        return _Timing(*args, **kwargs)


def legacy_trainer_class() -> type:
    """DeepNMTTrainer as it was before issue #48: a device sync per micro-batch for the tokens seen (the
    Trainer's ``.item()``) and for each loss component (``float``), and the parameter count walked per
    micro-batch (the Trainer's `floating_point_ops`)."""
    from transformers import Trainer

    from deep_nmt_hf.training import DeepNMTTrainer
    from deep_nmt_hf.training.trainer import LOSS_COMPONENTS

    class LegacyTrainer(DeepNMTTrainer):
        def _track_num_input_tokens(self, inputs: dict) -> None:
            Trainer._track_num_input_tokens(self, inputs)

        def floating_point_ops(self, inputs: dict) -> int:
            return Trainer.floating_point_ops(self, inputs)

        def compute_loss(
            self, model: Any, inputs: dict, return_outputs: bool = False, num_items_in_batch=None
        ):
            loss, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
            if model.training and hasattr(outputs, "get"):
                for name in LOSS_COMPONENTS:
                    value = outputs.get(name)
                    if value is not None:
                        float(value.detach())  # the old per-micro-batch read
            return (loss, outputs) if return_outputs else loss

    return LegacyTrainer


def make_trainer(
    name: str, corpus: dict, args: argparse.Namespace, device: torch.device, precision: str, steps: int,
    staging: Path, old: bool = False, callbacks: list | None = None,
) -> Any:  # fmt: skip
    """A DeepNMTTrainer as `training.run` builds it (arguments, callbacks, collator, optimizer) over `corpus`;
    `old` builds the pre-#48 pipeline (LegacyTrainer, exact-length padding, no workers)."""
    import datasets

    from deep_nmt_hf.training import DeepNMTTrainer, TrainingOptions
    from deep_nmt_hf.training.arguments import training_arguments, training_callbacks
    from deep_nmt_hf.training.loader import training_collator
    from deep_nmt_hf.training.optimizers import optimizer_cls_and_kwargs

    options = TrainingOptions(
        output_dir=str(staging), data_source=str(staging), src_lang="en", tgt_lang="de", max_steps=steps,
        warmup_steps=4000, logging_steps=args.logging_steps, save_steps=10**6, disable_tqdm=True,
        max_tokens=args.max_tokens, seed=1,
    )  # fmt: skip
    if old:
        options.dataloader_workers = 0
    elif args.dataloader_workers is not None:
        options.dataloader_workers = args.dataloader_workers
    if hasattr(options, "precision"):  # the --precision option (another part of issue #48)
        options.precision = precision
    training_args = training_arguments(options, staging, False)
    if precision != "fp32" and not getattr(training_args, precision, False):
        training_args = dataclasses.replace(training_args, bf16=precision == "bf16", fp16=precision == "fp16")
    model = build_model(name, args)
    config = getattr(model, "config", None)
    _, guard_callbacks = training_callbacks(options, config, training_args)
    tokenizer = word_tokenizer(args.vocab)
    new_pad = bench_pad(args, device) if bench_pad(args, device) > 1 else None
    buckets = None if old else bench_buckets(args, device)
    trainer_class = legacy_trainer_class() if old else DeepNMTTrainer
    return trainer_class(
        model=model,
        args=training_args,
        train_dataset=datasets.Dataset.from_dict(corpus),
        processing_class=tokenizer,
        data_collator=training_collator(
            tokenizer, model, pad_to_multiple_of=None if old else new_pad, buckets=buckets
        ),
        callbacks=[*guard_callbacks, *(callbacks or [])],
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs("adam", 5e-4),
        max_tokens=args.max_tokens,
    )


def timed_trainer_steps(
    name: str, corpus: dict, args: argparse.Namespace, device: torch.device, precision: str,
    callbacks: list | None = None, clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, list[float]]:  # fmt: skip
    """`deep-nmt train`'s steady seconds per step (the steps after the warm-up, up to the last step's end: the
    end-of-training checkpoint is left out) and the first steps' seconds."""
    with tempfile.TemporaryDirectory() as staging:
        timing = TimingCallback(args.warmup, device, clock)
        trainer = make_trainer(
            name, corpus, args, device, precision, args.warmup + args.steps, Path(staging),
            callbacks=[timing, *(callbacks or [])],
        )  # fmt: skip
        trainer.train()
    ends = timing.ends
    steady = (ends[-1] - ends[args.warmup - 1]) / args.steps
    first = [ends[0] - timing.begin] + [b - a for a, b in zip(ends, ends[1:], strict=False)][
        : args.warmup + 2
    ]
    return steady, first


def trainer_rows(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    batches = device_batches(corpus, args, device, args.warmup + args.steps)
    for name in args.trainer_variants:
        for precision in args.precisions:
            row = {"model": name, "precision": precision, "max_tokens": args.max_tokens}

            def measure(name: str = name, precision: str = precision) -> dict:
                steady, first = timed_trainer_steps(name, corpus, args, device, precision)
                raw = raw_stepper(build_model(name, args).to(device).train(), device, precision)
                raw_out = time_steps(raw, batches, args.warmup, args.steps, device)
                tokens = sum(int(b["_target_tokens"]) for b in batches[args.warmup :]) / args.steps
                exact = {}
                if bench_pad(args, device) > 1:  # what padding to a multiple costs or gains, raw loop
                    raw = raw_stepper(build_model(name, args).to(device).train(), device, precision)
                    exact_batches = device_batches(corpus, args, device, args.warmup + args.steps, pad=1)
                    exact_out = time_steps(raw, exact_batches, args.warmup, args.steps, device)
                    exact = {"raw_exact_lengths_target_tokens_per_s": exact_out["target_tokens_per_s"]}
                return exact | {
                    "trainer_step_ms": 1000 * steady,
                    "raw_step_ms": raw_out["step_ms"],
                    "trainer_over_raw": steady * 1000 / raw_out["step_ms"],
                    "raw_target_tokens_per_s": raw_out["target_tokens_per_s"],
                    "trainer_target_tokens_per_s_est": tokens / steady,
                    "first_steps_ms": [round(1000 * x, 1) for x in first],
                }

            results.add("trainer", row, measure)
