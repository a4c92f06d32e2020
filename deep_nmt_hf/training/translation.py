"""Batched beam-search translation of sentence lists and scoring of a saved model on a split."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import (
    AutoModelForSeq2SeqLM,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from ..data import load_parallel
from ..model.length_limit import (
    SourceLengthLimitLogitsProcessor,
    SourceLengthLimitMixin,
    length_limit_of,
    source_length_limits,
    source_lengths_of,
)
from ..model.tokenization_paired import load_folder_tokenizer
from ..publish.quantization import check_int8, quantize_int8
from .metrics import compute_translation_metrics

logger = logging.getLogger(__name__)

# (max_len_a, max_len_b) for a model whose generation config sets no per-sentence limit
DEFAULT_LIMIT = (2.0, 10)


def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.inference_mode()
def translate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    sentences: Sequence[str],
    num_beams: int = 4,
    batch_size: int = 32,
    max_new_tokens: int | None = None,
    progress: bool = False,
) -> list[str]:
    """Translate `sentences` with beam search, in batches of similar length; results in input order.

    Sentences are sorted by token length (longest first) so that a batch holds little padding, then the
    translations are put back in the order of the input. Empty or blank sentences translate to "" without
    running the model. Sources longer than the model's positions are truncated. `max_new_tokens=None` applies
    each sentence's own limit: the generation config's ``max_len_a · source length + max_len_b`` tokens
    (model/length_limit.py), or 2 × source + 10 where it has none, then ``</s>`` (bounded by the model's positions
    and its generation config's `max_length`), so that a model that never emits ``</s>`` cannot run for hundreds
    of steps and a sentence translates the same alone and in any batch.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    results = [""] * len(sentences)
    todo = [i for i, text in enumerate(sentences) if text.strip()]
    if not todo:
        return results
    max_positions = getattr(model.config, "max_position_embeddings", None)
    # the most tokens before </s>: the generation config's max_length counts the decoder start and that </s>
    limit_cap = (getattr(model.generation_config, "max_length", None) or 256) - 2
    if max_positions is not None:
        limit_cap = min(limit_cap, max_positions - 1)  # as the model's own generate caps it
    encoded = tokenizer(
        [sentences[i] for i in todo], truncation=max_positions is not None, max_length=max_positions
    )["input_ids"]
    vocab_size, unk = getattr(model.config, "vocab_size", None), getattr(model.config, "unk_token_id", None)
    if isinstance(vocab_size, int) and isinstance(unk, int) and len(tokenizer) > vocab_size:
        # a converted fairseq tokenizer's pieces past the model's vocabulary: <unk>, as fairseq reads them
        encoded = [[i if i < vocab_size else unk for i in ids] for ids in encoded]
    order = sorted(range(len(todo)), key=lambda k: len(encoded[k]), reverse=True)
    was_training = model.training
    model.eval()
    device = _device_of(model)
    batches = range(0, len(order), batch_size)
    try:
        for start in tqdm(batches, desc="Translating", unit="batch", disable=not progress):
            chunk = order[start : start + batch_size]
            batch = tokenizer.pad({"input_ids": [encoded[k] for k in chunk]}, return_tensors="pt")
            batch = {key: value.to(device) for key, value in batch.items()}
            # the model's generate applies its saved length-penalty form (model/length_penalty.py)
            if max_new_tokens is not None:
                # max_length counts the decoder start token: the same bound as max_new_tokens, without the
                # warning about max_new_tokens and the generation config's max_length both being set
                output = model.generate(**batch, num_beams=num_beams, max_length=max_new_tokens + 1)
            else:  # each sentence's own limit (model/length_limit.py), so that its neighbours cannot change it
                limit = length_limit_of(model.generation_config) or DEFAULT_LIMIT
                if isinstance(
                    model, SourceLengthLimitMixin
                ):  # its generate applies it, by its search's rules
                    output = model.generate(
                        **batch, num_beams=num_beams, max_len_a=limit[0], max_len_b=limit[1]
                    )
                else:
                    lengths = source_lengths_of(batch["input_ids"], batch.get("attention_mask"), None)
                    limits = source_length_limits(lengths, *limit, cap=limit_cap)
                    output = model.generate(
                        **batch,
                        num_beams=num_beams,
                        max_length=int(limits.max()) + 2,
                        logits_processor=LogitsProcessorList(
                            [SourceLengthLimitLogitsProcessor(limits, model.generation_config.eos_token_id)]
                        ),
                    )
            texts = tokenizer.batch_decode(output, skip_special_tokens=True)
            for k, text in zip(chunk, texts, strict=True):
                results[todo[k]] = text.strip()
    finally:
        model.train(was_training)
    return results


def evaluate_model(
    model_dir: str | os.PathLike[str],
    data_source: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
    num_beams: int = 4,
    batch_size: int = 32,
    max_length: int | None = None,
    progress: bool = True,
    max_samples: int | None = None,
    int8: bool = False,
) -> dict[str, Any]:
    """Translate one split with a saved model and score it: BLEU / chrF / TER with signatures.

    `max_length` bounds the number of generated tokens (None: the model's generation config). Returns the
    metrics plus the model, data source, split, languages and beam size. `max_samples` scores only the
    first N sentences of the split. `int8`: every linear layer quantized to int8 at load
    (publish/quantization.py `quantize_int8`).
    """
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: not a saved model directory (no config.json)")
    dataset = load_parallel(data_source, split, src_lang, tgt_lang)
    if max_samples is not None and len(dataset) > max_samples:
        dataset = dataset.select(range(max_samples))
    tokenizer = load_folder_tokenizer(model_dir)  # two vocabularies: PairedTokenizerFast
    if int8:
        check_int8()  # one line where torchao is missing, before any work
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    if int8:
        quantize_int8(model)
    pairs = dataset["translation"]
    sources = [pair[src_lang] for pair in pairs]
    references = [pair[tgt_lang] for pair in pairs]
    hypotheses = translate(
        model,
        tokenizer,
        sources,
        num_beams=num_beams,
        batch_size=batch_size,
        max_new_tokens=max_length,
        progress=progress,
    )
    result = compute_translation_metrics(hypotheses, references)
    result.update(
        model_dir=str(model_dir),
        data_source=str(data_source),
        split=split,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        int8=int8,
        num_beams=num_beams,
    )
    return result
