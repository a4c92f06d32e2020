"""Position embeddings other than Marian's table, so that models converted from fairseq score exactly.

`config.position_embedding`:
    "sinusoidal"          Marian's table (modeling_deep_nmt.SinusoidalPositions), positions from row 0
    "fairseq_sinusoidal"  fairseq's table (fairseq/modules/sinusoidal_positional_embedding.py, `get_embedding`):
                          row p = [sin(p·ω_0) .. sin(p·ω_{h-1}), cos(p·ω_0) .. cos(p·ω_{h-1})] with h = d/2 and
                          ω_i = exp(-i · ln(10000) / (h - 1)) — note h - 1, where Marian's has 10000^(-2i/d) —,
                          computed in float32 as fairseq computes it; recomputed on load, never saved
    "learned"             a saved table (fairseq's `LearnedPositionalEmbedding`, BART-style)

`config.position_offset` is the row of the first position: fairseq numbers the tokens of an unpadded sentence
`padding_idx + 1, padding_idx + 2, ...` (fairseq/utils.py, `make_positions`), so a converted model keeps fairseq's
whole table and starts reading it at `padding_idx + 1`. Every position of a right-padded batch (as Transformers
pads) then gets the row fairseq gives the same token of the unpadded sentence; pads read some row too, which no
real token attends to.

This file ships with saved checkpoints: torch and transformers only.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from transformers import initialization as init


def fairseq_sinusoidal_table(num_rows: int, dim: int) -> torch.Tensor:
    """fairseq's sinusoidal table of `num_rows` rows (float32, as fairseq computes it; the padding row, which
    fairseq zeroes, is never read here: reading starts at `position_offset` = padding_idx + 1)."""
    half = dim // 2
    step = math.log(10000) / (half - 1)
    frequencies = torch.exp(torch.arange(half, dtype=torch.float32) * -step)
    angles = torch.arange(num_rows, dtype=torch.float32).unsqueeze(1) * frequencies.unsqueeze(0)
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if dim % 2:
        table = torch.cat([table, torch.zeros(num_rows, 1)], dim=1)
    return table


def max_positions(config: Any, side: str) -> int:
    """A stack's number of positions: `max_position_embeddings`, or on the decoder side
    `decoder_max_position_embeddings` where set (fairseq's `max_source_positions` / `max_target_positions`)."""
    own = getattr(config, "decoder_max_position_embeddings", None) if side == "decoder" else None
    return config.max_position_embeddings if own is None else own


class OffsetPositions(nn.Module):
    """Rows `offset + position_offset ..` of a table of `max_position_embeddings + position_offset` rows: fairseq's
    sinusoidal table (a non-persistent buffer, rebuilt by `reset`) or a learned one (a parameter)."""

    def __init__(self, config: Any, side: str = "encoder") -> None:
        super().__init__()
        self.kind = config.position_embedding
        self.first = config.position_offset
        self.num_positions = max_positions(config, side)
        self.dim = config.d_model
        rows = self.num_positions + self.first
        if self.kind == "learned":
            self.weight = nn.Parameter(torch.zeros(rows, self.dim))
        else:
            table = fairseq_sinusoidal_table(rows, self.dim).to(torch.get_default_dtype())
            self.register_buffer("weight", table, persistent=False)

    @torch.no_grad()
    def reset(self) -> None:
        """Rebuild the sinusoidal table (from_pretrained materialises non-persistent buffers empty); a fresh
        learned table starts N(0, d^-1/2), as fairseq's (`init` leaves a loaded one as it is)."""
        if self.kind == "learned":
            init.normal_(self.weight, mean=0.0, std=self.dim**-0.5)
        else:
            self.weight.copy_(fairseq_sinusoidal_table(self.weight.shape[0], self.dim))

    def forward(self, seq_len: int, offset: int | torch.Tensor = 0) -> torch.Tensor:
        """The rows of positions offset .. offset + seq_len - 1 (a 0-d tensor offset gathers, as
        SinusoidalPositions does, so compiled decoding keeps one graph)."""
        if isinstance(offset, torch.Tensor):
            return self.weight[torch.arange(seq_len, device=self.weight.device) + offset + self.first]
        if offset + seq_len > self.num_positions:
            raise ValueError(
                f"sequence of {offset + seq_len} positions is longer than max_position_embeddings="
                f"{self.num_positions}; truncate the input or raise max_position_embeddings in the config"
            )
        start = self.first + offset
        return self.weight[start : start + seq_len]


__all__ = ["OffsetPositions", "fairseq_sinusoidal_table", "max_positions"]
