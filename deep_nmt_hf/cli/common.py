"""What every `deep-nmt` command shares: the help formatter, data / generation flags, model loading,
score printing and logging setup."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import Any

from .names import CHOICE_VALUES, variant_names

logger = logging.getLogger("deep_nmt_hf")

EXIT_ERROR = 2


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows defaults, except for flags whose default is None or a switch (their help says what happens)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def _variant_names() -> list[str]:
    return variant_names()


def _choice_help(field: str) -> str:
    values = ", ".join(CHOICE_VALUES.get(field, ())) or "see DeepNMTConfig"
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


def _print_scores(record: dict[str, Any], header: str) -> None:
    print(header)
    for name, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("ter", "TER")):
        print(f"{label:<5}= {record[name]:6.2f}  {record[name + '_signature']}")


def _load_model(model: str) -> tuple[Any, Any]:
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer  # Auto classes: registered by the package

    _check_model_path(model)
    return AutoModelForSeq2SeqLM.from_pretrained(model), AutoTokenizer.from_pretrained(model)


def complete_package_import() -> None:
    """Run `deep_nmt_hf/__init__.py` (Auto-class registration: torch, transformers) if the `deep-nmt` launcher
    (deep_nmt_hf_cli) deferred it to get the arguments checked first; a no-op after a normal import."""
    package = sys.modules["deep_nmt_hf"]
    if package.__dict__.pop("_import_deferred", False):
        package.__spec__.loader.exec_module(package)


def precheck(args: argparse.Namespace) -> None:
    """Checks that need no heavy import, run before any: paths that must exist, the variant name."""
    for flag, is_ok, what in (
        ("data_dir", Path.is_dir, "no such directory"),
        ("data", Path.is_file, "no such file"),
    ):
        value = getattr(args, flag, None)
        if isinstance(value, Path) and not is_ok(value):
            raise FileNotFoundError(f"--{flag.replace('_', '-')} {value}: {what}")
    variant = getattr(args, "variant", None)
    if variant is not None and variant not in variant_names():
        raise ValueError(f"--variant {variant}: unknown; valid variants: {', '.join(variant_names())}")
    for flag in ("model", "input", "model_dir"):  # evaluate / translate / plot, fold / export, push
        value = getattr(args, flag, None)
        if value is not None:
            _check_model_path(str(value))


def _check_model_path(model: str) -> None:
    path = Path(model).expanduser()
    if not path.exists() and (os.sep in model or model.startswith(".")):
        raise FileNotFoundError(f"{model}: no such model directory")
    if path.exists() and not (path / "config.json").is_file():
        raise FileNotFoundError(f"{model}: not a saved model directory (no config.json)")


def _setup_logging(quiet: bool = False) -> None:
    from transformers.utils import logging as hf_logging

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logger.setLevel(logging.INFO)
    hf_logging.set_verbosity_warning()
    # Transformers' "Loading weights" / "Writing model shards" bars flash at every tiny load and checkpoint;
    # the long work keeps its bars (training steps, translation batches, datasets maps, Hub transfers).
    from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars

    hub_bars = not are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # also turns off the Hub's bars: restored below
    if hub_bars:
        enable_progress_bars()
    if quiet:
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
