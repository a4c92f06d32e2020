"""Merged attention (MAtt): a simplified average attention merged with the cross-attention.

Paper: dsinit-merged-attention, eqs. 16-17:

    SAAN(S) = [M_a (S W_v)] W_o          M_a: causal cumulative average (position t averages positions 1..t)
    MAtt(S) = SAAN(S) + ATT(S, H)
    S̄ = LN(S + MAtt(S))                   (or the pre-LN / ADMIN forms, through the shared Sublayer)

Reading: the paper says W_o is shared by SAAN and the cross-attention ATT; its parameter counts (Table 3: 72.3M with
self-attention vs 66.0M with MAtt at 6 layers, i.e. 4d²+4d fewer per layer) show that SAAN owns no projection at
all, so W_v is shared too. We therefore compute `W_o(M_a(S W_v) + context(S, H))`: one output projection (its
bias counted once), no gates and no FFN inside the average attention. Padding positions of the target prefix are
excluded from the average (`decoder_attention_mask`).

Incremental decoding keeps, per layer application, the prefix sums of S W_v and the prefix counts of real positions
in a `caches.RunningAverageLayer` slot, laid out as Transformers lays out keys and values, (batch, heads, positions,
head_dim): the sums split into heads as keys, the counts broadcast as values. Each step reads only the last entry
(O(1) arithmetic in the target length; the slot grows by one entry per position, like a K/V cache), beam
reordering gathers that entry only, and `crop` (assisted decoding) and batch selection are cache-layer operations. The number of
cached positions is the slot's sequence length, so the position offset and `generate`'s bookkeeping stay right.
A static cache (compiled generation) keeps the same entries in its pre-allocated slot (`caches.StaticRunningAverage`).

With `output_attentions=True` the sublayer returns the average attention's weights too: per head, the
lower-triangular matrix whose row t holds 1/t over the real positions ≤ t (M_a of eq. 16, the same for every head).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.cache_utils import Cache

from .caches import StaticRunningAverage, running_average_slot


def cumulative_average(
    values: torch.Tensor, padding: torch.Tensor | None, past: tuple[torch.Tensor, torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """M_a applied to `values` (batch, time, d): position t is the mean of the real positions ≤ t, counting an
    earlier prefix given as `past` = (sum, count), shapes (batch, d) and (batch, 1). Returns (averages, prefix sums
    (batch, time, d), prefix counts (batch, time, 1)), the prefixes including `past`."""
    weights = torch.ones(values.shape[:2], dtype=values.dtype, device=values.device)
    if padding is not None:
        weights = padding[:, -values.shape[1] :].to(values.dtype)
    sums = (values * weights.unsqueeze(-1)).cumsum(dim=1)
    counts = weights.cumsum(dim=1).unsqueeze(-1)
    if past is not None:
        sums = sums + past[0].unsqueeze(1)
        counts = counts + past[1].unsqueeze(1)
    return sums / counts.clamp(min=1.0), sums, counts


def average_attention_weights(
    counts: torch.Tensor,
    padding: torch.Tensor | None,
    past_length: int | torch.Tensor,
    heads: int,
    key_length: int | None = None,
) -> torch.Tensor:
    """The weights M_a of the average attention as an attention matrix, (batch, heads, queries, past + queries):
    query i (position past + i) gives 1/count to each real position ≤ past + i and 0 elsewhere. A static cache
    fixes the key axis at its `key_length` (max_cache_len), as for its keys and values; `past_length` is then its
    fill level, a tensor, and the padding (positions 0 ..) is extended with zeros."""
    batch, queries = counts.shape[:2]
    keys = past_length + queries if key_length is None else key_length
    real = torch.ones(batch, keys, dtype=counts.dtype, device=counts.device)
    if padding is not None and key_length is None:
        real = padding[:, -keys:].to(counts.dtype)
    elif padding is not None:
        real = nn.functional.pad(padding.to(counts.dtype), (0, key_length - padding.shape[1]))
    positions = torch.arange(keys, device=counts.device)
    visible = positions[None, :] <= (past_length + torch.arange(queries, device=counts.device))[:, None]
    weights = real[:, None, :] * visible.to(counts.dtype) / counts.clamp(min=1.0)
    return weights[:, None].expand(batch, heads, queries, keys)


def real_target_positions(mask: torch.Tensor) -> torch.Tensor:
    """The real target positions (batch, key_length), from position 0, of the 4D decoder mask (batch, 1, queries,
    key_length) that `generate` builds for a static cache: its last query attends to every real position up to
    itself (a boolean mask attends where True, an additive one where 0); later positions come out as not real,
    which the average's causal structure ignores."""
    row = mask[:, 0, -1]
    return row if row.dtype == torch.bool else row == 0


