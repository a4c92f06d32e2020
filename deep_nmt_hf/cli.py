"""The `deep-nmt` command: train, evaluate, translate, demo.

Every subcommand explains its flags with ``--help``. Errors (bad paths, missing splits, bad data, invalid
config values) print one ``error: ...`` line on stderr and exit with code 2, leaving no output directory behind.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import MODEL_TYPES, VARIANTS
from .configuration_deep_nmt import CHOICES

logger = logging.getLogger("deep_nmt_hf")

EXIT_ERROR = 2

# choice flags: exactly the config field names (validated by the config class, not by argparse)
CHOICE_FLAGS = (
    "layer_norm_position",
    "residual_scaling",
    "init_method",
    "decoder_attention",
    "encoder_layer_aggregation",
    "decoder_layer_aggregation",
)

# the built-in demo: a deep pre-LN model that trains on the synthetic corpus in a few CPU minutes
DEMO_MODEL = {
    "d_model": 128,
    "encoder_layers": 8,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 512,
    "decoder_ffn_dim": 512,
    "layer_norm_position": "pre",
    "dropout": 0.1,
}
DEMO_DEFAULTS = {
    "train_size": 12000,
    "valid_size": 200,
    "test_size": 500,
    "max_steps": 800,
    "batch_size": 64,
    "lr": 1e-3,
    "warmup_steps": 200,
    "vocab_size": 2000,
}
QUICK_DEMO = {"train_size": 1000, "valid_size": 50, "test_size": 100, "max_steps": 100}


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows defaults, except for flags whose default is None or a switch (their help says what happens)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def _variant_names() -> list[str]:
    return [config_class.model_type for config_class, _, _ in MODEL_TYPES] + sorted(VARIANTS)


def _choice_help(field: str) -> str:
    implemented, planned = CHOICES.get(field, ((), ()))
    values = ", ".join(implemented) or "see DeepNMTConfig"
    return f"config field {field}: one of {values} (default: the variant's)"


def _add_data_flags(parser: argparse.ArgumentParser, required: bool = True) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(
        "--data-dir", type=Path, help="directory of line-aligned {split}.{lang}[.gz] files (or {split}.jsonl)"
    )
    group.add_argument(
        "--data", type=Path, help='one JSON-lines file of {"translation": {src: ..., tgt: ...}} rows'
    )
    group.add_argument("--dataset", help="a Hugging Face Hub dataset name (needs the network)")


def _add_generation_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-beams", type=int, default=4, help="beam size of beam search (1 = greedy)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per generation batch")


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
        "--variant",
        default="deep_nmt",
        help=f"model type / preset config class; one of: {', '.join(_variant_names())}",
    )
    model.add_argument(
        "--preset", help="a named shape preset of the variant (e.g. tiny, 6L-6L; see the config)"
    )
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
        "--label-smoothing", type=float, default=0.1, help="label smoothing of the model's loss"
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
        "--epochs", type=float, default=10.0, help="training epochs (when --max-steps is not set)"
    )
    run.add_argument("--batch-size", type=int, default=32, help="sentence pairs per training batch")
    run.add_argument(
        "--eval-batch-size", type=int, help="sentences per evaluation batch (default: --batch-size)"
    )
    run.add_argument(
        "--lr", type=float, default=5e-4, help="peak learning rate (Adam β=(0.9, 0.98), no decay)"
    )
    run.add_argument("--warmup-steps", type=int, default=4000, help="linear warmup, then inverse square root")
    run.add_argument("--max-grad-norm", type=float, default=1.0, help="gradient clipping norm")
    run.add_argument(
        "--eval-steps", type=int, help="evaluate (beam search, BLEU) every N steps (default: at end)"
    )
    run.add_argument(
        "--max-eval-samples", type=int, default=500, help="validation sentences used during training"
    )
    run.add_argument("--max-train-samples", type=int, help="use only the first N training pairs")
    run.add_argument("--save-steps", type=int, default=1000, help="write a checkpoint every N steps")
    run.add_argument("--save-total-limit", type=int, default=2, help="checkpoints kept")
    run.add_argument("--logging-steps", type=int, default=50, help="log the training loss every N steps")
    run.add_argument(
        "--num-beams", type=int, default=4, help="beam size for evaluation and generation_config"
    )
    run.add_argument("--seed", type=int, default=42, help="random seed")
    run.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="recompute activations in backward to save memory",
    )
    run.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    run.add_argument("--resume", action="store_true", help="continue from the checkpoints of a failed run")
    run.add_argument("--keep-checkpoints", action="store_true", help="keep checkpoint-* dirs in the output")
    run.add_argument(
        "--train-sampling",
        default="group_by_length",
        choices=("group_by_length", "random", "sequential"),
        help="training sampler; --batch-size is per process (global batch = processes x --batch-size)",
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
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    run.add_argument("--json", action="store_true", help="print the metrics record as JSON on stdout")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `deep-nmt` with its subcommands."""
    parser = argparse.ArgumentParser(
        prog="deep-nmt",
        description="Train, evaluate and run very deep Transformer translation models (deep_nmt_hf).",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    train = commands.add_parser(
        "train",
        help="train a model with Seq2SeqTrainer",
        description="Train a model on parallel text (joint BPE tokenizer, Seq2SeqTrainer, beam-search BLEU).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt train --data-dir ../shared/data/multi30k --src-lang en --tgt-lang de "
        "--valid-split val --output-dir out/en-de --layer-norm-position pre --encoder-layers 12",
    )
    _add_train_flags(train)

    evaluate = commands.add_parser(
        "evaluate",
        help="score a saved model: BLEU, chrF, TER with sacrebleu signatures",
        description="Translate one split with a saved model and print BLEU / chrF / TER with their signatures.",
        formatter_class=_HelpFormatter,
    )
    evaluate.add_argument("model", help="saved model directory")
    _add_data_flags(evaluate)
    evaluate.add_argument("--split", default="test", help="split to score")
    evaluate.add_argument("--src-lang", help="source language (default: from the model's metrics.json)")
    evaluate.add_argument("--tgt-lang", help="target language (default: from the model's metrics.json)")
    _add_generation_flags(evaluate)
    evaluate.add_argument(
        "--max-new-tokens", type=int, help="generated tokens per sentence (default: automatic)"
    )
    evaluate.add_argument("--json", action="store_true", help="print the result as JSON")

    translate = commands.add_parser(
        "translate",
        help="translate stdin to stdout, one sentence per line",
        description="Read sentences from stdin and write one translation per line to stdout (batched; empty "
        "lines stay empty; order kept).",
        formatter_class=_HelpFormatter,
    )
    translate.add_argument("model", help="saved model directory")
    _add_generation_flags(translate)
    translate.add_argument(
        "--max-new-tokens", type=int, help="generated tokens per sentence (default: automatic)"
    )

    demo = commands.add_parser(
        "demo",
        help="train a deep model on the built-in synthetic corpus (a few CPU minutes)",
        description="Generate the built-in synthetic language pair (sa -> sb), train a deep pre-LN model "
        f"({DEMO_MODEL['encoder_layers']}-layer encoder, {DEMO_MODEL['decoder_layers']}-layer decoder, "
        f"d_model {DEMO_MODEL['d_model']}) on it, score the test split and save everything.",
        formatter_class=_HelpFormatter,
    )
    demo.add_argument(
        "--output-dir", type=Path, default=Path("out/demo"), help="where data and model are saved"
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help=f"a much shorter run (corpus {QUICK_DEMO['train_size']}/{QUICK_DEMO['valid_size']}/"
        f"{QUICK_DEMO['test_size']} pairs, {QUICK_DEMO['max_steps']} steps); low BLEU",
    )
    demo.add_argument(
        "--max-steps", type=int, help=f"optimizer steps (default: {DEMO_DEFAULTS['max_steps']}, quick: fewer)"
    )
    demo.add_argument(
        "--train-size", type=int, help=f"training pairs (default: {DEMO_DEFAULTS['train_size']})"
    )
    demo.add_argument(
        "--valid-size", type=int, help=f"validation pairs (default: {DEMO_DEFAULTS['valid_size']})"
    )
    demo.add_argument("--test-size", type=int, help=f"test pairs (default: {DEMO_DEFAULTS['test_size']})")
    demo.add_argument(
        "--batch-size", type=int, default=DEMO_DEFAULTS["batch_size"], help="training batch size"
    )
    demo.add_argument("--lr", type=float, default=DEMO_DEFAULTS["lr"], help="peak learning rate")
    demo.add_argument("--num-beams", type=int, default=4, help="beam size for the final evaluation")
    demo.add_argument("--seed", type=int, default=1234, help="corpus and training seed")
    demo.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    demo.add_argument("--no-progress", action="store_true", help="hide progress bars")

    push = commands.add_parser(
        "push",
        help="publish a trained model on the Hugging Face Hub (model card, safetensors, code or folded)",
        description="Prepare the exact folder to upload (safetensors weights, config.json with auto_map and the "
        "code files, tokenizer, generation config, README.md model card from metrics.json, plots) and upload "
        "it with huggingface_hub. --fold uploads the folded stock model instead (no custom code needed).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt push out/demo me/deep-nmt-demo --dry-run",
    )
    push.add_argument("model_dir", type=Path, help="saved model directory (from deep-nmt train / demo)")
    push.add_argument("repo_id", help="Hub repository id, NAMESPACE/NAME")
    push.add_argument(
        "--fold", action="store_true", help="upload the folded stock Transformers model (foldable variants)"
    )
    push.add_argument("--private", action="store_true", help="create the repository as private")
    push.add_argument(
        "--dry-run", action="store_true", help="prepare the folder and list it; do not touch the network"
    )
    push.add_argument("--license", default="apache-2.0", help="license id for the model card metadata")
    push.add_argument(
        "--dataset", help="Hub dataset id of the training data, for the card (when training read local files)"
    )
    push.add_argument(
        "--staging-dir",
        type=Path,
        help="where to write the upload folder (a new directory; default: temporary)",
    )
    _add_tool_parsers(commands)
    return parser


# ----------------------------------------------------------------------------------------------------- helpers
def _data_source(args: argparse.Namespace) -> str | Path:
    if args.data_dir is not None:
        if not args.data_dir.is_dir():
            raise NotADirectoryError(f"--data-dir {args.data_dir}: no such directory")
        return args.data_dir
    if args.data is not None:
        if not args.data.is_file():
            raise FileNotFoundError(f"--data {args.data}: no such file")
        return args.data
    return args.dataset


def _parse_set(items: Sequence[str]) -> dict[str, Any]:
    from .configuration_deep_nmt import DeepNMTConfig

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


def _print_scores(record: dict[str, Any], header: str) -> None:
    print(header)
    for name, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("ter", "TER")):
        print(f"{label:<5}= {record[name]:6.2f}  {record[name + '_signature']}")


