"""What a finished run reports: the final beam-search scores and the ``metrics.json`` record."""

from __future__ import annotations

import datetime
import importlib.metadata
import logging
import os
import platform
from dataclasses import asdict
from pathlib import Path
from typing import Any

import datasets
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from ..data import ReadReport
from ..science.recipes import recipe_record
from .metrics import compute_translation_metrics
from .options import TrainingOptions
from .precision import precision_record, precision_used
from .translation import translate

logger = logging.getLogger(__name__)


def versions() -> dict[str, str]:
    """The versions of Python and of the packages a run depends on."""
    packages = ("deep_nmt_hf", "transformers", "torch", "tokenizers", "datasets", "accelerate", "sacrebleu")
    found = {"python": platform.python_version()}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = "unknown"
    return found


def relocate(path: str, staging: Path, final: Path) -> str:
    """A path inside the staging dir, as it will be once the staging dir is renamed to the final dir."""
    try:
        return str(final / Path(path).absolute().relative_to(staging))
    except ValueError:
        return path


def model_summary(model: PreTrainedModel) -> dict[str, Any]:
    """Model type, class, parameter count and the config's shape fields."""
    config = model.config.to_diff_dict()
    drop = {"transformers_version", "architectures", "auto_map", "torch_dtype", "dtype"}
    shape = {k: v for k, v in config.items() if not k.startswith("_") and k not in drop}
    return {
        "model_type": model.config.model_type,
        "architecture": type(model).__name__,
        "num_parameters": int(model.num_parameters()),
        "config": shape,
    }


def recipe_values_used(options: TrainingOptions, config_overrides: dict[str, Any]) -> dict[str, Any]:
    """The value of every recipe field this run uses (options, then config fields)."""
    return {**config_overrides, **asdict(options)}


