"""DLCL: initial weights, a hand-computed 2-layer stack, gradients, windows, caches, save/load, remote code."""

from __future__ import annotations

import pytest
import torch
from factories import PAD, VOCAB, padded_batch, tiny_model
from fresh_process import run_without_package
from transformers import AutoModelForSeq2SeqLM

from deep_nmt_hf import DLCLConfig, DLCLForConditionalGeneration
from deep_nmt_hf.folding import NotFoldableError, fold_to_stock
from deep_nmt_hf.layer_aggregation import LayerAggregation


def test_avg_init_makes_each_layer_read_the_mean_of_the_history() -> None:
    agg = LayerAggregation(3, 4, pre_norm=False)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight())
    history = [torch.randn(2, 5, 4) for _ in range(3)]
    with torch.no_grad():
        combined = agg.combine(history)  # row 2, post-norm: LN_2(mean of y_0..y_2)
    torch.testing.assert_close(combined, agg.layer_norms[1](torch.stack(history).mean(0)))
    expected = torch.tensor([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4])
    torch.testing.assert_close(agg.initial_weight(), expected)
    one = LayerAggregation(3, 4, pre_norm=True, init="one")
    assert torch.equal(one.initial_weight(), torch.tril(torch.ones(4, 4)))


def test_window_keeps_only_the_last_w_outputs() -> None:
    agg = LayerAggregation(4, 2, pre_norm=True, window=2)
    weights = agg.initial_weight()
    assert weights[4].tolist() == [0, 0, 0, 0.5, 0.5] and weights[1].tolist() == [0.5, 0.5, 0, 0, 0]
    with torch.no_grad():
        agg.weight.fill_(3.0)  # entries outside the window stay 0 whatever the parameter holds
    assert agg.weights()[4, :3].abs().sum() == 0


def test_hand_computed_two_layer_pre_norm_encoder() -> None:
    model = tiny_model(seed=2, layer_norm_position="pre", encoder_layer_aggregation="dlcl")
    encoder = model.model.encoder
    with torch.no_grad():
        encoder.aggregation.weight.copy_(torch.tensor([[1.0, 0, 0], [0.3, 0.7, 0], [0.2, -0.5, 1.3]]))
    ids, mask = padded_batch([5, 3])
    additive = torch.zeros(2, 1, 1, 5).masked_fill(
        mask[:, None, None, :] == 0, torch.finfo(torch.float32).min
    )
    y0 = encoder.embed(ids, None)
    y1 = encoder.layers[0](1.0 * y0, additive)[0]  # eq. 8, row 0: x_1 = W00 y_0 (y_0 not normalised)
    n1 = encoder.aggregation.layer_norms[0](y1)
    y2 = encoder.layers[1](0.3 * y0 + 0.7 * n1, additive)[0]
    n2 = encoder.aggregation.layer_norms[1](y2)
    expected = encoder.layer_norm(0.2 * y0 - 0.5 * n1 + 1.3 * n2)
    torch.testing.assert_close(encoder(input_ids=ids, attention_mask=mask).last_hidden_state, expected)


def test_hand_computed_two_layer_post_norm_encoder() -> None:
    model = tiny_model(seed=2, encoder_layer_aggregation="dlcl")
    encoder = model.model.encoder
    with torch.no_grad():
        encoder.aggregation.weight.copy_(torch.tensor([[1.0, 0, 0], [0.3, 0.7, 0], [0.2, -0.5, 1.3]]))
    ids, _ = padded_batch([4])
    y0 = encoder.embed(ids, None)
    y1 = encoder.layers[0](y0, None)[0]
    y2 = encoder.layers[1](encoder.aggregation.layer_norms[0](0.3 * y0 + 0.7 * y1), None)[0]  # eq. 9
    expected = encoder.aggregation.layer_norms[1](0.2 * y0 - 0.5 * y1 + 1.3 * y2)
    torch.testing.assert_close(encoder(input_ids=ids).last_hidden_state, expected)


