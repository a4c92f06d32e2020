"""A finished study model as one committed file: float16 weights with the model's config in the file's metadata.

A study's runs keep their checkpoints and saved models outside the work tree (``~/.cache/deep_nmt_bench``), and
a machine is not always handed on to the next sitting. The numbers survive in the committed records; the final
(averaged) weights survive as ``seedS.averaged.safetensors`` beside them: about 2 bytes a parameter (3 MB for an
18-6 model at d 64), loadable on any machine with the package installed (`load_weights`).

Float16 halves the file against float32; weights of these models lie far inside its range, so the cost is its
11-bit mantissa (a relative rounding of at most 2^-11 a weight; tests/benchmarks/test_study_weights.py bounds the logits).
The tokenizer is not stored (it is derived from Multi30k text, which we never commit): the file names the SHA-256
of the tokenizer it was trained with, and `load_weights` refuses a different one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from pathlib import Path
from typing import Any

FORMAT = "deep_nmt_bench.study_weights/1"


class StudyWeightsError(ValueError):
    """A weights file that cannot be loaded as asked (not this format, or saved with another tokenizer)."""


def tokenizer_digest(tokenizer: Any) -> str:
    """SHA-256 of what maps text to ids in the tokenizer's JSON (vocabulary, merges, normalisation, special
    tokens): equal digests, equal ids. Truncation and padding are left out: encoding with `max_length` or
    `padding` sets them on the backend, and they do not change which id a subword gets."""
    backend = getattr(tokenizer, "backend_tokenizer", None) or getattr(tokenizer, "_tokenizer", None)
    if backend is None:
        raise StudyWeightsError(f"{type(tokenizer).__name__} has no fast (tokenizers) backend to digest")
    fields = {k: v for k, v in json.loads(backend.to_str()).items() if k not in ("truncation", "padding")}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode("utf-8")).hexdigest()


def save_weights(model: Any, path: str | os.PathLike[str], tokenizer_sha256: str) -> Path:
    """Write `model`'s floating-point weights as float16 (other tensors as they are) and its config and
    generation config as metadata to `path`, atomically; shared (tied) tensors are stored once."""
    import torch
    from safetensors.torch import save_model

    from deep_nmt_hf.data.atomic import atomic_path

    path = Path(path)
    metadata = {
        "format": FORMAT,
        "config": model.config.to_json_string(use_diff=False),
        "generation_config": model.generation_config.to_json_string(use_diff=False),
        "tokenizer_sha256": tokenizer_sha256,
        "num_parameters": str(model.num_parameters()),
    }
    half = copy.deepcopy(model).to(torch.float16)  # the caller's model keeps its dtype
    with atomic_path(path) as temp:
        save_model(half, str(temp), metadata=metadata)
    return path


def read_metadata(path: str | os.PathLike[str]) -> dict[str, str]:
    """The file's metadata, checked to be this format's."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such weights file")
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
    except Exception as error:  # safetensors raises its own SafetensorError for a damaged header
        raise StudyWeightsError(f"{path}: not a safetensors file ({error})") from error
    if metadata.get("format") != FORMAT:
        raise StudyWeightsError(f"{path}: format {metadata.get('format')!r}, expected {FORMAT!r}")
    return metadata


def load_weights(path: str | os.PathLike[str], tokenizer_sha256: str | None = None) -> Any:
    """The model saved by `save_weights`, in float32 and eval mode (AutoModelForSeq2SeqLM from the stored config:
    stock Marian or a registered deep_nmt_hf variant). With `tokenizer_sha256`, the stored tokenizer digest must
    match it."""
    from safetensors.torch import load_model
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, GenerationConfig

    import deep_nmt_hf  # noqa: F401 - registers the variants with the Auto classes

    metadata = read_metadata(path)
    if tokenizer_sha256 is not None and metadata["tokenizer_sha256"] != tokenizer_sha256:
        raise StudyWeightsError(
            f"{path} was trained with tokenizer {metadata['tokenizer_sha256'][:12]}…, not the given "
            f"{tokenizer_sha256[:12]}…: its token ids would mean other subwords"
        )
    fields = json.loads(metadata["config"])
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    model = AutoModelForSeq2SeqLM.from_config(config)
    model.generation_config = GenerationConfig.from_dict(json.loads(metadata["generation_config"]))
    load_model(model, str(path), strict=True)
    return model.float().eval()
