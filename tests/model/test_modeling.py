"""The core encoder-decoder: registration, equivalences (cache, attention backends, padding, checkpointing)."""

from __future__ import annotations

import copy

import pytest
import torch
from factories import EOS, PAD, VOCAB, padded_batch, stepwise_logits, tiny_config, tiny_model
from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM, MarianConfig
from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding

import deep_nmt_hf
from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration, DeepNMTModel
from deep_nmt_hf.model.modeling_deep_nmt import SinusoidalPositions, sinusoidal_table

NORMS = ["post", "pre"]


def test_auto_classes_build_our_model_types() -> None:
    fields = {k: v for k, v in tiny_config().to_dict().items() if k != "model_type"}
    config = AutoConfig.for_model("deep_nmt", **fields)
    assert isinstance(config, DeepNMTConfig)
    assert type(AutoModelForSeq2SeqLM.from_config(config)) is DeepNMTForConditionalGeneration
    assert type(AutoModel.from_config(config)) is DeepNMTModel
    assert all(
        config_class.model_type.startswith("deep_nmt") for config_class, _, _ in deep_nmt_hf.MODEL_TYPES
    )


@pytest.mark.parametrize("dim", [32, 512])
def test_position_table_is_marians_exactly(dim: int) -> None:
    marian = MarianSinusoidalPositionalEmbedding(128, dim)
    assert torch.equal(sinusoidal_table(128, dim), marian.create_weight())


def test_position_overflow_names_the_limit() -> None:
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        SinusoidalPositions(8, 16)(9)


def test_one_shared_embedding_feeds_encoder_decoder_and_output() -> None:
    model = tiny_model()
    shared = model.get_input_embeddings()
    assert model.model.encoder.embed_tokens is shared and model.model.decoder.embed_tokens is shared
    assert model.lm_head.weight is shared.weight
    assert sum(p is shared.weight for p in model.parameters()) == 1  # saved once: test_embedding_tooling.py
    untied = tiny_model(tie_word_embeddings=False)
    assert untied.lm_head.weight is not untied.get_input_embeddings().weight


@pytest.mark.parametrize("norm", NORMS)
def test_pre_and_post_layer_norm_structure(norm: str) -> None:
    model = tiny_model(layer_norm_position=norm)
    has_final = model.model.encoder.layer_norm is not None and model.model.decoder.layer_norm is not None
    assert has_final == (norm == "pre")
    ids, mask = padded_batch([5, 3])
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.full((2, 1), PAD))
    assert out.logits.shape == (2, 1, VOCAB) and torch.isfinite(out.logits).all()
    if norm == "post":  # every post-LN encoder output row is LayerNorm-ed: mean 0, unit variance
        states = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
        assert torch.allclose(states.mean(-1), torch.zeros(2, 5), atol=1e-5)


