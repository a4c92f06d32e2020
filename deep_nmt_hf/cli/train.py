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
from .flags import FieldFlags, flag_default, flag_dest, flag_fields
from .names import check_config_values
from .preprocess import _add_data_path_flags
from .schedule_flags import add_schedule_flags, preset_help, schedule_flag_values

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
    """The flags of `deep-nmt train`: those of `TrainingOptions` fields are generated from the fields'
    metadata (help, choices, defaults: training/options.py) and only placed here; the others are written by
    hand, each saying why."""
    # light: training/__init__.py's names are lazy and options.py needs only the standard library
    from ..training import options as training_options

    options = FieldFlags(training_options.TrainingOptions)
    _add_data_flags(parser)  # by hand: one field (data_source), three exclusive flags; shared with evaluate
    options.add(parser, "src_lang", "tgt_lang", "output_dir", "train_split", "valid_split", "test_split")

    model = parser.add_argument_group("model (unset flags keep the variant's defaults)")
    options.add(model, "recipe")
    model.add_argument(  # by hand: the help lists the registered variants
        "--variant",
        help=f"model type / preset config class (default: deep_nmt, or the recipe's); one of: "
        f"{', '.join(_variant_names())}",
    )
    model.add_argument("--preset", help=preset_help())  # by hand: a shape preset, or a paper preset's fields
    _add_config_flags(model)  # by hand: DeepNMTConfig's fields, not TrainingOptions'
    options.add(model, "label_smoothing")

    tok = parser.add_argument_group("tokenizer")
    options.add(tok, "vocab_size", "tokenizer_dir", "max_source_length", "max_target_length")

    run = parser.add_argument_group("training")
    options.add(run, "max_steps", "num_train_epochs", "batch_size", "eval_batch_size", "learning_rate")
    options.add(run, "warmup_steps", "max_grad_norm", "optimizer", "adam_beta1", "adam_beta2", "adam_epsilon")
    options.add(run, "weight_decay", "max_tokens", "length_penalty", "length_penalty_form")
    options.add(run, "average_last_checkpoints")
    add_schedule_flags(run, options)  # generated, but for --average-last-epochs and --admin-profile-tokens
    options.add(run, "eval_steps", "max_eval_samples", "max_train_samples")
    final = run.add_mutually_exclusive_group()
    options.add(final, "final_eval_samples")
    final.add_argument(  # by hand: an alias, --final-eval-samples 0
        "--no-final-eval",
        dest="final_eval_samples",
        action="store_const",
        const=0,
        help="skip the final beam-search scoring (score later with deep-nmt evaluate)",
    )
    options.add(run, "save_steps", "save_total_limit", "logging_steps", "num_beams", "seed")
    options.add(run, "gradient_checkpointing")
    precision = run.add_mutually_exclusive_group()
    options.add(precision, "precision")
    for name in ("bf16", "fp16"):  # by hand: Transformers-style aliases of --precision
        alias = f"same as --precision {name}"
        precision.add_argument(f"--{name}", dest="precision", action="store_const", const=name, help=alias)
    options.add(run, "fsdp", "torch_compile", "torch_compile_backend", "dataloader_workers", "overwrite")
    options.add(run, "resume", "keep_checkpoints", "train_sampling", "divergence_factor")
    options.add(run, "skip_nonfinite_batches")
    _add_data_path_flags(parser)  # by hand in cli/preprocess.py: shared with `deep-nmt preprocess`
    options.add(parser, "streaming", "shuffle_buffer_size")
    # by hand: --no-progress sets disable_tqdm (True or None); --json is no option of the run
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--json", action="store_true", help="print the metrics record as JSON on stdout")
    options.add_rest(run)  # any other TrainingOptions field with flag metadata: no place chosen above


