"""The generation cache of deep_nmt_hf decoders: what each slot holds, for every variant.

`past_key_values` is a Transformers `EncoderDecoderCache(self_attention_cache, cross_attention_cache)` with one slot
per decoder layer *application* in each half (`config.decoder_depth`, which is also what `config.num_hidden_layers`
reports, so `DynamicCache(config=...)` / `StaticCache(config=...)` built by `generate` have exactly those slots).
Every slot's keys and values have Transformers' layout (batch, decoder_attention_heads, length, head_dim), so
generic cache code (beam reordering, `crop`, batch selection, code reading `keys.shape[-2]`) applies to all:

- causal self-attention (all variants but MAtt): a `DynamicLayer` / `StaticLayer` with keys and values of shape
  (batch, heads, decoded_length, head_dim), as Transformers documents;
- cross-attention: keys and values (batch, heads, source_length, head_dim), written once;
- a CAD layer that owns no cross-attention (`cross_attention_drop_rate=1`): the same slot holds keys and values of
  that shape (batch, heads, source_length, head_dim) in a `NoCrossAttentionLayer`, but they are zeros expanded from
  one element (stride 0: no memory per entry) and never read by attention. The slot is initialised (never `None`)
  and follows beam reordering and batch selection, staying expanded; a static cross cache holds its pre-allocated
  zeros there, never read;
- shared layers: one slot per application, so a unique layer applied three times owns three slots;
- MAtt (`decoder_attention="merged"`, dsinit-merged-attention eqs. 16-17): its average attention keeps no keys and
  values but prefix sums, in a `RunningAverageLayer` (below) of the self-attention half, in the same layout:
  keys (batch, heads, decoded_length, head_dim) are the prefix sums of S W_v split into heads, values the prefix
  counts of real positions broadcast over heads and head_dim. Each position's entry is the running state up to
  it, so beam reordering, `crop` (assisted decoding), `batch_select_indices` and `batch_repeat_interleave` are the
  plain `DynamicLayer` operations on the position and batch axes, and a step still costs O(1) work in the prefix
  length.

A static cache (`cache_implementation="static"`, needed for `torch.compile`d generation) works for every variant.
MAtt keeps the same prefix sums and counts in the pre-allocated (batch, heads, max_cache_len, head_dim) tensors of
Transformers' own `StaticLayer` (`StaticRunningAverage` reads and writes them): each step writes its entry in place
at the slot's fill level and reads the entry before it with a tensor index, no data-dependent branch, so compiled
decoding keeps one graph; beam reordering and batch handling are the StaticLayer's.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, EncoderDecoderCache, StaticLayer


class StaticCacheNotSupported(ValueError):
    """A variant whose decoder state has no static (compile-ready) form was given a static cache. Every variant has
    one now (MAtt since `StaticRunningAverage`); kept for code that catches it."""


class RunningAverageLayer(DynamicLayer):
    """Cache slot of one MAtt layer application (merged_attention.py, dsinit-merged-attention eq. 16), laid out as
    an ordinary key/value slot, (batch, heads, t, head_dim) with heads · head_dim = d_model:

    - `keys`, entry i = Σ_{j ≤ i} m_j · (S W_v)_j, the masked prefix sum of the value projections, split into heads
      as attention splits them (a view of the (batch, t, d_model) sums before it is appended);
    - `values`, entry i = Σ_{j ≤ i} m_j, the number of real (non-padding) positions up to i, the same number in
      every head and head_dim entry.

    The slot therefore takes the memory of an ordinary self-attention K/V cache of the same length. The average at
    the next position needs only the last entry of each, so decoding reads O(1) per step; keeping every prefix lets
    `crop` drop rejected draft tokens exactly (assisted decoding) — a single running sum could not.
    """

    def append(self, sums: torch.Tensor, counts: torch.Tensor, heads: int) -> None:
        """Append prefix sums (batch, t, d_model) and prefix counts (batch, t, 1) in the (batch, heads, t,
        head_dim) layout above."""
        append_prefixes(self, sums, counts, heads)

    def previous(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(sum, count) over the cached prefix, shapes (batch, d_model) and (batch, 1); None when empty."""
        if self.get_seq_length() == 0:
            return None
        return self.keys[:, :, -1].flatten(1), self.values[:, 0, -1, :1]


