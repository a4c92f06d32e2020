"""What the GPU training bench measures: the models at the papers' shapes, their synthetic corpus and tokenizer,
the chips' peak rates, the row fields."""

from __future__ import annotations

import argparse
import math
from typing import Any

import torch

# dense bf16 tensor-core peak (no sparsity), TFLOP/s, by a substring of torch.cuda.get_device_name()
PEAK_BF16 = {
    "H200": (989.0, "NVIDIA H200 datasheet (SXM): 1979 TFLOP/s bf16 with sparsity, 989 dense"),
    "H100 PCIe": (756.0, "NVIDIA H100 datasheet (PCIe): 1513 with sparsity, 756 dense"),
    "H100": (989.0, "NVIDIA H100 datasheet (SXM): 1979 TFLOP/s bf16 with sparsity, 989 dense"),
    "A100": (312.0, "NVIDIA A100 datasheet: 312 TFLOP/s bf16 dense"),
    "L40S": (362.0, "NVIDIA L40S datasheet: 362 TFLOP/s bf16 dense"),
}

# name -> (variant or "marian", encoder layers, decoder layers, extra config fields); paper shapes (PRESETS)
MODELS: dict[str, tuple[str, int, int, dict[str, Any]]] = {
    "marian-6-6": ("marian", 6, 6, {}),
    "base-6-6": ("base", 6, 6, {}),
    "admin-18-6": ("admin", 18, 6, {}),
    "admin-36-6": ("admin", 36, 6, {}),
    "admin-60-12": ("admin", 60, 12, {}),
    "dlcl-30-6": ("dlcl", 30, 6, {}),
    "matt-12-12": ("dsinit_matt", 12, 12, {}),
    "deep-decoder-6-12": ("deep_decoder", 6, 12, {}),
    "deep-decoder-15-15": ("deep_decoder", 15, 15, {}),
    "shared-8x5-4x2": ("shared_layers", 8, 4, {"encoder_layer_repeats": 5, "decoder_layer_repeats": 2}),
}
QUICK_MODELS = ("base-6-6", "admin-18-6")
MAX_POSITIONS = 256  # the benched models' max_position_embeddings: loader.py's buckets reach it
PRECISIONS = ("fp32", "bf16", "fp16")
SECTIONS = ("split", "trainer", "train", "generate", "stalls")
STALL_PLANS = ("exact", "pad8", "buckets")
ROW_FIELDS = {
    "train": ("model", "precision", "mode", "status", "step_ms", "target_tokens_per_s", "peak_memory_mib"),
    "trainer": ("model", "precision", "status", "trainer_step_ms", "raw_step_ms", "trainer_over_raw"),
    "generate": ("model", "mode", "status", "sentences_per_s"),
    "stalls": ("model", "precision", "plan", "cudnn_sdp", "status", "trainer_over_raw_tokens_per_s"),
}


def synthetic_corpus(count: int, vocab: int, seed: int = 0, max_length: int = 64) -> dict[str, list]:
    """Token ids with Multi30k-like lengths (BPE 8000: source ~13, target ~15 tokens with EOS, sd ~5), seeded.
    Ids 0-3 are special (pad 0, eos 1, unk 2, spare 3), as the joint BPE tokenizer lays them out."""
    generator = torch.Generator().manual_seed(seed)
    src = (torch.randn(count, generator=generator) * 5 + 13).round().clamp(3, max_length).long()
    tgt = (
        (src.float() * 1.1 + torch.randn(count, generator=generator) * 2).round().clamp(3, max_length).long()
    )
    ids = torch.randint(4, vocab, (count, 2 * max_length), generator=generator)
    rows = {"input_ids": [], "attention_mask": [], "labels": []}
    for index in range(count):
        s, t = int(src[index]), int(tgt[index])
        rows["input_ids"].append(ids[index, : s - 1].tolist() + [1])
        rows["attention_mask"].append([1] * s)
        rows["labels"].append(ids[index, max_length : max_length + t - 1].tolist() + [1])
    return rows


