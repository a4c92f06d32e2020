"""Atomic writes whose results get the umask's permissions.

Every file or directory this package writes "atomically" is first written to a temporary sibling (same directory,
so the final `os.replace` is a rename on one file system), flushed with fsync, given the mode a plain ``open()`` /
``mkdir()`` would have given it under the current umask (0o666 / 0o777 minus the umask), and only then renamed into
place. A failure leaves neither a destination nor a temporary file. `tempfile.mkstemp` / `mkdtemp` alone create
0600 files and 0700 directories whatever the umask, and safetensors writes its files the same way, so on a shared
machine colleagues could not read a model; `apply_umask_modes` repairs a tree written by such third-party code
before it is published.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

__all__ = [
    "apply_umask_modes",
    "atomic_directory",
    "atomic_path",
    "atomic_write",
    "current_umask",
    "dir_mode",
    "file_mode",
    "temp_sibling",
]


def current_umask() -> int:
    """The process umask (read from /proc where possible, which unlike `os.umask` does not change it)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode `open(path, "w")` gives a new file under the current umask."""
    return 0o666 & ~current_umask()


def dir_mode() -> int:
    """The mode `mkdir` gives a new directory under the current umask."""
    return 0o777 & ~current_umask()


def apply_umask_modes(root: str | os.PathLike[str]) -> None:
    """Give `root` and everything under it the umask's modes (files 0o666 & ~umask, directories 0o777 & ~umask).

    For trees written by code that uses mkstemp-style 0600 files (safetensors, tempfile) before they are
    published; symlinks are left alone.
    """
    root = Path(root)
    files, dirs = file_mode(), dir_mode()
    paths = [root, *root.rglob("*")] if root.is_dir() else [root]
    for path in paths:
        if path.is_symlink():
            continue
        path.chmod(dirs if path.is_dir() else files)


def _fsync_file(path: Path) -> None:
    with contextlib.suppress(OSError), open(path, "rb") as handle:
        os.fsync(handle.fileno())


def temp_sibling(
    destination: str | os.PathLike[str], text: bool = True, **open_kwargs: Any
) -> tuple[IO, Path]:
    """An open temporary file next to `destination` with the umask's mode, and its path.

    The caller writes it, closes it (after `handle.flush(); os.fsync(handle.fileno())`) and renames it onto
    `destination`; for a single file `atomic_write` does all of that.
    """
    destination = Path(destination)
    handle = tempfile.NamedTemporaryFile(
        "w" if text else "wb",
        dir=destination.parent,
        prefix=f".{destination.name}.",
        suffix=".tmp",
        delete=False,
        **open_kwargs,
    )
    os.chmod(handle.name, file_mode())
    return handle, Path(handle.name)


@contextlib.contextmanager
def atomic_write(
    path: str | os.PathLike[str],
    text: bool = True,
    encoding: str | None = "utf-8",
    newline: str | None = "\n",
) -> Iterator[IO]:
    """``with atomic_write(path) as handle: handle.write(...)``: `path` appears complete or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    kwargs = {"encoding": encoding, "newline": newline} if text else {}
    handle, temp = temp_sibling(path, text=text, **kwargs)
    try:
        with handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary sibling path (same suffix) for writers that take a file name, e.g. ``savefig``; renamed onto
    `path` with the umask's mode when the block succeeds, removed when it fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=path.suffix, dir=path.parent)
    os.close(handle)
    temp = Path(temp)
    try:
        yield temp
        os.chmod(temp, file_mode())
        _fsync_file(temp)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary sibling directory to fill; renamed onto `path` (which must not exist) when the block
    succeeds, with every file fsynced and given the umask's modes; removed when it fails."""
    path = Path(path)
    if path.exists():
        raise FileExistsError(f"{path} exists already; choose a new output directory")
    path.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent))
    try:
        yield work
        apply_umask_modes(work)
        for item in work.rglob("*"):
            if item.is_file() and not item.is_symlink():
                _fsync_file(item)
        os.replace(work, path)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
