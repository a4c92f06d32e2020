"""``--streaming``: a training corpus read as a `datasets.IterableDataset`, for corpora that do not fit on disk
a second time as Arrow.

The files are read lazily, line by line, with the same checks as the Arrow readers (`data.reading`: bad UTF-8,
malformed JSON and mismatched line counts raise `DataError` with file and line, when the stream reaches them);
empty pairs are skipped. Pairs are shuffled in a buffer of `buffer_size` pairs (``IterableDataset.shuffle``,
seeded: reshuffled per epoch with ``set_epoch``) and tokenized on the fly with the same encoder as the cache
(`preprocessing`), including the ``src_len`` / ``tgt_len`` columns. A stream has no length: the Trainer needs
``max_steps``.

Several processes: `streaming_pairs(..., rank=r, world_size=W)` keeps every W-th pair for rank r
(``datasets.distributed.split_dataset_by_node``: disjoint, together the whole stream) for custom loops. `train`
hands the Trainer the unsplit stream instead, and accelerate gives each rank its own slice of every global batch
(rank 0 reads and dispatches), which must not be split a second time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase

from .arrow import source_fingerprint, translation_features
from .preprocessing import pair_encoder, tokenizer_entry
from .reading import DataError, aligned_pairs, check_langs, find_file, jsonl_pairs

__all__ = ["DEFAULT_TOKENIZER_SAMPLE", "streaming_pairs", "streaming_tokenizer", "streaming_tokenized"]

DEFAULT_TOKENIZER_SAMPLE = 1_000_000  # pairs of the shuffled stream the tokenizer is trained on by default


def _source_files(
    source: str | os.PathLike[str], split: str, src_lang: str, tgt_lang: str
) -> tuple[str, list[str]]:
    path = Path(source).expanduser()
    if path.is_file():
        return "jsonl", [str(path)]
    if path.is_dir():
        for suffix in (".jsonl", ".json"):
            if (path / f"{split}{suffix}").is_file():
                return "jsonl", [str(path / f"{split}{suffix}")]
        files = [find_file(path, split, lang, src_lang, tgt_lang) for lang in (src_lang, tgt_lang)]
        return "parallel", [str(file) for file in files]
    raise DataError(
        f"{path}: --streaming needs a local directory of {{split}}.{{lang}}[.gz] files or a .jsonl file"
    )


def _rows(kind: str, files: tuple[str, ...], src_lang: str, tgt_lang: str) -> Iterator[dict[str, Any]]:
    counts: dict[str, Any] = {}
    if kind == "jsonl":
        pairs = jsonl_pairs(Path(files[0]), src_lang, tgt_lang, counts)
    else:
        pairs = aligned_pairs(Path(files[0]), Path(files[1]), counts)
    for source, target in pairs:
        yield {"translation": {src_lang: source, tgt_lang: target}}


def streaming_pairs(
    source: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
    seed: int = 42,
    buffer_size: int = 10_000,
    rank: int | None = None,
    world_size: int | None = None,
) -> datasets.IterableDataset:
    """The ``translation`` rows of a local corpus as a shuffled stream (buffer of `buffer_size` pairs, `seed`);
    with `rank` / `world_size`, only this rank's disjoint part (`split_dataset_by_node`)."""
    check_langs(src_lang, tgt_lang)
    if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
        raise ValueError(f"buffer_size={buffer_size!r} must be a positive integer")
    kind, files = _source_files(source, split, src_lang, tgt_lang)
    stream = datasets.IterableDataset.from_generator(
        _rows,
        features=translation_features(src_lang, tgt_lang),
        # a tuple: datasets would shard a list across workers
        gen_kwargs={"kind": kind, "files": tuple(files), "src_lang": src_lang, "tgt_lang": tgt_lang},
    )
    stream = stream.shuffle(seed=seed, buffer_size=buffer_size)
    if world_size is not None and world_size > 1:
        from datasets.distributed import split_dataset_by_node

        stream = split_dataset_by_node(stream, rank=int(rank or 0), world_size=world_size)
    return stream


def streaming_tokenized(
    stream: datasets.IterableDataset,
    tokenizer: PreTrainedTokenizerBase,
    src_lang: str,
    tgt_lang: str,
    max_source_length: int = 128,
    max_target_length: int = 128,
) -> datasets.IterableDataset:
    """`stream` tokenized on the fly: ``input_ids``, ``attention_mask``, ``labels``, ``src_len``, ``tgt_len``
    (truncated like `preprocessing.tokenize_cached`)."""
    encode = pair_encoder(tokenizer, src_lang, tgt_lang, max_source_length, max_target_length)
    return stream.map(encode, batched=True, batch_size=1000, remove_columns=["translation"]).remove_columns(
        "truncated"
    )


def streaming_tokenizer(
    source: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
    vocab_size: int = 8000,
    model_max_length: int = 512,
    sample: int | None = None,
    seed: int = 42,
    buffer_size: int = 10_000,
    cache_dir: str | os.PathLike[str] | None = None,
) -> tuple[PreTrainedTokenizerBase, Path]:
    """A joint BPE tokenizer trained on the first `sample` pairs (default `DEFAULT_TOKENIZER_SAMPLE`) of the
    stream shuffled with `seed`: deterministic by seed; cached by the files' fingerprint like
    `preprocessing.cached_tokenizer`."""
    sample = sample or DEFAULT_TOKENIZER_SAMPLE
    kind, files = _source_files(source, split, src_lang, tgt_lang)
    stream = streaming_pairs(source, split, src_lang, tgt_lang, seed=seed, buffer_size=buffer_size)

    def texts() -> Iterator[str]:
        for row in stream.take(sample):
            yield row["translation"][src_lang]
            yield row["translation"][tgt_lang]

    key = ("stream-tokenizer", source_fingerprint(files, kind), vocab_size, model_max_length, sample, seed)
    key += (buffer_size,)
    return tokenizer_entry(key, texts, vocab_size, model_max_length, cache_dir)
