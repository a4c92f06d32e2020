"""Every variant keeps the generation contracts of a stock Transformers seq2seq model (issue 17).

Defaults (greedy for a fresh model), a passed cache used unless use_cache=False, per-layer output tensors,
`return_dict_in_generate` structures, the cache object (shapes, reorder, crop, batch selection), continuing from
returned caches, assisted decoding, GenerationMixin bases, static cache and compiled generation. Tiny shapes.
"""

from __future__ import annotations

import logging

import pytest
import torch
from factories import EOS, PAD, TINY_SHAPE, VOCAB, padded_batch
from factories import variant_model as build
from transformers import CompileConfig, GenerationMixin
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

import deep_nmt_hf
from deep_nmt_hf.model.caches import NoCrossAttentionLayer, RunningAverageLayer
from deep_nmt_hf.model.transformers_compat import cache_of, with_cache
from deep_nmt_hf.training.generation_settings import translation_generation_config

VARIANTS = sorted(deep_nmt_hf.VARIANTS)
STATIC_OK = VARIANTS  # MAtt too: its prefix sums have a static slot (caches.StaticRunningAverage)
HEADS = TINY_SHAPE["decoder_attention_heads"]
HEAD_DIM = TINY_SHAPE["d_model"] // HEADS
NO_EOS = dict(
    suppress_tokens=[EOS]
)  # random models: always run to the length limit, so runs compare position-wise


def absent_cross_attention(model, application: int) -> bool:
    """Whether decoder layer application `application` owns no cross-attention (CAD with drop rate 1)."""
    config = model.config
    return config.cross_attention_drop_rate == 1.0 and application < config.cross_attention_drop_layers


def greedy_reference(model, ids, mask, steps: int) -> torch.Tensor:
    """Greedy decoding by hand (full forward passes, argmax, eos suppressed)."""
    target = torch.full((ids.shape[0], 1), PAD)
    for _ in range(steps):
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=target, use_cache=False).logits[
            :, -1
        ]
        logits[:, EOS] = -float("inf")
        target = torch.cat([target, logits.argmax(-1, keepdim=True)], dim=1)
    return target


# ------------------------------------------------------------------------------------------------ defaults
@pytest.mark.parametrize("variant", VARIANTS)
def test_fresh_model_generates_greedily_without_a_length_warning(variant: str, caplog) -> None:
    model = build(variant, seed=1)
    settings = model.generation_config
    assert (
        settings.num_beams in (None, 1)
        and settings.forced_eos_token_id is None
        and settings.max_length is None
    )
    ids, mask = padded_batch([6, 4], seed=1)
    with caplog.at_level(logging.WARNING, logger="transformers"):
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=5, **NO_EOS)
    assert not [r for r in caplog.records if "max_new_tokens" in r.getMessage()]
    assert torch.equal(out, greedy_reference(model, ids, mask, 5))


