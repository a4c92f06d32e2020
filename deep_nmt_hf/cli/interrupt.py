"""What Ctrl-C during `deep-nmt train` leaves behind, said in one line: where the partial run is and the command
that continues it (or, before the first checkpoint, that nothing was kept and the command that starts again).

The staging rule is `training.staging`'s: a run is written to ``<output_dir>.partial`` and renamed into place
when complete; on an interruption the partial directory is kept only if it holds Trainer checkpoints
(``checkpoint-<step>``), which ``--resume`` continues from. Standard library only (it runs on the way out).
"""

from __future__ import annotations

import argparse
import re
import shlex
from pathlib import Path

EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports it


def _step(checkpoint: Path) -> int:
    """``checkpoint-<step>`` or ``checkpoint-<step>-epoch<E>``: the step; -1 for another name."""
    match = re.match(r"checkpoint-(\d+)", checkpoint.name)
    return int(match.group(1)) if match else -1


def resume_argv(argv: list[str]) -> list[str]:
    """`argv` of the interrupted `train` with ``--resume`` (added once) and without ``--overwrite`` (which would
    delete the partial run instead of continuing it)."""
    kept = [arg for arg in argv if arg != "--overwrite"]
    return kept if "--resume" in kept else [*kept, "--resume"]


def interrupted_message(args: argparse.Namespace, argv: list[str]) -> str:
    """The line printed on Ctrl-C: for `train`, where the partial run is and the command that continues it."""
    output_dir = getattr(args, "output_dir", None)
    if getattr(args, "command", None) != "train" or output_dir is None:
        return "interrupted"
    final = Path(output_dir).expanduser().absolute()
    staging = final.with_name(final.name + ".partial")
    checkpoints = sorted(staging.glob("checkpoint-*"), key=_step) if staging.is_dir() else []
    if checkpoints:
        latest = checkpoints[-1]
        return (
            f"interrupted: the partial run is in {staging} (last checkpoint {latest.name}); continue it with: "
            f"deep-nmt {shlex.join(resume_argv(argv))}"
        )
    every = getattr(args, "save_steps", None)
    when = f" (one is written every {every} steps: --save-steps)" if every else ""
    return (
        f"interrupted before the first checkpoint{when}: nothing of the run was kept; start it again with: "
        f"deep-nmt {shlex.join([arg for arg in argv if arg != '--resume'])}"
    )
