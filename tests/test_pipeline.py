"""Every variant works through `pipeline("translation", ...)`, custom and folded."""

from __future__ import annotations

import pytest
import torch
from transformers import pipeline

import deep_nmt_hf
from deep_nmt_hf.folding import fold_to_stock
from deep_nmt_hf.synthetic import generate_pairs
from deep_nmt_hf.tokenization import special_token_ids, train_tokenizer

SMALL = dict(
    d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_attention_heads=4, decoder_attention_heads=4
)
SHALLOW = dict(encoder_layers=2, decoder_layers=2, max_position_embeddings=128)


@pytest.fixture(scope="module")
def tokenizer():
    pairs = generate_pairs(400, seed=3)
    return train_tokenizer([s for pair in pairs for s in pair], vocab_size=300, min_frequency=1)


@pytest.mark.parametrize("variant", sorted(deep_nmt_hf.VARIANTS))
def test_translation_pipeline_for_every_variant(variant: str, tokenizer) -> None:
    config_class = deep_nmt_hf.VARIANTS[variant]
    ids = {k: v for k, v in special_token_ids(tokenizer).items()}
    overrides = {**SMALL, **SHALLOW, **ids}
    if variant == "shared_layers":
        overrides |= {"encoder_layer_repeats": 2, "decoder_layer_repeats": 2}
    if variant == "deep_decoder":
        overrides |= {"cross_attention_drop_layers": 1}
    torch.manual_seed(0)
    config = config_class(**overrides)
    model = deep_nmt_hf.MODEL_TYPES[[c for c, _, _ in deep_nmt_hf.MODEL_TYPES].index(config_class)][2](
        config
    ).eval()
    translator = pipeline("translation", model=model, tokenizer=tokenizer, max_new_tokens=8, num_beams=2)
    out = translator(["kol nuto vugat .", "ela gupebeda avure ."])
    assert len(out) == 2 and all(isinstance(o["translation_text"], str) for o in out)
    try:
        stock, _ = fold_to_stock(model)
    except deep_nmt_hf.folding.NotFoldableError:
        return
    folded = pipeline("translation", model=stock, tokenizer=tokenizer, max_new_tokens=8, num_beams=2)
    assert folded(["kol nuto vugat .", "ela gupebeda avure ."]) == out


def test_pipeline_from_a_saved_directory_and_its_errors(tmp_path, tokenizer) -> None:
    ids = special_token_ids(tokenizer)
    torch.manual_seed(1)
    model = deep_nmt_hf.DeepNMTForConditionalGeneration(deep_nmt_hf.DeepNMTConfig(**SMALL, **SHALLOW, **ids))
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    # An untrained model likes the bare word-boundary piece, which decodes to nothing: ban it (and pad).
    blank = tokenizer.convert_tokens_to_ids("▁")
    generation = dict(max_new_tokens=6, min_new_tokens=4, bad_words_ids=[[blank], [ids["pad_token_id"]]])
    translator = pipeline("translation", model=str(tmp_path), **generation)
    assert isinstance(translator, deep_nmt_hf.TranslationPipeline)
    direct = model.eval().generate(**tokenizer(["kol nuto ."], return_tensors="pt"), **generation)
    expected = tokenizer.decode(direct[0], skip_special_tokens=True).strip()
    assert expected  # min_new_tokens forces real tokens, so the comparison below means something
    # as Transformers' translation pipeline: a list of records for a string and for a list of strings
    assert translator("kol nuto .") == [{"translation_text": expected}]
    assert translator(["kol nuto ."]) == [{"translation_text": expected}]
    assert translator(["kol nuto .", "kol nuto ."]) == [{"translation_text": expected}] * 2
    with pytest.raises(ValueError, match="takes strings"):
        translator(123)
