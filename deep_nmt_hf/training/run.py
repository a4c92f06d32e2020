"""`train`: data, tokenizer, config and model, then `DeepNMTTrainer`; score, save and record the run."""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import datasets
import torch
from transformers import (
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    TrainerCallback,
    set_seed,
)

from ..data import ReadReport, load_parallel
from ..data.corpus import tokenize_dataset
from ..model.configuration_deep_nmt import DeepNMTConfig
from ..science.recipes import describe
from .arguments import training_arguments, training_callbacks
from .averaging import average_into, find_checkpoints, last_checkpoint
from .compilation import compile_regions
from .generation_settings import translation_generation_config
from .inputs import _load_training_data, build_config, training_corpus
from .length_penalty import set_length_penalty
from .loader import training_collator
from .metrics import make_compute_metrics
from .optimizers import optimizer_cls_and_kwargs
from .options import TrainingOptions
from .precision import resolve_precision
from .record import recipe_values_used, run_record, score_splits
from .resolution import resolve_run
from .run_clock import TrainingClock, whole_run_metrics
from .sharding import shard_model, shard_summary
from .staging import METRICS_FILE, SAVING_DIR, _partial_dir, check_output_dir, staged_output_dir
from .trainer import DeepNMTTrainer

logger = logging.getLogger(__name__)


