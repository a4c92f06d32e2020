"""`train`: data, tokenizer, config and model, then `DeepNMTTrainer`; score, save and record the run."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import logging
import os
import platform
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

import datasets
import torch
from transformers import (
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    set_seed,
)
from transformers.trainer_utils import get_last_checkpoint

from ..admin import AdminProfilingCallback
from ..configuration_deep_nmt import DeepNMTConfig
from ..data import ReadReport
from ..generation_settings import translation_generation_config
from ..length_penalty import set_length_penalty
from ..optimizers import optimizer_cls_and_kwargs
from ..pipeline_shipping import ship_translation_pipeline
from ..preprocessing import cached_tokenizer
from ..recipes import describe, recipe_config, recipe_record
from ..sharding import shard_model, shard_summary
from .divergence import DivergenceCallback, TrainingDivergedError
from .inputs import _load_training_data, build_config, load_split, resolve_variant, tokenize_dataset
from .metrics import compute_translation_metrics, make_compute_metrics
from .options import TrainingOptions, nmt_recipe
from .staging import METRICS_FILE, SAVING_DIR, _check_output_dir, _partial_dir, staged_output_dir
from .trainer import DeepNMTTrainer
from .translation import translate

logger = logging.getLogger(__name__)


def _versions() -> dict[str, str]:
    packages = ("deep_nmt_hf", "transformers", "torch", "tokenizers", "datasets", "accelerate", "sacrebleu")
    versions = {"python": platform.python_version()}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions


def _relocate(path: str, staging: Path, final: Path) -> str:
    """A path inside the staging dir, as it will be once the staging dir is renamed to the final dir."""
    try:
        return str(final / Path(path).absolute().relative_to(staging))
    except ValueError:
        return path


def _model_summary(model: PreTrainedModel) -> dict[str, Any]:
    config = model.config.to_diff_dict()
    drop = {"transformers_version", "architectures", "auto_map", "torch_dtype", "dtype"}
    shape = {k: v for k, v in config.items() if not k.startswith("_") and k not in drop}
    return {
        "model_type": model.config.model_type,
        "architecture": type(model).__name__,
        "num_parameters": int(model.num_parameters()),
        "config": shape,
    }


def _score_split(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: datasets.Dataset,
    options: TrainingOptions,
) -> dict[str, Any]:
    pairs = dataset["translation"]
    hypotheses = translate(
        model,
        tokenizer,
        [pair[options.src_lang] for pair in pairs],
        num_beams=options.num_beams,
        batch_size=options.eval_batch_size or options.batch_size,
        progress=not options.disable_tqdm,
    )
    return compute_translation_metrics(hypotheses, [pair[options.tgt_lang] for pair in pairs])


def train(
    options: TrainingOptions,
    config_overrides: dict[str, Any] | None = None,
    *,
    staging_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Train a model with `Seq2SeqTrainer`, save it into `options.output_dir` and return its metrics record.

    Steps: load the train / validation (/ test) splits; train a joint BPE tokenizer on the training split (or
    load `options.tokenizer_dir`); build the variant's config from `config_overrides` (field name -> value)
    and the model; train; score the validation (and test) split with beam search; save model (safetensors),
    tokenizer, generation config and ``metrics.json`` (the returned dict).

    All inputs are checked before anything is written. With `staging_dir` the caller owns the staging
    directory (see `staged_output_dir`) and the final rename; otherwise `train` stages by itself.

    Several processes (`accelerate launch`, torchrun: WORLD_SIZE > 1 in the environment): every rank checks
    the output directory; the main process reads the corpus, trains the tokenizer and tokenizes into the
    fingerprinted cache (`deep_nmt_hf.preprocessing`) while the others wait, then they load the same entries; the Trainer shards the data (global batch = world size × `batch_size`); at the end every
    rank takes part in saving the model (needed for FSDP / DeepSpeed), then rank 0 alone reloads it, scores,
    writes ``metrics.json`` and renames the staging directory. The output directory must be on a file
    system all ranks share. Non-zero ranks return ``{"process_index": rank, "global_step": ...}``.
    """
    config_overrides = dict(config_overrides or {})
    if options.recipe is not None:  # the recipe's config fields under the explicit ones
        config_overrides = {**recipe_config(options.recipe), **config_overrides}
        logger.info("%s", describe(options.recipe, _recipe_values_used(options, config_overrides)))
    config_class, model_class = resolve_variant(options.variant)
    distributed = _init_distributed()
    if options.fsdp and distributed is None:
        raise ValueError(
            "fsdp=True (--fsdp) shards over several processes: launch with torchrun or accelerate launch "
            "(WORLD_SIZE > 1), or drop it"
        )
    if staging_dir is None:
        _check_output_dir(options)
    if distributed is not None:
        distributed.wait_for_everyone()  # all ranks checked the output dir before rank 0 creates the staging dir
    report = ReadReport()
    train_set, valid_set, valid_split = _load_training_data(options, report)
    test_set = None
    if options.test_split is not None:
        test_set = load_split(options.data_source, options.test_split, options.src_lang, options.tgt_lang)

    if options.tokenizer_dir is not None:
        tokenizer = AutoTokenizer.from_pretrained(options.tokenizer_dir)
    else:
        # cached by fingerprint: the main process trains it (streamed corpus or a seeded sample), the other
        # ranks wait and load the same files
        longest = max(options.max_source_length, options.max_target_length)
        settings = dict(
            vocab_size=options.vocab_size,
            model_max_length=config_overrides.get("max_position_embeddings", max(256, longest)),
            sample=options.tokenizer_sample,
            seed=options.seed,
            cache_dir=options.cache_dir,
        )
        langs = (options.src_lang, options.tgt_lang)
        if options.streaming:
            from ..streaming import streaming_tokenizer

            source = (options.data_source, options.train_split)
            tokenizer, _ = streaming_tokenizer(
                *source, *langs, buffer_size=options.shuffle_buffer_size, **settings
            )
        else:
            tokenizer, _ = cached_tokenizer(train_set, *langs, **settings)
    if options.preset is not None:
        presets = getattr(config_class, "PRESETS", {})
        if options.preset not in presets:
            raise ValueError(
                f"preset={options.preset!r} is unknown for variant {options.variant!r}; "
                f"presets: {', '.join(presets) or 'none'}"
            )
        config_overrides = {**presets[options.preset], **config_overrides}
    config_overrides.setdefault("label_smoothing", options.label_smoothing)
    config = build_config(
        tokenizer,
        config_class,
        max_source_length=options.max_source_length,
        max_target_length=options.max_target_length,
        **config_overrides,
    )

    inputs = (config, model_class, tokenizer, train_set, valid_set, valid_split, test_set, report)
    if staging_dir is not None:
        return _train_in(options, Path(staging_dir), *inputs)
    if distributed is not None and not distributed.is_main_process:
        staging = _partial_dir(Path(options.output_dir).expanduser().absolute())
        distributed.wait_for_everyone()  # rank 0 has created (or cleaned) the staging dir
        return _train_in(options, staging, *inputs)
    with staged_output_dir(options.output_dir, overwrite=options.overwrite, resume=options.resume) as staging:
        if distributed is not None:
            distributed.wait_for_everyone()
        return _train_in(options, staging, *inputs)


