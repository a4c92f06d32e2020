"""`deep-nmt average`: average the last N checkpoints of a run into a loadable model directory."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .common import _HelpFormatter, check_weights


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `average` parser; returns {command: handler}."""
    average = commands.add_parser(
        "average",
        help="average the last N checkpoints of a run into a model directory",
        description="Element-wise mean of the weights of the last N checkpoint-* directories of a run (fairseq's "
        "average_checkpoints.py), written with the newest checkpoint's config, generation config and the "
        "tokenizer as a directory that from_pretrained, deep-nmt evaluate and translate load.",
        formatter_class=_HelpFormatter,
        epilog="examples:\n  deep-nmt average out/en-de --last 5 --output out/en-de-avg5\n"
        "  deep-nmt average out/admin --last-epochs 10   # the last 10 checkpoint-*-epoch* (--save-strategy epoch)",
    )
    average.add_argument("run_dir", type=Path, help="a run directory holding checkpoint-* directories")
    which = average.add_mutually_exclusive_group(required=True)
    which.add_argument(
        "--last", type=int, metavar="N", help="average the N newest checkpoints (step or epoch)"
    )
    which.add_argument(
        "--last-epochs",
        type=int,
        metavar="N",
        help="average the N newest epoch checkpoints (checkpoint-STEP-epochE, written with --save-strategy epoch; "
        "fairseq's --num-epoch-checkpoints N, as the papers' evaluation scripts)",
    )
    average.add_argument(
        "--output",
        type=Path,
        help="new directory for the averaged model (default: RUN_DIR/averaged-last-N[-epochs])",
    )
    return {"average": _cmd_average}


def _cmd_average(args: argparse.Namespace) -> int:
    from ..training.averaging import average_checkpoints, find_checkpoints

    epochs = args.last_epochs is not None
    last = args.last_epochs if epochs else args.last
    if isinstance(last, int) and last >= 1:  # a corrupt checkpoint: one line naming its file (common.py)
        for checkpoint in find_checkpoints(args.run_dir, epochs_only=epochs)[-last:]:
            check_weights(checkpoint)
    out = average_checkpoints(args.run_dir, last, args.output, epochs=epochs)
    print(f"averaged the last {last} {'epoch ' if epochs else ''}checkpoints of {args.run_dir} into {out}")
    return 0