def test_translation_generation_config_holds_the_trained_model_search() -> None:
    model = build("base")
    settings = translation_generation_config(model.config, num_beams=5, length_penalty=0.6, max_length=40)
    assert (settings.num_beams, settings.length_penalty, settings.max_length) == (5, 0.6, 40)
    assert settings.forced_eos_token_id == EOS and settings.bad_words_ids == [[PAD]]
    assert settings.decoder_start_token_id == PAD
    assert translation_generation_config(model.config).max_length == 64  # min(256, max_position_embeddings)
    with pytest.raises(ValueError, match="max_length=100"):
        translation_generation_config(model.config, max_length=100)
    with pytest.raises(ValueError, match="num_beams=0"):
        translation_generation_config(model.config, num_beams=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_lm_class_lists_generation_mixin_among_its_own_bases(variant: str) -> None:
    cls = type(build(variant))
    assert GenerationMixin in cls.__bases__ and cls.can_generate()


# ------------------------------------------------------------------------------------------------ the decoder's cache
@pytest.mark.parametrize("variant", VARIANTS)
def test_decoder_uses_a_passed_cache_unless_use_cache_is_false(variant: str) -> None:
    model = build(variant, seed=2)
    ids, mask = padded_batch([5, 3], seed=2)
    target = torch.cat([torch.full((2, 1), PAD), torch.randint(2, VOCAB - 1, (2, 4))], dim=1)
    memory = model.get_encoder()(input_ids=ids, attention_mask=mask).last_hidden_state
    decoder = model.get_decoder()
    common = dict(encoder_hidden_states=memory, encoder_attention_mask=mask)
    full = decoder(input_ids=target, use_cache=False, **common)["last_hidden_state"]
    cache = EncoderDecoderCache(DynamicCache(), DynamicCache())
    decoder(input_ids=target[:, :3], cache=cache, **common)  # use_cache unset
    rest = decoder(input_ids=target[:, 3:], cache=cache, **common)["last_hidden_state"]
    torch.testing.assert_close(rest, full[:, 3:], atol=1e-5, rtol=1e-5)
    dropped = decoder(input_ids=target[:, 3:], cache=cache, use_cache=False, **common)
    assert cache_of(dropped) is None
    assert not torch.allclose(dropped["last_hidden_state"], full[:, 3:], atol=1e-3)


@pytest.mark.parametrize("variant", VARIANTS)
def test_cache_slots_shapes_reorder_crop_and_batch_select(variant: str) -> None:
    model = build(variant, seed=3)
    config = model.config
    ids, mask = padded_batch([6, 4, 5], seed=3)
    target = torch.cat([torch.full((3, 1), PAD), torch.randint(2, VOCAB - 1, (3, 5))], dim=1)
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)

    def run(decoder_input_ids, cache, attention_mask=mask, outputs=encoder_outputs):
        return model(
            encoder_outputs=outputs,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            cache=cache,
            use_cache=True,
        )

    full = run(target, None).logits
    cache = cache_of(run(target[:, :4], EncoderDecoderCache(DynamicCache(), DynamicCache())))
    # one slot per layer application, the count Transformers reads; none left empty
    depth = config.decoder_depth
    assert config.num_hidden_layers == depth == len(cache.self_attention_cache.layers)
    assert len(cache.cross_attention_cache.layers) == depth
    for application in range(depth):
        own, cross = (
            cache.self_attention_cache.layers[application],
            cache.cross_attention_cache.layers[application],
        )
        # every slot in Transformers' layout (batch, heads, length, head_dim): MAtt's prefix sums and counts too
        assert isinstance(own, RunningAverageLayer) == (config.decoder_attention == "merged")
        assert own.keys.shape == own.values.shape == (3, HEADS, 4, HEAD_DIM)
        # cross-attention: the source length, also where a CAD layer owns no cross-attention (expanded zeros)
        assert cross.keys.shape == cross.values.shape == (3, HEADS, ids.shape[1], HEAD_DIM)
        if absent_cross_attention(model, application):
            assert isinstance(cross, NoCrossAttentionLayer) and cross.keys.stride() == (0, 0, 0, 0)
    # crop: drop the last two positions and decode them again
    cache.crop(-2)  # remove two positions
    assert cache.get_seq_length() == 2
    continued = run(target[:, 2:], cache).logits
    torch.testing.assert_close(continued, full[:, 2:], atol=1e-5, rtol=1e-5)
    # beam reordering: a permuted cache continues like the permuted batch
    order = torch.tensor([2, 0, 1])
    cache = cache_of(run(target[:, :4], EncoderDecoderCache(DynamicCache(), DynamicCache())))
    cache.reorder_cache(order)
    assert all(
        not absent_cross_attention(model, i) or slot.keys.stride() == (0, 0, 0, 0)
        for i, slot in enumerate(cache.cross_attention_cache.layers)
    )  # reordered zeros stay expanded
    permuted = run(target[order, 4:], cache, mask[order], type(encoder_outputs)(encoder_outputs[0][order]))
    torch.testing.assert_close(permuted.logits, full[order, 4:], atol=1e-5, rtol=1e-5)
    # batch selection keeps the chosen sentences
    cache = cache_of(run(target[:, :4], EncoderDecoderCache(DynamicCache(), DynamicCache())))
    keep = torch.tensor([0, 2])
    cache.batch_select_indices(keep)
    assert all(slot.keys.shape[0] == 2 for slot in cache.cross_attention_cache.layers)  # absent slots too
    selected = run(target[keep, 4:], cache, mask[keep], type(encoder_outputs)(encoder_outputs[0][keep]))
    torch.testing.assert_close(selected.logits, full[keep, 4:], atol=1e-5, rtol=1e-5)


