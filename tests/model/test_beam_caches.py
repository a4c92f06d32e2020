"""No wasted work in beam search (caches.py): the cross-attention keys and values are not gathered at each beam
step (their rows are equal within a sentence's beams), the self-attention cache grows in place without a
concatenation, and MAtt's running-average slot gathers only the entry the next step reads. Tokens and scores are
unchanged: test_cache_equivalence.py compares cached with uncached decoding (greedy and beam 4, dynamic and
static caches) for every variant; here, what is (not) copied.

Counting: a `TorchDispatchMode` records every aten operator a call runs, with the number of elements it
outputs (`index_select` of a (batch, heads, positions, head_dim) slot: the elements gathered; the cross-attention
slots' check gathers their per-row labels, (batch,), which is not counted).
"""

from __future__ import annotations

import pytest
import torch
from factories import PAD, TINY_SHAPE, VOCAB, padded_batch
from factories import variant_model as build
from torch.utils._python_dispatch import TorchDispatchMode
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

import deep_nmt_hf
from deep_nmt_hf.model.caches import BeamConstantRows, GrowingLayer, RunningAverageLayer
from deep_nmt_hf.model.transformers_compat import cache_of

VARIANTS = sorted(deep_nmt_hf.VARIANTS)
HEADS = TINY_SHAPE["decoder_attention_heads"]
HEAD_DIM = TINY_SHAPE["d_model"] // HEADS
BEAMS = 2


class OperatorCounter(TorchDispatchMode):
    """Records (operator name, elements output, dimensions output) for every aten call inside the `with` block."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, int, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        size, dims = (out.numel(), out.dim()) if isinstance(out, torch.Tensor) else (0, 0)
        self.calls.append((func.overloadpacket.__name__, size, dims))
        return out

    def elements(self, name: str, dims: int) -> int:
        """Elements output by `name` calls with `dims`-dimensional outputs (4: cache slots)."""
        return sum(size for op, size, d in self.calls if op == name and d == dims)

    def count(self, name: str) -> int:
        return sum(op == name for op, _, _ in self.calls)


def beam_prefill(variant: str, length: int = 5, grad: bool = False):
    """A model, a cache filled with `length` target positions for 2 sentences x BEAMS beams (the encoder output
    expanded per beam, as `generate` does), and what is needed to continue decoding; without autograd unless
    `grad`."""
    model = build(variant, seed=4)
    ids, mask = padded_batch([6, 4], seed=4)
    ids, mask = ids.repeat_interleave(BEAMS, 0), mask.repeat_interleave(BEAMS, 0)
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    target = torch.cat([torch.full((4, 1), PAD), torch.randint(2, VOCAB - 1, (4, length))], dim=1)

    @torch.set_grad_enabled(grad)
    def run(decoder_input_ids, cache, order=slice(None)):
        return model(
            encoder_outputs=type(encoder_outputs)(encoder_outputs[0][order]),
            attention_mask=mask[order],
            decoder_input_ids=decoder_input_ids,
            cache=cache,
            use_cache=True,
        )

    cache = cache_of(run(target[:, :length], EncoderDecoderCache(DynamicCache(), DynamicCache())))
    return model, cache, target, run


def attended_cross_slots(cache):
    """The cross-attention slots that hold keys (not a CAD layer's expanded zeros)."""
    return [s for s in cache.cross_attention_cache.layers if s.keys.stride() != (0, 0, 0, 0)]


@pytest.mark.parametrize("variant", VARIANTS)
def test_beam_reordering_gathers_only_the_self_attention_state_that_differs(variant: str) -> None:
    """Within-sentence beam indices: no cross-attention row is gathered (the tensors stay the very same), the
    self-attention slots gather their filled positions once (no spare capacity), MAtt's slots only their last
    entry; what every slot then holds equals Transformers' full gather, and decoding continues like the reordered
    batch decoded from scratch."""
    model, cache, target, run = beam_prefill(variant)
    length, depth = target.shape[1] - 1, model.config.decoder_depth
    merged = model.config.decoder_attention == "merged"
    cross_before = [(s.keys, s.values) for s in attended_cross_slots(cache)]
    assert cross_before and all(isinstance(s, BeamConstantRows) for s in attended_cross_slots(cache))
    own = cache.self_attention_cache.layers
    assert all(isinstance(s, RunningAverageLayer if merged else GrowingLayer) for s in own)
    expected = [(s.keys.clone(), s.values.clone()) for s in own]
    order = torch.tensor([1, 1, 2, 3])  # sentence 0: beam 1 twice; sentence 1: both beams kept
    with OperatorCounter() as counter:
        cache.reorder_cache(order)
    gathered_positions = 1 if merged else length
    assert counter.elements("index_select", dims=4) == depth * 2 * 4 * HEADS * gathered_positions * HEAD_DIM
    assert all(
        s.keys is k and s.values is v
        for s, (k, v) in zip(attended_cross_slots(cache), cross_before, strict=True)
    )
    for slot, (keys, values) in zip(
        own, expected, strict=True
    ):  # MAtt: the recorded gathers, applied on read
        assert torch.equal(slot.keys, keys[order]) and torch.equal(slot.values, values[order])
    continued = run(target[order, length:], cache, order).logits
    fresh = run(target[order], None, order).logits[:, length:]
    torch.testing.assert_close(continued, fresh, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("cache_implementation", ["dynamic", "static"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_beam_search_keeps_the_cross_attention_tensors(variant: str, cache_implementation: str) -> None:
    """In `generate`'s beam search every decoder step reads the very cross-attention tensors the first step
    wrote: beam reordering copies none of them (Transformers' layers gather a new copy at every step)."""
    model = build(variant, seed=5)
    ids, mask = padded_batch([6, 4, 5], seed=5)
    seen: list[list[torch.Tensor]] = []

    def record(module, args, kwargs):
        cache = kwargs["cache"]
        if cache is not None and cache.cross_attention_cache.layers and cache.get_seq_length() > 0:
            seen.append(
                [s.keys for s in attended_cross_slots(cache)]
                + [s.values for s in attended_cross_slots(cache)]
            )

    hook = model.get_decoder().register_forward_pre_hook(record, with_kwargs=True)
    try:
        model.generate(
            input_ids=ids,
            attention_mask=mask,
            num_beams=4,
            max_new_tokens=6,
            min_new_tokens=6,
            cache_implementation=cache_implementation,
        )
    finally:
        hook.remove()
    assert len(seen) == 5 and seen[0]  # steps 2..6 read a filled cache
    for step in seen[1:]:
        assert all(a is b for a, b in zip(step, seen[0], strict=True))


@pytest.mark.parametrize("variant", ["base", "dsinit_matt"])
def test_a_decoding_step_concatenates_no_cache(variant: str) -> None:
    """A decoding step writes the new position into the slots' free capacity: no `cat` (Transformers'
    DynamicLayer concatenates a copy of each slot's whole prefix at every step). Under autograd the slot
    concatenates instead (in-place writes would break the graph of earlier steps) and gradients flow."""
    model, cache, target, run = beam_prefill(variant)
    length = target.shape[1] - 1
    with OperatorCounter() as counter:
        run(target[:, length:], cache)
    assert counter.count("cat") == 0
    assert cache.get_seq_length() == length + 1
    model, cache, target, run = beam_prefill(variant, length=2, grad=True)
    run(target[:, 2:3], cache).logits.sum().backward()
    own = cache.self_attention_cache.layers[0]
    assert own.plain and own.get_seq_length() == 3 and model.lm_head.weight.grad is not None
