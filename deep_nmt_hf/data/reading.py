"""Readers: parallel text -> `datasets.Dataset` with one column ``translation``: ``{src_lang: str, tgt_lang: str}``.

That is the row shape of the official Transformers `run_translation.py`. Sources:

1. a directory of ``{split}.{lang}`` or ``{split}.{lang}.gz`` files (line-aligned, UTF-8, one sentence a line);
   having both ``{split}.{lang}`` and ``{split}.{lang}.gz`` is an error (ambiguous);
2. a JSON-lines file, each line ``{"translation": {"en": "...", "de": "..."}}`` (also ``{split}.jsonl`` or
   ``{split}.json`` inside a directory);
3. a `datasets` Hub dataset (needs the network).

Files (1, 2) are streamed line by line into an Arrow file in the cache (`data.arrow`) and the returned dataset
is memory-mapped from it: memory does not grow with the corpus, and a second read of unchanged files only
loads the cached file. Lines are decoded as strict UTF-8 one at a time (exact line numbers in errors) and
stripped of the newline / CR and surrounding whitespace.

Empty-line policy: a pair where either side is empty or whitespace-only after stripping is dropped (in a JSONL
file a blank line counts as such a pair). The number dropped is logged at warning level, naming the file(s) and
the first dropped line (row, for Hub datasets), and the counts are filled into a `ReadReport` when the caller
passes one (``report=ReadReport()``); they are stored with the cache entry, so a cached read reports them too.
A source where every pair is dropped is an error.

Every problem with the data raises `DataError` (a ValueError) naming the file, the line where relevant, and
what was expected; a failed read leaves no cache entry.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import zip_longest
from pathlib import Path
from typing import IO, Any

import datasets

from .arrow import build_translation_arrow, cache_root, cached_entry, source_fingerprint
from .errors import DataError
from .split_files import available_splits, check_split_named, split_files

logger = logging.getLogger(__name__)

__all__ = [
    "DataError",
    "ReadReport",
    "available_splits",
    "load_hub_dataset",
    "load_parallel",
    "read_jsonl",
    "read_parallel_dir",
]

_JSONL_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


@dataclass
class ReadReport:
    """Counts filled in by the readers (pass one in to get them back).

    Attributes:
        sources: files (or the Hub dataset name) that were read.
        total: pairs seen (line pairs, JSONL lines or Hub rows).
        kept: pairs in the returned dataset.
        dropped: pairs dropped by the empty-line policy.
        first_dropped: 1-based line (row) number of the first dropped pair, or None.
    """

    sources: list[str] = field(default_factory=list)
    total: int = 0
    kept: int = 0
    dropped: int = 0
    first_dropped: int | None = None


# --------------------------------------------------------------------------------------------------- helpers
def check_langs(src_lang: str, tgt_lang: str) -> None:
    for name, lang in (("src_lang", src_lang), ("tgt_lang", tgt_lang)):
        if not isinstance(lang, str) or not lang:
            raise ValueError(f"{name} must be a non-empty string, got {lang!r}")
    if src_lang == tgt_lang:
        raise ValueError(f"src_lang and tgt_lang must differ, both are {src_lang!r}")


def _open_binary(path: Path) -> IO[bytes]:
    return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")


def _decoded_lines(path: Path, handle: IO[bytes]) -> Iterator[str]:
    """Yield stripped lines of a UTF-8 file; DataError with the line number on bad UTF-8."""
    for number, raw in enumerate(handle, start=1):
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            raise DataError(
                f"{path}: line {number} is not valid UTF-8 ({err.reason} at byte {err.start}); "
                "expected UTF-8 text, one sentence per line"
            ) from err
        if number == 1:
            text = text.removeprefix("\ufeff")
        yield text.strip()


def _finish_report(
    report: ReadReport | None,
    sources: list[str],
    total: int,
    kept: int,
    first_dropped: int | None,
    unit: str = "line",
) -> None:
    dropped = total - kept
    where = " and ".join(sources)
    if kept == 0:
        raise DataError(
            f"{where}: all {total} pairs are empty on at least one side (nothing left after dropping them); "
            "expected non-empty parallel sentences"
        )
    if dropped:
        logger.warning(
            "dropped %d of %d pairs with an empty side from %s (first at %s %d)",
            dropped,
            total,
            where,
            unit,
            first_dropped,
        )
    if report is not None:
        report.sources = list(sources)
        report.total = total
        report.kept = kept
        report.dropped = dropped
        report.first_dropped = first_dropped


# ---------------------------------------------------------------------------------------- directory of files
def find_file(data_dir: Path, split: str, lang: str, src_lang: str, tgt_lang: str) -> Path:
    plain = data_dir / f"{split}.{lang}"
    gz = data_dir / f"{split}.{lang}.gz"
    if plain.is_file() and gz.is_file():
        raise DataError(f"ambiguous input: both {plain} and {gz} exist; keep only one of them")
    if plain.is_file():
        return plain
    if gz.is_file():
        return gz
    files = split_files(data_dir)
    for_split = sorted(name for names in files.get(split, {}).values() for name in names)
    for_lang = sorted(name for langs in files.values() for name in langs.get(lang, []))
    if not for_split:
        check_split_named(data_dir, split, src_lang, tgt_lang)
    raise DataError(
        f"missing file {plain} (or {gz.name}); files for split {split!r}: {', '.join(for_split)}; "
        f"files for language {lang!r}: {', '.join(for_lang) or 'none'}"
    )


def aligned_pairs(src_path: Path, tgt_path: Path, counts: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Yield the kept (non-empty) pairs of two line-aligned files; fill `counts` ("total", "first_dropped").

    Raises DataError (when exhausted) if a file is empty or the line counts differ."""
    n_src = n_tgt = 0
    first_dropped: int | None = None
    with _open_binary(src_path) as src_handle, _open_binary(tgt_path) as tgt_handle:
        pairs = zip_longest(_decoded_lines(src_path, src_handle), _decoded_lines(tgt_path, tgt_handle))
        for number, (s, t) in enumerate(pairs, start=1):
            if s is None or t is None:
                # one file ended: just count the rest of the other (bytes, no decoding needed)
                rest = 1 + sum(1 for _ in (tgt_handle if s is None else src_handle))
                n_src, n_tgt = (
                    (number - 1, number - 1 + rest) if s is None else (number - 1 + rest, number - 1)
                )
                break
            n_src = n_tgt = number
            if s and t:
                yield s, t
            elif first_dropped is None:
                first_dropped = number
    for path, count in ((src_path, n_src), (tgt_path, n_tgt)):
        if count == 0:
            raise DataError(f"{path}: file is empty (no lines); expected one sentence per line")
    if n_src != n_tgt:
        raise DataError(
            f"line counts differ: {src_path} has {n_src} lines but {tgt_path} has {n_tgt}; "
            f"line {min(n_src, n_tgt) + 1} exists only in {src_path if n_src > n_tgt else tgt_path}; "
            "expected line-aligned files"
        )
    counts.update(total=n_src, first_dropped=first_dropped)


