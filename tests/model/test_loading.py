"""`from_pretrained` of a checkpoint without its embedding (issue #49, item 2): the stacks hold `shared` itself, so
Transformers' marking of the tie targets as initialised marked `shared.weight` too, and a checkpoint missing it
loaded silently with the embedding left on `meta`. It is now reported missing and initialised, as for Marian;
a complete checkpoint still reports nothing missing and loads exactly."""

from __future__ import annotations

import pytest
import torch
from factories import TINY_SHAPE, VOCAB, padded_batch
from safetensors.torch import load_file, save_file
from transformers import AutoModel, AutoModelForSeq2SeqLM

import deep_nmt_hf

CASES = [
    (variant, auto) for variant in sorted(deep_nmt_hf.VARIANTS) for auto in (AutoModel, AutoModelForSeq2SeqLM)
]


def saved(variant: str, auto, directory) -> torch.nn.Module:
    config = deep_nmt_hf.VARIANTS[variant](vocab_size=VOCAB, max_position_embeddings=64, **TINY_SHAPE)
    torch.manual_seed(0)
    model = auto.from_config(config).eval()
    model.save_pretrained(directory)
    return model


def on_meta(model: torch.nn.Module) -> list[str]:
    tensors = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return [name for name, tensor in tensors if tensor.device.type == "meta"]


@pytest.mark.parametrize(("variant", "auto"), CASES, ids=[f"{v}-{a.__name__}" for v, a in CASES])
def test_a_checkpoint_without_its_embedding_reports_it_missing_and_initialises_it(
    variant, auto, tmp_path
) -> None:
    saved(variant, auto, tmp_path)
    weights = load_file(tmp_path / "model.safetensors")
    prefix = "model." if auto is AutoModelForSeq2SeqLM else ""
    del weights[f"{prefix}shared.weight"]
    save_file(weights, tmp_path / "model.safetensors", metadata={"format": "pt"})

    model, info = auto.from_pretrained(tmp_path, output_loading_info=True)

    assert f"{prefix}shared.weight" in info["missing_keys"]
    assert on_meta(model) == []
    embedding = model.get_input_embeddings()
    assert (
        model.get_encoder().embed_tokens is embedding and model.get_decoder().embed_tokens.weight is not None
    )
    assert (
        torch.isfinite(embedding.weight).all() and embedding.weight.std() > 0
    )  # initialised, not empty memory
    ids, mask = padded_batch([5, 3])
    if auto is AutoModelForSeq2SeqLM:
        assert model.lm_head.weight is embedding.weight  # still tied
        out = model.eval().generate(input_ids=ids, attention_mask=mask, max_new_tokens=3)
        assert out.shape[0] == 2
    else:
        model.eval()(input_ids=ids, attention_mask=mask, decoder_input_ids=ids[:, :2])


@pytest.mark.parametrize(("variant", "auto"), CASES, ids=[f"{v}-{a.__name__}" for v, a in CASES])
def test_a_complete_checkpoint_reports_nothing_missing_and_loads_exactly(variant, auto, tmp_path) -> None:
    original = saved(variant, auto, tmp_path)
    model, info = auto.from_pretrained(tmp_path, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    assert on_meta(model) == []
    expected = original.state_dict()
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, expected[name]), name
