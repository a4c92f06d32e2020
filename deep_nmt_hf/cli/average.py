"""`deep-nmt average`: average the last N checkpoints of a run into a loadable model directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import _HelpFormatter


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `average` parser; returns {command: handler}."""
    average = commands.add_parser(
        "average",
        help="average the last N checkpoints of a run into a model directory",
        description="Element-wise mean of the weights of the last N checkpoint-* directories of a run (fairseq's "
        "average_checkpoints.py), written with the newest checkpoint's config, generation config and the "
        "tokenizer as a directory that from_pretrained, deep-nmt evaluate and translate load.",
        formatter_class=_HelpFormatter,
        epilog="example:\n  deep-nmt average out/en-de --last 5 --output out/en-de-avg5",
    )
    average.add_argument("run_dir", type=Path, help="a run directory holding checkpoint-* directories")
    average.add_argument(
        "--last", type=int, required=True, help="how many of the newest checkpoints to average"
    )
    average.add_argument(
        "--output", type=Path, help="new directory for the averaged model (default: RUN_DIR/averaged-last-N)"
    )
    return {"average": _cmd_average}


def _cmd_average(args: argparse.Namespace) -> int:
    from ..averaging import average_checkpoints

    out = average_checkpoints(args.run_dir, args.last, args.output)
    print(f"averaged the last {args.last} checkpoints of {args.run_dir} into {out}")
    return 0
