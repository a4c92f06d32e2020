"""Initialisation methods: xavier, DS-Init bounds per layer (sample statistics), DeepNorm β."""

from __future__ import annotations

import math

import pytest
import torch
from factories import tiny_config

from deep_nmt_hf import DeepNMTForConditionalGeneration


def uniform_bound_estimate(weight: torch.Tensor) -> float:
    """For U(-b, b): std = b / sqrt(3)."""
    return weight.std().item() * math.sqrt(3)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_ds_init_bound_shrinks_with_layer_number(alpha: float) -> None:
    torch.manual_seed(0)
    config = tiny_config(
        init_method="ds_init",
        ds_init_alpha=alpha,
        d_model=128,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        encoder_layers=4,
        decoder_layers=3,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
    )
    model = DeepNMTForConditionalGeneration(config)
    for side, stack in (("encoder", model.model.encoder), ("decoder", model.model.decoder)):
        for index, layer in enumerate(stack.layers):
            l = index + 1  # counted from 1 separately in encoder and decoder  # noqa: E741
            for name, module in layer.named_modules():
                if not isinstance(module, torch.nn.Linear):
                    continue
                fan_out, fan_in = module.weight.shape
                bound = math.sqrt(6 / (fan_in + fan_out)) * alpha / math.sqrt(l)
                assert module.weight.abs().max().item() <= bound + 1e-7, (side, l, name)
                assert uniform_bound_estimate(module.weight) == pytest.approx(bound, rel=0.05), (
                    side,
                    l,
                    name,
                )
                assert torch.all(module.bias == 0)
    # outside the layers nothing changes: LayerNorms are (1, 0), the output projection is plain xavier
    ln = model.model.encoder.layers[2].ffn.layer_norm
    assert torch.all(ln.weight == 1) and torch.all(ln.bias == 0)


def test_xavier_default_bounds_do_not_depend_on_depth() -> None:
    torch.manual_seed(0)
    model = DeepNMTForConditionalGeneration(tiny_config(d_model=128, encoder_ffn_dim=256, encoder_layers=4))
    bounds = [uniform_bound_estimate(layer.ffn.fn.fc1.weight) for layer in model.model.encoder.layers]
    assert bounds == pytest.approx([math.sqrt(6 / (128 + 256))] * 4, rel=0.05)


def test_xavier_is_fairseqs_recipe_per_matrix() -> None:
    """fairseq (v0.6-v0.9, what ADMIN/DLCL/shared layers trained with): q/k/v Glorot with gain 1/√2 (= Glorot on
    the fused 3d×d in_proj), out_proj and FFN plain Glorot, every bias zero, self- and cross-attention alike."""
    torch.manual_seed(0)
    d, ffn = 128, 512
    config = tiny_config(
        d_model=d,
        encoder_ffn_dim=ffn,
        decoder_ffn_dim=ffn,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
    )
    model = DeepNMTForConditionalGeneration(config)
    qkv_bound = math.sqrt(6 / (2 * d)) / math.sqrt(2)
    assert qkv_bound == pytest.approx(math.sqrt(6 / (d + 3 * d)))  # the fused in_proj's Glorot bound
    expected = {
        "q_proj": qkv_bound,
        "k_proj": qkv_bound,
        "v_proj": qkv_bound,
        "out_proj": math.sqrt(6 / (2 * d)),
        "fc1": math.sqrt(6 / (d + ffn)),
        "fc2": math.sqrt(6 / (d + ffn)),
    }
    seen = set()
    for stack in (model.model.encoder, model.model.decoder):
        for layer in stack.layers:
            for name, module in layer.named_modules():
                if not isinstance(module, torch.nn.Linear):
                    continue
                short = name.rsplit(".", 1)[-1]
                bound = expected[short]
                assert module.weight.abs().max().item() <= bound + 1e-7, name
                assert uniform_bound_estimate(module.weight) == pytest.approx(bound, rel=0.05), name
                assert module.bias is None or torch.all(module.bias == 0), name
                seen.add(name.split(".")[0] + "." + short)
    assert {"self_attn.q_proj", "encoder_attn.v_proj", "ffn.fc2"} <= seen


def test_untied_output_projection_is_normal_like_fairseq() -> None:
    torch.manual_seed(0)
    model = DeepNMTForConditionalGeneration(
        tiny_config(d_model=64, vocab_size=4000, encoder_attention_heads=4, tie_word_embeddings=False)
    )
    head = model.get_output_embeddings().weight
    assert head.data_ptr() != model.get_input_embeddings().weight.data_ptr()
    assert head.mean().item() == pytest.approx(0.0, abs=0.01)
    assert head.std().item() == pytest.approx(64**-0.5, rel=0.05)


def test_embeddings_are_normal_with_zero_pad_row() -> None:
    torch.manual_seed(0)
    config = tiny_config(d_model=64, vocab_size=4000, encoder_attention_heads=4)
    model = DeepNMTForConditionalGeneration(config)
    weight = model.get_input_embeddings().weight
    assert torch.all(weight[config.pad_token_id] == 0)
    assert weight.std().item() == pytest.approx(64**-0.5, rel=0.05)


def test_normal_init_draws_linears_and_embeddings_from_init_std() -> None:
    """init_method='normal' (Transformers' Marian/BART recipe): N(0, init_std) weights, zero biases and pad row."""
    torch.manual_seed(0)
    config = tiny_config(
        init_method="normal", init_std=0.05, d_model=128, encoder_ffn_dim=256, decoder_ffn_dim=256
    )
    model = DeepNMTForConditionalGeneration(config)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) > 10
    for module in linears:
        assert module.weight.std().item() == pytest.approx(0.05, rel=0.1)
        assert module.bias is None or torch.all(module.bias == 0)
    embedding = model.get_input_embeddings().weight
    assert embedding[config.pad_token_id].abs().max().item() == 0
    rows = [i for i in range(embedding.shape[0]) if i != config.pad_token_id]
    assert embedding[rows].std().item() == pytest.approx(0.05, rel=0.05)
    # the xavier default is far from this at the same shape
    xavier = DeepNMTForConditionalGeneration(
        tiny_config(d_model=128, encoder_ffn_dim=256, decoder_ffn_dim=256)
    )
    assert xavier.model.encoder.layers[0].ffn.fn.fc1.weight.std().item() > 0.07


@pytest.mark.parametrize("bad", [0, -0.02, "0.02", None])
def test_init_std_must_be_positive(bad) -> None:
    with pytest.raises(ValueError, match="init_std="):
        tiny_config(init_method="normal", init_std=bad)