def target_padding_of(attention_mask: torch.Tensor | None, static: bool) -> torch.Tensor | None:
    """The real target positions (batch, length) that the average counts, from the decoder's attention mask: the
    (batch, length) mask itself, or read from the 4D causal mask that `generate` hands a `static` cache."""
    if isinstance(attention_mask, torch.Tensor) and attention_mask.dim() == 4 and static:
        return real_target_positions(attention_mask)
    if attention_mask is not None and attention_mask.dim() != 2:
        raise ValueError(
            "decoder_attention='merged' (MAtt) needs a (batch, length) decoder_attention_mask marking target "
            f"padding, got shape {tuple(attention_mask.shape)}"
        )
    return attention_mask


class MergedAttention(nn.Module):
    """MAtt(S) = W_o(M_a(S W_v) + context(S, H)), sharing every projection with the cross-attention.

    Returns `(output, (average_weights, cross_weights))`; both weights are None unless `output_attentions`.
    The average weights depend on the target padding only, not on the input values: without a cached prefix they
    are returned as a leaf tensor (requiring grad when the input does) and applied as a matrix product, so that
    `retain_grad()` / `.grad` work on them; with a cached prefix they describe the running-sum step."""

    def __init__(self, cross_attention: nn.Module) -> None:
        super().__init__()
        self.cross_attention = cross_attention

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        target_padding: torch.Tensor | None = None,
        cache: Cache | None = None,
        cache_index: int = 0,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, tuple[torch.Tensor | None, torch.Tensor | None]]:
        attention = self.cross_attention
        slot = running_average_slot(cache, cache_index) if cache is not None else None
        past = slot.previous() if slot is not None else None
        past_length = slot.get_seq_length() if slot is not None else 0
        values = attention.v_proj(hidden_states)
        current = target_padding
        if isinstance(slot, StaticRunningAverage) and target_padding is not None:
            # a static slot's padding covers positions from 0 (to max_cache_len from a 4D mask): gather the
            # queries' own positions with the fill level as a tensor, no data-dependent slice
            positions = torch.arange(values.shape[1], device=values.device) + past_length
            current = target_padding.gather(1, positions.expand(values.shape[0], -1))
        averages, sums, counts = cumulative_average(values, current, past)
        if slot is not None:
            slot.append(sums, counts, attention.num_heads)
        context, cross_weights = attention.attend(
            hidden_states, key_value_states, attention_mask, cache, cache_index, output_attentions
        )
        average_weights = None
        if output_attentions:
            key_length = slot.max_cache_len if isinstance(slot, StaticRunningAverage) else None
            average_weights = average_attention_weights(
                counts, target_padding, past_length, attention.num_heads, key_length
            )
            if past is None:  # no cached prefix: apply the returned weights, so that gradients reach them
                if torch.is_grad_enabled() and values.requires_grad:
                    average_weights = average_weights.detach().requires_grad_()
                averages = torch.matmul(average_weights[:, 0, :, : values.shape[1]], values)
        return attention.out_proj(averages + context), (average_weights, cross_weights)
