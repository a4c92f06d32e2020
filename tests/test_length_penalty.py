"""GNMT length penalty through generate(custom_generate=...): scores, ranking, equivalence at α = 0, saving."""

from __future__ import annotations

import pytest
import torch
from factories import padded_batch, tiny_model
from transformers import GenerationConfig

from deep_nmt_hf.length_penalty import generation_kwargs, gnmt_beam_search, gnmt_penalty, set_length_penalty


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
