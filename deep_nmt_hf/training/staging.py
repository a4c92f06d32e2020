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
        raise FileExistsError(_exists_message(final, resume))
    if final.exists() and not final.is_dir():
        raise FileExistsError(f"{final}: exists and is not a directory")
    if staging.exists():
        if resume:
            logger.info("resuming in %s", staging)
        elif overwrite:
            shutil.rmtree(staging)
        else:
            raise FileExistsError(_partial_message(staging))
    elif resume:
        logger.warning("--resume: nothing to resume (no %s); starting a fresh run", staging)
    staging.mkdir(parents=True, exist_ok=True)
    try:
        yield staging
    except BaseException as error:
        if _has_checkpoints(staging):
            if not isinstance(
                error, KeyboardInterrupt
            ):  # Ctrl-C: `deep-nmt` says it in one line (cli/interrupt.py)
                logger.warning("run failed; its checkpoints are kept in %s (--resume to continue)", staging)
        else:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    from ..data.atomic import apply_umask_modes  # lazily: `check_output_dir` runs before torch (cli/train.py)

    old = final.with_name(f"{final.name}.old-{os.getpid()}")
    apply_umask_modes(staging)  # safetensors writes 0600 files whatever the umask
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def check_output_dir(options: TrainingOptions) -> None:
    """Fail early (before any work; `deep-nmt train` before torch is imported) on an output directory that
    `staged_output_dir` would refuse."""
    check_output_path(options.output_dir, overwrite=options.overwrite, resume=options.resume)


def check_output_path(
    output_dir: str | os.PathLike[str], overwrite: bool = False, resume: bool = False
) -> None:
    """`check_output_dir` for a directory and the two switches (`deep-nmt demo`'s early check)."""
    final = Path(output_dir).expanduser().absolute()
    if final.exists() and not final.is_dir():
        raise FileExistsError(f"{final}: exists and is not a directory")
    if final.is_dir() and any(final.iterdir()) and not overwrite:
        raise FileExistsError(_exists_message(final, resume))
    if _partial_dir(final).exists() and not (resume or overwrite):
        raise FileExistsError(_partial_message(_partial_dir(final)))


def _exists_message(final: Path, resume: bool) -> str:
    done = " (the run is complete: nothing to resume)" if resume else ""
    return (
        f"{final}: output directory exists and is not empty{done}; pass --overwrite (overwrite=True) to "
        "replace it"
    )


def _partial_message(staging: Path) -> str:
    return (
        f"{staging}: a partial run exists; continue it with --resume (resume=True) or start again with "
        "--overwrite (overwrite=True)"
    )
