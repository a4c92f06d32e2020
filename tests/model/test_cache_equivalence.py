"""Cached decoding equals uncached decoding, on models whose outputs vary (issue 24).

Each variant is trained for a few steps on a counting task (factories.counting_task_model), so that its translations
change from step to step and sentence to sentence; then every decoding mode `generate` offers is run with the
cache and without it, and the tokens and the per-step scores (finite entries) must agree. A forward that ignores
the cache it is handed (as ours did on Transformers 5.24, which passes it as `cache=`) sees only the newest token
at each step: its scores differ from the uncached ones from the second step on, which
`test_an_ignored_cache_changes_the_scores` shows on the same models, so these comparisons can fail.

The beam modes also cover our cache slots (caches.py): cross-attention keys and values that beam search leaves
unreordered, self-attention slots that grow in place, MAtt's slot gathering only its last entry.

Tolerance: scores within 1e-4 absolute (float32; the cached and uncached paths sum in different orders).
"""

from __future__ import annotations

import pytest
import torch
from factories import EOS, PAD, counting_task_model, padded_batch
from transformers.cache_utils import DynamicCache, EncoderDecoderCache

import deep_nmt_hf

VARIANTS = sorted(deep_nmt_hf.VARIANTS)
ATOL = 1e-4
LENGTHS = [7, 5, 8, 4]
MODES = {
    "greedy": dict(num_beams=1, do_sample=False),
    "beam": dict(num_beams=4, do_sample=False),
    "sample": dict(num_beams=1, do_sample=True, top_k=0),
    "static": dict(num_beams=1, do_sample=False, cache_implementation="static"),
    "static_beam": dict(num_beams=4, do_sample=False, cache_implementation="static"),
}
_MODELS: dict[str, torch.nn.Module] = {}


def trained(variant: str) -> torch.nn.Module:
    """One counting-task model per variant for the whole module (about a second each)."""
    if variant not in _MODELS:
        _MODELS[variant] = counting_task_model(variant)
    return _MODELS[variant]


def generate(model, use_cache: bool, seed: int = 0, lengths: list[int] = LENGTHS, **kwargs):
    ids, mask = padded_batch(lengths, seed=21)
    torch.manual_seed(seed)
    return model.generate(
        input_ids=ids,
        attention_mask=mask,
        max_new_tokens=9,
        use_cache=use_cache,
        return_dict_in_generate=True,
        output_scores=True,
        **kwargs,
    )


def assert_same_scores(cached: tuple[torch.Tensor, ...], uncached: tuple[torch.Tensor, ...]) -> None:
    assert len(cached) == len(uncached)
    for step, (a, b) in enumerate(zip(cached, uncached, strict=True)):
        finite = torch.isfinite(a)
        assert torch.equal(finite, torch.isfinite(b)), f"step {step}: different tokens are ruled out"
        torch.testing.assert_close(
            a[finite], b[finite], atol=ATOL, rtol=0, msg=f"scores differ at step {step}"
        )


@pytest.mark.parametrize("variant", VARIANTS)
def test_counting_task_models_translate_with_varied_tokens(variant: str) -> None:
    """The models the comparisons run on are not degenerate: several different tokens per sentence."""
    out = generate(trained(variant), use_cache=False, **MODES["greedy"])
    content = [set(row.tolist()) - {PAD, EOS} for row in out.sequences]
    assert all(len(tokens) >= 3 for tokens in content), out.sequences.tolist()


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decoding_equals_uncached(variant: str, mode: str) -> None:
    model = trained(variant)
    settings = dict(MODES[mode])
    cached = generate(model, use_cache=True, **settings)
    settings.pop("cache_implementation", None)
    uncached = generate(model, use_cache=False, **settings)
    assert torch.equal(cached.sequences, uncached.sequences)
    assert_same_scores(cached.scores, uncached.scores)
    if settings["num_beams"] > 1:
        torch.testing.assert_close(cached.sequences_scores, uncached.sequences_scores, atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_assisted_decoding_equals_uncached_greedy(variant: str) -> None:
    """Assisted decoding (a draft model proposes, the model verifies; the caches are cropped on rejection) gives
    greedy's tokens and scores. The draft is a less trained counting-task model, so some of its proposals are rejected."""
    model, draft = trained(variant), counting_task_model(variant, seed=1, steps=10)
    for length in LENGTHS[:2]:  # Transformers' assisted decoding takes one sentence at a time
        assisted = generate(model, True, lengths=[length], assistant_model=draft, do_sample=False)
        plain = generate(model, False, lengths=[length], do_sample=False)
        assert torch.equal(assisted.sequences, plain.sequences)
        assert_same_scores(assisted.scores, plain.scores)


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_ignored_cache_changes_the_scores(variant: str) -> None:
    """What the comparisons above guard against: decoding step by step from the newest token alone (a forward
    that drops the cache it is given) gives other scores than the full prefix on these models."""
    model = trained(variant)
    ids, mask = padded_batch(LENGTHS, seed=21)
    target = generate(model, use_cache=False, do_sample=False).sequences
    encoder_outputs = model.get_encoder()(input_ids=ids, attention_mask=mask)
    full = model(encoder_outputs=encoder_outputs, attention_mask=mask, decoder_input_ids=target).logits
    newest_only = torch.cat(
        [
            model(
                encoder_outputs=encoder_outputs,
                attention_mask=mask,
                decoder_input_ids=target[:, t : t + 1],
                cache=EncoderDecoderCache(DynamicCache(), DynamicCache()),
            ).logits
            for t in range(target.shape[1])
        ],
        dim=1,
    )
    assert (newest_only[:, 2:] - full[:, 2:]).abs().max() > 100 * ATOL