def test_num_hidden_layers_counts_layer_applications_and_is_read_only() -> None:
    config = build("shared_layers").config
    assert config.get_text_config(decoder=True).num_hidden_layers == config.decoder_depth == 4
    assert config.decoder_layers == 2
    with pytest.raises(AttributeError, match="set decoder_layers"):
        config.num_hidden_layers = 3


# ------------------------------------------------------------------------------------------------ output contracts
@pytest.mark.parametrize("variant", VARIANTS)
def test_attentions_and_hidden_states_are_tensors_per_layer_application_with_gradients(variant: str) -> None:
    model = build(variant, seed=4)
    config = model.config
    ids, mask = padded_batch([6, 4], seed=4)
    target = torch.cat([torch.full((2, 1), PAD), torch.randint(2, VOCAB - 1, (2, 4))], dim=1)
    out = model(
        input_ids=ids,
        attention_mask=mask,
        decoder_input_ids=target,
        output_attentions=True,
        output_hidden_states=True,
    )
    batch, source, length, d = 2, ids.shape[1], target.shape[1], config.d_model
    assert len(out.encoder_attentions) == config.encoder_depth == len(out.encoder_hidden_states) - 1
    assert len(out.decoder_attentions) == len(out.cross_attentions) == config.decoder_depth
    assert len(out.decoder_hidden_states) == config.decoder_depth + 1
    for weights in out.encoder_attentions:
        assert weights.shape == (batch, HEADS, source, source)
    for application, (own, cross) in enumerate(
        zip(out.decoder_attentions, out.cross_attentions, strict=True)
    ):
        assert own.shape == (batch, HEADS, length, length)
        assert cross.shape == (batch, HEADS, length, source)
        if absent_cross_attention(model, application):
            assert not cross.any()  # documented zeros: no source position is attended
        else:
            torch.testing.assert_close(cross.sum(-1), torch.ones(batch, HEADS, length))
    for states in out.encoder_hidden_states + out.decoder_hidden_states:
        assert states.shape[-1] == d
    if config.decoder_attention == "merged":  # the average attention: lower-triangular 1/t per head
        expected = torch.tril(torch.ones(length, length)) / torch.arange(1, length + 1)[:, None]
        for own in out.decoder_attentions:
            torch.testing.assert_close(own, expected.expand(batch, HEADS, length, length))
    else:
        for own in out.decoder_attentions:
            assert not torch.triu(own, diagonal=1).any()  # causal
    # retain_grad works on every entry; the output depends on every real entry
    entries = [
        out.encoder_hidden_states[0],
        *out.encoder_attentions,
        out.decoder_hidden_states[0],
        *out.decoder_attentions,
        *out.cross_attentions,
    ]
    for entry in entries:
        entry.retain_grad()
    out.logits.sum().backward()
    real = [out.encoder_hidden_states[0], *out.encoder_attentions, out.decoder_hidden_states[0]]
    real += [w for i, w in enumerate(out.cross_attentions) if not absent_cross_attention(model, i)]
    if config.decoder_attention == "self":
        real += list(out.decoder_attentions)
    assert all(entry.grad is not None for entry in real)
    # an absent cross-attention's zeros are in the graph too, with their true gradient: exactly zero
    absent = [w for i, w in enumerate(out.cross_attentions) if absent_cross_attention(model, i)]
    assert all(entry.grad is not None and not entry.grad.any() for entry in absent)