def _recipe_values_used(options: TrainingOptions, config_overrides: dict[str, Any]) -> dict[str, Any]:
    """The value of every recipe field this run uses (options, then config fields)."""
    return {**config_overrides, **asdict(options)}


def set_generation_settings(model: PreTrainedModel, options: TrainingOptions) -> None:
    """Beam size, length penalty (value and form) and maximum length of the saved generation_config.json: the
    recipe's values on `generation_settings.translation_generation_config`."""
    generation_config = translation_generation_config(
        model.config, num_beams=options.num_beams, max_length=options.max_target_length + 1
    )
    set_length_penalty(generation_config, options.length_penalty, options.length_penalty_form)
    model.generation_config = generation_config


def _average_checkpoints_into(model: PreTrainedModel, staging: Path, last: int) -> list[str]:
    """Load the mean of the last `last` checkpoints into `model`; the names averaged ([] if too few exist)."""
    from ..averaging import average_weights, find_checkpoints

    checkpoints = find_checkpoints(staging)[-last:]
    if len(checkpoints) < last:
        logger.warning(
            "average_last_checkpoints=%d: only %d checkpoint(s) written; keeping the final weights",
            last,
            len(checkpoints),
        )
        return []
    weights = average_weights(checkpoints)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    tied = set(getattr(model, "all_tied_weights_keys", {}) or {})
    if unexpected or set(missing) - tied:
        raise RuntimeError(
            f"averaged checkpoints do not match the model: missing {missing}, unexpected {unexpected}"
        )
    logger.info("final model = average of %s", ", ".join(p.name for p in checkpoints))
    return [p.name for p in checkpoints]


