"""Small model factories shared by the tests (tiny shapes so the suite runs on 2 CPU cores)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

import deep_nmt_hf
from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration
from deep_nmt_hf.model.transformers_compat import cache_of

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
            cache=cache,
            use_cache=True,
        )
        cache = cache_of(out)
        steps.append(out.logits)
    return torch.cat(steps, dim=1), cache


# the fields each variant needs beyond its defaults to show what is special about it at tiny size
VARIANT_FIELDS = {
    "shared_layers": {"decoder_layer_repeats": 2, "encoder_layer_repeats": 2},
    "deep_decoder": {
        "cross_attention_drop_layers": 1,
        "cross_attention_drop_rate": 1.0,
    },  # layer 0: no cross-attn
}


def variant_model(variant: str, seed: int = 0, **overrides):
    """A tiny model of `variant` (a key of deep_nmt_hf.VARIANTS) showing what is special about it, in eval mode."""
    config_class = deep_nmt_hf.VARIANTS[variant]
    lm_class = next(lm for config, _, lm in deep_nmt_hf.MODEL_TYPES if config is config_class)
    fields = dict(
        TINY_SHAPE, vocab_size=VOCAB, pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=EOS
    )
    fields.update(unk_token_id=1, max_position_embeddings=64, **VARIANT_FIELDS.get(variant, {}))
    fields.update(overrides)
    torch.manual_seed(seed)
    return lm_class(config_class(**fields)).eval()


def counting_batch(lengths: list[int], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random sources (padded_batch) and their "translations": count up from the first source token, one token
    per source token (ids 2..VOCAB-2, wrapping round), then eos. Returns (input_ids, attention_mask, labels)."""
    ids, mask = padded_batch(lengths, seed=seed)
    span = VOCAB - 3
    steps = torch.arange(ids.shape[1])[None, :]
    labels = (ids[:, :1] - 2 + steps) % span + 2
    labels[mask == 0] = -100
    labels[torch.arange(len(lengths)), torch.tensor(lengths) - 1] = EOS
    return ids, mask, labels


def counting_task_model(variant: str, seed: int = 0, steps: int = 40, **overrides):
    """A tiny `variant` model trained for a few steps on the counting task (counting_batch): each step's output
    depends on the decoded prefix and each sentence starts elsewhere, so translations vary from step to step and
    sentence to sentence (a random tiny model mostly repeats one token, which cannot tell an ignored cache from a
    used one). Adam, lr 1e-2, batches of 16 sources of 4-8 tokens; returned in eval mode."""
    model = variant_model(variant, seed=seed, **overrides).train()
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(steps):
        lengths = torch.randint(4, 9, (16,), generator=generator).tolist()
        ids, mask, labels = counting_batch(
            lengths, seed=int(torch.randint(0, 2**31, (1,), generator=generator))
        )
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def randomise_omegas(model, generator: torch.Generator, low: float = 0.3, high: float = 4.0) -> None:
    """Set every ADMIN ω of `model` uniformly in [low, high)."""
    from deep_nmt_hf.model.residual import AdminOmega

    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, AdminOmega):
                module.omega.copy_(low + (high - low) * torch.rand(module.omega.shape, generator=generator))


def save_untrained_model(out: Path, pairs: int, vocab_size: int) -> Path:
    """A tiny untrained model (d_model 16, 1+1 layers) with a tokenizer trained on `pairs` synthetic pairs, saved
    to `out`: what a command that only needs something that generates reads."""
    from deep_nmt_hf.data.synthetic import generate_pairs
    from deep_nmt_hf.data.tokenization import special_token_ids, train_tokenizer

    texts = [s for pair in generate_pairs(pairs, seed=5) for s in pair]
    tokenizer = train_tokenizer(texts, vocab_size=vocab_size, min_frequency=1)
    torch.manual_seed(0)
    config = DeepNMTConfig(
        d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
        encoder_ffn_dim=32, decoder_ffn_dim=32, max_position_embeddings=64, **special_token_ids(tokenizer),
    )  # fmt: skip
    DeepNMTForConditionalGeneration(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