def test_gradient_reaches_the_combination_weights() -> None:
    model = tiny_model(
        layer_norm_position="pre", encoder_layer_aggregation="dlcl", decoder_layer_aggregation="dlcl"
    )
    ids, mask = padded_batch([6, 4])
    model.train()
    model(input_ids=ids, attention_mask=mask, labels=torch.randint(2, VOCAB - 1, (2, 5))).loss.backward()
    for stack in (model.model.encoder, model.model.decoder):
        grad = stack.aggregation.weight.grad
        assert grad is not None and grad.tril().abs().sum() > 0
        assert grad.triu(1).abs().sum() == 0  # entries above the diagonal never matter


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("beams", [1, 4])
def test_cached_generation_equals_uncached(norm: str, beams: int) -> None:
    model = tiny_model(
        seed=5,
        layer_norm_position=norm,
        encoder_layer_aggregation="dlcl",
        decoder_layer_aggregation="dlcl",
        decoder_layers=3,
        dlcl_window=2,
    )
    with torch.no_grad():  # move W away from its init so the test sees a real combination
        for stack in (model.model.encoder, model.model.decoder):
            stack.aggregation.weight.add_(0.3 * torch.randn_like(stack.aggregation.weight))
    ids, mask = padded_batch([7, 4, 2], seed=6)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=12)
    assert torch.equal(model.generate(**kwargs, use_cache=True), model.generate(**kwargs, use_cache=False))


def test_save_load_keeps_the_weights_and_remote_code_loads(tmp_path) -> None:
    config = DLCLConfig.from_preset("tiny", vocab_size=VOCAB, max_position_embeddings=64, dlcl_window=3)
    model = DLCLForConditionalGeneration(config).eval()
    with torch.no_grad():
        model.model.encoder.aggregation.weight.add_(torch.randn_like(model.model.encoder.aggregation.weight))
    model.save_pretrained(tmp_path / "model")
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "model")
    assert type(loaded) is DLCLForConditionalGeneration and loaded.config.dlcl_window == 3
    assert torch.equal(loaded.model.encoder.aggregation.weight, model.model.encoder.aggregation.weight)
    ids, mask = padded_batch([5, 3])
    torch.save({"input_ids": ids, "attention_mask": mask}, tmp_path / "batch.pt")
    result = run_without_package(
        """
import json, torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
batch = torch.load("batch.pt")
with torch.no_grad():
    logits = model(**batch, decoder_input_ids=torch.full((2, 3), model.config.pad_token_id)).logits
print(json.dumps({"class": type(model).__name__, "logits": logits.tolist()}))
""",
        tmp_path,
    )
    assert result["class"] == "DLCLForConditionalGeneration"
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.full((2, 3), PAD)).logits
    torch.testing.assert_close(torch.tensor(result["logits"]), expected, atol=1e-5, rtol=1e-5)


def test_dlcl_does_not_fold_but_plain_pre_norm_does() -> None:
    with pytest.raises(NotFoldableError, match="encoder_layer_aggregation='dlcl'"):
        fold_to_stock(tiny_model(layer_norm_position="pre", encoder_layer_aggregation="dlcl"))
    assert fold_to_stock(tiny_model(layer_norm_position="pre", encoder_layers=4))[1].beam_outputs_identical


def test_bad_dlcl_fields_are_rejected() -> None:
    with pytest.raises(ValueError, match="dlcl_window=0"):
        DLCLConfig(dlcl_window=0)
    with pytest.raises(ValueError, match="dlcl_init='zeros' is not a valid choice"):
        DLCLConfig(dlcl_init="zeros")


def test_dlcl_heatmap_is_drawn_and_needs_dlcl(tmp_path) -> None:
    from deep_nmt_hf.plots import dlcl_weights, plot_dlcl_weights

    model = tiny_model(
        layer_norm_position="pre", encoder_layer_aggregation="dlcl", decoder_layer_aggregation="dlcl"
    )
    weights = dlcl_weights(model)
    assert set(weights) == {"encoder", "decoder"} and weights["encoder"].shape == (3, 3)
    path = plot_dlcl_weights(model, tmp_path / "dlcl.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="no DLCL layer aggregation"):
        dlcl_weights(tiny_model())
