"""Parallel text -> an Arrow file on disk, built once per corpus version and memory-mapped afterwards.

The readers stream sentence pairs into `build_translation_arrow`, which writes them in batches of
`WRITE_BATCH_SIZE` rows with `datasets.arrow_writer.ArrowWriter`: the corpus is never held in Python memory,
and the returned `datasets.Dataset` is memory-mapped from the file (``Dataset.from_file``), like any dataset
in the `datasets` cache. Each write is one Arrow record batch of `WRITE_BATCH_SIZE` rows (the writer's default
is 1,000): opening a memory-mapped file reads every record batch's header, and each header's page fault maps
64 KiB of the file around it (the kernel's fault-around) into the process, so at 4M pairs 1,000-row batches put
254 MiB of the file into the opening process's RSS and 10,000-row batches 28 MiB (bench/data_scaling.py).

Cache entries live under `cache_root()` (``$DEEP_NMT_HF_CACHE``, else ``deep_nmt_hf/`` inside the `datasets`
cache, ``$HF_DATASETS_CACHE``), one directory per key. The key of a corpus (`source_fingerprint`) hashes the
resolved file paths, sizes and modification times (ns) and the language pair, so editing or replacing a file
builds a new entry. An entry is built in a temporary directory beside it and renamed into place only when
complete (several processes may race: the first rename wins, the others discard theirs), so a failed or
interrupted build leaves no entry behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import datasets
from datasets.arrow_writer import ArrowWriter

__all__ = [
    "CACHE_ENV",
    "WRITE_BATCH_SIZE",
    "build_translation_arrow",
    "cache_root",
    "cached_entry",
    "source_fingerprint",
    "translation_features",
]

CACHE_ENV = "DEEP_NMT_HF_CACHE"
WRITE_BATCH_SIZE = 10_000
ARROW_FILE = "data.arrow"
_FORMAT_VERSION = 1  # bump when the layout of an entry changes: old entries are then ignored


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """`cache_dir` if given, else ``$DEEP_NMT_HF_CACHE``, else ``<datasets cache>/deep_nmt_hf``."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override).expanduser()
    return Path(datasets.config.HF_DATASETS_CACHE) / "deep_nmt_hf"


def source_fingerprint(paths: Iterable[str | os.PathLike[str]], *extra: Any) -> str:
    """A 16-hex-digit key of files (resolved path, size, mtime in ns) and JSON-able `extra` values."""
    parts: list[Any] = [_FORMAT_VERSION]
    for path in paths:
        resolved = Path(path).resolve()
        stat = resolved.stat()
        parts.append([str(resolved), stat.st_size, stat.st_mtime_ns])
    parts.extend(extra)
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def translation_features(src_lang: str, tgt_lang: str) -> datasets.Features:
    """The ``translation`` column of run_translation.py: ``{src_lang: str, tgt_lang: str}``."""
    return datasets.Features({"translation": datasets.Translation(languages=[src_lang, tgt_lang])})


def build_translation_arrow(
    pairs: Iterable[tuple[str, str]], path: str | os.PathLike[str], src_lang: str, tgt_lang: str
) -> int:
    """Write (source, target) pairs as a ``translation`` Arrow file, `WRITE_BATCH_SIZE` rows at a time.

    Returns the number of rows written. Only one batch of rows is in Python memory at any time.
    """
    writer = ArrowWriter(
        features=translation_features(src_lang, tgt_lang),
        path=os.fspath(path),
        writer_batch_size=WRITE_BATCH_SIZE,  # one record batch per write (see the module docstring)
    )
    batch: list[dict[str, str]] = []
    try:
        for source, target in pairs:
            batch.append({src_lang: source, tgt_lang: target})
            if len(batch) >= WRITE_BATCH_SIZE:
                writer.write_batch({"translation": batch})
                batch = []
        if batch:
            writer.write_batch({"translation": batch})
        count, _ = writer.finalize()
    finally:
        writer.close()
    return int(count)


@contextlib.contextmanager
def _building(entry: Path) -> Iterator[Path]:
    """A temporary directory renamed to `entry` on success (or discarded when another process won)."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    temp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".tmp", dir=entry.parent))
    try:
        yield temp
        try:
            os.replace(temp, entry)
        except OSError:
            if not (entry / "meta.json").is_file():
                raise
            shutil.rmtree(temp, ignore_errors=True)  # another process built the same entry first
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise


def cached_entry(
    entry: Path, build: Callable[[Path], dict[str, Any]]
) -> tuple[datasets.Dataset, dict[str, Any]]:
    """Load the Arrow entry at `entry`, building it first with ``build(arrow_path) -> meta dict`` if absent.

    `meta` (JSON, e.g. the read counts) is stored in ``meta.json`` beside the data and returned with the
    memory-mapped dataset. A `build` that raises leaves nothing behind.
    """
    meta_path = entry / "meta.json"
    if not meta_path.is_file():
        with _building(entry) as temp:
            meta = build(temp / ARROW_FILE)
            (temp / "meta.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    dataset = datasets.Dataset.from_file(os.fspath(entry / ARROW_FILE))
    return dataset, meta