def train(
    options: TrainingOptions,
    config_overrides: dict[str, Any] | None = None,
    *,
    staging_dir: str | os.PathLike[str] | None = None,
    translations: dict[str, list[str]] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict[str, Any]:
    """Train a model with `Seq2SeqTrainer`, save it into `options.output_dir` and return its metrics record.

    Steps: load the train / validation (/ test) splits; train a joint BPE tokenizer on the training split (or
    load `options.tokenizer_dir`); build the variant's config from `config_overrides` (field name -> value)
    and the model; train; score the validation (and test) split with beam search; save model (safetensors),
    tokenizer, generation config and ``metrics.json`` (the returned dict).

    All inputs are checked before anything is written. With `staging_dir` the caller owns the staging
    directory (see `staged_output_dir`) and the final rename; otherwise `train` stages by itself. A
    `translations` dict receives the final scoring's hypotheses, split -> one translation per sentence;
    `callbacks` are added to the Trainer's (e.g. the demo's `time_budget.WallClockBudget`).

    Several processes (`accelerate launch`, torchrun: WORLD_SIZE > 1 in the environment): every rank checks
    the output directory; the main process reads the corpus, trains the tokenizer and tokenizes into the
    fingerprinted cache (`deep_nmt_hf.data.preprocessing`) while the others wait, then they load the same entries; the Trainer shards the data (global batch = world size × `batch_size`); at the end every
    rank takes part in saving the model (needed for FSDP / DeepSpeed), then rank 0 alone reloads it, scores,
    writes ``metrics.json`` and renames the staging directory. The output directory must be on a file
    system all ranks share. Non-zero ranks return ``{"process_index": rank, "global_step": ...}``.
    """
    options = resolve_precision(options)  # explicit, else the recipe's (with its fallback), else fp32
    # every value's layer (defaults, shape preset, recipe, config fields) and every check, before any data work
    run = resolve_run(options, config_overrides)
    options, config_class, model_class = run.options, run.config_class, run.model_class
    if options.recipe is not None:
        logger.info("%s", describe(options.recipe, recipe_values_used(options, run.config)))
    distributed = _init_distributed()
    if options.fsdp and distributed is None:
        raise ValueError(
            "fsdp=True (--fsdp) shards over several processes: launch with torchrun or accelerate launch "
            "(WORLD_SIZE > 1), or drop it"
        )
    if staging_dir is None:
        check_output_dir(options)
    if distributed is not None:
        distributed.wait_for_everyone()  # all ranks checked the output dir before rank 0 creates the staging dir
    report = ReadReport()
    train_set, valid_set, valid_split = _load_training_data(options, report)
    test_set = None
    if options.test_split is not None:
        test_set = load_parallel(options.data_source, options.test_split, options.src_lang, options.tgt_lang)

    if options.tokenizer_dir is not None:
        tokenizer = AutoTokenizer.from_pretrained(options.tokenizer_dir)
    else:
        # cached by fingerprint: the main process trains it (streamed corpus or a seeded sample), the other
        # ranks wait and load the same files
        settings = dict(
            vocab_size=options.vocab_size,
            model_max_length=run.config["max_position_embeddings"],
            sample=options.tokenizer_sample,
            seed=options.seed,
            cache_dir=options.cache_dir,
        )
        tokenizer = training_corpus(options).tokenizer(train_set, **settings)
    config = build_config(
        tokenizer,
        config_class,
        max_source_length=options.max_source_length,
        max_target_length=options.max_target_length,
        **run.config,
    )

    inputs = (config, model_class, tokenizer, train_set, valid_set, valid_split, test_set, report)
    if staging_dir is not None:
        return _train_in(options, Path(staging_dir), *inputs, translations=translations, callbacks=callbacks)
    if distributed is not None and not distributed.is_main_process:
        staging = _partial_dir(Path(options.output_dir).expanduser().absolute())
        distributed.wait_for_everyone()  # rank 0 has created (or cleaned) the staging dir
        return _train_in(options, staging, *inputs, translations=translations, callbacks=callbacks)
    with staged_output_dir(options.output_dir, overwrite=options.overwrite, resume=options.resume) as staging:
        if distributed is not None:
            distributed.wait_for_everyone()
        return _train_in(options, staging, *inputs, translations=translations, callbacks=callbacks)


def set_generation_settings(model: PreTrainedModel, options: TrainingOptions) -> None:
    """Beam size, length penalty (value and form) and maximum length of the saved generation_config.json: the
    recipe's values on `generation_settings.translation_generation_config`."""
    generation_config = translation_generation_config(
        model.config, num_beams=options.num_beams, max_length=options.max_target_length + 1
    )
    set_length_penalty(generation_config, options.length_penalty, options.length_penalty_form)
    model.generation_config = generation_config


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
    translations: dict[str, list[str]] | None = None,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict[str, Any]:
    resume_from = last_checkpoint(staging) if options.resume else None
    if resume_from is not None and config.residual_scaling == "admin":
        # ω is in the checkpoint's weights: do not profile again over them
        saved = json.loads((resume_from / "config.json").read_text(encoding="utf-8"))
        config.admin_profiled = bool(saved.get("admin_profiled", config.admin_profiled))
    set_seed(options.seed)
    model = model_class(config)
    set_generation_settings(model, options)
    if options.fsdp:
        model = shard_model(model)  # every rank keeps its Shard(0) slice of every parameter
    if options.torch_compile:  # the repeated layers, each class compiled once (issue #55)
        compile_regions(model, backend=options.torch_compile_backend)

    token_stats: dict[str, int] = {}
    train_tokens, eval_tokens, eval_refs = _tokenized_splits(
        options, tokenizer, train_set, valid_set, token_stats
    )
    evaluate_during = eval_tokens is not None and options.eval_steps is not None
    args = training_arguments(options, staging, evaluate_during)
    divergence, own_callbacks = training_callbacks(options, config, args)
    clock = TrainingClock()  # train_runtime of the whole run, across --resume
    trainer = DeepNMTTrainer(
        model=model,
        args=args,
        train_dataset=train_tokens,
        eval_dataset=eval_tokens if evaluate_during else None,
        processing_class=tokenizer,
        data_collator=training_collator(tokenizer, model),  # pads to a multiple of 8 on CUDA (loader.py)
        compute_metrics=make_compute_metrics(tokenizer, eval_refs) if evaluate_during else None,
        callbacks=[*own_callbacks, clock, *callbacks],
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs(
            options.optimizer,
            options.learning_rate,
            (options.adam_beta1, options.adam_beta2),
            options.adam_epsilon,
        ),
        max_tokens=options.max_tokens,
    )
    train_output = trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
    train_output = train_output._replace(metrics=whole_run_metrics(train_output.metrics, clock))
    if divergence.diverged_at is not None:
        raise divergence.error(last_checkpoint(staging))

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
        by_epoch = options.save_strategy == "epoch"
        averaged = average_into(model, staging, options.average_last_checkpoints, epochs=by_epoch)
    final_splits = [(options.test_split, test_set)]
    if options.score_valid or test_set is None:
        final_splits.insert(0, (valid_split, valid_set))
    scores = score_splits(model, tokenizer, options, final_splits, translations)

    shutil.rmtree(staging / SAVING_DIR, ignore_errors=True)
    if not options.keep_checkpoints:
        for checkpoint in find_checkpoints(staging):
            shutil.rmtree(checkpoint)
    # safetensors, config.json, generation_config.json (+ code via auto_map, and the translation pipeline:
    # pipeline("translation", ..., trust_remote_code=True) without an install, pipeline_shipping.py)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)

    record = run_record(
        options,
        trainer=trainer,
        train_output=train_output,
        model=model,
        tokenizer=tokenizer,
        train_set=train_set,
        valid_split=valid_split,
        scores=scores,
        averaged=averaged,
        divergence=divergence,
        report=report,
        token_stats=token_stats,
        sharding=sharding,
        staging=staging,
    )
    (staging / METRICS_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    return record


def _tokenized_splits(
    options: TrainingOptions,
    tokenizer: PreTrainedTokenizerBase,
    train_set: Any,
    valid_set: datasets.Dataset | None,
    token_stats: dict[str, int],
) -> tuple[Any, datasets.Dataset | None, list[str] | None]:
    """The tokenized training split (streamed or cached), the tokenized validation subset and its references."""
    lengths = (options.max_source_length, options.max_target_length)
    langs = (options.src_lang, options.tgt_lang)
    train_tokens = training_corpus(options).tokenized(train_set, tokenizer, *lengths, stats=token_stats)
    if valid_set is None:
        return train_tokens, None, None
    eval_subset = valid_set
    if options.max_eval_samples is not None and len(valid_set) > options.max_eval_samples:
        eval_subset = valid_set.select(range(options.max_eval_samples))
    eval_tokens = tokenize_dataset(eval_subset, tokenizer, *langs, *lengths, cache_dir=options.cache_dir)
    return train_tokens, eval_tokens, [pair[options.tgt_lang] for pair in eval_subset["translation"]]
