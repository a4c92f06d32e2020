"""Small model factories shared by the tests (tiny shapes so the suite runs on 2 CPU cores)."""

from __future__ import annotations

from typing import Any

import torch

from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration

VOCAB = 48
PAD = VOCAB - 1
EOS = 0


# the shape every tiny test model uses (2+2 layers, d_model 32, no dropout)
TINY_SHAPE: dict[str, Any] = dict(
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    dropout=0.0,
)
# what a complete saved model directory written by `train` / `deep-nmt demo` holds
SAVED_MODEL_FILES = (
    "config.json",
    "model.safetensors",
    "generation_config.json",
    "tokenizer.json",
    "metrics.json",
)


def tiny_config(**overrides: Any) -> DeepNMTConfig:
    """A 2+2-layer, d_model 32 config with the Marian special-token layout (eos 0, unk 1, pad last)."""
    fields: dict[str, Any] = dict(vocab_size=VOCAB, max_position_embeddings=64, **TINY_SHAPE)
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


def stepwise_logits(
    model: DeepNMTForConditionalGeneration, ids: torch.Tensor, mask: torch.Tensor, target: torch.Tensor
) -> tuple[torch.Tensor, Any]:
    """Decode `target` one token at a time through an `EncoderDecoderCache`; returns (logits, final cache)."""
    from transformers.cache_utils import DynamicCache, EncoderDecoderCache

    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    steps = []
    for t in range(target.shape[1]):
        out = model(
            encoder_outputs=encoder_outputs,
            attention_mask=mask,
            decoder_input_ids=target[:, t : t + 1],
            past_key_values=cache,
            use_cache=True,
        )
        cache = out.past_key_values
        steps.append(out.logits)
    return torch.cat(steps, dim=1), cache
