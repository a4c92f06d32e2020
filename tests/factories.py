"""Small model factories shared by the tests (tiny shapes so the suite runs on 2 CPU cores)."""

from __future__ import annotations

from typing import Any

import torch

from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration

VOCAB = 48
PAD = VOCAB - 1
EOS = 0


def tiny_config(**overrides: Any) -> DeepNMTConfig:
    """A 2+2-layer, d_model 32 config with the Marian special-token layout (eos 0, unk 1, pad last)."""
    fields: dict[str, Any] = dict(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=64,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        dropout=0.0,
    )
    fields.update(overrides)
    return DeepNMTConfig(**fields)


def tiny_model(seed: int = 0, **overrides: Any) -> DeepNMTForConditionalGeneration:
    torch.manual_seed(seed)
    return DeepNMTForConditionalGeneration(tiny_config(**overrides)).eval()


def padded_batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random source ids (2..VOCAB-2) ending in eos, right-padded with PAD; returns (input_ids, attention_mask)."""
    generator = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.full((len(lengths), width), PAD, dtype=torch.long)
    for row, length in enumerate(lengths):
        ids[row, : length - 1] = torch.randint(2, VOCAB - 1, (length - 1,), generator=generator)
        ids[row, length - 1] = EOS
    return ids, (ids != PAD).long()