def _add_config_flags(model: Any) -> None:
    """Flags for config fields (DeepNMTConfig's, validated by the config class); --set for any other."""
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


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `train` parser; returns {command: handler}."""
    train = commands.add_parser(
        "train",
        help="train a model with Seq2SeqTrainer",
        description="Train a model on parallel text (joint BPE tokenizer, Seq2SeqTrainer, beam-search BLEU).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt train --data-dir data/multi30k --src-lang en --tgt-lang de "
        "--valid-split val --output-dir out/en-de --layer-norm-position pre --encoder-layers 12",
    )
    _add_train_flags(train)

    return {"train": _cmd_train}


def _set_values(items: Sequence[str]) -> dict[str, Any]:
    """--set FIELD=VALUE items as {field: JSON value (else the bare string)}; the field names are not checked."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected FIELD=VALUE")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw  # a bare string such as --set dlcl_init=one
    return values


def _parse_set(items: Sequence[str]) -> dict[str, Any]:
    from ..model.configuration_deep_nmt import DeepNMTConfig

    known = set(DeepNMTConfig().to_dict())
    values = _set_values(items)
    for key in values:
        if key not in known:
            raise ValueError(f"--set {key}: not a config field of DeepNMTConfig")
    return values


def precheck(args: argparse.Namespace) -> None:
    """What `train` can check before torch is imported (`deep_nmt_hf.cli.main` runs it first): every option
    (`resolution.resolve_options`: recipe, presets, ``--max-steps 0``), the config values that have a rule of
    their own (`names.check_config_values`: ``--set encoder_layers=-2``), the named splits of a --data-dir and
    the output directory (`staging.check_output_dir`). The config's other rules follow once it is imported."""
    from ..training.options import TrainingOptions
    from ..training.resolution import resolve_options
    from ..training.staging import check_output_dir

    options, fields, _ = resolve_options(
        _option_flags(args, TrainingOptions), _config_flags(args), config_set=_set_values(args.config_set)
    )
    check_config_values(fields)
    if args.data_dir is not None:  # the splits named (valid_split None: the first of valid / val / ... found)
        from ..data.split_files import check_split_named

        for split in (options.train_split, options.valid_split, options.test_split):
            if split is not None:
                check_split_named(args.data_dir, split, options.src_lang, options.tgt_lang)
    check_output_dir(options)


def _config_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the named flags set (those given only; --set is `_parse_set`'s)."""
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
    return {key: value for key, value in flags.items() if value is not None}


def _option_flags(args: argparse.Namespace, options_class: type) -> dict[str, Any]:
    """The TrainingOptions fields the user gave on the command line. A flag at its default counts as not given
    (argparse cannot tell them apart), so that a preset's or recipe's value applies under it."""
    values = {
        field.name: getattr(args, flag_dest(field))
        for field in flag_fields(options_class)
        if hasattr(args, flag_dest(field)) and getattr(args, flag_dest(field)) != flag_default(field)
    }
    for name in ("output_dir", "tokenizer_dir"):  # --output-dir, --tokenizer: Paths for str fields
        if name in values:
            values[name] = str(values[name])
    by_hand = {
        "variant": args.variant,
        "preset": args.preset,
        "recipe": args.recipe,
        "disable_tqdm": True if args.no_progress else None,
        "num_proc": args.num_proc,
        "tokenizer_sample": args.tokenizer_sample,
        "cache_dir": args.cache_dir,
    }
    values.update((key, value) for key, value in by_hand.items() if value is not None)
    return {**values, **schedule_flag_values(args), "data_source": _data_source(args)}


def _cmd_train(args: argparse.Namespace) -> int:
    from ..training import TrainingOptions, train
    from ..training.resolution import resolve_run

    # one path for every value (training/resolution.py): flags over --set over the paper preset over the recipe
    # over the shape preset over the defaults; every value is checked here, before any data is read
    run = resolve_run(
        _option_flags(args, TrainingOptions), _config_flags(args), config_set=_parse_set(args.config_set)
    )
    options = run.options
    with contextlib.redirect_stdout(sys.stderr):  # Trainer logs go to stderr; stdout carries only the result
        record = train(options, run.overrides)
    if "process_index" in record:  # a non-zero rank of a multi-process run: rank 0 reports
        return 0
    if args.json:
        print(json.dumps(record, indent=2, default=str))
    else:
        if record.get("eval_split"):
            _print_scores(record, f"{record['eval_split']} ({record['num_sentences']} sentences):")
        print(f"model saved to {Path(args.output_dir).absolute()}")
    return 0
