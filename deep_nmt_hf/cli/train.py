"""`deep-nmt train`: its flags and the command."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .common import _add_data_flags, _choice_help, _data_source, _HelpFormatter, _print_scores, _variant_names
from .names import PRECISIONS
from .preprocess import _add_data_path_flags
from .schedule_flags import add_schedule_flags, preset_help, schedule_values

# choice flags: exactly the config field names (validated by the config class, not by argparse)
CHOICE_FLAGS = (
    "layer_norm_position",
    "residual_scaling",
    "init_method",
    "decoder_attention",
    "encoder_layer_aggregation",
    "decoder_layer_aggregation",
)


def _add_train_flags(parser: argparse.ArgumentParser) -> None:
    _add_data_flags(parser)
    parser.add_argument("--src-lang", required=True, help="source language code (file suffix / JSON key)")
    parser.add_argument("--tgt-lang", required=True, help="target language code (file suffix / JSON key)")
    parser.add_argument("--output-dir", required=True, type=Path, help="where the trained model is saved")
    parser.add_argument("--train-split", default="train", help="training split name")
    parser.add_argument(
        "--valid-split",
        help="validation split name (default: the first of valid, val, validation, dev found)",
    )
    parser.add_argument("--test-split", help="optional split scored at the end (reported in metrics.json)")

    model = parser.add_argument_group("model (unset flags keep the variant's defaults)")
    model.add_argument(
        "--recipe",
        help="a paper's training recipe by name (admin, dsinit_matt, dlcl, shared_layers, deep_decoder, marian): "
        "variant, optimizer, lr, warmup, dropouts, token batches, clipping, beam, length penalty, averaging, "
        "embedding sharing; printed at start; flags given explicitly win",
    )
    model.add_argument(
        "--variant",
        help=f"model type / preset config class (default: deep_nmt, or the recipe's); one of: "
        f"{', '.join(_variant_names())}",
    )
    model.add_argument("--preset", help=preset_help())
    model.add_argument("--d-model", type=int, help="model width d_model")
    model.add_argument("--encoder-layers", type=int, help="number of encoder layers")
    model.add_argument("--decoder-layers", type=int, help="number of decoder layers")
    model.add_argument("--heads", type=int, help="attention heads in encoder and decoder")
    model.add_argument("--ffn-dim", type=int, help="feed-forward inner size in encoder and decoder")
    model.add_argument("--dropout", type=float, help="residual dropout")
    model.add_argument("--attention-dropout", type=float, help="dropout on attention weights")
    model.add_argument("--activation-dropout", type=float, help="dropout after the FFN activation")
    model.add_argument(
        "--activation-function", help="FFN activation (a transformers ACT2FN name, e.g. relu, gelu)"
    )
    model.add_argument(
        "--max-position-embeddings", type=int, help="positions (default: max(256, max lengths))"
    )
    for field in CHOICE_FLAGS:
        model.add_argument(
            "--" + field.replace("_", "-"), dest=field, metavar="VALUE", help=_choice_help(field)
        )
    model.add_argument(
        "--set",
        dest="config_set",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="any other config field (JSON value, e.g. --set dlcl_window=4 --set encoder_reinject_input=true); "
        "repeatable",
    )
    model.add_argument(
        "--label-smoothing",
        type=float,
        help="label smoothing of the model's loss (default: 0.1, or the recipe's)",
    )

    tok = parser.add_argument_group("tokenizer")
    tok.add_argument(
        "--vocab-size", type=int, default=8000, help="joint BPE vocabulary size (when training one)"
    )
    tok.add_argument("--tokenizer", type=Path, help="load this saved tokenizer instead of training one")
    tok.add_argument(
        "--max-source-length", type=int, default=128, help="source tokens kept (longer: truncated)"
    )
    tok.add_argument(
        "--max-target-length", type=int, default=128, help="target tokens kept (longer: truncated)"
    )

    run = parser.add_argument_group("training")
    run.add_argument("--max-steps", type=int, default=-1, help="optimizer steps (> 0 overrides --epochs)")
    run.add_argument(
        "--epochs",
        type=float,
        help="training epochs when --max-steps is not set (default: 10, or the preset's)",
    )
    run.add_argument("--batch-size", type=int, default=32, help="sentence pairs per training batch")
    run.add_argument(
        "--eval-batch-size", type=int, help="sentences per evaluation batch (default: --batch-size)"
    )
    run.add_argument("--lr", type=float, help="peak learning rate (default: 5e-4, or the recipe's)")
    run.add_argument(
        "--warmup-steps",
        type=int,
        help="linear warmup, then inverse square root (default: 4000, or the recipe's)",
    )
    run.add_argument(
        "--max-grad-norm",
        type=float,
        help="gradient clipping norm, 0 = no clipping (default: 1.0, or the recipe's)",
    )
    run.add_argument(
        "--optimizer", choices=("adam", "adamw", "radam"), help="optimizer (default: adam, or the recipe's)"
    )
    run.add_argument("--adam-beta1", type=float, help="β1 (default: 0.9, or the recipe's)")
    run.add_argument("--adam-beta2", type=float, help="β2 (default: 0.98, or the recipe's)")
    run.add_argument("--adam-epsilon", type=float, help="ε (default: 1e-8, or the recipe's)")
    run.add_argument("--weight-decay", type=float, help="weight decay (default: 0, or the recipe's)")
    run.add_argument(
        "--max-tokens",
        type=int,
        help="token-budget batches (fairseq's --max-tokens): padded source and target size per batch and "
        "process <= N; replaces --batch-size for training (default: sentence batches, or the recipe's)",
    )
    run.add_argument(
        "--length-penalty", type=float, help="beam-search length penalty α (default: 1.0, or the recipe's)"
    )
    run.add_argument(
        "--length-penalty-form",
        choices=("fairseq", "gnmt"),
        help="fairseq = Transformers' len^α, gnmt = ((5+len)/6)^α (default: fairseq, or the recipe's)",
    )
    run.add_argument(
        "--average-last-checkpoints",
        type=int,
        metavar="N",
        help="final model = average of the last N checkpoints (default: none, or the recipe's)",
    )
    add_schedule_flags(run)
    run.add_argument(
        "--eval-steps", type=int, help="evaluate (beam search, BLEU) every N steps (default: at end)"
    )
    run.add_argument(
        "--max-eval-samples", type=int, default=500, help="validation sentences used during training"
    )
    run.add_argument("--max-train-samples", type=int, help="use only the first N training pairs")
    final = run.add_mutually_exclusive_group()
    final.add_argument(
        "--final-eval-samples",
        type=int,
        metavar="N",
        help="score only the first N sentences of the validation / test split after training (default: all; "
        "0 = none)",
    )
    final.add_argument(
        "--no-final-eval",
        dest="final_eval_samples",
        action="store_const",
        const=0,
        help="skip the final beam-search scoring (score later with deep-nmt evaluate)",
    )
    run.add_argument("--save-steps", type=int, default=1000, help="write a checkpoint every N steps")
    run.add_argument("--save-total-limit", type=int, default=2, help="checkpoints kept")
    run.add_argument("--logging-steps", type=int, default=50, help="log the training loss every N steps")
    run.add_argument(
        "--num-beams",
        type=int,
        help="beam size for evaluation and generation_config (default: 4, or the recipe's)",
    )
    run.add_argument("--seed", type=int, default=42, help="random seed")
    run.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in backward to save memory",
    )
    _add_precision_flags(run)
    run.add_argument(
        "--fsdp",
        action="store_true",
        help="shard parameters, gradients and optimizer state over the processes (FSDP2 fully_shard; "
        "needs torchrun / accelerate launch with 2+ processes)",
    )
    run.add_argument(
        "--torch-compile", action="store_true", help="compile the model with torch.compile (inductor)"
    )
    run.add_argument(
        "--torch-compile-backend",
        metavar="NAME",
        help="torch.compile backend for --torch-compile (default inductor; aot_eager traces without codegen)",
    )
    run.add_argument(
        "--dataloader-workers",
        type=int,
        metavar="N",
        help="processes that collate training batches (default: 2 on CUDA, 0 on CPU)",
    )
    run.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    run.add_argument("--resume", action="store_true", help="continue from the checkpoints of a failed run")
    run.add_argument("--keep-checkpoints", action="store_true", help="keep checkpoint-* dirs in the output")
    run.add_argument(
        "--train-sampling",
        default="group_by_length",
        choices=("group_by_length", "random", "sequential"),
        help="training sampler: group_by_length (similar lengths per batch; a numpy index array, 8 bytes a "
        "pair), random (torch's sampler: a Python list of the corpus per epoch) or sequential; --batch-size is per "
        "process (global batch = processes x --batch-size); --max-tokens replaces it",
    )
    run.add_argument(
        "--divergence-factor",
        type=float,
        help="stop when a step's loss exceeds this factor x the mean of the previous 20 steps (> 1)",
    )
    run.add_argument(
        "--skip-nonfinite-batches",
        type=int,
        default=0,
        metavar="N",
        help="skip up to N batches with a NaN/inf loss (zero gradient; counted in metrics.json) before "
        "stopping",
    )
    _add_data_path_flags(parser)
    parser.add_argument(
        "--streaming",
        action="store_true",
        help="stream the training split (datasets IterableDataset, no Arrow copy, shuffle buffer); needs "
        "--max-steps",
    )
    parser.add_argument(
        "--shuffle-buffer-size", type=int, default=10_000, help="pairs in the --streaming shuffle buffer"
    )
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--json", action="store_true", help="print the metrics record as JSON on stdout")


def _add_precision_flags(run: Any) -> None:
    """--precision and the Transformers-style aliases --bf16 / --fp16 (one of them at most)."""
    precision = run.add_mutually_exclusive_group()
    precision.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="mixed precision (the Trainer's, via accelerate): bf16 or fp16 autocast with fp32 weights, fp16 with "
        "dynamic loss scaling (needs a CUDA GPU); default: the recipe's (the papers' fp16 falls back to fp32 "
        "without CUDA, with a warning), else fp32",
    )
    precision.add_argument(
        "--bf16", dest="precision", action="store_const", const="bf16", help="same as --precision bf16"
    )
    precision.add_argument(
        "--fp16", dest="precision", action="store_const", const="fp16", help="same as --precision fp16"
    )


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `train` parser; returns {command: handler}."""
    train = commands.add_parser(
        "train",
        help="train a model with Seq2SeqTrainer",
        description="Train a model on parallel text (joint BPE tokenizer, Seq2SeqTrainer, beam-search BLEU).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt train --data-dir ../shared/data/multi30k --src-lang en --tgt-lang de "
        "--valid-split val --output-dir out/en-de --layer-norm-position pre --encoder-layers 12",
    )
    _add_train_flags(train)

    return {"train": _cmd_train}