def test_post_and_pre_ln_compute_different_functions() -> None:
    ids, mask = padded_batch([4])
    post = tiny_model(seed=3, layer_norm_position="post")
    pre = tiny_model(seed=3, layer_norm_position="pre")
    pre.load_state_dict(post.state_dict(), strict=False)  # same weights; pre adds final norms (fresh, 1/0)
    dec = torch.full((1, 1), PAD)
    a = post(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    b = pre(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    assert not torch.allclose(a, b, atol=1e-3)


@pytest.mark.parametrize("norm", NORMS)
def test_incremental_decoding_equals_full_pass(norm: str) -> None:
    model = tiny_model(layer_norm_position=norm)
    ids, mask = padded_batch([6, 4])
    target = torch.cat([torch.full((2, 1), PAD), torch.randint(2, VOCAB - 1, (2, 6))], dim=1)
    full = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target).logits
    steps, _ = stepwise_logits(model, ids, mask, target)
    torch.testing.assert_close(steps, full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("beams", [1, 4])
def test_cached_generation_equals_uncached(norm: str, beams: int) -> None:
    model = tiny_model(seed=1, layer_norm_position=norm)
    ids, mask = padded_batch([7, 5, 3], seed=2)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=12, do_sample=False)
    cached = model.generate(**kwargs, use_cache=True)
    uncached = model.generate(**kwargs, use_cache=False)
    assert torch.equal(cached, uncached)
    assert (cached[:, 0] == PAD).all()  # decoding starts from the pad id (Marian convention)


@pytest.mark.parametrize("norm", NORMS)
def test_eager_and_sdpa_agree(norm: str) -> None:
    eager = tiny_model(layer_norm_position=norm)
    sdpa = copy.deepcopy(eager)
    eager.set_attn_implementation("eager")
    sdpa.set_attn_implementation("sdpa")
    ids, mask = padded_batch([6, 2])
    dec = torch.cat([torch.full((2, 1), PAD), ids[:, :4]], dim=1)
    a = eager(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    b = sdpa(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert torch.equal(
        eager.generate(input_ids=ids, attention_mask=mask, num_beams=3, max_new_tokens=8),
        sdpa.generate(input_ids=ids, attention_mask=mask, num_beams=3, max_new_tokens=8),
    )


@pytest.mark.parametrize("norm", NORMS)
def test_padded_batch_equals_each_sentence_alone(norm: str) -> None:
    model = tiny_model(seed=4, layer_norm_position=norm)
    lengths = [8, 3, 5]
    ids, mask = padded_batch(lengths, seed=5)
    dec = torch.full((3, 1), PAD)
    batch_logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
    batch_out = model.generate(input_ids=ids, attention_mask=mask, num_beams=2, max_new_tokens=10)
    for row, length in enumerate(lengths):
        alone = ids[row : row + 1, :length]
        logits = model(input_ids=alone, decoder_input_ids=dec[:1]).logits
        torch.testing.assert_close(logits[0], batch_logits[row], atol=1e-5, rtol=1e-5)
        out = model.generate(input_ids=alone, num_beams=2, max_new_tokens=10)[0]
        expected = batch_out[row][: out.shape[0]]
        assert torch.equal(out, expected)
        assert (batch_out[row][out.shape[0] :] == PAD).all()


@pytest.mark.parametrize("norm", NORMS)
def test_gradient_checkpointing_gives_the_same_gradients(norm: str) -> None:
    model = tiny_model(seed=6, layer_norm_position=norm, dropout=0.1).train()
    checkpointed = copy.deepcopy(model)
    checkpointed.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    assert all(layer.gradient_checkpointing for layer in checkpointed.model.encoder.layers)
    ids, mask = padded_batch([6, 4])
    labels = torch.randint(2, VOCAB - 1, (2, 5))
    grads = []
    for m in (model, checkpointed):
        torch.manual_seed(11)  # the same dropout masks (checkpoint replays the RNG state)
        m(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        grads.append({n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name in grads[0]:
        torch.testing.assert_close(grads[0][name], grads[1][name], atol=1e-6, rtol=1e-5, msg=name)


def test_hidden_states_and_attentions_are_returned() -> None:
    model = tiny_model(encoder_layers=3, decoder_layers=2)
    ids, mask = padded_batch([5, 4])
    dec = torch.full((2, 3), PAD)
    out = model(
        input_ids=ids,
        attention_mask=mask,
        decoder_input_ids=dec,
        output_hidden_states=True,
        output_attentions=True,
    )
    assert len(out.encoder_hidden_states) == 4 and len(out.decoder_hidden_states) == 3
    assert torch.equal(out.encoder_hidden_states[-1], out.encoder_last_hidden_state)
    assert len(out.encoder_attentions) == 3 and out.encoder_attentions[0].shape == (2, 4, 5, 5)
    assert out.decoder_attentions[0].shape == (2, 4, 3, 3) and out.cross_attentions[1].shape == (2, 4, 3, 5)
    # causal: no weight on future target positions; padding: no weight on padded source keys
    assert out.decoder_attentions[0][..., 0, 1:].abs().max() == 0
    assert out.cross_attentions[0][1, :, :, 4].abs().max() == 0
    as_tuple = model(input_ids=ids, attention_mask=mask, decoder_input_ids=dec, return_dict=False)
    torch.testing.assert_close(as_tuple[0], out.logits, atol=1e-5, rtol=1e-5)  # sdpa here, eager above


def test_resize_token_embeddings_keeps_sharing_and_old_rows() -> None:
    model = tiny_model()
    old = model.get_input_embeddings().weight.detach().clone()
    model.resize_token_embeddings(VOCAB + 8)
    emb = model.get_input_embeddings()
    assert emb.weight.shape == (VOCAB + 8, 32) and model.config.vocab_size == VOCAB + 8
    assert model.model.encoder.embed_tokens is emb and model.model.decoder.embed_tokens is emb
    assert model.lm_head.weight is emb.weight
    assert torch.equal(emb.weight[:VOCAB], old)
    ids, mask = padded_batch([4])
    assert model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.full((1, 1), PAD)).logits.shape[
        -1
    ] == (VOCAB + 8)


def test_loss_ignores_minus_100_and_uses_config_label_smoothing() -> None:
    ids, mask = padded_batch([5, 4])
    labels = torch.tensor([[5, 6, EOS], [7, EOS, -100]])
    plain = tiny_model(seed=2)
    smooth = tiny_model(seed=2, label_smoothing=0.1)
    out = plain(input_ids=ids, attention_mask=mask, labels=labels)
    manual = torch.nn.functional.cross_entropy(
        out.logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100
    )
    torch.testing.assert_close(out.loss, manual)
    smoothed = smooth(input_ids=ids, attention_mask=mask, labels=labels).loss
    expected = torch.nn.functional.cross_entropy(
        out.logits.reshape(-1, VOCAB), labels.reshape(-1), ignore_index=-100, label_smoothing=0.1
    )
    torch.testing.assert_close(smoothed, expected)
    assert not torch.isclose(smoothed, out.loss)


def test_bf16_forward_and_generate() -> None:
    model = tiny_model().to(torch.bfloat16)
    ids, mask = padded_batch([6, 3])
    out = model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.full((2, 2), PAD))
    assert out.logits.dtype == torch.bfloat16 and torch.isfinite(out.logits.float()).all()
    assert model.generate(input_ids=ids, attention_mask=mask, num_beams=2, max_new_tokens=5).shape[0] == 2


def test_labels_shift_right_into_decoder_inputs() -> None:
    model = tiny_model()
    labels = torch.tensor([[5, 6, EOS], [7, EOS, -100]])
    assert model.prepare_decoder_input_ids_from_labels(labels).tolist() == [[PAD, 5, 6], [PAD, 7, EOS]]


def test_marian_layout_defaults() -> None:
    config = DeepNMTConfig(vocab_size=100)
    assert (config.pad_token_id, config.decoder_start_token_id, config.eos_token_id) == (99, 99, 0)
    assert MarianConfig().decoder_start_token_id == MarianConfig().pad_token_id  # the convention we follow


@pytest.mark.parametrize("variant", ["dlcl", "admin"])
def test_a_bf16_load_keeps_every_parameter_and_buffer_in_bf16(variant: str, tmp_path) -> None:
    """`from_pretrained(..., dtype=torch.bfloat16)`: the sinusoidal table (a buffer rebuilt on load) and every
    other floating tensor are bf16, so no forward casts a float32 table; its rows are the float64 table rounded
    once. DLCL and ADMIN carry the extra buffers and parameters (aggregation mask, ω)."""
    from factories import variant_model

    variant_model(variant, seed=5).save_pretrained(tmp_path)
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path, dtype=torch.bfloat16)
    floating = [t for t in [*model.parameters(), *model.buffers()] if t.is_floating_point()]
    assert floating and all(t.dtype == torch.bfloat16 for t in floating)
    table = model.model.encoder.embed_positions.weight
    expected = torch.cat([torch.sin(angles := positions_by_frequency(table.shape)), torch.cos(angles)], dim=1)
    assert torch.equal(table, expected.to(torch.bfloat16))
    ids, mask = padded_batch([5, 3])
    assert model(input_ids=ids, attention_mask=mask, decoder_input_ids=ids).logits.dtype == torch.bfloat16


def positions_by_frequency(shape: tuple[int, int]) -> torch.Tensor:
    """p · 10000^(-2i/d) in float64, (positions, d/2)."""
    positions, dim = shape
    exponents = 2 * torch.arange(dim // 2, dtype=torch.float64) / dim
    return torch.arange(positions, dtype=torch.float64)[:, None] / 10000.0**exponents
