"""Writers: `write_jsonl` and `write_parallel_dir` write temporary files in the destination directory and
`os.replace` them into place, so a failed write leaves neither a destination nor a temp file."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from .atomic import temp_sibling
from .reading import DataError, check_langs

__all__ = ["write_jsonl", "write_parallel_dir"]


# --------------------------------------------------------------------------------------------------- writers
def _temp_file(destination: Path) -> tuple[IO[str], Path]:
    return temp_sibling(destination, encoding="utf-8", newline="\n")  # the umask's mode (atomic.py)


def _discard(handles: list[IO[str]], temps: list[Path]) -> None:
    for handle in handles:
        with contextlib.suppress(OSError):
            handle.close()
    for temp in temps:
        with contextlib.suppress(OSError):
            temp.unlink()


def _commit(handles: list[IO[str]]) -> None:
    for handle in handles:
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()


def write_jsonl(
    dataset: Iterable[Mapping[str, Any]],
    path: str | os.PathLike[str],
    src_lang: str,
    tgt_lang: str,
) -> int:
    """Write rows ``{"translation": {...}}`` as run_translation.py JSON lines, atomically; return rows written.

    Only `src_lang` and `tgt_lang` are written. A row without them, or with a non-string value, raises
    DataError and leaves no file behind (an existing destination is kept unchanged).
    """
    check_langs(src_lang, tgt_lang)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp = _temp_file(path)
    count = 0
    try:
        for index, row in enumerate(dataset):
            pair = row.get("translation") if isinstance(row, Mapping) else None
            if not isinstance(pair, Mapping):
                raise DataError(f"{path}: row {index} has no 'translation' mapping (got {row!r})")
            values = {lang: pair.get(lang) for lang in (src_lang, tgt_lang)}
            for lang, value in values.items():
                if not isinstance(value, str):
                    raise DataError(f"{path}: row {index}: translation[{lang!r}] is {value!r}, not a string")
            handle.write(json.dumps({"translation": values}, ensure_ascii=False) + "\n")
            count += 1
        _commit([handle])
        os.replace(temp, path)
    except BaseException:
        _discard([handle], [temp])
        raise
    return count


def write_parallel_dir(
    pairs: Iterable[tuple[str, str]],
    data_dir: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
) -> int:
    """Write ``{split}.{src_lang}`` and ``{split}.{tgt_lang}`` (plain UTF-8) atomically; return pairs written.

    Both temp files are written completely before either is renamed into place. A pair that is not two
    strings, or a sentence containing a line break, raises DataError and leaves no file behind. Refuses to
    write next to an existing ``.gz`` twin (which would make the split ambiguous to read).
    """
    check_langs(src_lang, tgt_lang)
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    destinations = [data_dir / f"{split}.{src_lang}", data_dir / f"{split}.{tgt_lang}"]
    for destination in destinations:
        twin = destination.with_name(destination.name + ".gz")
        if twin.exists():
            raise DataError(f"refusing to write {destination}: {twin} exists and reading would be ambiguous")
    handles: list[IO[str]] = []
    temps: list[Path] = []
    count = 0
    try:
        for destination in destinations:
            handle, temp = _temp_file(destination)
            handles.append(handle)
            temps.append(temp)
        for number, pair in enumerate(pairs, start=1):
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise DataError(f"{data_dir}: pair {number} is {pair!r}; expected a (source, target) tuple")
            for destination, handle, sentence in zip(destinations, handles, pair, strict=True):
                if not isinstance(sentence, str):
                    raise DataError(f"{destination}: line {number} is {sentence!r}; expected a string")
                if "\n" in sentence or "\r" in sentence:
                    raise DataError(
                        f"{destination}: line {number} contains a line break; expected one sentence per line"
                    )
                handle.write(sentence + "\n")
            count += 1
        _commit(handles)
        for temp, destination in zip(temps, destinations, strict=True):
            os.replace(temp, destination)
    except BaseException:
        _discard(handles, temps)
        raise
    return count
