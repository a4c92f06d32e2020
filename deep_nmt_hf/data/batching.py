"""Token-budget batches (fairseq's ``--max-tokens``): as many sentence pairs per batch as fit a padded budget.

Every paper of this project trains with fairseq-style batches of a token budget (3.5k-8k per GPU in
admin-very-deep-transformers-nmt, prenorm-dlcl, recurrent-shared-layers; 25k tokens in dsinit-merged-attention)
rather than a fixed number of sentences. fairseq's semantics (`data_utils.batch_by_size` with
`LanguagePairDataset.num_tokens = max(src_len, tgt_len)`): the examples are ordered by length, then cut greedily
into batches whose *padded* size, batch size × longest example, stays ≤ ``max_tokens`` on the source side and on
the target side; the batches are then shuffled.

`TokenBudgetBatchSampler` does that per epoch from ``(seed, epoch)``: a seeded permutation breaks length ties, a
stable sort by source length, ties by target length, orders the examples (fairseq's
`LanguagePairDataset.ordered_indices`: mergesort by target, then by source), the greedy cut makes the batches, and a
second seeded permutation orders the batches. With ``pad_to_multiple_of`` (the training collator's, issue #48)
the budget counts each length rounded up to that multiple, so the collator's padded batch still stays within it
and batch shapes come in buckets of that size. With ``length_buckets`` (issue #55: the GPU default, a small fixed
set of lengths, `length_buckets`) each length counts as the smallest bucket that holds it, and the collator pads to
it (`BucketPadding`): a whole epoch then has a few length shapes, not one per length. Like fairseq's `batch_by_size`, a full batch of 8 or more examples is
cut to a multiple of ``required_batch_size_multiple`` (fairseq's default 8: tensor-core friendly shapes) and the
rest carried into the next batch. Under DDP (``num_replicas`` > 1) the batch list is padded to a multiple of
``num_replicas`` by repeating its first batches (every rank runs the same number of steps) and rank r takes
batches r, r + R, r + 2R, ... — every rank a different batch, the same on every run with the same seed.
Gradient accumulation needs nothing special: each batch is one micro-batch, and `DeepNMTTrainer`'s token-exact
loss scaling weights them by their target tokens.

The lengths come in as arrays (``numpy`` or any sequence), so a large Arrow dataset can hand them over from its
length columns without materialising examples (`dataset_lengths` reads them from the token columns with
pyarrow).

`LengthGroupedSampler` is the sentence-batch counterpart (the Trainer's ``group_by_length``): the order of
Transformers' sampler of that name, index for index, kept in one numpy array instead of per-mega-batch Python
lists, so its memory is 8 bytes a pair rather than about 100 (issue #16: at 4M pairs the Python lists were most of
the cached run's growth in peak RSS).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from torch.utils.data import Sampler


class TokenBudgetBatchSampler(Sampler[list[int]]):
    """Batches of dataset indices whose padded source and target size each stay ≤ `max_tokens`.

    Args:
        source_lengths: tokens of each example's source (with EOS), any 1-d integer array.
        target_lengths: tokens of each example's target; None uses the source lengths.
        max_tokens: the budget per batch (per process): batch size × longest example ≤ max_tokens, each side.
        max_sentences: optional cap on the examples per batch (fairseq's ``--batch-size`` next to
            ``--max-tokens``).
        shuffle: False keeps the length order and the batch order (deterministic, for evaluation).
        required_batch_size_multiple: a full batch of at least this many examples holds a multiple of it
            (fairseq's ``--required-batch-size-multiple``, default 8; 1 turns it off).
        seed: the epoch's order comes from (seed, epoch); call `set_epoch` each epoch (the Trainer does).
        num_replicas, rank: the DDP split (rank takes every num_replicas-th batch).
        pad_to_multiple_of: the collator pads lengths up to a multiple of this (e.g. 8); the budget counts the
            padded lengths (1: exact lengths, fairseq's semantics). The order still sorts by exact length.
        length_buckets: the collator pads lengths up to the smallest of these that holds them (`BucketPadding`);
            the budget counts the bucketed lengths (after `pad_to_multiple_of`). None: no buckets.

    Raises ValueError naming the first example longer than `max_tokens` (fairseq raises there too; truncate with
    the max source/target length or raise the budget).
    """

    def __init__(
        self,
        source_lengths: Sequence[int] | np.ndarray,
        target_lengths: Sequence[int] | np.ndarray | None = None,
        *,
        max_tokens: int,
        max_sentences: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        num_replicas: int = 1,
        rank: int = 0,
        required_batch_size_multiple: int = 8,
        pad_to_multiple_of: int = 1,
        length_buckets: Sequence[int] | None = None,
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens={max_tokens!r} must be a positive integer")
        if max_sentences is not None and (not isinstance(max_sentences, int) or max_sentences < 1):
            raise ValueError(f"max_sentences={max_sentences!r} must be a positive integer (or None)")
        multiple = required_batch_size_multiple
        if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
            raise ValueError(f"required_batch_size_multiple={multiple!r} must be a positive integer (1: off)")
        if (
            isinstance(pad_to_multiple_of, bool)
            or not isinstance(pad_to_multiple_of, int)
            or pad_to_multiple_of < 1
        ):
            raise ValueError(f"pad_to_multiple_of={pad_to_multiple_of!r} must be a positive integer (1: off)")
        if not isinstance(num_replicas, int) or num_replicas < 1 or not 0 <= rank < num_replicas:
            raise ValueError(f"rank={rank!r} must lie in [0, num_replicas={num_replicas!r})")
        self.source_lengths = np.asarray(source_lengths, dtype=np.int64).reshape(-1)
        self.target_lengths = (
            self.source_lengths
            if target_lengths is None
            else np.asarray(target_lengths, dtype=np.int64).reshape(-1)
        )
        if len(self.source_lengths) != len(self.target_lengths):
            raise ValueError(
                f"source_lengths ({len(self.source_lengths)}) and target_lengths ({len(self.target_lengths)}) "
                "must have one entry per example"
            )
        if len(self.source_lengths) == 0:
            raise ValueError("no examples: the lengths are empty")
        longest = np.maximum(self.source_lengths, self.target_lengths)
        too_long = np.flatnonzero(longest > max_tokens)
        if too_long.size:
            index = int(too_long[0])
            raise ValueError(
                f"example {index} has {int(self.source_lengths[index])} source / {int(self.target_lengths[index])} "
                f"target tokens, more than max_tokens={max_tokens} ({too_long.size} such examples); raise "
                "max_tokens or lower the max source/target length"
            )
        self.max_tokens = max_tokens
        self.max_sentences = max_sentences
        self.required_batch_size_multiple = multiple
        self.pad_to_multiple_of = pad_to_multiple_of
        self.length_buckets = None if length_buckets is None else checked_buckets(length_buckets)
        self.shuffle = shuffle
        self.seed = seed
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self._first = self._batches(0)  # kept for epoch 0's iteration: at 4M pairs the cut takes ~5 CPU-s
        self._num_batches = len(self._first)  # the same every epoch: only ties are reordered

    def set_epoch(self, epoch: int) -> None:
        """Use epoch `epoch`'s order (the Trainer calls this at the start of every epoch)."""
        self.epoch = int(epoch)

    def _batches(self, epoch: int) -> list[np.ndarray]:
        """All batches of one epoch (every rank's), in the order they are served."""
        count = len(self.source_lengths)
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(count) if self.shuffle else np.arange(count)
        # stable sort by source length, ties by target length: equal lengths keep the random order above
        order = order[np.lexsort((self.target_lengths[order], self.source_lengths[order]))]
        src_of, tgt_of = self.source_lengths[order], self.target_lengths[order]
        pad = self.pad_to_multiple_of
        if pad > 1:  # the lengths the collator pads to: the budget holds for the padded batch
            src_of, tgt_of = -(-src_of // pad) * pad, -(-tgt_of // pad) * pad
        if self.length_buckets is not None:  # the bucket the collator pads each length to
            src_of, tgt_of = bucketed(src_of, self.length_buckets), bucketed(tgt_of, self.length_buckets)
        multiple = self.required_batch_size_multiple
        batches: list[np.ndarray] = []
        start, longest_src, longest_tgt = 0, 0, 0
        for position in range(len(order)):
            src, tgt = int(src_of[position]), int(tgt_of[position])
            size = position - start + 1
            new_src, new_tgt = max(longest_src, src), max(longest_tgt, tgt)
            full = self.max_sentences is not None and size > self.max_sentences
            while size > 1 and (full or size * new_src > self.max_tokens or size * new_tgt > self.max_tokens):
                # fairseq's mod_len: the batch holds a multiple of `multiple`, the rest goes to the next batch (a
                # carried rest that still overflows with this example is cut again, kept whole)
                held = size - 1
                keep = max(multiple * (held // multiple), held % multiple)
                batches.append(order[start : start + keep])
                start += keep
                size = position - start + 1
                new_src = int(src_of[start : position + 1].max())
                new_tgt = int(tgt_of[start : position + 1].max())
                full = self.max_sentences is not None and size > self.max_sentences
            longest_src, longest_tgt = new_src, new_tgt
        batches.append(order[start:])
        if self.shuffle:
            batches = [batches[i] for i in rng.permutation(len(batches))]
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._first if self.epoch == 0 and self._first is not None else self._batches(self.epoch)
        if self.epoch != 0:
            self._first = None  # views of one index array; not needed after the first epoch
        total = -(-len(batches) // self.num_replicas) * self.num_replicas
        batches = batches + batches[: total - len(batches)]
        for batch in batches[self.rank :: self.num_replicas]:
            yield batch.tolist()

    def __len__(self) -> int:
        return -(-self._num_batches // self.num_replicas)


def length_buckets(max_length: int, smallest: int = 8) -> tuple[int, ...]:
    """A small fixed set of padded lengths covering 1..`max_length` (issue #55): multiples of `smallest` up to 4 ×
    `smallest`, then steps of ×1.5 rounded up to a multiple of `smallest` (8, 16, 24, 32, 48, 72, 112, 168,
    256, 384, ...), the last one ≥ `max_length`. A batch padded to its bucket wastes at most a third of its positions
    (a quarter past 32), and an epoch of any corpus has at most ~2 log₁.₅(max_length) length shapes per side:
    9 up to 256 tokens, against 32 for multiples of 8 and one per length for exact padding."""
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        raise ValueError(f"max_length={max_length!r} must be a positive integer")
    buckets = [smallest]
    while buckets[-1] < max_length:
        last = buckets[-1]
        step = last + smallest if last < 4 * smallest else -(-(last * 3 // 2) // smallest) * smallest
        buckets.append(step)
    return tuple(buckets)


def checked_buckets(buckets: Sequence[int]) -> tuple[int, ...]:
    """`buckets` as a tuple of strictly increasing positive integers, else ValueError naming them."""
    values = tuple(buckets)
    if (
        not values
        or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in values)
        or any(a >= b for a, b in zip(values, values[1:], strict=False))
    ):
        raise ValueError(f"length_buckets={values!r} must be strictly increasing positive integers")
    return values


def bucket_length(length: int, buckets: Sequence[int]) -> int:
    """The smallest bucket ≥ `length`; a length past the last bucket is rounded up to a multiple of it."""
    for bucket in buckets:
        if length <= bucket:
            return bucket
    last = buckets[-1]
    return -(-length // last) * last


def bucketed(lengths: np.ndarray, buckets: Sequence[int]) -> np.ndarray:
    """`bucket_length` of every entry of an integer array."""
    table = np.asarray(buckets, dtype=np.int64)
    index = np.searchsorted(table, lengths, side="left")
    inside = index < len(table)
    out = np.where(inside, table[np.minimum(index, len(table) - 1)], 0)
    return np.where(inside, out, -(-lengths // table[-1]) * table[-1])


class BucketPadding:
    """A seq2seq collator whose batches are padded up to length buckets: `collator` (e.g. `DataCollatorForSeq2Seq`
    with label padding -100) pads each batch to its longest example, then the source (``input_ids``,
    ``attention_mask``: pad id / 0) and the labels (-100; ``decoder_input_ids`` when present: pad id) are padded on
    the right to `bucket_length` of their length. Padded source positions are masked and padded label positions
    ignored, so the loss and the gradients are the unbucketed batch's."""

    def __init__(self, collator: Any, buckets: Sequence[int], pad_token_id: int) -> None:
        self.collator = collator
        self.length_buckets = checked_buckets(buckets)
        self.pad_token_id = int(pad_token_id)
        self.pad_to_multiple_of = getattr(collator, "pad_to_multiple_of", None)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        batch = self.collator(features)
        fills = {"input_ids": self.pad_token_id, "attention_mask": 0}
        fills |= {"labels": -100, "decoder_input_ids": self.pad_token_id, "decoder_attention_mask": 0}
        for side in (
            ("input_ids", "attention_mask"),
            ("labels", "decoder_input_ids", "decoder_attention_mask"),
        ):
            present = [name for name in side if isinstance(batch.get(name), torch.Tensor)]
            if not present:
                continue
            length = batch[present[0]].shape[1]
            extra = bucket_length(length, self.length_buckets) - length
            if extra:
                for name in present:
                    batch[name] = torch.nn.functional.pad(batch[name], (0, extra), value=fills[name])
        return batch


class LengthGroupedSampler(Sampler[int]):
    """Indices in mega-batches of similar length: `transformers.trainer_pt_utils.get_length_grouped_indices`'s
    order (a random permutation from `generator`, cut into mega-batches of ``min(50, n // (4 × batch_size))``
    batches, each sorted longest first, the longest mega-batch head moved to the front) in numpy.

    Args:
        lengths: one length per example (any 1-d integer array; kept as int32).
        batch_size: the batch the mega-batches are multiples of (per-device batch × gradient accumulation).
        generator: the torch generator of the permutation; None uses torch's global one (as the Trainer does).
    """

    def __init__(self, lengths: Sequence[int] | np.ndarray, batch_size: int, generator: Any = None) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size={batch_size!r} must be a positive integer")
        self.lengths = np.asarray(lengths, dtype=np.int32).reshape(-1)
        self.batch_size = batch_size
        self.generator = generator

    def __len__(self) -> int:
        return len(self.lengths)

    def indices(self) -> np.ndarray:
        """One epoch's order (draws one permutation from the generator)."""
        import torch

        count = len(self.lengths)
        # int32 draws the same permutation as int64 (what Transformers uses) in half the memory
        order = torch.randperm(count, generator=self.generator, dtype=torch.int32).numpy()
        size = max(1, min(count // (self.batch_size * 4), 50)) * self.batch_size
        for start in range(0, count, size):
            block = order[start : start + size]  # a view: sorted in place, longest first, ties kept in order
            block[:] = block[np.argsort(-self.lengths[block], kind="stable")]
        heads = np.arange(0, count, size)
        top = heads[int(np.argmax(self.lengths[order[heads]]))]
        order[0], order[top] = order[top], order[0]
        return order

    def __iter__(self) -> Iterator[int]:
        order = self.indices()
        for start in range(0, len(order), 1 << 16):  # Python ints a chunk at a time, never the whole epoch
            yield from order[start : start + (1 << 16)].tolist()


def length_column(dataset: Any, name: str) -> np.ndarray:
    """One integer column of a `datasets.Dataset` as a numpy array, straight from its Arrow chunks when it has no
    indices mapping (at 4M rows: 16 MiB for an int32 column, where ``with_format("numpy")[:]`` peaks at about
    150 MiB more); through `datasets`' numpy formatting otherwise."""
    if getattr(dataset, "_indices", None) is None and hasattr(getattr(dataset, "data", None), "column"):
        return dataset.data.column(name).to_numpy()
    return np.asarray(dataset.select_columns([name]).with_format("numpy")[:][name])


def dataset_lengths(
    dataset: Any, columns: tuple[str, str] = ("input_ids", "labels")
) -> tuple[np.ndarray, ...]:
    """(source lengths, target lengths) of a tokenized dataset: its ``src_len`` / ``tgt_len`` columns when it has
    them (the cached splits of `preprocessing.tokenize_cached`), else its token columns.

    A `datasets.Dataset` without an indices mapping is read with pyarrow's `list_value_length` (no Python
    objects per example); anything else row by row."""
    names = getattr(dataset, "column_names", None) or ()
    # the preprocessed splits' length columns (preprocessing.py): no token lists read
    if "src_len" in names and "tgt_len" in names:
        return tuple(length_column(dataset, name).astype(np.int64) for name in ("src_len", "tgt_len"))
    data = getattr(dataset, "data", None)
    if getattr(dataset, "_indices", None) is None and hasattr(data, "column"):
        import pyarrow.compute as pc

        return tuple(
            pc.list_value_length(data.column(name)).to_numpy(zero_copy_only=False).astype(np.int64)
            for name in columns
        )
    return tuple(np.array([len(row[name]) for row in dataset], dtype=np.int64) for name in columns)