def _init_distributed() -> Any:
    """accelerate's `PartialState` when launched with several processes (WORLD_SIZE > 1), else None.

    Initializes the process group the way the Trainer would (nccl on GPUs, gloo on CPU), early, so that the
    ranks can agree on the output directory and the tokenizer before the Trainer exists.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return state if state.num_processes > 1 else None


def _train_in(
    options: TrainingOptions,
    staging: Path,
    config: DeepNMTConfig,
    model_class: type,
    tokenizer: PreTrainedTokenizerBase,
    train_set: datasets.Dataset,
    valid_set: datasets.Dataset | None,
    valid_split: str | None,
    test_set: datasets.Dataset | None,
    report: ReadReport | None = None,
) -> dict[str, Any]:
    final = Path(options.output_dir).expanduser().absolute()
    resume_from = get_last_checkpoint(str(staging)) if options.resume and staging.is_dir() else None
    if resume_from is not None and config.residual_scaling == "admin":
        # ω is in the checkpoint's weights: do not profile again over them
        saved = json.loads((Path(resume_from) / "config.json").read_text(encoding="utf-8"))
        config.admin_profiled = bool(saved.get("admin_profiled", config.admin_profiled))
    set_seed(options.seed)
    model = model_class(config)
    set_generation_settings(model, options)
    if options.fsdp:
        model = shard_model(model)  # every rank keeps its Shard(0) slice of every parameter

    lengths = (options.max_source_length, options.max_target_length)
    token_stats: dict[str, int] = {}
    if isinstance(train_set, datasets.IterableDataset):
        from ..streaming import streaming_tokenized

        train_tokens = streaming_tokenized(train_set, tokenizer, options.src_lang, options.tgt_lang, *lengths)
    else:
        cache = {"num_proc": options.num_proc, "cache_dir": options.cache_dir}
        train_tokens = tokenize_dataset(
            train_set, tokenizer, options.src_lang, options.tgt_lang, *lengths, stats=token_stats, **cache
        )
    eval_tokens = eval_refs = None
    if valid_set is not None:
        eval_subset = valid_set
        if options.max_eval_samples is not None and len(valid_set) > options.max_eval_samples:
            eval_subset = valid_set.select(range(options.max_eval_samples))
        eval_tokens = tokenize_dataset(
            eval_subset, tokenizer, options.src_lang, options.tgt_lang, *lengths, cache_dir=options.cache_dir
        )
        eval_refs = [pair[options.tgt_lang] for pair in eval_subset["translation"]]
    evaluate_during = eval_tokens is not None and options.eval_steps is not None

    args = Seq2SeqTrainingArguments(
        output_dir=str(staging),
        per_device_train_batch_size=options.batch_size,
        per_device_eval_batch_size=options.eval_batch_size or options.batch_size,
        **nmt_recipe(
            options.learning_rate,
            options.warmup_steps,
            options.max_grad_norm,
            options.train_sampling,
            betas=(options.adam_beta1, options.adam_beta2),
            epsilon=options.adam_epsilon,
            weight_decay=options.weight_decay,
        ),
        max_steps=options.max_steps,
        num_train_epochs=options.num_train_epochs,
        activation_checkpointing=options.gradient_checkpointing,  # 4.x: gradient_checkpointing
        eval_strategy="steps" if evaluate_during else "no",
        eval_steps=options.eval_steps if evaluate_during else None,
        save_strategy="steps",
        save_steps=options.save_steps,
        save_total_limit=max(options.save_total_limit, options.average_last_checkpoints or 0),
        logging_strategy="steps",
        logging_steps=options.logging_steps,
        logging_first_step=True,
        logging_nan_inf_filter=False,  # the divergence guard must see NaN / inf losses
        include_num_input_tokens_seen="non_padding",
        predict_with_generate=True,
        generation_num_beams=options.num_beams,
        generation_max_length=options.max_target_length + 1,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        seed=options.seed,
        disable_tqdm=options.disable_tqdm,
        dataloader_num_workers=0,
        torch_compile=options.torch_compile,
        torch_compile_backend=options.torch_compile_backend,
    )
    divergence = DivergenceCallback(options.divergence_factor, options.skip_nonfinite_batches)
    callbacks: list[TrainerCallback] = [divergence]
    if config.residual_scaling == "admin":
        # rank 0 profiles on the first global batch: the same ω for any number of processes
        profile_size = options.batch_size * args.world_size
        callbacks.append(AdminProfilingCallback(batch_size=profile_size, seed=options.seed))
    trainer = DeepNMTTrainer(
        model=model,
        args=args,
        train_dataset=train_tokens,
        eval_dataset=eval_tokens if evaluate_during else None,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        compute_metrics=make_compute_metrics(tokenizer, eval_refs) if evaluate_during else None,
        callbacks=callbacks,
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs(
            options.optimizer,
            options.learning_rate,
            (options.adam_beta1, options.adam_beta2),
            options.adam_epsilon,
        ),
        max_tokens=options.max_tokens,
    )
    train_output = trainer.train(resume_from_checkpoint=resume_from)
    if divergence.diverged_at is not None:
        step, loss = divergence.diverged_at
        last_good = get_last_checkpoint(str(staging))
        kept = (
            f"the last good checkpoint is {last_good} (kept; continue with --resume, e.g. after lowering the "
            "learning rate)"
            if last_good
            else "no checkpoint was written before it"
        )
        raise TrainingDivergedError(
            f"training diverged at step {step}: {divergence.reason} (loss={loss}); {kept}; try a lower "
            "learning rate, more warmup, pre-LN or a residual-scaling variant"
        )

    sharding = shard_summary(trainer.model) if options.fsdp else None  # collective
    if trainer.args.world_size > 1:
        # every rank takes part in gathering the weights (FSDP / DeepSpeed); only rank 0 writes
        trainer.save_model(str(staging))
        if not trainer.is_world_process_zero():
            return {"process_index": trainer.args.process_index, "global_step": trainer.state.global_step}
        model = model_class.from_pretrained(staging)
        model.generation_config = trainer.model.generation_config
    else:
        model = trainer.model
    model.config.use_cache = True  # the Trainer sets it to args.use_cache (False) for training
    averaged = []
    if options.average_last_checkpoints:
        averaged = _average_checkpoints_into(model, staging, options.average_last_checkpoints)
    scores: dict[str, dict[str, Any]] = {}
    final_splits = [(options.test_split, test_set)]
    if options.score_valid or test_set is None:
        final_splits.insert(0, (valid_split, valid_set))
    for split, dataset in final_splits:
        if split is None or dataset is None or options.final_eval_samples == 0:
            continue
        whole = len(dataset)
        if options.final_eval_samples is not None and whole > options.final_eval_samples:
            dataset = dataset.select(range(options.final_eval_samples))  # the first N, as --max-eval-samples
        logger.info(
            "scoring split %r (%d of %d sentences, beam %d)", split, len(dataset), whole, options.num_beams
        )
        scores[split] = {**_score_split(model, tokenizer, dataset, options), "split_sentences": whole}
    if options.final_eval_samples == 0:
        logger.info("final scoring skipped (final_eval_samples=0); score later with deep-nmt evaluate")

    shutil.rmtree(staging / SAVING_DIR, ignore_errors=True)
    if not options.keep_checkpoints:
        for checkpoint in staging.glob("checkpoint-*"):
            shutil.rmtree(checkpoint)
    model.save_pretrained(staging)  # safetensors, config.json, generation_config.json (+ code via auto_map)
    tokenizer.save_pretrained(staging)
    ship_translation_pipeline(staging)  # pipeline("translation", ..., trust_remote_code=True), no install

    train_metrics = dict(train_output.metrics)
    runtime = train_metrics.get("train_runtime")
    tokens_seen = trainer.state.num_input_tokens_seen
    if runtime and tokens_seen:
        train_metrics["train_source_tokens_per_second"] = round(tokens_seen / runtime, 1)
        train_metrics["num_input_tokens_seen"] = int(tokens_seen)
    train_metrics["skipped_nonfinite_batches"] = len(divergence.skipped)
    train_metrics["skipped_nonfinite_steps"] = list(divergence.skipped)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    headline_split = next((split for split in (options.test_split, valid_split) if split in scores), None)
    hyperparameters = {
        key: value for key, value in asdict(options).items() if key not in ("output_dir", "data_source")
    }
    hyperparameters.update(
        optimizer=options.optimizer,
        adam_betas=[options.adam_beta1, options.adam_beta2],
        adam_epsilon=options.adam_epsilon,
        weight_decay=options.weight_decay,
        batching=f"max_tokens={options.max_tokens}"
        if options.max_tokens
        else f"batch_size={options.batch_size}",
        averaged_checkpoints=averaged,
        lr_scheduler="inverse_sqrt",
        train_sampling_strategy=options.train_sampling,
        world_size=trainer.args.world_size,
        distributed_type=str(trainer.accelerator.distributed_type.value),
        global_batch_size=options.batch_size * trainer.args.world_size,
    )
    record: dict[str, Any] = {
        "task": "translation",
        "src_lang": options.src_lang,
        "tgt_lang": options.tgt_lang,
        "data_source": _relocate(os.fspath(options.data_source), staging, final),
        "train_split": options.train_split,
        "valid_split": valid_split,
        "test_split": options.test_split,
        "num_train_examples": None if options.streaming else len(train_set),
        "data": {
            # a stream is never counted ahead: these are None with streaming
            "train_pairs_read": None
            if options.streaming
            else report.total
            if report is not None
            else len(train_set),
            "train_pairs_dropped_empty": None if options.streaming else report.dropped if report else 0,
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
            "hyperparameters": hyperparameters,
            "recipe": (
                recipe_record(options.recipe, _recipe_values_used(options, model.config.to_dict()))
                if options.recipe is not None
                else None
            ),
            "model": _model_summary(model),
            "tokenizer": {
                "vocab_size": len(tokenizer),
                "source": options.tokenizer_dir or "trained (joint BPE)",
            },
            "versions": _versions(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    (staging / METRICS_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    return record
