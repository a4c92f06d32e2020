"""MAtt (DS-Init + merged attention) with a static cache (issue #49, item 3): its running-average slot lives in the
static cache's pre-allocated tensors (caches.StaticRunningAverage), so `_can_compile_fullgraph = True` holds for it
too: static-cache generation equals dynamic-cache generation, and decoding compiles with `fullgraph=True`."""

from __future__ import annotations

import pytest
import torch
from factories import EOS, PAD, padded_batch, variant_model
from transformers import CompileConfig
from transformers.cache_utils import DynamicCache, EncoderDecoderCache, StaticCache

from deep_nmt_hf.model.caches import StaticRunningAverage, running_average_slot
from deep_nmt_hf.model.transformers_compat import cache_of

NO_EOS = dict(suppress_tokens=[EOS])  # random models: run to the length limit, so runs compare position-wise
SCORES = dict(output_scores=True, return_dict_in_generate=True)


def assert_same_generation(a, b, atol: float = 1e-5) -> None:
    assert torch.equal(a.sequences, b.sequences)
    assert len(a.scores) == len(b.scores)
    for x, y in zip(a.scores, b.scores, strict=True):
        finite = torch.isfinite(x)
        assert torch.equal(finite, torch.isfinite(y))
        torch.testing.assert_close(x[finite], y[finite], atol=atol, rtol=0)


def compile_config() -> CompileConfig:
    config = CompileConfig(fullgraph=True, backend="eager", mode=None)
    config._compile_all_devices = True  # Transformers compiles on CPU only when asked
    return config


@pytest.mark.parametrize("beams", [1, 3])
def test_static_cache_generation_equals_dynamic(beams: int) -> None:
    model = variant_model("dsinit_matt", seed=9)
    assert model.config.decoder_attention == "merged" and model._can_compile_fullgraph
    ids, mask = padded_batch([6, 4], seed=9)
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=6, num_beams=beams, **NO_EOS, **SCORES)
    dynamic = model.generate(**kwargs)
    static = model.generate(**kwargs, cache_implementation="static")
    assert_same_generation(static, dynamic)
    if beams > 1:
        torch.testing.assert_close(static.sequences_scores, dynamic.sequences_scores, atol=1e-5, rtol=0)


def test_static_cache_reads_target_padding_from_generates_4d_mask() -> None:
    """With a padded decoder prompt, `generate` gives a static cache a 4D mask; MAtt takes the real target
    positions from it (`merged_attention.real_target_positions`) and averages as with the dynamic cache's 2D mask."""
    model = variant_model("dsinit_matt", seed=3)
    ids, mask = padded_batch([6, 5], seed=3)
    prompt = torch.tensor([[PAD, 7, 9], [PAD, 8, 4]])
    prompt_mask = torch.tensor([[1, 1, 1], [1, 0, 1]])
    kwargs = dict(input_ids=ids, attention_mask=mask, decoder_input_ids=prompt, max_new_tokens=4)
    kwargs.update(decoder_attention_mask=prompt_mask, **NO_EOS, **SCORES)
    dynamic = model.generate(**kwargs)
    static = model.generate(**kwargs, cache_implementation="static")
    assert_same_generation(static, dynamic)
    unpadded = model.generate(**{**kwargs, "decoder_attention_mask": torch.ones_like(prompt_mask)})
    assert not torch.allclose(unpadded.scores[0][1], dynamic.scores[0][1])  # the padding mattered


def test_compiled_forward_with_a_static_cache_equals_dynamic_steps() -> None:
    """A `torch.compile(fullgraph=True)` forward decodes step by step through a static cache (prefill eager,
    then one compiled graph per step shape) and gives the logits of dynamic-cache decoding."""
    model = variant_model("dsinit_matt", seed=5)
    ids, mask = padded_batch([6, 4], seed=5)
    target = torch.randint(2, PAD, (2, 5), generator=torch.Generator().manual_seed(5))
    target[:, 0] = PAD
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    common = dict(encoder_outputs=encoder_outputs, attention_mask=mask, use_cache=True)

    dynamic = EncoderDecoderCache(DynamicCache(), DynamicCache())
    expected = []
    for t in range(target.shape[1]):
        out = model(decoder_input_ids=target[:, t : t + 1], cache=dynamic, **common)
        dynamic = cache_of(out)
        expected.append(out.logits)

    static = EncoderDecoderCache(
        StaticCache(config=model.config, max_cache_len=8), StaticCache(config=model.config, max_cache_len=6)
    )
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    got = [
        model(decoder_input_ids=target[:, :1], cache=static, **common).logits
    ]  # prefill allocates the slots
    assert isinstance(running_average_slot(static, 0), StaticRunningAverage)
    for t in range(1, target.shape[1]):
        got.append(compiled(decoder_input_ids=target[:, t : t + 1], cache=static, **common).logits)
    torch.testing.assert_close(torch.cat(got, 1), torch.cat(expected, 1), atol=1e-5, rtol=0)


def test_compiled_generation_with_every_output_equals_eager() -> None:
    """As Transformers' `test_generate_compilation_all_outputs`: compiled static-cache generation (fullgraph) with
    attentions, hidden states and scores gives eager's; MAtt's average weights span the static key axis."""
    model = variant_model("dsinit_matt", seed=6)
    ids, mask = padded_batch([6, 4], seed=6)
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=4, **NO_EOS, **SCORES)
    kwargs.update(output_attentions=True, output_hidden_states=True, cache_implementation="static")
    eager = model.generate(**kwargs)
    torch._dynamo.reset()
    compiled = model.generate(**kwargs, compile_config=compile_config())
    assert hasattr(model, "_compiled_call")  # the decoding steps ran through torch.compile (fullgraph)
    assert_same_generation(compiled, eager)
    for out in (eager, compiled):  # one key axis, the static cache's, at every step; each row averages
        assert len({weights.shape[-1] for step in out.decoder_attentions for weights in step}) == 1
        sums = torch.stack([weights.sum(-1) for weights in out.decoder_attentions[-1]])
        torch.testing.assert_close(sums, torch.ones_like(sums))
    for a, b in zip(compiled.decoder_attentions[-1], eager.decoder_attentions[-1], strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
