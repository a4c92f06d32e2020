"""Preprocess once: a cached tokenizer and a tokenized corpus on disk that the next run and every rank reuse.

Like ``fairseq-preprocess``, but on `datasets`' Arrow files. Three kinds of cache entry live under
`data.cache_root()` (``$DEEP_NMT_HF_CACHE``, else ``<datasets cache>/deep_nmt_hf``), each a directory named by
a fingerprint of everything its content depends on:

* ``parallel-<key>`` / ``jsonl-<key>``: the corpus as Arrow (`data.read_parallel_dir` / `data.read_jsonl`);
  key = file paths, sizes and mtimes;
* ``tokenizer-<key>``: the joint BPE tokenizer (`cached_tokenizer`); key = the corpus dataset's fingerprint,
  vocabulary size, `sample` and `seed`;
* ``tokenized-<key>``: ``input_ids``, ``attention_mask``, ``labels``, ``src_len``, ``tgt_len`` and a
  ``truncated`` flag per pair (`tokenize_cached`); key = corpus fingerprint, tokenizer (its JSON), language
  pair and maximum lengths. `num_proc` is not part of the key: any number of workers builds the same entry.

Several processes (`accelerate launch`): the main process builds a missing entry first while the others wait
(`main_process_first`), then they load it. The cache folder must be on a file system every rank sees.

``src_len`` / ``tgt_len`` are the token counts (``</s>`` included, after truncation), kept as a cheap int32
column so that length-grouped or token-budget samplers read them without loading token lists; the number of
truncated pairs is summed with `pyarrow.compute` on the ``truncated`` column.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import logging
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import datasets
import pyarrow.compute as pc
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from .arrow import WRITE_BATCH_SIZE, _building, cache_root
from .tokenization import train_tokenizer

logger = logging.getLogger(__name__)

__all__ = [
    "TOKENIZED_COLUMNS",
    "TokenizedSplit",
    "cached_tokenizer",
    "corpus_texts",
    "main_process_first",
    "tokenize_cached",
    "tokenizer_fingerprint",
]

PREPROCESS_VERSION = 1  # bump when the tokenized layout changes: old entries are then ignored
TOKENIZED_COLUMNS = ("input_ids", "attention_mask", "labels", "src_len", "tgt_len", "truncated")
_META = "meta.json"
_FEATURES = datasets.Features(
    {
        "input_ids": datasets.List(datasets.Value("int32")),
        "attention_mask": datasets.List(datasets.Value("int8")),
        "labels": datasets.List(datasets.Value("int32")),
        "src_len": datasets.Value("int32"),
        "tgt_len": datasets.Value("int32"),
        "truncated": datasets.Value("bool"),
    }
)


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([PREPROCESS_VERSION, *parts], default=str).encode()).hexdigest()[:16]


@contextlib.contextmanager
def main_process_first() -> Iterator[None]:
    """accelerate's `PartialState.main_process_first` when launched with several processes, else nothing.

    The main process runs the block first (building cache entries); the others wait, then run it (loading)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        yield
        return
    import torch
    from accelerate import PartialState

    with PartialState(cpu=not torch.cuda.is_available()).main_process_first():
        yield