def _load_model(model: str) -> tuple[Any, Any]:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer  # Auto classes: registered by the package

    path = Path(model).expanduser()
    if not path.exists() and (os.sep in model or model.startswith(".")):
        raise FileNotFoundError(f"{model}: no such model directory")
    if path.exists() and not (path / "config.json").is_file():
        raise FileNotFoundError(f"{model}: not a saved model directory (no config.json)")
    return AutoModelForSeq2SeqLM.from_pretrained(model), AutoTokenizer.from_pretrained(model)


def _setup_logging(quiet: bool = False) -> None:
    from transformers.utils import logging as hf_logging

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logger.setLevel(logging.INFO)
    hf_logging.set_verbosity_warning()
    if quiet:
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")


# ---------------------------------------------------------------------------------------------------- commands
def _cmd_train(args: argparse.Namespace) -> int:
    from .training import TrainingOptions, train

    options = TrainingOptions(
        output_dir=str(args.output_dir),
        data_source=_data_source(args),
        src_lang=args.src_lang,
        tgt_lang=args.tgt_lang,
        train_split=args.train_split,
        valid_split=args.valid_split,
        test_split=args.test_split,
        variant=args.variant,
        preset=args.preset,
        tokenizer_dir=str(args.tokenizer) if args.tokenizer else None,
        vocab_size=args.vocab_size,
        max_source_length=args.max_source_length,
        max_target_length=args.max_target_length,
        batch_size=args.batch_size,
        eval_batch_size=args.eval_batch_size,
        learning_rate=args.lr,
        warmup_steps=args.warmup_steps,
        max_steps=args.max_steps,
        num_train_epochs=args.epochs,
        eval_steps=args.eval_steps,
        save_steps=args.save_steps,
        save_total_limit=args.save_total_limit,
        logging_steps=args.logging_steps,
        max_eval_samples=args.max_eval_samples,
        max_train_samples=args.max_train_samples,
        num_beams=args.num_beams,
        seed=args.seed,
        label_smoothing=args.label_smoothing,
        max_grad_norm=args.max_grad_norm,
        gradient_checkpointing=args.gradient_checkpointing,
        overwrite=args.overwrite,
        resume=args.resume,
        keep_checkpoints=args.keep_checkpoints,
        disable_tqdm=True if args.no_progress else None,
        train_sampling=args.train_sampling,
        divergence_factor=args.divergence_factor,
        skip_nonfinite_batches=args.skip_nonfinite_batches,
    )
    with contextlib.redirect_stdout(sys.stderr):  # Trainer logs go to stderr; stdout carries only the result
        record = train(options, _config_overrides(args))
    if "process_index" in record:  # a non-zero rank of a multi-process run: rank 0 reports
        return 0
    if args.json:
        print(json.dumps(record, indent=2, default=str))
    else:
        if record.get("eval_split"):
            _print_scores(record, f"{record['eval_split']} ({record['num_sentences']} sentences):")
        print(f"model saved to {Path(args.output_dir).absolute()}")
    return 0


