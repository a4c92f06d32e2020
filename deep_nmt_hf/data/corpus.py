"""The training corpus as training reads it: the one public face of `data` that `training` calls (issue #51).

Two lanes, chosen once by `TrainingCorpus.streaming`:

- map-style (default): the split is read once into the Arrow cache (`reading.load_parallel`), the tokenizer is
  trained on it and cached (`preprocessing.cached_tokenizer`), and it is tokenized into a fingerprinted cache
  (`preprocessing.tokenize_cached`) that the next run and every rank reuse;
- streaming (``--streaming``): the split is read, shuffled in a buffer and tokenized on the fly
  (`streaming.streaming_pairs` / `streaming_tokenizer` / `streaming_tokenized`), for corpora larger than the disk
  cache should hold.

Validation and test splits are small and always map-style: `load_parallel` and `tokenize_dataset`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import datasets
from transformers import PreTrainedTokenizerBase

from .preprocessing import cached_tokenizer, tokenize_cached
from .reading import ReadReport, load_parallel
from .streaming import streaming_pairs, streaming_tokenized, streaming_tokenizer

Pairs = datasets.Dataset | datasets.IterableDataset


def tokenize_dataset(
    dataset: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    src_lang: str,
    tgt_lang: str,
    max_source_length: int = 128,
    max_target_length: int = 128,
    stats: dict[str, int] | None = None,
    num_proc: int | None = None,
    cache_dir: str | os.PathLike[str] | None = None,
) -> datasets.Dataset:
    """Map ``{"translation": {src, tgt}}`` rows to ``input_ids``, ``attention_mask``, ``labels`` and the
    per-pair lengths ``src_len`` / ``tgt_len`` (`preprocessing.tokenize_cached`: a fingerprinted on-disk
    cache, reused by the next run and by every rank; `num_proc` tokenizing workers).

    Over-long pairs are truncated (not dropped): the source to `max_source_length` tokens and the target to
    `max_target_length` tokens, both still ending in ``</s>`` (the same ids as the tokenizer's own
    ``truncation=True``). When `stats` is given, ``stats["truncated_pairs"]`` is set to the number of pairs
    that were cut on at least one side.
    """
    split = tokenize_cached(
        dataset,
        tokenizer,
        src_lang,
        tgt_lang,
        max_source_length,
        max_target_length,
        num_proc=num_proc,
        cache_dir=cache_dir,
    )
    if stats is not None:
        stats["truncated_pairs"] = split.truncated_pairs
    return split.dataset.remove_columns("truncated")


@dataclass(frozen=True)
class TrainingCorpus:
    """One training split of a local corpus or Hub dataset, read through the lane `streaming` picks."""

    source: str | os.PathLike[str]
    split: str
    src_lang: str
    tgt_lang: str
    streaming: bool = False
    seed: int = 42
    buffer_size: int = 10_000
    cache_dir: str | os.PathLike[str] | None = None
    num_proc: int | None = None

    def pairs(self, report: ReadReport | None = None, limit: int | None = None) -> Pairs:
        """The ``translation`` rows, at most `limit` of them (a stream: its first `limit` after shuffling);
        the map-style lane counts dropped empty pairs into `report`."""
        if self.streaming:
            stream = streaming_pairs(
                self.source, self.split, self.src_lang, self.tgt_lang, self.seed, self.buffer_size
            )
            return stream if limit is None else stream.take(limit)
        pairs = load_parallel(
            self.source, self.split, self.src_lang, self.tgt_lang, report=report, cache_dir=self.cache_dir
        )
        return pairs if limit is None or len(pairs) <= limit else pairs.select(range(limit))

    def tokenizer(self, pairs: Pairs, **settings: Any) -> PreTrainedTokenizerBase:
        """A joint BPE tokenizer trained on the corpus, cached (`settings`: vocab_size, model_max_length, sample,
        seed, cache_dir). The streaming lane trains it on the first pairs of the shuffled stream."""
        if self.streaming:
            source = (self.source, self.split, self.src_lang, self.tgt_lang)
            return streaming_tokenizer(*source, buffer_size=self.buffer_size, **settings)[0]
        return cached_tokenizer(pairs, self.src_lang, self.tgt_lang, **settings)[0]

    def tokenized(
        self,
        pairs: Pairs,
        tokenizer: PreTrainedTokenizerBase,
        max_source_length: int,
        max_target_length: int,
        stats: dict[str, int] | None = None,
    ) -> Pairs:
        """`pairs` as model inputs (`tokenize_dataset`'s columns and truncation), cached or on the fly."""
        langs = (self.src_lang, self.tgt_lang)
        if self.streaming:
            return streaming_tokenized(pairs, tokenizer, *langs, max_source_length, max_target_length)
        cache = {"num_proc": self.num_proc, "cache_dir": self.cache_dir}
        return tokenize_dataset(
            pairs, tokenizer, *langs, max_source_length, max_target_length, stats, **cache
        )