def word_tokenizer(vocab: int) -> Any:
    """A fast tokenizer over ids only (`tokenizer.pad` is all the collator asks): pad 0, eos 1, unk 2."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    words = {"<pad>": 0, "</s>": 1, "<unk>": 2, "<s>": 3} | {f"w{i}": i for i in range(4, vocab)}
    backend = Tokenizer(WordLevel(words, unk_token="<unk>"))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


class PreLNTransformer(torch.nn.Module):
    """The reference: `torch.nn.Transformer` (pre-LN, `norm_first=True`), sinusoid-free learned positions, one
    shared embedding tied to the output projection, token cross-entropy with label smoothing 0.1."""

    def __init__(self, vocab: int, d_model: int, heads: int, ffn: int, enc: int, dec: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model, padding_idx=0)
        self.positions = torch.nn.Embedding(512, d_model)
        self.core = torch.nn.Transformer(
            d_model, heads, enc, dec, ffn, dropout=0.1, batch_first=True, norm_first=True
        )
        self.scale = math.sqrt(d_model)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.embed(ids) * self.scale + self.positions(positions)

    def forward(
        self, input_ids: Any, attention_mask: Any, labels: Any, decoder_input_ids: Any, **_: Any
    ) -> Any:
        length = decoder_input_ids.shape[1]
        causal = torch.nn.Transformer.generate_square_subsequent_mask(length, device=input_ids.device)
        hidden = self.core(
            self._embed(input_ids),
            self._embed(decoder_input_ids),
            tgt_mask=causal,
            src_key_padding_mask=attention_mask.eq(0),
            memory_key_padding_mask=attention_mask.eq(0),
            tgt_is_causal=True,
        )
        logits = hidden @ self.embed.weight.t()
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, label_smoothing=0.1
        )
        return {"loss": loss, "logits": logits}


def width(args: argparse.Namespace) -> dict[str, int]:
    return {"d_model": args.d_model, "ffn": 4 * args.d_model, "heads": args.heads, "vocab": args.vocab}


def depths(name: str, args: argparse.Namespace) -> tuple[int, int, dict[str, Any]]:
    if name.startswith("torch-pre-ln-"):
        enc, dec = (int(x) for x in name.rsplit("-", 2)[-2:])
        return enc, dec, {}
    _, enc, dec, extra = MODELS[name]
    if args.quick:  # tiny: 2 encoder / 1 decoder layer(s), loops 2
        enc, dec = 2, 1
        extra = {k: 2 for k in extra}
    return enc, dec, extra


def applied_depth(name: str, args: argparse.Namespace) -> tuple[int, int]:
    """Layer applications per side (shared layers: unique layers × loops): the nn.Transformer reference's depth."""
    enc, dec, extra = depths(name, args)
    return enc * extra.get("encoder_layer_repeats", 1), dec * extra.get("decoder_layer_repeats", 1)


def build_model(name: str, args: argparse.Namespace) -> torch.nn.Module:
    w = width(args)
    enc, dec, extra = depths(name, args)
    torch.manual_seed(0)
    if name.startswith("torch-pre-ln-"):
        return PreLNTransformer(w["vocab"], w["d_model"], w["heads"], w["ffn"], enc, dec)
    variant = MODELS[name][0]
    shape = dict(
        vocab_size=w["vocab"], d_model=w["d_model"], encoder_layers=enc, decoder_layers=dec,
        encoder_attention_heads=w["heads"], decoder_attention_heads=w["heads"], encoder_ffn_dim=w["ffn"],
        decoder_ffn_dim=w["ffn"], max_position_embeddings=MAX_POSITIONS, pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0,
    )  # fmt: skip
    if variant == "marian":
        from transformers import MarianConfig, MarianMTModel

        return MarianMTModel(MarianConfig(**shape, forced_eos_token_id=1))
    from deep_nmt_hf.training import resolve_variant

    config_class, model_class = resolve_variant(variant)
    return model_class(config_class(**shape, unk_token_id=2, label_smoothing=0.1, **extra))