def _cmd_evaluate(args: argparse.Namespace) -> int:
    from .training import METRICS_FILE, evaluate_model

    model_dir = Path(args.model).expanduser()
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{args.model}: not a saved model directory (no config.json)")
    src_lang, tgt_lang = args.src_lang, args.tgt_lang
    if src_lang is None or tgt_lang is None:
        metrics_path = model_dir / METRICS_FILE
        saved = json.loads(metrics_path.read_text(encoding="utf-8")) if metrics_path.is_file() else {}
        src_lang = src_lang or saved.get("src_lang")
        tgt_lang = tgt_lang or saved.get("tgt_lang")
        if src_lang is None or tgt_lang is None:
            raise ValueError(
                f"give --src-lang and --tgt-lang ({model_dir} has no {METRICS_FILE} naming them)"
            )
    result = evaluate_model(
        model_dir,
        _data_source(args),
        args.split,
        src_lang,
        tgt_lang,
        num_beams=args.num_beams,
        batch_size=args.batch_size,
        max_length=args.max_new_tokens,
    )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        _print_scores(
            result,
            f"{args.model} on {args.split} ({result['num_sentences']} sentences, {src_lang}->{tgt_lang}, "
            f"beam {args.num_beams}):",
        )
    return 0


def _cmd_translate(args: argparse.Namespace) -> int:
    from .training import translate

    model, tokenizer = _load_model(args.model)
    lines = [line.rstrip("\r\n") for line in sys.stdin]
    outputs = translate(
        model,
        tokenizer,
        lines,
        num_beams=args.num_beams,
        batch_size=args.batch_size,
        max_new_tokens=args.max_new_tokens,
    )
    for text in outputs:
        sys.stdout.write(" ".join(text.splitlines()) + "\n")
    sys.stdout.flush()
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .data import write_parallel_dir
    from .synthetic import SRC_LANG, TGT_LANG, demo_splits
    from .training import TrainingOptions, staged_output_dir, train

    base = {**DEMO_DEFAULTS, **(QUICK_DEMO if args.quick else {})}
    sizes = {
        name: getattr(args, f"{name}_size") or base[f"{name}_size"] for name in ("train", "valid", "test")
    }
    max_steps = args.max_steps or base["max_steps"]
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # the synthetic text is tokenized on purpose
    start = time.time()
    final = args.output_dir.expanduser().absolute()
    with staged_output_dir(final, overwrite=args.overwrite) as staging:
        logger.info("generating the synthetic corpus (%s -> %s): %s", SRC_LANG, TGT_LANG, sizes)
        data_dir = staging / "data"
        splits = demo_splits(seed=args.seed, **sizes)
        for split, pairs in splits.items():
            write_parallel_dir(pairs, data_dir, split, SRC_LANG, TGT_LANG)
        options = TrainingOptions(
            output_dir=str(final),
            data_source=data_dir,
            src_lang=SRC_LANG,
            tgt_lang=TGT_LANG,
            valid_split="valid",
            test_split="test",
            vocab_size=DEMO_DEFAULTS["vocab_size"],
            batch_size=args.batch_size,
            eval_batch_size=64,
            learning_rate=args.lr,
            warmup_steps=min(DEMO_DEFAULTS["warmup_steps"], max(1, max_steps // 4)),
            max_steps=max_steps,
            save_steps=max_steps,
            save_total_limit=1,
            logging_steps=max(1, min(50, max_steps // 10)),
            num_beams=args.num_beams,
            seed=args.seed,
            score_valid=False,
            disable_tqdm=True if args.no_progress else None,
        )
        logger.info(
            "training a %d+%d-layer pre-LN model (d_model %d) for %d steps",
            DEMO_MODEL["encoder_layers"],
            DEMO_MODEL["decoder_layers"],
            DEMO_MODEL["d_model"],
            max_steps,
        )
        with contextlib.redirect_stdout(sys.stderr):  # Trainer logs to stderr; the summary to stdout
            record = train(options, dict(DEMO_MODEL), staging_dir=staging)
    minutes, seconds = divmod(time.time() - start, 60)
    _print_scores(record, f"\ndemo test split ({record['num_sentences']} sentences, beam {args.num_beams}):")
    print(
        f"\ntrained {record['global_step']} steps; total time {int(minutes)} min {seconds:.0f} s\n"
        f"saved to {final} (model, tokenizer, generation_config.json, metrics.json, data/)\n\n"
        "load it:\n"
        "  import deep_nmt_hf  # registers the model classes\n"
        "  from transformers import AutoModelForSeq2SeqLM, AutoTokenizer\n"
        f"  model = AutoModelForSeq2SeqLM.from_pretrained({str(final)!r})\n"
        f"  tokenizer = AutoTokenizer.from_pretrained({str(final)!r})\n"
        "without the package installed: AutoModelForSeq2SeqLM.from_pretrained(path, trust_remote_code=True)\n"
        f"or from the shell: echo '{splits['test'][0][0]}' | deep-nmt translate {final}"
    )
    return 0


def _cmd_push(args: argparse.Namespace) -> int:
    from .hub import check_repo_id, push

    check_repo_id(args.repo_id)
    prepared, url = push(
        args.model_dir,
        args.repo_id,
        fold=args.fold,
        private=args.private,
        dry_run=args.dry_run,
        license=args.license,
        dataset=args.dataset,
        staging_dir=args.staging_dir,
    )
    print(prepared.listing())
    if url is None:
        print(f"dry run: nothing uploaded; the folder for {args.repo_id} is {prepared.folder}")
    else:
        print(f"uploaded to https://huggingface.co/{args.repo_id} ({url})")
    return 0


# -------------------------------------------------------------------------------- fold / export / plot / data
def _add_tool_parsers(commands: Any) -> None:
    """Parsers of `fold`, `export`, `plot dlcl|omega` and `data to-json`."""
    fold = commands.add_parser(
        "fold",
        help="fold a trained model into a stock Transformers class (MarianMTModel / Pegasus)",
        description="Fold IN into the stock class with the same function (post-LN, ADMIN, DeepNorm, DS-Init -> "
        "MarianMTModel; pre-LN -> PegasusForConditionalGeneration), check that logits agree to --atol and beam-4 "
        "outputs are identical on a probe batch, and write the stock model, tokenizer and generation config to "
        "OUT (a new directory, written atomically). OUT loads with plain AutoModelForSeq2SeqLM, no custom code. "
        "DLCL, merged attention and input re-injection between loops have no stock equivalent: refused.",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt fold out/admin out/admin-marian",
    )
    fold.add_argument("input", type=Path, metavar="IN", help="saved deep_nmt_hf model directory")
    fold.add_argument("output", type=Path, metavar="OUT", help="new directory for the folded stock model")
    fold.add_argument(
        "--atol", type=float, default=1e-4, help="largest |Δlogits| allowed by the check (fp32)"
    )

    export = commands.add_parser(
        "export",
        help="export a model for another runtime (CTranslate2)",
        description="Fold IN when needed, then convert it for CTranslate2 (OUT: a new directory, written "
        "atomically). Post-LN models (MarianMTModel) and pre-LN models (Pegasus) are both supported; float32 "
        "output equals Transformers' beam search token for token (tests/test_ctranslate2.py).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt export out/base out/base-ct2 --to ctranslate2 --quantization int8\n"
        "then: ctranslate2.Translator('out/base-ct2').translate_batch(tokens, beam_size=4, patience=1,\n"
        "      min_decoding_length=0)  # the same search as Transformers' generate(num_beams=4, early_stopping=True)",
    )
    export.add_argument(
        "input", type=Path, metavar="IN", help="saved model directory (deep_nmt_hf or folded)"
    )
    export.add_argument("output", type=Path, metavar="OUT", help="new directory for the exported model")
    export.add_argument("--to", choices=("ctranslate2",), default="ctranslate2", help="target runtime")
    export.add_argument(
        "--quantization",
        help="CTranslate2 weight type: one of float32, int8, int8_float32, int16, float16, bfloat16, "
        "int8_float16 (default: keep float32)",
    )

    plot = commands.add_parser(
        "plot",
        help="plot what a model learned: DLCL weights or ADMIN ω",
        description="Save a PNG of a trained model's DLCL layer-combination weights (prenorm-dlcl Fig. 5) or of "
        "ADMIN's residual scale ω per sublayer.",
        formatter_class=_HelpFormatter,
    )
    plots = plot.add_subparsers(dest="plot_kind", metavar="KIND", required=True)
    for kind, what, default in (
        (
            "dlcl",
            "heatmap of the learned DLCL weights W per side (models with layer aggregation 'dlcl')",
            "dlcl",
        ),
        (
            "omega",
            "ADMIN ω per sublayer, encoder and decoder (models with residual_scaling 'admin')",
            "omega",
        ),
    ):
        sub = plots.add_parser(
            kind, help=what, description=f"Save a PNG: {what}.", formatter_class=_HelpFormatter
        )
        sub.add_argument("model", metavar="MODEL", help="saved deep_nmt_hf model directory")
        sub.add_argument("--out", type=Path, help=f"PNG file to write (default: MODEL/{default}.png)")

    data = commands.add_parser(
        "data",
        help="convert parallel data (to run_translation.py JSON lines)",
        description="Data tools.",
        formatter_class=_HelpFormatter,
    )
    data_tools = data.add_subparsers(dest="data_tool", metavar="TOOL", required=True)
    to_json = data_tools.add_parser(
        "to-json",
        help='write {"translation": {SRC: .., TGT: ..}} JSON lines (transformers run_translation.py format)',
        description="Read one split (--split) or every split (--all-splits) of a directory of line-aligned "
        "{split}.{lang}[.gz] files and write run_translation.py JSON lines: with --split, OUT is the .jsonl file; "
        "with --all-splits, OUT is a new directory receiving {split}.jsonl per split. Output is written "
        "atomically (temporary sibling, then rename).",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt data to-json --data-dir ../shared/data/multi30k --src-lang en --tgt-lang de "
        "--split train train.jsonl",
    )
    to_json.add_argument(
        "--data-dir", type=Path, required=True, help="directory of {split}.{lang}[.gz] files"
    )
    to_json.add_argument("--src-lang", required=True, help="source language code (file suffix / JSON key)")
    to_json.add_argument("--tgt-lang", required=True, help="target language code (file suffix / JSON key)")
    which = to_json.add_mutually_exclusive_group(required=True)
    which.add_argument("--split", help="the split to convert; OUT is a .jsonl file")
    which.add_argument(
        "--all-splits", action="store_true", help="convert every split found; OUT is a new directory"
    )
    to_json.add_argument("output", type=Path, metavar="OUT", help="output .jsonl file (or directory)")
    to_json.add_argument("--overwrite", action="store_true", help="replace an existing output file")


def _cmd_fold(args: argparse.Namespace) -> int:
    from .folding import FoldCheckError, fold_directory

    if not args.atol > 0:
        raise ValueError(f"--atol {args.atol}: must be > 0")
    try:
        report = fold_directory(args.input, args.output, atol=args.atol)
    except FoldCheckError as error:
        raise ValueError(f"{args.input}: {error}") from error
    print(f"folded {args.input} into {report.stock_class} -> {args.output}")
    print(f"max |Δlogits| = {report.max_abs_logit_diff:.2e} (allowed {args.atol:.0e})")
    print(f"beam-4 outputs identical: {'yes' if report.beam_outputs_identical else 'no'}")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from .export import QUANTIZATIONS, export_ctranslate2
    from .folding import FoldCheckError

    if args.quantization is not None and args.quantization not in QUANTIZATIONS:
        raise ValueError(f"--quantization {args.quantization}: not one of {', '.join(QUANTIZATIONS)}")
    try:
        out = export_ctranslate2(args.input, args.output, quantization=args.quantization)
    except (FoldCheckError, RuntimeError) as error:
        raise ValueError(f"{args.input}: {error}") from error
    print(f"exported {args.input} to CTranslate2 ({args.quantization or 'float32'}) -> {out}")
    return 0


def _cmd_plot(args: argparse.Namespace) -> int:
    import tempfile

    from .admin import current_omegas
    from .plots import dlcl_weights, plot_dlcl_weights, plot_omegas

    model, _ = _load_model(args.model)
    config = model.config
    if not str(getattr(config, "model_type", "")).startswith("deep_nmt"):
        raise ValueError(f"{args.model}: model_type={config.model_type!r} is not a deep_nmt_hf model")
    out = args.out or Path(args.model) / f"{args.plot_kind}.png"
    if out.suffix.lower() != ".png":
        raise ValueError(f"--out {out}: expected a .png file name")
    if args.plot_kind == "dlcl":
        try:
            dlcl_weights(model)
        except ValueError as error:
            raise ValueError(f"{args.model}: {error}") from error
    elif getattr(config, "residual_scaling", None) != "admin":
        raise ValueError(
            f"{args.model}: not an ADMIN model (residual_scaling={config.residual_scaling!r}); ω exists only "
            "with residual_scaling='admin'"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=".png", dir=out.parent)
    os.close(handle)
    try:
        if args.plot_kind == "dlcl":
            plot_dlcl_weights(model, temp)
        else:
            omegas = current_omegas(model)
            plot_omegas(omegas, temp)
            for side, values in omegas.items():
                print(f"{side} ω: " + " ".join(f"{value:.3g}" for value in values))
        os.replace(temp, out)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    print(f"wrote {out}")
    return 0


def _cmd_data(args: argparse.Namespace) -> int:
    import shutil
    import tempfile

    from .data import available_splits, load_parallel, write_jsonl

    if not args.data_dir.is_dir():
        raise NotADirectoryError(f"--data-dir {args.data_dir}: no such directory")
    out = args.output
    if args.split is not None:
        if out.is_dir():
            raise IsADirectoryError(f"{out}: is a directory; with --split OUT is the .jsonl file to write")
        if out.exists() and not args.overwrite:
            raise FileExistsError(f"{out} exists already; pass --overwrite to replace it")
        rows = write_jsonl(
            load_parallel(args.data_dir, args.split, args.src_lang, args.tgt_lang),
            out,
            args.src_lang,
            args.tgt_lang,
        )
        print(f"{args.split}: {rows} pairs -> {out}")
        return 0
    splits = available_splits(args.data_dir, args.src_lang, args.tgt_lang)
    if not splits:
        raise ValueError(
            f"--data-dir {args.data_dir}: no split has files for both {args.src_lang} and {args.tgt_lang}"
        )
    if out.exists():
        raise FileExistsError(f"{out} exists already; --all-splits writes a new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        counts = {}
        for split in splits:
            data = load_parallel(args.data_dir, split, args.src_lang, args.tgt_lang)
            counts[split] = write_jsonl(data, staging / f"{split}.jsonl", args.src_lang, args.tgt_lang)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for split, rows in counts.items():
        print(f"{split}: {rows} pairs -> {out / (split + '.jsonl')}")
    return 0


COMMANDS = {"train": _cmd_train, "evaluate": _cmd_evaluate, "translate": _cmd_translate, "demo": _cmd_demo}
COMMANDS["push"] = _cmd_push
COMMANDS.update({"fold": _cmd_fold, "export": _cmd_export, "plot": _cmd_plot, "data": _cmd_data})


def main(argv: list[str] | None = None) -> int:
    """Entry point of `deep-nmt`; returns the exit code (0 ok, 2 error)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(quiet=getattr(args, "no_progress", False))
    from .data import DataError
    from .training import TrainingDivergedError

    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except (DataError, ValueError, OSError, TrainingDivergedError) as err:
        if args.debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    raise SystemExit(main())