@pytest.mark.parametrize("variant", VARIANTS)
def test_retain_grad_on_the_first_layers_attentions_as_transformers_tests_it(variant: str) -> None:
    """Transformers' test_retain_grad_hidden_states_attentions: retain_grad on the first entry of each output,
    backward from one logit, every .grad set. For the deep decoder, layer 0 owns no cross-attention: its zero
    weights get an all-zero gradient, while an attending layer's weights get a non-zero one. The logits are the
    same with gradients off (nothing added) and on (the placeholder joins the graph without changing them)."""
    model = build(variant, seed=4)
    ids, mask = padded_batch([6, 4], seed=4)
    target = torch.cat([torch.full((2, 1), PAD), torch.randint(2, VOCAB - 1, (2, 4))], dim=1)
    inputs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=target)
    out = model(**inputs, output_attentions=True, output_hidden_states=True)
    entries = [
        out.encoder_hidden_states[0],
        out.encoder_attentions[0],
        out.decoder_hidden_states[0],
        out.decoder_attentions[0],
        out.cross_attentions[0],
        out.cross_attentions[-1],
    ]
    for entry in entries:
        entry.retain_grad()
    out.logits.flatten()[0].backward()
    assert all(entry.grad is not None for entry in entries[:3] + entries[4:])
    first, last = out.cross_attentions[0].grad, out.cross_attentions[-1].grad
    assert last.abs().sum() > 0  # an attending layer
    if absent_cross_attention(model, 0):
        assert first.shape == out.cross_attentions[0].shape and not first.any()
    else:
        assert first.abs().sum() > 0
    if model.config.decoder_attention == "self":
        assert out.decoder_attentions[0].grad is not None
    with torch.no_grad():  # without gradients nothing is added to the output
        assert torch.equal(model(**inputs, output_attentions=True).logits, out.logits)


GENERATION_MODES = {
    "greedy": dict(num_beams=1, do_sample=False),
    "sample": dict(num_beams=1, do_sample=True, top_k=0),
    "beam": dict(num_beams=2, do_sample=False),
    "beam_sample": dict(num_beams=2, do_sample=True, top_k=0),
}


@pytest.mark.parametrize("mode", sorted(GENERATION_MODES))
@pytest.mark.parametrize("variant", VARIANTS)
def test_return_dict_in_generate_has_transformers_shapes(variant: str, mode: str) -> None:
    model = build(variant, seed=5)
    config = model.config
    ids, mask = padded_batch([6, 4], seed=5)
    torch.manual_seed(0)
    new = 4
    out = model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=new,
        return_dict_in_generate=True,
        output_scores=True,
        output_logits=True,
        output_attentions=True,
        output_hidden_states=True,
        **GENERATION_MODES[mode],
        **NO_EOS,
    )
    rows = 2 * GENERATION_MODES[mode]["num_beams"]
    source, depth = ids.shape[1], config.decoder_depth
    assert out.sequences.shape == (2, 1 + new)
    assert len(out.scores) == len(out.logits) == new
    assert all(s.shape == (rows, VOCAB) for s in out.scores + out.logits)
    assert len(out.encoder_attentions) == config.encoder_depth
    # the encoder runs once, before Transformers expands its last_hidden_state for the beams: (batch, ...)
    assert all(w.shape == (2, HEADS, source, source) for w in out.encoder_attentions)
    assert len(out.encoder_hidden_states) == config.encoder_depth + 1
    for step in range(new):
        assert len(out.decoder_attentions[step]) == len(out.cross_attentions[step]) == depth
        assert all(w.shape == (rows, HEADS, 1, step + 1) for w in out.decoder_attentions[step])
        assert all(w.shape == (rows, HEADS, 1, source) for w in out.cross_attentions[step])
        assert len(out.decoder_hidden_states[step]) == depth + 1
        assert all(h.shape == (rows, 1, config.d_model) for h in out.decoder_hidden_states[step])
    if GENERATION_MODES[mode]["num_beams"] > 1:
        assert out.beam_indices.shape == (2, new) and out.sequences_scores.shape == (2,)