def score_splits(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    options: TrainingOptions,
    splits: list[tuple[str | None, datasets.Dataset | None]],
    translations: dict[str, list[str]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Translate and score each (split, dataset) with beam search: its first `final_eval_samples` sentences when
    that is set, none when it is 0. `translations`, when given, receives each split's hypotheses."""
    scores: dict[str, dict[str, Any]] = {}
    for split, dataset in splits:
        if split is None or dataset is None or options.final_eval_samples == 0:
            continue
        whole = len(dataset)
        if options.final_eval_samples is not None and whole > options.final_eval_samples:
            dataset = dataset.select(range(options.final_eval_samples))  # the first N, as --max-eval-samples
        logger.info(
            "scoring split %r (%d of %d sentences, beam %d)", split, len(dataset), whole, options.num_beams
        )
        pairs = dataset["translation"]
        hypotheses = translate(
            model,
            tokenizer,
            [pair[options.src_lang] for pair in pairs],
            num_beams=options.num_beams,
            batch_size=options.eval_batch_size or options.batch_size,
            progress=not options.disable_tqdm,
        )
        metrics = compute_translation_metrics(hypotheses, [pair[options.tgt_lang] for pair in pairs])
        if translations is not None:
            translations[split] = list(hypotheses)
        scores[split] = {**metrics, "split_sentences": whole}
    if options.final_eval_samples == 0:
        logger.info("final scoring skipped (final_eval_samples=0); score later with deep-nmt evaluate")
    return scores


def hyperparameters(options: TrainingOptions, trainer: Any, averaged: list[str]) -> dict[str, Any]:
    """The options of the run (paths left out) and what they mean for the batch, schedule and averaging."""
    world = trainer.args.world_size
    record = {
        key: value for key, value in asdict(options).items() if key not in ("output_dir", "data_source")
    }
    per_step = (
        f"max_tokens={options.max_tokens}" if options.max_tokens else f"batch_size={options.batch_size}"
    )
    record.update(
        optimizer=options.optimizer,
        adam_betas=[options.adam_beta1, options.adam_beta2],
        adam_epsilon=options.adam_epsilon,
        weight_decay=options.weight_decay,
        batching=per_step,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        averaged_checkpoints=averaged,
        lr_scheduler="inverse_sqrt",
        train_sampling_strategy=options.train_sampling,
        world_size=world,
        distributed_type=str(trainer.accelerator.distributed_type.value),
        # sentence pairs (or token budgets with max_tokens) per optimizer step, over every process
        global_batch_size=options.batch_size * world * options.gradient_accumulation_steps,
    )
    if options.max_tokens:
        record["global_max_tokens"] = options.max_tokens * world * options.gradient_accumulation_steps
    # what the accelerator trained in (fp32 / bf16 / fp16), read back rather than taken from the options
    used = precision_used(trainer.accelerator)
    if used is not None:
        record["precision"] = used
    else:
        record.pop("precision", None)  # never claim a precision the run cannot confirm
    return record


def run_record(
    options: TrainingOptions,
    *,
    trainer: Any,
    train_output: Any,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    train_set: Any,
    valid_split: str | None,
    scores: dict[str, dict[str, Any]],
    averaged: list[str],
    divergence: Any,
    report: ReadReport | None,
    token_stats: dict[str, int],
    sharding: dict[str, Any] | None,
    staging: Path,
) -> dict[str, Any]:
    """The ``metrics.json`` record of a finished run (the headline split's scores at the top level)."""
    final = Path(options.output_dir).expanduser().absolute()
    train_metrics = dict(train_output.metrics)
    runtime = train_metrics.get("train_runtime")
    tokens_seen = trainer.state.num_input_tokens_seen
    if runtime and tokens_seen:
        train_metrics["train_source_tokens_per_second"] = round(tokens_seen / runtime, 1)
        train_metrics["num_input_tokens_seen"] = int(tokens_seen)
    train_metrics["skipped_nonfinite_batches"] = len(divergence.skipped)
    train_metrics["skipped_nonfinite_steps"] = list(divergence.skipped)
    precision = precision_record(trainer.accelerator, divergence)
    precision.pop("precision", None)  # in "hyperparameters"
    train_metrics.update(precision)  # fp16 only: the steps the loss scaler skipped, the final loss scale
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    headline_split = next((split for split in (options.test_split, valid_split) if split in scores), None)
    streaming = options.streaming
    record: dict[str, Any] = {
        "task": "translation",
        "src_lang": options.src_lang,
        "tgt_lang": options.tgt_lang,
        "data_source": relocate(os.fspath(options.data_source), staging, final),
        "train_split": options.train_split,
        "valid_split": valid_split,
        "test_split": options.test_split,
        "num_train_examples": None if streaming else len(train_set),
        "data": {
            # a stream is never counted ahead: these are None with streaming
            "train_pairs_read": None if streaming else report.total if report is not None else len(train_set),
            "train_pairs_dropped_empty": None if streaming else report.dropped if report else 0,
            "train_first_dropped_line": report.first_dropped if report is not None else None,
            "train_pairs_truncated": token_stats.get("truncated_pairs"),
            "max_source_length": options.max_source_length,
            "max_target_length": options.max_target_length,
        },
        "eval_split": headline_split,
    }
    if sharding is not None:  # what each rank held (FSDP2); not a hyperparameter, so not in the model card
        record["sharding"] = sharding
    if headline_split is not None:
        record.update(scores[headline_split])
    record.update(
        {
            "metrics": scores,
            "global_step": trainer.state.global_step,
            "epoch": trainer.state.epoch,
            "train": {
                **train_metrics,
                "first_logged_loss": losses[0] if losses else None,
                "last_logged_loss": losses[-1] if losses else None,
            },  # fmt: skip
            "log_history": trainer.state.log_history,
            "hyperparameters": hyperparameters(options, trainer, averaged),
            "recipe": (
                recipe_record(options.recipe, recipe_values_used(options, model.config.to_dict()))
                if options.recipe is not None
                else None
            ),
            "model": model_summary(model),
            "tokenizer": {
                "vocab_size": len(tokenizer),
                "source": options.tokenizer_dir or "trained (joint BPE)",
            },
            "versions": versions(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    return record
