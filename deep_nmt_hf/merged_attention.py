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

Incremental decoding keeps, per layer application, the running sum of S W_v over the prefix and its length in a
`RunningAverageLayer` cache slot: each step costs O(1) in the target length, survives beam reordering (the slot
reorders like any cache layer), and reports the number of decoded positions as its sequence length so that the
position offset and `generate`'s bookkeeping stay right.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.cache_utils import Cache, DynamicLayer, EncoderDecoderCache


class RunningAverageLayer(DynamicLayer):
    """Cache slot of one MAtt layer application: `keys` = running sum (batch, d), `values` = count (batch, 1)."""

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0

    def add(self, total: torch.Tensor, count: torch.Tensor, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Add the sums and counts of `steps` new positions; return the previous (sum, count) or zeros."""
        if not self.is_initialized:
            self.keys, self.values = torch.zeros_like(total), torch.zeros_like(count)
            self.dtype, self.device, self.is_initialized = total.dtype, total.device, True
        previous = (self.keys, self.values)
        self.keys, self.values = self.keys + total, self.values + count
        self.steps += steps
        return previous

    def get_seq_length(self) -> int:
        return self.steps if self.is_initialized else 0

    def reset(self) -> None:
        super().reset()
        self.steps = 0

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError("a running average cannot be cropped (assisted decoding is not supported)")


def running_average_slot(past_key_values: Cache, index: int) -> RunningAverageLayer:
    """The RunningAverageLayer for layer application `index`, created in the self-attention cache on first use."""
    cache = (
        past_key_values.self_attention_cache
        if isinstance(past_key_values, EncoderDecoderCache)
        else past_key_values
    )
    while len(cache.layers) <= index:
        cache.layers.append(RunningAverageLayer())
    if not isinstance(cache.layers[index], RunningAverageLayer):
        if cache.layers[index].get_seq_length() > 0:
            raise ValueError(
                f"cache slot {index} already holds self-attention states; MAtt needs a fresh cache"
            )
        cache.layers[index] = RunningAverageLayer()
    return cache.layers[index]


def cumulative_average(
    values: torch.Tensor, padding: torch.Tensor | None, past: tuple[torch.Tensor, torch.Tensor] | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """M_a applied to `values` (batch, time, d): position t is the mean of the real positions ≤ t, counting an
    earlier prefix given as `past` = (sum, count). Returns (averages, sum of the new real positions, their count)."""
    weights = torch.ones(values.shape[:2], dtype=values.dtype, device=values.device)
    if padding is not None:
        weights = padding[:, -values.shape[1] :].to(values.dtype)
    weighted = values * weights.unsqueeze(-1)
    sums = weighted.cumsum(dim=1)
    counts = weights.cumsum(dim=1).unsqueeze(-1)
    if past is not None:
        sums = sums + past[0].unsqueeze(1)
        counts = counts + past[1].unsqueeze(1)
    averages = sums / counts.clamp(min=1.0)
    return averages, weighted.sum(dim=1), weights.sum(dim=1, keepdim=True)


class MergedAttention(nn.Module):
    """MAtt(S) = W_o(M_a(S W_v) + context(S, H)), sharing every projection with the cross-attention."""

    def __init__(self, cross_attention: nn.Module) -> None:
        super().__init__()
        self.cross_attention = cross_attention

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        target_padding: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        cache_index: int = 0,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        attention = self.cross_attention
        slot = running_average_slot(past_key_values, cache_index) if past_key_values is not None else None
        values = attention.v_proj(hidden_states)
        past = None
        if slot is not None and slot.is_initialized:
            past = (slot.keys, slot.values)
        averages, new_sum, new_count = cumulative_average(values, target_padding, past)
        if slot is not None:
            slot.add(new_sum, new_count, hidden_states.shape[1])
        context, weights = attention.attend(
            hidden_states, key_value_states, attention_mask, past_key_values, cache_index, output_attentions
        )
        return attention.out_proj(averages + context), weights