# ------------------------------------------------------------------------------------------------- tokenizer
def corpus_texts(
    dataset: datasets.Dataset,
    src_lang: str,
    tgt_lang: str,
    sample: int | None = None,
    seed: int = 42,
    batch_size: int = 10_000,
) -> Iterator[str]:
    """Source and target sentences of a translation dataset, streamed in Arrow batches (never a full list).

    With `sample`, only `sample` pairs drawn without replacement by ``random.Random(seed)`` (the same pairs for
    the same seed and dataset), in corpus order; the whole corpus when it has no more pairs than that.
    """
    if sample is not None:
        if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
            raise ValueError(f"tokenizer sample={sample!r} must be a positive integer (or None: every pair)")
        if sample < len(dataset):
            indices = sorted(random.Random(seed).sample(range(len(dataset)), sample))
            dataset = dataset.select(indices)
    for batch in dataset.select_columns(["translation"]).iter(batch_size=batch_size):
        for pair in batch["translation"]:
            yield pair[src_lang]
            yield pair[tgt_lang]


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """A 16-hex-digit hash of the tokenizer's definition (its ``tokenizer.json`` without the truncation and
    padding state, which calls such as ``tokenizer(..., truncation=True)`` change)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        raise TypeError(f"{type(tokenizer).__name__} is not a fast tokenizer: cannot fingerprint it")
    definition = json.loads(backend.to_str())
    for transient in ("truncation", "padding"):  # set by every call with truncation=True / padding
        definition.pop(transient, None)
    return hashlib.sha256(json.dumps(definition, sort_keys=True).encode()).hexdigest()[:16]


def cached_tokenizer(
    dataset: datasets.Dataset,
    src_lang: str,
    tgt_lang: str,
    vocab_size: int = 8000,
    model_max_length: int = 512,
    sample: int | None = None,
    seed: int = 42,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[PreTrainedTokenizerBase, Path]:
    """The joint BPE tokenizer of `dataset` (`tokenization.train_tokenizer` on `corpus_texts`), from the cache
    when an entry with the same corpus, settings, sample and seed exists; returns it and its directory."""
    key = ("tokenizer", dataset._fingerprint, vocab_size, model_max_length, sample, seed)
    return tokenizer_entry(
        key,
        lambda: corpus_texts(dataset, src_lang, tgt_lang, sample=sample, seed=seed),
        vocab_size,
        model_max_length,
        cache_dir,
    )


def tokenizer_entry(
    key: tuple[Any, ...],
    texts: Callable[[], Iterator[str]],
    vocab_size: int,
    model_max_length: int,
    cache_dir: str | os.PathLike[str] | None,
) -> tuple[PreTrainedTokenizerBase, Path]:
    entry = cache_root(cache_dir) / f"tokenizer-{_key(*key)}"
    with main_process_first():
        if not (entry / _META).is_file():
            with _building(entry) as temp:
                tokenizer = train_tokenizer(texts(), vocab_size=vocab_size, model_max_length=model_max_length)
                tokenizer.save_pretrained(os.fspath(temp))
                (temp / _META).write_text(
                    json.dumps({"key": list(key)}, default=str) + "\n", encoding="utf-8"
                )
            logger.info("trained the tokenizer into %s", entry)
        else:
            logger.info("tokenizer loaded from the cache %s", entry)
        return AutoTokenizer.from_pretrained(os.fspath(entry)), entry


# ------------------------------------------------------------------------------------------------ tokenizing
@dataclass
class TokenizedSplit:
    """A tokenized split in the cache: the memory-mapped `dataset` (`TOKENIZED_COLUMNS`), its directory
    `path`, `fingerprint`, the number of `truncated_pairs` and whether it came `from_cache`."""

    dataset: datasets.Dataset
    path: Path
    fingerprint: str
    truncated_pairs: int
    from_cache: bool


def pair_encoder(
    tokenizer: PreTrainedTokenizerBase,
    src_lang: str,
    tgt_lang: str,
    max_source_length: int,
    max_target_length: int,
) -> Any:
    tokenizer = copy.deepcopy(
        tokenizer
    )  # calls with truncation=True change its state: keep the caller's intact
    eos = tokenizer.eos_token_id

    def cut(rows: list[list[int]], limit: int, flags: list[bool]) -> list[list[int]]:
        # tokenized with room for one more token: a row longer than `limit` was longer than the limit
        out = []
        for index, row in enumerate(rows):
            if len(row) > limit:
                flags[index] = True
                row = row[: limit - 1] + [eos if row[-1] == eos else row[limit - 1]]
            out.append(row)
        return out

    def encode(batch: dict[str, list]) -> dict[str, list]:
        sources = [pair[src_lang] for pair in batch["translation"]]
        targets = [pair[tgt_lang] for pair in batch["translation"]]
        source_ids = tokenizer(sources, truncation=True, max_length=max_source_length + 1)["input_ids"]
        target_ids = tokenizer(text_target=targets, truncation=True, max_length=max_target_length + 1)[
            "input_ids"
        ]
        flags = [False] * len(sources)
        source_ids = cut(source_ids, max_source_length, flags)
        target_ids = cut(target_ids, max_target_length, flags)
        return {
            "input_ids": source_ids,
            "attention_mask": [[1] * len(row) for row in source_ids],
            "labels": target_ids,
            "src_len": [len(row) for row in source_ids],
            "tgt_len": [len(row) for row in target_ids],
            "truncated": flags,
        }

    return encode


def _load_entry(entry: Path) -> tuple[datasets.Dataset, dict[str, Any]]:
    meta = json.loads((entry / _META).read_text(encoding="utf-8"))
    parts = [datasets.Dataset.from_file(os.fspath(entry / name)) for name in meta["files"]]
    dataset = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    return dataset, meta


def tokenize_cached(
    dataset: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    src_lang: str,
    tgt_lang: str,
    max_source_length: int = 128,
    max_target_length: int = 128,
    num_proc: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> TokenizedSplit:
    """Tokenize ``{"translation": ...}`` rows into a cache entry (or load it); see the module docstring.

    Over-long pairs are truncated (not dropped): the source to `max_source_length` tokens and the target to
    `max_target_length`, both still ending in ``</s>`` (the ids of the tokenizer's own ``truncation=True``).
    `num_proc` worker processes tokenize (`datasets.Dataset.map`); the main process builds, other ranks wait.
    """
    if num_proc is not None and (isinstance(num_proc, bool) or not isinstance(num_proc, int) or num_proc < 1):
        raise ValueError(f"num_proc={num_proc!r} must be a positive integer (or None: one process)")
    fingerprint = _key(
        "tokenized",
        dataset._fingerprint,
        tokenizer_fingerprint(tokenizer),
        src_lang,
        tgt_lang,
        max_source_length,
        max_target_length,
    )
    entry = cache_root(cache_dir) / f"tokenized-{fingerprint}"
    from_cache = True
    with main_process_first():
        if not (entry / _META).is_file():
            from_cache = False
            with _building(entry) as temp:
                workers = num_proc if num_proc is not None and num_proc > 1 and len(dataset) > 1 else None
                mapped = dataset.map(
                    pair_encoder(tokenizer, src_lang, tgt_lang, max_source_length, max_target_length),
                    batched=True,
                    batch_size=WRITE_BATCH_SIZE,  # one Arrow record batch per map batch: few headers to open
                    writer_batch_size=WRITE_BATCH_SIZE,
                    remove_columns=dataset.column_names,
                    features=_FEATURES,
                    num_proc=workers,
                    cache_file_name=os.fspath(temp / "data.arrow"),
                    new_fingerprint=fingerprint,
                    desc="Tokenizing",
                )
                truncated = pc.sum(mapped.data.column("truncated")).as_py() or 0
                meta = {
                    "files": [Path(part["filename"]).name for part in mapped.cache_files],
                    "num_rows": len(mapped),
                    "truncated_pairs": int(truncated),
                    "src_lang": src_lang,
                    "tgt_lang": tgt_lang,
                    "max_source_length": max_source_length,
                    "max_target_length": max_target_length,
                    "tokenizer": tokenizer_fingerprint(tokenizer),
                }
                (temp / _META).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
                del mapped
        tokenized, meta = _load_entry(entry)
    logger.info(
        "%s tokenized split %s (%d pairs, %d truncated)",
        "loaded the cached" if from_cache else "wrote the",
        entry,
        meta["num_rows"],
        meta["truncated_pairs"],
    )
    return TokenizedSplit(tokenized, entry, fingerprint, int(meta["truncated_pairs"]), from_cache)