# ------------------------------------------------------------------------------------------------ generation features
@pytest.mark.parametrize("variant", VARIANTS)
def test_generation_continues_from_the_returned_cache(variant: str) -> None:
    model = build(variant, seed=6)
    ids, mask = padded_batch([6, 4], seed=6)
    kwargs = dict(input_ids=ids, attention_mask=mask, do_sample=False, **NO_EOS)
    whole = model.generate(**kwargs, max_new_tokens=6, return_dict_in_generate=True)
    first = model.generate(**kwargs, max_new_tokens=3, return_dict_in_generate=True)
    assert cache_of(first).get_seq_length() == 3  # start token + 2 generated; the last is not yet in
    rest = model.generate(
        **kwargs,
        decoder_input_ids=first.sequences,
        decoder_attention_mask=torch.ones_like(
            first.sequences
        ),  # full-length mask: feed only the uncached tail
        **with_cache(cache_of(first)),
        max_new_tokens=3,
        return_dict_in_generate=True,
    )
    assert torch.equal(rest.sequences, whole.sequences)
    for half in ("self_attention_cache", "cross_attention_cache"):  # the continued cache is the one-run cache
        for a, b in zip(
            getattr(cache_of(rest), half).layers,
            getattr(cache_of(whole), half).layers,
            strict=True,
        ):
            torch.testing.assert_close(a.keys, b.keys, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(a.values, b.values, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("variant", VARIANTS)
def test_assisted_decoding_gives_the_greedy_output(variant: str) -> None:
    model = build(variant, seed=7)
    # a shallow draft of the same variant (its own random weights: most drafts are rejected, some accepted)
    draft = build(variant, seed=8, encoder_layers=1, decoder_layers=1)
    ids, _ = padded_batch([6], seed=7)  # Transformers' assisted decoding takes one sentence at a time
    kwargs = dict(input_ids=ids, max_new_tokens=10, do_sample=False, **NO_EOS)
    greedy = model.generate(**kwargs)
    assisted = model.generate(**kwargs, assistant_model=draft)
    assert torch.equal(assisted, greedy)
    # the model as its own draft: every draft token is accepted
    assert torch.equal(model.generate(**kwargs, assistant_model=model), greedy)


# ------------------------------------------------------------------------------------------------ static cache, compile
@pytest.mark.parametrize("variant", STATIC_OK)
def test_static_cache_gives_the_dynamic_cache_output(variant: str) -> None:
    model = build(variant, seed=9)
    ids, mask = padded_batch([6, 4], seed=9)
    for beams in (1, 2):
        kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=6, num_beams=beams, **NO_EOS)
        dynamic = model.generate(**kwargs)
        static = model.generate(**kwargs, cache_implementation="static")
        assert torch.equal(static, dynamic), (variant, beams)


def test_compiled_generation_with_a_static_cache_equals_eager() -> None:
    model = build("deep_decoder", seed=10)
    ids, mask = padded_batch([6, 4], seed=10)
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=5, **NO_EOS)
    eager = model.generate(**kwargs)
    compile_config = CompileConfig(fullgraph=True, backend="eager", mode=None)
    compile_config._compile_all_devices = True  # Transformers compiles on CPU only when asked
    torch._dynamo.reset()
    compiled = model.generate(**kwargs, cache_implementation="static", compile_config=compile_config)
    assert hasattr(model, "_compiled_call")  # the decoding steps ran through torch.compile (fullgraph)
    assert torch.equal(compiled, eager)
