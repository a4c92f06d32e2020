"""Recurrent shared layers: application order, re-injection (eq. 7), parameters, unroll, gradients, caches."""

from __future__ import annotations

import pytest
import torch
from factories import PAD, VOCAB, padded_batch, tiny_model
from transformers import AutoModelForSeq2SeqLM

from deep_nmt_hf import SharedLayersConfig, SharedLayersForConditionalGeneration
from deep_nmt_hf.model.layer_sharing import application_order, repeat_starts, unroll
from deep_nmt_hf.model.transformers_compat import cache_of
from deep_nmt_hf.publish.folding import NotFoldableError, fold_to_stock

SHARED = dict(encoder_layer_repeats=3, decoder_layer_repeats=2)


def test_cycle_order_by_hand() -> None:
    assert application_order(3, 2, "cycle") == [0, 1, 2, 0, 1, 2]
    assert repeat_starts(3, 2, "cycle") == [3]
    assert application_order(2, 3, "cycle") == [0, 1, 0, 1, 0, 1] and repeat_starts(2, 3, "cycle") == [2, 4]


def test_zigzag_order_is_the_closed_chain_of_figure_2() -> None:
    assert application_order(4, 2, "zigzag") == [0, 1, 2, 3, 2, 1, 0]  # the paper's N = 4, T = 2 example
    assert application_order(4, 3, "zigzag") == [0, 1, 2, 3, 2, 1, 0, 1, 2, 3]
    assert application_order(2, 4, "zigzag") == [0, 1, 0, 1, 0]
    for n, t in [(3, 1), (3, 4), (5, 3)]:
        walk = application_order(n, t, "zigzag")
        assert len(walk) == n + (t - 1) * (n - 1)
        assert all(abs(a - b) == 1 for a, b in zip(walk, walk[1:], strict=False))  # always a neighbour
    assert repeat_starts(4, 3, "zigzag") == [4, 7]


def test_effective_depth_is_derived() -> None:
    config = SharedLayersConfig.from_preset("tiny", encoder_layer_order="zigzag")
    assert config.encoder_depth == 3 + 2 * 2 and config.decoder_depth == 4
    assert "encoder_depth" not in config.to_dict()


def test_reinjection_follows_eq_7_by_hand() -> None:
    for reinject in (False, True):
        model = tiny_model(
            seed=3,
            layer_norm_position="pre",
            encoder_layers=2,
            encoder_layer_repeats=2,
            encoder_reinject_input=reinject,
        )
        encoder = model.model.encoder
        ids, _ = padded_batch([5])
        x = encoder.embed(ids, None)
        b1 = encoder.layers[1](encoder.layers[0](x, None)[0], None)[0]  # first block: B_0 = x
        b2_in = b1 + x if reinject else b1  # B_1^in = B_0^out + x
        b2 = encoder.layers[1](encoder.layers[0](b2_in, None)[0], None)[0]
        torch.testing.assert_close(encoder(input_ids=ids).last_hidden_state, encoder.layer_norm(b2))


def test_parameter_count_depends_only_on_the_unique_layers() -> None:
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    base = count(tiny_model(encoder_layers=3, decoder_layers=2))
    for repeats in (2, 5):
        for order in ("cycle", "zigzag"):
            model = tiny_model(
                encoder_layers=3,
                decoder_layers=2,
                encoder_layer_repeats=repeats,
                decoder_layer_repeats=repeats,
                encoder_layer_order=order,
                decoder_layer_order=order,
            )
            assert count(model) == base


@pytest.mark.parametrize("order", ["cycle", "zigzag"])
def test_unroll_gives_identical_logits_and_folds_without_reinjection(order: str) -> None:
    model = tiny_model(
        seed=4,
        layer_norm_position="pre",
        encoder_layer_order=order,
        decoder_layer_order=order,
        encoder_reinject_input=True,
        **SHARED,
    )
    unrolled = unroll(model)
    assert len(unrolled.model.encoder.layers) == model.config.encoder_depth
    assert not unrolled.config.encoder_share_layers
    ids, mask = padded_batch([6, 3])
    dec = torch.full((2, 4), PAD)
    torch.testing.assert_close(
        unrolled(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits,
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits,
        atol=0,
        rtol=0,
    )
    with pytest.raises(NotFoldableError, match="encoder_reinject_input=True"):
        fold_to_stock(model)
    plain = tiny_model(seed=4, layer_norm_position="pre", encoder_layer_order=order, **SHARED)
    stock, report = fold_to_stock(plain)  # unrolled on the way
    assert report.beam_outputs_identical and stock.config.encoder_layers == plain.config.encoder_depth


def test_gradients_of_a_shared_layer_accumulate_over_every_application() -> None:
    model = tiny_model(seed=5, encoder_layers=2, encoder_layer_repeats=3, encoder_reinject_input=True).train()
    unrolled = unroll(model).train()
    ids, mask = padded_batch([6, 4])
    labels = torch.randint(2, VOCAB - 1, (2, 5))
    for m in (model, unrolled):
        m(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
    name = "self_attn.fn.q_proj.weight"
    shared = dict(model.model.encoder.layers[1].named_parameters())[name].grad
    copies = [dict(unrolled.model.encoder.layers[a].named_parameters())[name].grad for a in (1, 3, 5)]
    torch.testing.assert_close(shared, sum(copies), atol=1e-6, rtol=1e-5)
    assert all(c.abs().sum() > 0 for c in copies)


@pytest.mark.parametrize("order", ["cycle", "zigzag"])
@pytest.mark.parametrize("beams", [1, 4])
def test_cached_generation_equals_uncached_with_one_cache_entry_per_application(
    order: str, beams: int
) -> None:
    model = tiny_model(
        seed=6,
        decoder_layers=2,
        decoder_layer_repeats=3,
        decoder_layer_order=order,
        decoder_reinject_input=True,
    )
    ids, mask = padded_batch([7, 4, 2], seed=7)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=10)
    assert torch.equal(model.generate(**kwargs, use_cache=True), model.generate(**kwargs, use_cache=False))
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.full((3, 2), PAD), use_cache=True)
    depth = model.config.decoder_depth
    assert len(cache_of(out).self_attention_cache.layers) == depth > model.config.decoder_layers


def test_save_load_round_trip(tmp_path) -> None:
    config = SharedLayersConfig.from_preset("tiny", vocab_size=VOCAB, max_position_embeddings=64)
    model = SharedLayersForConditionalGeneration(config).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is SharedLayersForConditionalGeneration and loaded.config.encoder_depth == 9
    ids, mask = padded_batch([5, 2])
    dec = torch.full((2, 3), PAD)
    assert torch.equal(
        loaded(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits,
        model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits,
    )


def test_bad_sharing_settings_are_rejected() -> None:
    with pytest.raises(ValueError, match="encoder_layer_order='zigzag' needs encoder_layers ≥ 2"):
        SharedLayersConfig(encoder_layers=1, encoder_layer_order="zigzag")
    with pytest.raises(ValueError, match="residual_scaling='admin' with shared encoder layers"):
        SharedLayersConfig(layer_norm_position="post", residual_scaling="admin")
    with pytest.raises(ValueError, match="decoder_layer_repeats=0"):
        SharedLayersConfig(decoder_layer_repeats=0)
    with pytest.raises(ValueError, match="decoder_layer_order='spiral' is not a valid choice"):
        SharedLayersConfig(decoder_layer_order="spiral")