def _cached_read(
    kind: str,
    paths: list[Path],
    pairs: Callable[[dict[str, Any]], Iterator[tuple[str, str]]],
    src_lang: str,
    tgt_lang: str,
    cache_dir: str | os.PathLike[str] | None,
    report: ReadReport | None,
) -> datasets.Dataset:
    """The Arrow cache entry of `paths` (built by streaming `pairs` once), with the report filled in."""
    sources = [str(path) for path in paths]
    key = source_fingerprint(paths, kind, src_lang, tgt_lang)

    def build(arrow_path: Path) -> dict[str, Any]:
        counts: dict[str, Any] = {}
        kept = build_translation_arrow(pairs(counts), arrow_path, src_lang, tgt_lang)
        if kept == 0:
            _finish_report(None, sources, counts["total"], 0, None)  # raises: every pair was empty
        return {"sources": sources, "total": counts["total"], "kept": kept, **counts}

    dataset, meta = cached_entry(cache_root(cache_dir) / f"{kind}-{key}", build)
    _finish_report(report, sources, meta["total"], meta["kept"], meta["first_dropped"])
    return dataset


def read_parallel_dir(
    data_dir: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
    report: ReadReport | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> datasets.Dataset:
    """Read line-aligned ``{split}.{src_lang}[.gz]`` / ``{split}.{tgt_lang}[.gz]`` into a translation dataset.

    The pairs are streamed into an Arrow file in the cache (`cache_root(cache_dir)`, keyed by the files'
    paths, sizes and mtimes) and the dataset is memory-mapped from it; the next call with unchanged files
    only loads it."""
    check_langs(src_lang, tgt_lang)
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: not a directory; expected a folder of {{split}}.{{lang}}[.gz] files")
    src_path = find_file(data_dir, split, src_lang, src_lang, tgt_lang)
    tgt_path = find_file(data_dir, split, tgt_lang, src_lang, tgt_lang)
    return _cached_read(
        "parallel",
        [src_path, tgt_path],
        lambda counts: aligned_pairs(src_path, tgt_path, counts),
        src_lang,
        tgt_lang,
        cache_dir,
        report,
    )


# ------------------------------------------------------------------------------------------------ json lines
def jsonl_pairs(
    path: Path, src_lang: str, tgt_lang: str, counts: dict[str, Any]
) -> Iterator[tuple[str, str]]:
    """Yield the kept pairs of a JSON-lines file; fill `counts`. DataError with file and line on bad rows."""
    expected = f'expected {{"translation": {{"{src_lang}": "...", "{tgt_lang}": "..."}}}}'
    total = 0
    first_dropped: int | None = None
    with _open_binary(path) as handle:
        for number, line in enumerate(_decoded_lines(path, handle), start=1):
            total = number
            if not line:
                first_dropped = first_dropped or number
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataError(f"{path}: line {number} is not valid JSON ({err.msg}); {expected}") from err
            if not isinstance(row, dict) or "translation" not in row:
                found = f"keys {sorted(row)}" if isinstance(row, dict) else f"a JSON {type(row).__name__}"
                raise DataError(f"{path}: line {number} has no 'translation' key (found {found}); {expected}")
            pair = row["translation"]
            if not isinstance(pair, dict):
                raise DataError(
                    f"{path}: line {number}: 'translation' is a {type(pair).__name__}, not an object; {expected}"
                )
            values = []
            for lang in (src_lang, tgt_lang):
                if lang not in pair:
                    raise DataError(
                        f"{path}: line {number}: 'translation' has no {lang!r} key "
                        f"(found languages {sorted(pair)}); {expected}"
                    )
                if not isinstance(pair[lang], str):
                    raise DataError(
                        f"{path}: line {number}: translation[{lang!r}] is {pair[lang]!r}, not a string; "
                        f"{expected}"
                    )
                values.append(pair[lang].strip())
            if values[0] and values[1]:
                yield values[0], values[1]
            elif first_dropped is None:
                first_dropped = number
    if total == 0:
        raise DataError(f"{path}: file is empty (no lines); {expected} on each line")
    counts.update(total=total, first_dropped=first_dropped)


def read_jsonl(
    path: str | os.PathLike[str],
    src_lang: str,
    tgt_lang: str,
    report: ReadReport | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> datasets.Dataset:
    """Read ``{"translation": {src_lang: ..., tgt_lang: ...}}`` lines (other keys are ignored).

    Streamed into a cached, memory-mapped Arrow file like `read_parallel_dir`."""
    check_langs(src_lang, tgt_lang)
    path = Path(path)
    if not path.is_file():
        raise DataError(f"missing file {path}; expected a JSON-lines file of {{'translation': {{...}}}} rows")
    return _cached_read(
        "jsonl",
        [path],
        lambda counts: jsonl_pairs(path, src_lang, tgt_lang, counts),
        src_lang,
        tgt_lang,
        cache_dir,
        report,
    )


# ------------------------------------------------------------------------------------------------------- hub
def load_hub_dataset(
    name: str,
    src_lang: str,
    tgt_lang: str,
    split: str,
    config_name: str | None = None,
    report: ReadReport | None = None,
    **kwargs: Any,
) -> datasets.Dataset:
    """`datasets.load_dataset(name, config_name, split=split, **kwargs)`, normalised to the translation shape.

    A ``translation`` column is kept as it is; otherwise ``src_lang`` / ``tgt_lang`` columns are folded into
    one. Pairs with an empty (or missing) side are dropped (empty-line policy). Works on local data too, e.g.
    ``load_hub_dataset("json", "en", "de", "train", data_files="train.jsonl")``.
    """
    check_langs(src_lang, tgt_lang)
    label = name if config_name is None else f"{name} (config {config_name!r})"
    try:
        loaded = datasets.load_dataset(name, config_name, split=split, **kwargs)
    except ConnectionError as err:
        raise DataError(
            f"could not load dataset {label}: the Hugging Face Hub is unreachable ({err}); "
            "for offline use pass a local folder of {split}.{lang}[.gz] files or a .jsonl file (--data-dir)"
        ) from err
    except FileNotFoundError as err:
        raise DataError(
            f"dataset {label} not found ({err}); expected a Hub dataset name, or a local folder / .jsonl file "
            "(--data-dir)"
        ) from err
    except ValueError as err:
        raise DataError(f"dataset {label}: cannot load split {split!r} ({err})") from err
    if not isinstance(loaded, datasets.Dataset):
        raise DataError(
            f"dataset {label}: expected one split as a datasets.Dataset, got {type(loaded).__name__}"
        )

    columns = loaded.column_names
    if "translation" in columns:
        feature = loaded.features["translation"]
        if isinstance(feature, datasets.Translation):
            langs = list(feature.languages)
        elif isinstance(feature, dict):
            langs = list(feature)
        else:
            langs = []
        if not {src_lang, tgt_lang} <= set(langs):
            raise DataError(
                f"dataset {label} split {split!r}: the 'translation' column ({feature}) has languages "
                f"{sorted(langs)}; expected a mapping with {src_lang!r} and {tgt_lang!r}"
            )
        dataset = loaded.select_columns(["translation"])
    elif src_lang in columns and tgt_lang in columns:
        dataset = loaded.map(
            lambda batch: {
                "translation": [
                    {src_lang: s, tgt_lang: t} for s, t in zip(batch[src_lang], batch[tgt_lang], strict=True)
                ]
            },
            batched=True,
            remove_columns=columns,
            features=datasets.Features({"translation": datasets.Translation(languages=[src_lang, tgt_lang])}),
        )
    else:
        raise DataError(
            f"dataset {label} split {split!r} has columns {columns}; expected a 'translation' column or "
            f"{src_lang!r} and {tgt_lang!r} columns"
        )

    keep: list[int] = []
    first_dropped: int | None = None
    index = 0
    for batch in dataset.select_columns(["translation"]).iter(batch_size=1000):
        for pair in batch["translation"]:
            s, t = pair.get(src_lang), pair.get(tgt_lang)
            if isinstance(s, str) and isinstance(t, str) and s.strip() and t.strip():
                keep.append(index)
            elif first_dropped is None:
                first_dropped = index + 1
            index += 1
    _finish_report(report, [label], index, len(keep), first_dropped, unit="row")
    return dataset if len(keep) == index else dataset.select(keep)


# -------------------------------------------------------------------------------------------------- dispatch
def _looks_like_path(source: str) -> bool:
    return source.startswith(("/", "./", "../", "~", ".\\", "..\\")) or source.endswith(_JSONL_SUFFIXES)


def load_parallel(
    source: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
    config_name: str | None = None,
    report: ReadReport | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> datasets.Dataset:
    """Load one split from a directory, a JSON-lines file or (otherwise) a Hub dataset name.

    A directory is read with `read_parallel_dir`, or as ``{split}.jsonl`` / ``{split}.json`` inside it when
    there are no ``{split}.{lang}`` files. A JSON-lines file is read whole (`split` is ignored). A
    `pathlib.Path`, or a string that looks like a path, that does not exist is an error rather than a Hub name.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        jsonl = [path / f"{split}{suffix}" for suffix in (".jsonl", ".json")]
        jsonl = [candidate for candidate in jsonl if candidate.is_file()]
        text = [path / f"{split}.{lang}{gz}" for lang in (src_lang, tgt_lang) for gz in ("", ".gz")]
        text = [candidate for candidate in text if candidate.is_file()]
        if jsonl and (text or len(jsonl) > 1):
            found = ", ".join(str(candidate) for candidate in jsonl + text)
            raise DataError(f"ambiguous input for split {split!r}: found {found}; keep only one format")
        if jsonl:
            return read_jsonl(jsonl[0], src_lang, tgt_lang, report=report, cache_dir=cache_dir)
        return read_parallel_dir(path, split, src_lang, tgt_lang, report=report, cache_dir=cache_dir)
    if path.is_file():
        if path.name.endswith(_JSONL_SUFFIXES):
            return read_jsonl(path, src_lang, tgt_lang, report=report, cache_dir=cache_dir)
        raise DataError(
            f"{path}: unsupported file type; expected a directory of {{split}}.{{lang}}[.gz] files or a "
            ".jsonl / .json file"
        )
    if not isinstance(source, str) or _looks_like_path(source):
        raise DataError(f"{path}: no such file or directory")
    return load_hub_dataset(source, src_lang, tgt_lang, split, config_name=config_name, report=report)
