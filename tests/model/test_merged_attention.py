"""Merged attention (MAtt): the average equals an explicit cumulative mean, caches are exact, parameters match."""

from __future__ import annotations

import hashlib

import pytest
import torch
from factories import PAD, VOCAB, padded_batch, stepwise_logits, tiny_model, variant_model
from fresh_process import generate_with_remote_code
from transformers import AutoModelForSeq2SeqLM

from deep_nmt_hf import VARIANTS, DSInitMAttConfig, DSInitMAttForConditionalGeneration
from deep_nmt_hf.model.caches import RunningAverageLayer
from deep_nmt_hf.model.merged_attention import MergedAttention, cumulative_average
from deep_nmt_hf.model.modeling_deep_nmt import (
    DecoderLayerBase,
    DeepNMTDecoderLayer,
    DeepNMTEncoderLayer,
    MergedAttentionDecoderLayer,
)
from deep_nmt_hf.model.residual import AdminOmega
from deep_nmt_hf.model.transformers_compat import cache_of
from deep_nmt_hf.publish.folding import NotFoldableError, fold_to_stock
from deep_nmt_hf.training.sharding import shard_units


def test_cumulative_average_equals_explicit_mean_with_padding() -> None:
    values = torch.randn(2, 5, 3)
    padding = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1]])  # row 1 is left-padded
    averages, sums, counts = cumulative_average(values, padding)
    for row in range(2):
        for t in range(5):
            real = [k for k in range(t + 1) if padding[row, k]]
            expected = values[row, real].mean(0) if real else torch.zeros(3)
            torch.testing.assert_close(averages[row, t], expected)
    torch.testing.assert_close(sums[1, -1], values[1, 2:].sum(0))
    assert counts[:, :, 0].tolist() == [[1.0, 2.0, 3.0, 4.0, 5.0], [0.0, 0.0, 1.0, 2.0, 3.0]]


def test_step_by_step_average_with_prefix_sums_equals_the_full_pass_and_crops_exactly() -> None:
    values = torch.randn(3, 6, 4)
    full, _, _ = cumulative_average(values, None)
    slot = RunningAverageLayer()
    for t in range(6):
        step, sums, counts = cumulative_average(values[:, t : t + 1], None, slot.previous())
        slot.append(sums, counts, heads=2)
        torch.testing.assert_close(step[:, 0], full[:, t])
    # the K/V layout (batch, heads, t, head_dim): sums split into 2 heads of 2, counts broadcast
    assert slot.get_seq_length() == 6 and slot.keys.shape == slot.values.shape == (3, 2, 6, 2)
    torch.testing.assert_close(slot.keys.transpose(1, 2).flatten(2), values.cumsum(1))
    assert torch.equal(slot.values, torch.arange(1.0, 7.0)[None, None, :, None].expand(3, 2, 6, 2))
    slot.crop(-2)  # drop two positions (rejected draft tokens): the average continues from position 4
    step, _, _ = cumulative_average(values[:, 4:5], None, slot.previous())
    torch.testing.assert_close(step[:, 0], full[:, 4])


def test_matt_sublayer_is_saan_plus_cross_attention_with_shared_projections() -> None:
    model = tiny_model(decoder_attention="merged")
    matt = model.model.decoder.layers[0].merged_attn.fn
    assert isinstance(matt, MergedAttention)
    attention = matt.cross_attention
    states, memory = torch.randn(2, 4, 32), torch.randn(2, 6, 32)
    out, _ = matt(states, key_value_states=memory)
    saan = attention.out_proj(cumulative_average(attention.v_proj(states), None)[0])  # eq. 16
    cross = attention(states, key_value_states=memory)[0]
    torch.testing.assert_close(
        out, saan + cross - attention.out_proj.bias, atol=1e-6, rtol=1e-5
    )  # W_o bias once


def test_parameter_count_identity_at_the_paper_base_shape() -> None:
    shape = dict(vocab_size=1000, encoder_layers=6, decoder_layers=6, max_position_embeddings=128)
    with torch.device("meta"):
        matt = DSInitMAttForConditionalGeneration(DSInitMAttConfig(**shape))
        selfattn = DSInitMAttForConditionalGeneration(DSInitMAttConfig(**shape, decoder_attention="self"))
    d = 512
    count = lambda m: sum(p.numel() for p in m.parameters())  # noqa: E731
    assert count(selfattn) - count(matt) == 6 * (4 * d * d + 4 * d + 2 * d)
    assert len(matt.model.decoder.layers[0].sublayers()) == 2


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("beams", [1, 4])
def test_cached_generation_equals_uncached(norm: str, beams: int) -> None:
    model = tiny_model(seed=3, decoder_attention="merged", layer_norm_position=norm)
    ids, mask = padded_batch([8, 5, 2], seed=4)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=14)
    assert torch.equal(model.generate(**kwargs, use_cache=True), model.generate(**kwargs, use_cache=False))


@pytest.mark.parametrize("beams", [1, 3])
def test_generated_cache_has_the_key_value_layout(beams: int) -> None:
    """After generate (greedy, beam 3), every MAtt slot holds keys and values of shape (batch · beams, heads,
    steps, head_dim), as Transformers expects of each layer: keys the prefix sums of S W_v split into heads (their
    last entry is what `previous()` continues from), values the prefix counts (1, 2, …, steps: no target padding)."""
    model = tiny_model(seed=3, decoder_attention="merged")
    ids, mask = padded_batch([8, 5], seed=4)
    out = model.generate(
        input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=6, return_dict_in_generate=True
    )
    cache = cache_of(out)
    steps = cache.get_seq_length()
    assert steps == out.sequences.shape[1] - 1
    counts = torch.arange(1.0, steps + 1)[None, None, :, None].expand(2 * beams, 4, steps, 8)
    for slot in cache.self_attention_cache.layers:
        assert isinstance(slot, RunningAverageLayer)
        assert slot.keys.shape == slot.values.shape == (2 * beams, 4, steps, 8)
        assert torch.equal(slot.values, counts)
        sums, count = slot.previous()
        assert torch.equal(sums, slot.keys[:, :, -1].reshape(2 * beams, 32))
        assert torch.equal(count, torch.full((2 * beams, 1), float(steps)))


