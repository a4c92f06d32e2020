"""Untied embeddings (share_encoder_decoder_embeddings, tie_word_embeddings): save, load, fold or refuse to."""

from __future__ import annotations

import pytest
import torch
from factories import padded_batch, tiny_model
from transformers import AutoModelForSeq2SeqLM, MarianMTModel, PegasusForConditionalGeneration

from deep_nmt_hf.publish.folding import NotFoldableError, fold_to_stock


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.data_ptr() == b.data_ptr()


def logits(model, seed: int = 0) -> torch.Tensor:
    ids, mask = padded_batch([6, 4], seed=seed)
    return model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits


@pytest.mark.parametrize(("share", "tie"), [(False, True), (True, False), (False, False)])
def test_untied_save_load_and_fold_into_marian(tmp_path, share: bool, tie: bool) -> None:
    model = tiny_model(seed=1, share_encoder_decoder_embeddings=share, tie_word_embeddings=tie)
    source, head = model.model.shared.weight, model.lm_head.weight
    target = model.model.decoder.embed_tokens.weight
    assert same(model.model.encoder.embed_tokens.weight, source)
    assert same(target, source) is share
    assert same(head, target) is tie
    assert not torch.equal(head, source)  # drawn separately unless tied
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert loaded.config.share_encoder_decoder_embeddings is share
    assert same(loaded.lm_head.weight, loaded.model.decoder.embed_tokens.weight) is tie
    assert same(loaded.model.decoder.embed_tokens.weight, loaded.model.shared.weight) is share
    torch.testing.assert_close(logits(loaded), logits(model), rtol=0, atol=0)
    stock, report = fold_to_stock(model)
    assert isinstance(stock, MarianMTModel)
    assert stock.config.share_encoder_decoder_embeddings is share
    assert report.max_abs_logit_diff < 1e-4 and report.beam_outputs_identical


def test_untied_output_projection_folds_into_pegasus() -> None:
    model = tiny_model(seed=2, layer_norm_position="pre", tie_word_embeddings=False)
    stock, report = fold_to_stock(model)
    assert isinstance(stock, PegasusForConditionalGeneration)
    assert report.max_abs_logit_diff < 1e-4


def test_separate_target_embedding_with_pre_ln_says_why_it_cannot_fold() -> None:
    model = tiny_model(layer_norm_position="pre", share_encoder_decoder_embeddings=False)
    with pytest.raises(
        NotFoldableError, match="share_encoder_decoder_embeddings=False with layer_norm_position='pre'"
    ):
        fold_to_stock(model)


@pytest.mark.parametrize(("share", "tie"), [(False, True), (False, False), (True, True)])
def test_resize_token_embeddings_resizes_every_embedding_and_keeps_the_ties(share: bool, tie: bool) -> None:
    """`resize_token_embeddings` grows the shared, the decoder's own target embedding and the output projection
    together (they all index the one vocabulary), keeps the ties, leaves the old rows and translates new ids."""
    model = tiny_model(seed=4, share_encoder_decoder_embeddings=share, tie_word_embeddings=tie)
    before = logits(model)
    old = model.config.vocab_size
    model.resize_token_embeddings(old + 5)
    base = model.model
    embeddings = [base.shared, base.decoder.embed_tokens, base.encoder.embed_tokens]
    assert {e.num_embeddings for e in embeddings} == {old + 5} == {model.lm_head.out_features}
    assert model.config.vocab_size == old + 5 and base.decoder.embed_tokens is (
        base.decoder_embed_tokens or base.shared
    )
    assert same(model.lm_head.weight, base.decoder.embed_tokens.weight) == tie
    torch.testing.assert_close(logits(model)[..., :old], before, atol=1e-5, rtol=1e-5)
    ids = torch.tensor([[old + 4, 3, 0]])
    assert model(input_ids=ids, decoder_input_ids=ids).logits.shape == (1, 3, old + 5)