def _parse_set(items: Sequence[str]) -> dict[str, Any]:
    from ..model.configuration_deep_nmt import DeepNMTConfig

    known = set(DeepNMTConfig().to_dict())
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE")
        if key not in known:
            raise ValueError(f"--set {key}: not a config field of DeepNMTConfig")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw  # a bare string such as --set dlcl_init=one
    return values


def _config_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides = _parse_set(args.config_set)
    flags = {
        "d_model": args.d_model,
        "encoder_layers": args.encoder_layers,
        "decoder_layers": args.decoder_layers,
        "encoder_attention_heads": args.heads,
        "decoder_attention_heads": args.heads,
        "encoder_ffn_dim": args.ffn_dim,
        "decoder_ffn_dim": args.ffn_dim,
        "dropout": args.dropout,
        "attention_dropout": args.attention_dropout,
        "activation_dropout": args.activation_dropout,
        "activation_function": args.activation_function,
        "max_position_embeddings": args.max_position_embeddings,
        **{field: getattr(args, field) for field in CHOICE_FLAGS},
    }
    overrides.update({key: value for key, value in flags.items() if value is not None})
    return overrides


def _cmd_train(args: argparse.Namespace) -> int:
    from ..training import TrainingOptions, train

    explicit = dict(
        variant=args.variant,
        label_smoothing=args.label_smoothing,
        learning_rate=args.lr,
        warmup_steps=args.warmup_steps,
        max_grad_norm=args.max_grad_norm,
        num_beams=args.num_beams,
        optimizer=args.optimizer,
        adam_beta1=args.adam_beta1,
        adam_beta2=args.adam_beta2,
        adam_epsilon=args.adam_epsilon,
        weight_decay=args.weight_decay,
        max_tokens=args.max_tokens,
        length_penalty=args.length_penalty,
        length_penalty_form=args.length_penalty_form,
        average_last_checkpoints=args.average_last_checkpoints,
    )
    recipe, scheduled, preset_config = schedule_values(args)  # a paper preset's values under the flags
    # flags left unset take the preset's, then the recipe's value, then TrainingOptions' default
    options = TrainingOptions.from_recipe(
        recipe,
        **{**scheduled, **{key: value for key, value in explicit.items() if value is not None}},
        output_dir=str(args.output_dir),
        data_source=_data_source(args),
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        train_split=args.train_split,
        valid_split=args.valid_split,
        test_split=args.test_split,
        tokenizer_dir=str(args.tokenizer) if args.tokenizer else None,
        vocab_size=args.vocab_size,
        max_source_length=args.max_source_length,
        max_target_length=args.max_target_length,
        batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size,
        max_steps=args.max_steps,
        eval_steps=args.eval_steps,
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        logging_steps=args.logging_steps,
        max_eval_samples=args.max_eval_samples,
        max_train_samples=args.max_train_samples,
        final_eval_samples=args.final_eval_samples,
        seed=args.seed,
        gradient_checkpointing=args.gradient_checkpointing,
        overwrite=args.overwrite,
        resume=args.resume,
        keep_checkpoints=args.keep_checkpoints,
        disable_tqdm=True if args.no_progress else None,
        train_sampling=args.train_sampling,
        divergence_factor=args.divergence_factor,
        skip_nonfinite_batches=args.skip_nonfinite_batches,
        fsdp=args.fsdp,
        torch_compile=args.torch_compile,
        torch_compile_backend=args.torch_compile_backend,
        precision=args.precision,
        dataloader_workers=args.dataloader_workers,
        num_proc=args.num_proc,
        tokenizer_sample=args.tokenizer_sample,
        cache_dir=args.cache_dir,
        streaming=args.streaming,
        shuffle_buffer_size=args.shuffle_buffer_size,
    )
    with contextlib.redirect_stdout(sys.stderr):  # Trainer logs go to stderr; stdout carries only the result
        record = train(options, {**preset_config, **_config_overrides(args)})
    if "process_index" in record:  # a non-zero rank of a multi-process run: rank 0 reports
        return 0
    if args.json:
        print(json.dumps(record, indent=2, default=str))
    else:
        if record.get("eval_split"):
            _print_scores(record, f"{record['eval_split']} ({record['num_sentences']} sentences):")
        print(f"model saved to {Path(args.output_dir).absolute()}")
    return 0
