"""Crash-safe output: a ``<output_dir>.partial`` staging directory renamed into place when complete."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from .options import TrainingOptions

logger = logging.getLogger(__name__)

METRICS_FILE = "metrics.json"
SAVING_DIR = ".saving"  # checkpoints are written here, then renamed into the output directory


def _fsync_tree(directory: Path) -> None:
    """Flush every file under `directory` to disk (so that a rename publishes complete files)."""
    for path in directory.rglob("*"):
        if path.is_file():
            with contextlib.suppress(OSError), open(path, "rb") as handle:
                os.fsync(handle.fileno())


def _partial_dir(output_dir: Path) -> Path:
    return output_dir.with_name(output_dir.name + ".partial")


def _has_checkpoints(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("checkpoint-*"))


@contextlib.contextmanager
def staged_output_dir(
    output_dir: str | os.PathLike[str], overwrite: bool = False, resume: bool = False
) -> Iterator[Path]:
    """Yield a staging directory ``<output_dir>.partial``; on success rename it to `output_dir`.

    An existing `output_dir` is an error unless `overwrite` (then it is replaced only after the new one is
    complete). On failure the staging directory is removed, unless it holds Trainer checkpoints (kept for
    `resume`). An existing staging directory is reused with `resume`, else it is an error (or, with
    `overwrite`, deleted).
    """
    final = Path(output_dir).expanduser().absolute()
    staging = _partial_dir(final)
    if final.exists() and not (final.is_dir() and not any(final.iterdir())) and not overwrite:
        raise FileExistsError(
            f"{final}: output directory exists and is not empty; pass overwrite to replace it"
        )
    if final.exists() and not final.is_dir():
        raise FileExistsError(f"{final}: exists and is not a directory")
    if staging.exists():
        if resume:
            logger.info("resuming in %s", staging)
        elif overwrite:
            shutil.rmtree(staging)
        else:
            raise FileExistsError(
                f"{staging}: a partial run exists; resume it (resume / --resume) or delete it (overwrite)"
            )
    staging.mkdir(parents=True, exist_ok=True)
    try:
        yield staging
    except BaseException:
        if _has_checkpoints(staging):
            logger.warning("run failed; its checkpoints are kept in %s (resume to continue)", staging)
        else:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    old = final.with_name(f"{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def _check_output_dir(options: TrainingOptions) -> None:
    """Fail early (before any work) on an output directory that `staged_output_dir` would refuse."""
    final = Path(options.output_dir).expanduser().absolute()
    if final.exists() and not final.is_dir():
        raise FileExistsError(f"{final}: exists and is not a directory")
    if final.is_dir() and any(final.iterdir()) and not options.overwrite:
        raise FileExistsError(
            f"{final}: output directory exists and is not empty; pass overwrite to replace it"
        )
    if _partial_dir(final).exists() and not (options.resume or options.overwrite):
        raise FileExistsError(
            f"{_partial_dir(final)}: a partial run exists; resume it (resume / --resume) or delete it (overwrite)"
        )
