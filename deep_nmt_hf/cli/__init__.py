"""The `deep-nmt` command: train, evaluate, translate, demo, push, fold, export, plot, data, preprocess, average.

Every subcommand explains its flags with ``--help``. Errors (bad paths, missing splits, bad data, invalid
config values) print one ``error: ...`` line on stderr and exit with code 2, leaving no output directory behind.
One module per command group (`train`, `evaluate`, `demo`, `push`, `tools`); each has `add_parsers(commands)`
returning its handlers, and `common` holds what they share.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any

from . import average, convert, demo, evaluate, preprocess, push, tools
from . import train as train_command
from .common import (
    EXIT_ERROR,
    _HelpFormatter,
    _setup_logging,
    add_threads_flag,
    apply_threads,
    check_saved_model_types,
    precheck,
)
from .import_notices import quiet_import_notices
from .interrupt import EXIT_INTERRUPTED, interrupted_message
from .train import CHOICE_FLAGS

__all__ = ["CHOICE_FLAGS", "EXIT_ERROR", "build_parser", "main"]

COMMAND_GROUPS = (train_command, evaluate, demo, push, tools, preprocess, average, convert)
# command -> its checks that need no heavy import, run with `precheck` before torch
EARLY_CHECKS: dict[str, Callable[[argparse.Namespace], None]] = {
    "train": train_command.precheck,
    "demo": demo.precheck,
}


def _parser_and_handlers() -> tuple[argparse.ArgumentParser, dict[str, Callable[[argparse.Namespace], int]]]:
    parser = argparse.ArgumentParser(
        prog="deep-nmt",
        description="Train, evaluate and run very deep Transformer translation models (deep_nmt_hf).",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    handlers: dict[str, Any] = {}
    for group in COMMAND_GROUPS:
        handlers.update(group.add_parsers(commands))
    for command in dict.fromkeys(commands.choices.values()):
        add_threads_flag(command)  # every command: --threads N (common.THREADS_HELP)
    return parser, handlers


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of `deep-nmt` with its subcommands."""
    return _parser_and_handlers()[0]


def main(argv: list[str] | None = None) -> int:
    """Entry point of `deep-nmt`; returns the exit code (0 ok, 2 error)."""
    parser, handlers = _parser_and_handlers()
    args = parser.parse_args(argv)  # --help and flag errors exit here, before torch is imported
    quiet_import_notices()
    try:
        precheck(args)
        EARLY_CHECKS.get(args.command, lambda _: None)(args)  # each command's own light checks
    except (ValueError, OSError) as err:
        if args.debug:
            raise
        print(f"error: {err}", file=sys.stderr)
        return EXIT_ERROR
    from .. import register

    register()  # the Auto classes (torch, transformers); the `deep-nmt` launcher held it until now
    apply_threads(args)  # before any torch work
    _setup_logging(quiet=getattr(args, "no_progress", False))
    from safetensors import SafetensorError

    from ..data import DataError
    from ..training import TrainingDivergedError
    from ..training.distributed import end_process_group

    try:
        check_saved_model_types(args)  # never Transformers' remote-code question on stdin, in any command
        code = handlers[args.command](args)
    except KeyboardInterrupt:  # for train: where the partial run is and the command that continues it
        # on a line of its own: a progress bar's line has no end yet (the two would overlap)
        print("\n" + interrupted_message(args, sys.argv[1:] if argv is None else list(argv)), file=sys.stderr)
        return EXIT_INTERRUPTED
    except (DataError, ValueError, OSError, TrainingDivergedError, SafetensorError) as err:
        if args.debug:
            raise
        what = "unreadable safetensors weights: " if isinstance(err, SafetensorError) else ""
        print(f"error: {what}{err}", file=sys.stderr)
        return EXIT_ERROR
    if code == 0:
        end_process_group()  # torch's shutdown contract: see deep_nmt_hf.training.distributed
    return code
