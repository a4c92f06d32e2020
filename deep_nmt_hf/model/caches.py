"""The generation cache of deep_nmt_hf decoders: what each slot holds, for every variant.

`past_key_values` is a Transformers `EncoderDecoderCache(self_attention_cache, cross_attention_cache)` with one slot
per decoder layer *application* in each half (`config.decoder_depth`, which is also what `config.num_hidden_layers`
reports, so `DynamicCache(config=...)` / `StaticCache(config=...)` built by `generate` have exactly those slots).
Every slot's keys and values have Transformers' layout (batch, decoder_attention_heads, length, head_dim), so
generic cache code (beam reordering, `crop`, batch selection, code reading `keys.shape[-2]`) applies to all; beam
search does no wasted work on them (no gather of what is equal across a sentence's beams, no concatenation):

- causal self-attention (all variants but MAtt): keys and values of shape (batch, heads, decoded_length, head_dim),
  as Transformers documents, in a `GrowingLayer` (a `DynamicLayer` that writes each step into pre-allocated
  capacity instead of concatenating a copy of the prefix, and reorders in one pass) or a static cache's
  `StaticLayer`;
- cross-attention: keys and values (batch, heads, source_length, head_dim), written once, in a
  `BeamConstantLayer` / `StaticBeamConstantLayer`: beam search moves rows only among a sentence's beams, whose
  rows are equal (`generate` expands the encoder output per beam), so beam reordering leaves them as they are;
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
  it, so `crop` (assisted decoding), `batch_select_indices` and `batch_repeat_interleave` are the cache-layer
  operations on the position and batch axes; a step costs O(1) work in the prefix length, beam reordering
  included (it gathers the last entry and records the reordering for the earlier ones).

`generate` creates Transformers' generic slots (`DynamicLayer` / `StaticLayer`); the decoder swaps each empty one
for ours before its first write (`fit_slots`). Tokens and scores are those of the generic slots.

A static cache (`cache_implementation="static"`, needed for `torch.compile`d generation) works for every variant.
MAtt keeps the same prefix sums and counts in the pre-allocated (batch, heads, max_cache_len, head_dim) tensors of
Transformers' own `StaticLayer` (`StaticRunningAverage` reads and writes them): each step writes its entry in place
at the slot's fill level and reads the entry before it with a tensor index, no data-dependent branch, so compiled
decoding keeps one graph; beam reordering and batch handling are the StaticLayer's.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers.cache_utils import Cache, DynamicCache, DynamicLayer, EncoderDecoderCache, StaticLayer


class StaticCacheNotSupported(ValueError):
    """A variant whose decoder state has no static (compile-ready) form was given a static cache. Every variant has
    one now (MAtt since `StaticRunningAverage`); kept for code that catches it."""


# `DynamicLayer.crop(max_length)` (a length to keep, or a negative count to remove) in the lowest Transformers we
# declare, `crop(tokens_to_remove)` (negative only) in later ones; named by test_transformers_surfaces
CROP_TO_LENGTH = "max_length" in inspect.signature(DynamicLayer.crop).parameters


class GrowingLayer(DynamicLayer):
    """Self-attention slot of a dynamic cache that grows in place: keys and values live in pre-allocated
    (batch, heads, capacity, head_dim) buffers, `keys` / `values` are views of their first `length` positions, and
    each `update` writes the new positions into the free capacity (doubled when full) instead of concatenating a
    copy of the whole prefix (Transformers' `DynamicLayer`). Beam reordering gathers the filled positions into a
    second buffer of the same size in one pass (`index_select(..., out=)`) and swaps the two.

    The views stay valid until the next update or reordering overwrites them, as Transformers' own static cache
    behaves. Memory: the capacity is at most twice the filled length, plus the spare once reordered, so up to twice
    the peak of a `DynamicLayer` (which holds two copies of the prefix during each concatenation and reordering). A call that writes tensors requiring grad (a forward with a cache under autograd) turns the slot into a
    plain `DynamicLayer` for good: in-place writes would break the graph of earlier steps."""

    initial_capacity = 16

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.length = 0
        self.plain = False
        self.stores: tuple[torch.Tensor, torch.Tensor] | None = None
        self.spares: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if (
            not self.plain
            and torch.is_grad_enabled()
            and (key_states.requires_grad or value_states.requires_grad)
        ):
            self.become_plain()
        if self.plain:
            return super().update(key_states, value_states, *args, **kwargs)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        if self.stores is None or end > self.stores[0].shape[-2]:
            self.grow(key_states, value_states, end)
        keys, values = self.stores
        keys[:, :, self.length : end].copy_(key_states)
        values[:, :, self.length : end].copy_(value_states)
        self.length = end
        self.publish()
        return self.keys, self.values

    def grow(self, key_states: torch.Tensor, value_states: torch.Tensor, needed: int) -> None:
        """New buffers of at least `needed` positions (twice the old capacity), holding the filled prefix."""
        old = self.stores
        capacity = max(needed, self.initial_capacity, 2 * old[0].shape[-2] if old is not None else 0)
        stores = []
        for states, previous in zip((key_states, value_states), old or (None, None), strict=True):
            store = states.new_empty((*states.shape[:2], capacity, states.shape[-1]))
            if previous is not None and self.length:
                store[:, :, : self.length].copy_(previous[:, :, : self.length])
            stores.append(store)
        self.stores, self.spares = (stores[0], stores[1]), None

    def publish(self) -> None:
        """Point `keys` / `values` at the filled positions of the buffers."""
        if self.stores is not None:
            self.keys, self.values = (store[:, :, : self.length] for store in self.stores)

    def become_plain(self) -> None:
        """Continue as a `DynamicLayer` (concatenation), from a copy of what the buffers hold."""
        if self.stores is not None:
            self.keys, self.values = (store[:, :, : self.length].clone() for store in self.stores)
        self.stores = self.spares = None
        self.plain = True

    def get_seq_length(self) -> int:
        return super().get_seq_length() if self.plain else self.length

    def offload(self) -> None:
        """An offloaded cache (`cache_implementation="offloaded"`) moves `keys` / `values` between devices:
        continue as a plain `DynamicLayer`, whose tensors those are."""
        if not self.plain:
            self.become_plain()
        super().offload()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Gather the filled positions along the batch axis into the spare buffers, in one pass, and swap."""
        if self.plain or self.stores is None:
            super().reorder_cache(beam_idx)
            return
        if self.length == 0:
            return
        if self.spares is None:
            self.spares = (torch.empty_like(self.stores[0]), torch.empty_like(self.stores[1]))
        index = beam_idx.to(self.stores[0].device)
        for store, spare in zip(self.stores, self.spares, strict=True):
            torch.index_select(store[:, :, : self.length], 0, index, out=spare[:, :, : self.length])
        self.stores, self.spares = self.spares, self.stores
        self.publish()

    def crop(self, amount: int) -> None:
        """Transformers' `crop` in the form the installed release gives it: a negative `amount` removes that many
        positions; a positive one is the length to keep where `DynamicLayer.crop(max_length)` takes it (before
        5.2x, as assisted decoding calls it there) and Transformers' own error where it takes `tokens_to_remove`."""
        if self.plain or self.stores is None:
            super().crop(amount)
            return
        if amount > 0 and not CROP_TO_LENGTH:
            super().crop(amount)  # Transformers' error for the legacy positive form
        target = amount if amount >= 0 and CROP_TO_LENGTH else self.length - abs(amount)
        self.length = max(min(target, self.length), 0)
        self.publish()

    def rebuild(self, batch_op: Any) -> None:
        """Apply a batch operation (selection, repetition) to the buffers; the spares are dropped."""
        self.stores = tuple(batch_op(store) for store in self.stores)
        self.spares = None
        self.publish()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.plain or self.stores is None:
            super().batch_repeat_interleave(repeats)
        elif self.length > 0:
            self.rebuild(lambda store: store.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.plain or self.stores is None:
            super().batch_select_indices(indices)
        elif self.length > 0:
            self.rebuild(lambda store: store[indices, ...])

    def reset(self) -> None:
        super().reset()
        self.length, self.plain, self.stores, self.spares = 0, False, None, None


class RunningAverageLayer(GrowingLayer):
    """Cache slot of one MAtt layer application (merged_attention.py, dsinit-merged-attention eq. 16), laid out as
    an ordinary key/value slot, (batch, heads, t, head_dim) with heads · head_dim = d_model:

    - `keys`, entry i = Σ_{j ≤ i} m_j · (S W_v)_j, the masked prefix sum of the value projections, split into heads
      as attention splits them (a view of the (batch, t, d_model) sums before it is appended);
    - `values`, entry i = Σ_{j ≤ i} m_j, the number of real (non-padding) positions up to i, the same number in
      every head and head_dim entry.

    The slot therefore takes the memory of an ordinary self-attention K/V cache of the same length (it grows in
    place, `GrowingLayer`). The average at the next position needs only the last entry of each, so decoding reads
    O(1) per step, and beam reordering gathers only that entry: the earlier entries' reorderings are recorded and
    applied when something reads them (`keys` / `values`, `crop`, batch selection), so a beam step costs O(1) in
    the prefix length too. Keeping every prefix lets `crop` drop rejected draft tokens exactly (assisted
    decoding) — a single running sum could not.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.pending: list[
            tuple[int, torch.Tensor]
        ] = []  # (positions, beam_idx) not yet applied to the prefix
        self.key_view = self.value_view = None
        super().__init__(**kwargs)

    @property
    def keys(self) -> torch.Tensor | None:
        self.settle()
        return self.key_view

    @keys.setter
    def keys(self, value: torch.Tensor | None) -> None:
        self.key_view = value

    @property
    def values(self) -> torch.Tensor | None:
        self.settle()
        return self.value_view

    @values.setter
    def values(self, value: torch.Tensor | None) -> None:
        self.value_view = value

    def settle(self) -> None:
        """Apply the recorded beam reorderings to the positions before the last one they found, in order."""
        pending, self.pending = self.pending, []
        for positions, index in pending:
            for store in self.stores:
                store[:, :, :positions] = store[:, :, :positions].index_select(0, index)

    def append(self, sums: torch.Tensor, counts: torch.Tensor, heads: int) -> None:
        """Append prefix sums (batch, t, d_model) and prefix counts (batch, t, 1) in the (batch, heads, t,
        head_dim) layout above."""
        append_prefixes(self, sums, counts, heads)

    def previous(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(sum, count) over the cached prefix, shapes (batch, d_model) and (batch, 1); None when empty."""
        if self.get_seq_length() == 0:
            return None
        keys, values = (
            (self.key_view, self.value_view) if self.stores is not None else (self.keys, self.values)
        )
        return keys[:, :, -1].flatten(1), values[:, 0, -1, :1]

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Gather the last entry now (the next step reads it); record the reordering for the earlier ones."""
        if self.plain or self.stores is None or self.length == 0:
            super().reorder_cache(beam_idx)
            return
        index = beam_idx.to(self.stores[0].device)
        last = self.length - 1
        for store in self.stores:
            store[:, :, last : self.length] = store[:, :, last : self.length].index_select(0, index)
        if last > 0:
            self.pending.append((last, index))

    def crop(self, tokens_to_remove: int) -> None:
        self.settle_if_buffered()
        super().crop(tokens_to_remove)

    def batch_repeat_interleave(self, repeats: int) -> None:
        self.settle_if_buffered()
        super().batch_repeat_interleave(repeats)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self.settle_if_buffered()
        super().batch_select_indices(indices)

    def become_plain(self) -> None:
        self.settle_if_buffered()
        super().become_plain()

    def settle_if_buffered(self) -> None:
        if self.stores is not None:
            self.settle()

    def reset(self) -> None:
        self.pending = []
        super().reset()


def equal_row_labels(keys: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """A label per batch row, (batch,): consecutive rows whose keys and values are equal share one label (the
    beams of a sentence, which `generate` expands from one encoder row)."""
    if keys.shape[0] < 2:
        return torch.zeros(keys.shape[0], dtype=torch.long, device=keys.device)
    same = (keys[1:] == keys[:-1]).flatten(1).all(1) & (values[1:] == values[:-1]).flatten(1).all(1)
    return torch.cat([same.new_zeros(1, dtype=torch.long), (~same).long().cumsum(0)])


class BeamConstantRows:
    """What the cross-attention slots below add to a Transformers cache layer: the keys and values (batch, heads,
    source_length, head_dim) are written once from the encoder output, which `generate` expands per beam (each
    sentence's row repeated), so the rows of a sentence's beams are equal, and beam search's indices never leave a
    sentence. The slot labels its equal rows when written (`equal_row_labels`, one comparison pass); a
    `reorder_cache` whose indices only move rows among equal ones leaves the tensors as they are (Transformers'
    layer gathers a copy of them at every beam step), any other reordering gathers as Transformers does. The check
    costs a gather and a comparison of `batch` labels."""

    row_labels: torch.Tensor | None = None

    def label_rows(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.row_labels = equal_row_labels(key_states, value_states)

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        labels = self.row_labels
        if labels is not None:
            moved = labels.index_select(0, beam_idx.to(labels.device))
            if torch.equal(moved, labels):
                return  # every row receives an equal row: nothing to gather
            self.row_labels = moved
        super().reorder_cache(beam_idx)

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.row_labels is not None:
            self.row_labels = self.row_labels.repeat_interleave(repeats)
        super().batch_repeat_interleave(repeats)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.row_labels is not None:
            self.row_labels = self.row_labels[indices]
        super().batch_select_indices(indices)

    def reset(self) -> None:
        self.row_labels = None
        super().reset()


class BeamConstantLayer(BeamConstantRows, DynamicLayer):
    """Cross-attention slot of a dynamic cache (`BeamConstantRows`). The first `update` stores the given tensors,
    made contiguous (as the concatenation to an empty `DynamicLayer` and each of its beam gathers make them: a
    transposed view read at every step costs the attention kernel more than the one copy)."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.get_seq_length() > 0:  # written again (not by our models): labels no longer known
            self.row_labels = None
            return super().update(key_states, value_states, *args, **kwargs)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        # contiguous once (projections split into heads are transposed views): attention reads them every step
        self.keys, self.values = key_states.contiguous(), value_states.contiguous()
        self.label_rows(self.keys, self.values)
        return self.keys, self.values


class StaticBeamConstantLayer(BeamConstantRows, StaticLayer):
    """Cross-attention slot of a static cache (`BeamConstantRows`): Transformers' `StaticLayer`, pre-allocated to
    the source length."""

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        first = not self.is_initialized
        keys, values = super().update(key_states, value_states, *args, **kwargs)
        self.row_labels = equal_row_labels(key_states, value_states) if first else None
        return keys, values


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


def fit_slots(past_key_values: Cache, growing_self_attention: bool) -> None:
    """Swap the generic empty slots `generate` (or a caller) created for ours, before their first write: in the
    cross-attention half, `BeamConstantLayer` / `StaticBeamConstantLayer` for Transformers' `DynamicLayer` /
    `StaticLayer` (beam search leaves them unreordered); in the self-attention half, when `growing_self_attention`
    (causal self-attention, not MAtt, which picks its own slot: `running_average_slot`), `GrowingLayer` for a
    `DynamicLayer`. Filled slots, and any other layer class, are kept as they are."""
    if not isinstance(past_key_values, EncoderDecoderCache):
        return
    cross = past_key_values.cross_attention_cache.layers
    for index, layer in enumerate(cross):
        if layer.is_initialized:
            continue
        if type(layer) is DynamicLayer:
            cross[index] = BeamConstantLayer()
        elif type(layer) is StaticLayer:
            cross[index] = StaticBeamConstantLayer(max_cache_len=layer.max_cache_len)
    if growing_self_attention:
        own = past_key_values.self_attention_cache.layers
        for index, layer in enumerate(own):
            if type(layer) is DynamicLayer and not layer.is_initialized:
                own[index] = GrowingLayer()


def decoder_cache(
    past_key_values: Cache | None, use_cache: bool | None, config: Any, slots: int
) -> Cache | None:
    """The cache a decoder forward runs with, as in Marian: a given cache is used unless ``use_cache=False``; none
    given, a fresh dynamic one when `use_cache` (unset: ``config.use_cache``) asks for it. A dynamic cache gets
    `slots` slots (one per layer application); empty generic slots become ours (`fit_slots`)."""
    if use_cache is False:
        return None
    if past_key_values is None and (use_cache or (use_cache is None and config.use_cache)):
        past_key_values = EncoderDecoderCache(DynamicCache(), DynamicCache())
    static = is_static(past_key_values)
    if past_key_values is not None and not static:
        ensure_cache_slots(past_key_values, slots)
    if past_key_values is not None:
        fit_slots(past_key_values, growing_self_attention=config.decoder_attention == "self")
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
    if (
        type(cross.layers[index]) in (DynamicLayer, BeamConstantLayer)
        and not cross.layers[index].is_initialized
    ):
        cross.layers[index] = NoCrossAttentionLayer()
    cross.update(zeros, zeros, index)
    past_key_values.is_updated[index] = True


__all__ = [
    "BeamConstantLayer",
    "BeamConstantRows",
    "GrowingLayer",
    "NoCrossAttentionLayer",
    "RunningAverageLayer",
    "StaticBeamConstantLayer",
    "StaticCacheNotSupported",
    "StaticRunningAverage",
    "append_prefixes",
    "ensure_cache_slots",
    "equal_row_labels",
    "expanded_zeros",
    "fit_slots",
    "is_static",
    "mark_cross_slot_without_attention",
    "running_average_slot",
    "self_attention_half",
]