def test_incremental_logits_equal_the_full_pass_and_the_cache_holds_running_sums() -> None:
    model = tiny_model(seed=5, decoder_attention="merged", decoder_layers=3)
    ids, mask = padded_batch([6, 4])
    target = torch.cat([torch.full((2, 1), PAD), torch.randint(2, VOCAB - 1, (2, 7))], dim=1)
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
    steps, cache = stepwise_logits(model, ids, mask, target)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)
    slots = cache.self_attention_cache.layers
    assert len(slots) == 3 and all(isinstance(s, RunningAverageLayer) for s in slots)
    length = target.shape[1]
    assert all(
        s.keys.shape == s.values.shape == (2, 4, length, 8) for s in slots
    )  # (batch, heads, t, head_dim)
    assert all(torch.equal(s.values[:, :, -1], torch.full((2, 4, 8), float(length))) for s in slots)
    assert cache.get_seq_length() == target.shape[1]


def test_combines_with_admin_and_does_not_fold() -> None:
    model = tiny_model(decoder_attention="merged", residual_scaling="admin")
    decoder = model.model.decoder.sublayers()
    assert len(decoder) == 4 and decoder[0].residual_scale is None
    assert all(isinstance(s.residual_scale, AdminOmega) for s in decoder[1:])
    with pytest.raises(NotFoldableError, match="decoder_attention='merged'"):
        fold_to_stock(model)


@pytest.mark.slow
def test_trust_remote_code_load_of_a_matt_model(tmp_path) -> None:
    model = DSInitMAttForConditionalGeneration(
        DSInitMAttConfig.from_preset("tiny", vocab_size=VOCAB, max_position_embeddings=64)
    ).eval()
    model.save_pretrained(tmp_path / "model")
    assert (
        type(AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "model")) is DSInitMAttForConditionalGeneration
    )
    ids, mask = padded_batch([5, 3])
    generate = dict(num_beams=4, max_new_tokens=10)
    name, out = generate_with_remote_code(
        model, {"input_ids": ids, "attention_mask": mask}, tmp_path, **generate
    )
    assert name == "DSInitMAttForConditionalGeneration"
    assert out == model.generate(input_ids=ids, attention_mask=mask, **generate).tolist()


@pytest.mark.parametrize("attention", ["self", "merged"])
def test_the_decoder_builds_the_layer_class_of_its_attention(attention: str) -> None:
    """One decoder layer class per `decoder_attention`, picked when the decoder builds its layers (issue #51); the
    model's `_no_split_modules` (FSDP units, device_map) name exactly the layer classes it builds."""
    expected = {"self": DeepNMTDecoderLayer, "merged": MergedAttentionDecoderLayer}[attention]
    model = tiny_model(decoder_attention=attention)
    decoder = model.model.decoder
    assert decoder.layer_class is expected
    assert all(type(layer) is expected and isinstance(layer, DecoderLayerBase) for layer in decoder.layers)
    assert not hasattr(decoder.layers[0], "self_attn" if attention == "merged" else "merged_attn")
    assert set(model._no_split_modules) == {"DeepNMTEncoderLayer", expected.__name__}
    assert {type(unit) for unit in shard_units(model)} == {DeepNMTEncoderLayer, expected}


# per variant: the number of state-dict keys of its tiny model (factories.variant_model) and the first 16 hex digits
# of the sha256 of those keys in state-dict order, as checkpoints saved before the decoder layer became one class
# per attention kind (issue #51) hold them
STATE_DICT_KEYS = {
    "admin": (96, "52d330c437d74ad5"),
    "base": (88, "a3d35ddf3abecadf"),
    "deep_decoder": (82, "7f69dbbd3b754d23"),
    "deepnorm": (88, "a3d35ddf3abecadf"),
    "dlcl": (102, "526cdef1e54b0113"),
    "dsinit_matt": (68, "3e3273e2ffabac8d"),
    "shared_layers": (92, "8ab668872db27f1e"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_state_dict_keys_and_their_order_are_those_of_earlier_checkpoints(variant: str) -> None:
    """The keys (and their order: an optimizer state saved with a checkpoint follows it) stay those of the
    checkpoints saved before: every one of them loads unchanged."""
    keys = list(variant_model(variant).state_dict())
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]
    assert (len(keys), digest) == STATE_DICT_KEYS[variant], "\n".join(keys)


def test_a_matt_layer_keeps_the_keys_of_its_checkpoints() -> None:
    """The MAtt sublayer shares every projection with its cross-attention (`merged_attn.fn.cross_attention.*`)."""
    prefix = "model.decoder.layers.1."
    keys = [k.removeprefix(prefix) for k in variant_model("dsinit_matt").state_dict() if k.startswith(prefix)]
    projections = [f"{m}.{p}" for m in ("q_proj", "k_proj", "v_proj", "out_proj") for p in ("weight", "bias")]
    expected = [f"merged_attn.fn.cross_attention.{k}" for k in projections]
    expected += ["merged_attn.layer_norm.weight", "merged_attn.layer_norm.bias"]
    expected += [f"ffn.fn.{m}.{p}" for m in ("fc1", "fc2") for p in ("weight", "bias")]
    assert keys == expected + ["ffn.layer_norm.weight", "ffn.layer_norm.bias"]
