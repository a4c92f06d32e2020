"""Which splits a directory of parallel text holds: ``{split}.{lang}[.gz]`` files and ``{split}.jsonl`` files.
Standard library only, so that `deep-nmt train` checks the splits named on its command line before torch and
datasets are imported (`reading.py` reads the files)."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import DataError


def split_files(data_dir: Path) -> dict[str, dict[str, list[str]]]:
    """{split: {lang: [file names]}} for every ``{split}.{lang}[.gz]`` file in data_dir."""
    found: dict[str, dict[str, list[str]]] = {}
    for entry in sorted(os.listdir(data_dir)):
        if not (data_dir / entry).is_file():
            continue
        stem = entry.removesuffix(".gz")
        split, dot, lang = stem.rpartition(".")
        if not dot or not split or not lang or lang in ("jsonl", "json"):
            continue
        found.setdefault(split, {}).setdefault(lang, []).append(entry)
    return found


def _jsonl_splits(data_dir: Path) -> list[str]:
    return sorted(
        {
            entry.rpartition(".")[0]
            for entry in os.listdir(data_dir)
            if entry.endswith((".jsonl", ".json")) and (data_dir / entry).is_file()
        }
    )


def available_splits(data_dir: str | os.PathLike[str], src_lang: str, tgt_lang: str) -> list[str]:
    """Sorted splits with a file for both languages (plain or .gz), plus splits with a ``{split}.jsonl``."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise DataError(f"{data_dir}: not a directory; expected a folder of {{split}}.{{lang}}[.gz] files")
    splits = {
        split for split, langs in split_files(data_dir).items() if src_lang in langs and tgt_lang in langs
    }
    splits.update(_jsonl_splits(data_dir))
    return sorted(splits)


def check_split_named(data_dir: Path, split: str, src_lang: str, tgt_lang: str) -> None:
    """DataError naming the split and the splits there when `data_dir` holds no file of `split` at all (neither
    ``{split}.*`` text files nor ``{split}.jsonl``); which file of the split is missing is `reading`'s to say."""
    if split in split_files(data_dir) or split in _jsonl_splits(data_dir):
        return
    raise DataError(
        f"{data_dir}: unknown split {split!r} (no {split}.* files); available splits for "
        f"{src_lang}-{tgt_lang}: {', '.join(available_splits(data_dir, src_lang, tgt_lang)) or 'none'}"
    )


__all__ = ["available_splits", "check_split_named", "split_files"]