def append_prefixes(
    layer: DynamicLayer | StaticLayer, sums: torch.Tensor, counts: torch.Tensor, heads: int
) -> None:
    """Write prefix sums (batch, t, d_model) and counts (batch, t, 1) into a cache layer as keys and values in the
    (batch, heads, t, head_dim) layout of `RunningAverageLayer`."""
    keys = sums.unflatten(-1, (heads, -1)).transpose(1, 2)
    layer.update(keys, counts.unsqueeze(1).expand(keys.shape))


class StaticRunningAverage:
    """A Transformers `StaticLayer` used as a MAtt slot: the `RunningAverageLayer` layout (prefix sums as keys,
    prefix counts as values) in its pre-allocated (batch, heads, max_cache_len, head_dim) tensors. `append` writes
    in place at the fill level (`StaticLayer.update`); `previous` reads the entry before it with a tensor index and
    gives zeros while the slot is empty (after a prefill or a crop to 0 alike), without a data-dependent branch."""

    def __init__(self, layer: StaticLayer) -> None:
        self.layer = layer

    def append(self, sums: torch.Tensor, counts: torch.Tensor, heads: int) -> None:
        append_prefixes(self.layer, sums, counts, heads)

    def previous(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(sum, count) over the cached prefix, shapes (batch, d_model) and (batch, 1); None before allocation."""
        layer = self.layer
        if not layer.is_initialized:  # the prefill (never compiled) allocates it
            return None
        filled = layer.cumulative_length.reshape(())  # a 0-d tensor from 5.24, shape (1,) before
        last = (filled - 1).clamp(min=0).reshape(1)
        present = (filled > 0).to(layer.keys.dtype)
        sums = layer.keys.index_select(2, last).flatten(1) * present
        counts = layer.values.index_select(2, last)[:, 0, 0, :1] * present
        return sums, counts

    def get_seq_length(self) -> int | torch.Tensor:
        return self.layer.get_seq_length()

    @property
    def max_cache_len(self) -> int:
        return self.layer.max_cache_len


def expanded_zeros(like: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor:
    """Zeros of `shape` (dtype and device of `like`) that hold one element: every stride is 0."""
    return like.new_zeros(()).expand(shape)


class NoCrossAttentionLayer(DynamicLayer):
    """Cross-attention slot of a decoder layer that owns no cross-attention (CAD, `cross_attention_drop_rate=1`).

    Its keys and values have the usual shape (batch, heads, source_length, head_dim), so generic code that reads
    the source length or indexes a position finds what it expects, but they are zeros expanded from one element
    (stride 0), which take no memory per entry; attention never reads them. `update` keeps the given tensors
    as they are (a DynamicLayer would concatenate, which materialises them), and beam reordering, batch selection
    and repetition rebuild the expanded zeros at the new batch size instead of indexing into them."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys, self.values = key_states, value_states
        return self.keys, self.values

    def _resize_batch(self, batch: int) -> None:
        if self.is_initialized:
            self.keys = expanded_zeros(self.keys, (batch, *self.keys.shape[1:]))
            self.values = expanded_zeros(self.values, (batch, *self.values.shape[1:]))

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._resize_batch(len(beam_idx))

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._resize_batch(self.keys.shape[0] * repeats)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.is_initialized:
            device = indices.device if isinstance(indices, torch.Tensor) else None
            self._resize_batch(torch.arange(self.keys.shape[0], device=device)[indices].numel())

    def reset(self) -> None:
        """Nothing to zero (in-place writes into an expanded tensor fail): drop the slot, as DynamicLayer does."""
        self.keys = self.values = None
        self.is_initialized = False


def self_attention_half(past_key_values: Cache) -> Cache:
    return (
        past_key_values.self_attention_cache
        if isinstance(past_key_values, EncoderDecoderCache)
        else past_key_values
    )


def is_static(past_key_values: Cache | None) -> bool:
    """Whether the decoder's self-attention half pre-allocates its slots (StaticCache)."""
    if past_key_values is None:
        return False
    return any(isinstance(layer, StaticLayer) for layer in self_attention_half(past_key_values).layers)


def running_average_slot(past_key_values: Cache, index: int) -> RunningAverageLayer | StaticRunningAverage:
    """The RunningAverageLayer for layer application `index`, replacing the empty generic slot on first use; a
    static cache's slot is used in place (`StaticRunningAverage`)."""
    cache = self_attention_half(past_key_values)
    while len(cache.layers) <= index:
        cache.layers.append(RunningAverageLayer())
    slot = cache.layers[index]
    if isinstance(slot, RunningAverageLayer):
        return slot
    if isinstance(slot, StaticLayer):
        return StaticRunningAverage(slot)
    if slot.get_seq_length() > 0:
        raise ValueError(f"cache slot {index} already holds self-attention keys; MAtt needs a fresh cache")
    replacement = RunningAverageLayer()
    if getattr(slot, "record_past", False):  # an assistant's cache (assisted decoding) records for rollback
        replacement.record_past = True
    cache.layers[index] = replacement
    return replacement


def ensure_cache_slots(past_key_values: Cache, count: int) -> None:
    """Give each half of the cache at least `count` slots (one per layer application). `generate` already builds
    that many from `config.num_hidden_layers`; a cache made by hand may start empty."""
    caches = [past_key_values]
    if isinstance(past_key_values, EncoderDecoderCache):
        caches = [past_key_values.self_attention_cache, past_key_values.cross_attention_cache]
    for cache in caches:
        while len(cache.layers) < count:
            cache.layers.append(DynamicLayer())


def decoder_cache(
    past_key_values: Cache | None, use_cache: bool | None, config: Any, slots: int
) -> Cache | None:
    """The cache a decoder forward runs with, as in Marian: a given cache is used unless ``use_cache=False``; none
    given, a fresh dynamic one when `use_cache` (unset: ``config.use_cache``) asks for it. A dynamic cache gets
    `slots` slots (one per layer application)."""
    if use_cache is False:
        return None
    if past_key_values is None and (use_cache or (use_cache is None and config.use_cache)):
        past_key_values = EncoderDecoderCache(DynamicCache(), DynamicCache())
    static = is_static(past_key_values)
    if past_key_values is not None and not static:
        ensure_cache_slots(past_key_values, slots)
    return past_key_values


def mark_cross_slot_without_attention(
    past_key_values: Cache | None, index: int, like: torch.Tensor, heads: int
) -> None:
    """Initialise, once, the cross-attention slot of a layer application that owns no cross-attention (CAD with
    `cross_attention_drop_rate=1`), `like` being the encoder output (batch, source_length, d_model): keys and values
    of shape (batch, heads, source_length, head_dim), zeros expanded with stride 0 in a `NoCrossAttentionLayer`
    (a static cross cache copies them into its pre-allocated zeros). Never read by attention."""
    if not isinstance(past_key_values, EncoderDecoderCache) or past_key_values.is_updated.get(index):
        return
    batch, source_length, d_model = like.shape
    zeros = expanded_zeros(like, (batch, heads, source_length, d_model // heads))
    cross = past_key_values.cross_attention_cache
    while len(cross.layers) <= index:
        cross.layers.append(DynamicLayer())
    if type(cross.layers[index]) is DynamicLayer and not cross.layers[index].is_initialized:
        cross.layers[index] = NoCrossAttentionLayer()
    cross.update(zeros, zeros, index)
    past_key_values.is_updated[index] = True


__all__ = [
    "NoCrossAttentionLayer",
    "RunningAverageLayer",
    "StaticCacheNotSupported",
    "StaticRunningAverage",
    "append_prefixes",
    "ensure_cache_slots",
    "expanded_zeros",
    "is_static",
    "mark_cross_slot_without_attention",
    "running_average_slot",
    "self_attention_half",
]
