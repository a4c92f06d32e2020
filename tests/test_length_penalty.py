"""GNMT length penalty through generate(custom_generate=...): scores, ranking, equivalence at α = 0, saving."""

from __future__ import annotations

import pytest
import torch
from factories import EOS, PAD, padded_batch, tiny_model
from transformers import GenerationConfig, GenerationMixin, LogitsProcessor, LogitsProcessorList

from deep_nmt_hf.training.length_penalty import (
    generation_kwargs,
    gnmt_beam_search,
    gnmt_penalty,
    set_length_penalty,
)


def test_gnmt_penalty_formula() -> None:
    assert gnmt_penalty(1, 0.6) == pytest.approx(1.0)
    assert gnmt_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert gnmt_penalty(30, 0.0) == 1.0


def _generate(model, **kwargs):
    ids, mask = padded_batch([7, 5, 3], seed=4)
    return model.generate(
        input_ids=ids,
        attention_mask=mask,
        num_beams=4,
        num_return_sequences=4,
        max_new_tokens=8,
        do_sample=False,
        output_scores=True,
        return_dict_in_generate=True,
        **kwargs,
    )


def test_alpha_zero_is_transformers_beam_search_without_penalty() -> None:
    model = tiny_model(seed=3)
    ours = _generate(model, length_penalty=0.0, custom_generate=gnmt_beam_search)
    stock = _generate(model, length_penalty=0.0)
    assert torch.equal(ours.sequences, stock.sequences)
    torch.testing.assert_close(ours.sequences_scores, stock.sequences_scores)


def test_gnmt_scores_are_log_prob_over_gnmt_penalty_and_ranked() -> None:
    model = tiny_model(seed=3)
    out = _generate(model, length_penalty=0.6, custom_generate=gnmt_beam_search)
    transition = model.compute_transition_scores(
        out.sequences, out.scores, out.beam_indices, normalize_logits=False
    )
    generated = (out.beam_indices[:, : transition.shape[1]] >= 0).sum(-1)  # tokens incl. EOS
    expected = torch.stack(
        [transition[i].sum() / gnmt_penalty(int(n), 0.6) for i, n in enumerate(generated.tolist())]
    )
    torch.testing.assert_close(out.sequences_scores, expected, rtol=1e-4, atol=1e-4)
    per_input = out.sequences_scores.view(3, 4)
    assert torch.all(per_input[:, :-1] >= per_input[:, 1:])  # n-best sorted by the GNMT score
    stock = _generate(model, length_penalty=0.6)  # len^0.6: other scores
    assert not torch.allclose(stock.sequences_scores, out.sequences_scores)
    assert "_update_finished_beams" not in model.__dict__  # the hook is gone after the call


def test_form_is_saved_and_selects_the_hook(tmp_path) -> None:
    config = GenerationConfig(num_beams=4)
    set_length_penalty(config, 0.6, "gnmt")
    config.save_pretrained(tmp_path)
    loaded = GenerationConfig.from_pretrained(tmp_path)
    assert loaded.length_penalty == 0.6 and loaded.length_penalty_form == "gnmt"
    assert generation_kwargs(loaded) == {"custom_generate": gnmt_beam_search}
    set_length_penalty(loaded, 1.0, "fairseq")
    assert generation_kwargs(loaded) == {}
    with pytest.raises(ValueError, match="length_penalty_form='t2t'"):
        set_length_penalty(loaded, 0.6, "t2t")


class ScriptedLogProbs(LogitsProcessor):
    """Every step: token 5 costs 0.04 nats and eos 0.3 (1.0 at the first step); every other token is ruled out.
    Under GNMT's penalty with α = 1 each extra token then improves the score a little, so the best hypothesis
    runs to the length limit, while the hypotheses that ended early are finished and look good."""

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        out = torch.full_like(scores, -1e9)
        out[:, 5] = -0.04
        out[:, EOS] = -1.0 if input_ids.shape[1] == 1 else -0.3
        return out


def test_never_stopping_early_keeps_the_best_gnmt_hypothesis(monkeypatch) -> None:
    """With `early_stopping="never"`, beam search stops once no running beam, even at the length limit, can beat
    the finished ones; with the GNMT penalty that bound must divide the running scores by the penalty (comparing
    raw scores stops too early here). It keeps the best hypothesis and score of a search that runs every beam
    to the limit, which is known in closed form here (1e-5)."""
    model = tiny_model(seed=3)
    ids, mask = padded_batch([7, 5], seed=9)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=2, max_new_tokens=14, length_penalty=1.0)
    kwargs |= dict(custom_generate=gnmt_beam_search, return_dict_in_generate=True, output_scores=True)
    kwargs |= dict(logits_processor=LogitsProcessorList([ScriptedLogProbs()]), early_stopping="never")
    bounded = model.generate(**kwargs)
    never_stop = staticmethod(
        lambda is_early_stop_heuristic_unsatisfied, **_: is_early_stop_heuristic_unsatisfied
    )
    monkeypatch.setattr(GenerationMixin, "_check_early_stop_heuristic", never_stop)
    exhaustive = model.generate(**kwargs)
    best = torch.tensor([PAD] + [5] * 14)  # the length limit, where the beams are closed without eos
    assert all(torch.equal(out.sequences, best.expand(2, -1)) for out in (bounded, exhaustive))
    expected = -14 * 0.04 / gnmt_penalty(14, 1.0)
    torch.testing.assert_close(bounded.sequences_scores, torch.full((2,), expected), atol=1e-5, rtol=0)
    torch.testing.assert_close(exhaustive.sequences_scores, bounded.sequences_scores, atol=1e-5, rtol=0)
