"""GNMT's length penalty, applied by the model's own `generate` where the generation config asks for it
(model/length_penalty.py): scores, ranking, equivalence at α = 0, saving, and the same beams and scores through
every door — `model.generate`, `pipeline("translation")`, `deep-nmt translate` and a `trust_remote_code` load in a
fresh process without the package."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest
import torch
from factories import EOS, PAD, padded_batch, tiny_model
from fresh_process import run_without_package
from transformers import GenerationConfig, GenerationMixin, LogitsProcessor, LogitsProcessorList, pipeline

import deep_nmt_hf
from deep_nmt_hf.cli import main
from deep_nmt_hf.data.synthetic import generate_pairs
from deep_nmt_hf.data.tokenization import special_token_ids, train_tokenizer
from deep_nmt_hf.model.length_penalty import gnmt_penalty, length_penalty_form
from deep_nmt_hf.publish.folding import fold_to_stock
from deep_nmt_hf.training.generation_settings import translation_generation_config
from deep_nmt_hf.training.length_penalty import set_length_penalty


def test_gnmt_penalty_formula() -> None:
    assert gnmt_penalty(1, 0.6) == pytest.approx(1.0)
    assert gnmt_penalty(7, 0.6) == pytest.approx(2.0**0.6)
    assert gnmt_penalty(30, 0.0) == 1.0


def _generate(model, form: str | None = None, **kwargs):
    ids, mask = padded_batch([7, 5, 3], seed=4)
    if form is not None:
        model.generation_config.length_penalty_form = form
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


def _gnmt_scores(model, out, alpha: float) -> torch.Tensor:
    """Each returned hypothesis's summed log-prob over GNMT's penalty of its generated length (EOS included)."""
    transition = model.compute_transition_scores(
        out.sequences, out.scores, out.beam_indices, normalize_logits=False
    )
    generated = (out.beam_indices[:, : transition.shape[1]] >= 0).sum(-1)
    return torch.stack([transition[i].sum() / gnmt_penalty(int(n), alpha) for i, n in enumerate(generated)])


def test_alpha_zero_is_transformers_beam_search_without_penalty() -> None:
    model = tiny_model(seed=3)
    ours = _generate(model, "gnmt", length_penalty=0.0)
    stock = _generate(model, "fairseq", length_penalty=0.0)
    assert torch.equal(ours.sequences, stock.sequences)
    torch.testing.assert_close(ours.sequences_scores, stock.sequences_scores)


def test_generate_scores_by_the_gnmt_penalty_where_the_config_asks() -> None:
    model = tiny_model(seed=3)
    out = _generate(model, "gnmt", length_penalty=0.6)
    torch.testing.assert_close(out.sequences_scores, _gnmt_scores(model, out, 0.6), rtol=1e-4, atol=1e-4)
    per_input = out.sequences_scores.view(3, 4)
    assert torch.all(per_input[:, :-1] >= per_input[:, 1:])  # n-best sorted by the GNMT score
    stock = _generate(model, "fairseq", length_penalty=0.6)  # len^0.6: other scores
    assert not torch.allclose(stock.sequences_scores, out.sequences_scores)
    # a call's own generation config decides over the model's
    own = GenerationConfig(num_beams=4, length_penalty=0.6, length_penalty_form="fairseq")
    assert torch.equal(_generate(model, generation_config=own).sequences_scores, stock.sequences_scores)


def test_form_is_saved_and_checked(tmp_path) -> None:
    config = GenerationConfig(num_beams=4)
    assert length_penalty_form(config) == "fairseq"  # none saved: Transformers' len^α
    set_length_penalty(config, 0.6, "gnmt")
    config.save_pretrained(tmp_path)
    loaded = GenerationConfig.from_pretrained(tmp_path)
    assert loaded.length_penalty == 0.6 and length_penalty_form(loaded) == "gnmt"
    with pytest.raises(ValueError, match="length_penalty_form='t2t'"):
        set_length_penalty(loaded, 0.6, "t2t")
    loaded.length_penalty_form = "t2t"
    with pytest.raises(ValueError, match="generation_config.length_penalty_form='t2t'; valid: fairseq, gnmt"):
        tiny_model(seed=0).generate(
            *padded_batch([3], seed=0)[:1], generation_config=loaded, max_new_tokens=2
        )


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
    model.generation_config.length_penalty_form = "gnmt"
    ids, mask = padded_batch([7, 5], seed=9)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=2, max_new_tokens=14, length_penalty=1.0)
    kwargs |= dict(return_dict_in_generate=True, output_scores=True)
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


# ----------------------------------------------------------------------------------------- every door alike
SOURCE = "kol nuto vugat ."
ALPHA, MAX_LENGTH = 0.6, 17  # max_length counts the decoder start token (17: as fold_to_stock checks)

REMOTE = """
import json, torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
out = model.generate(**torch.load("batch.pt"), max_length=%d, output_scores=True, return_dict_in_generate=True)
print(json.dumps({"module": type(model).__module__, "sequences": out.sequences.tolist(),
                  "scores": out.sequences_scores.tolist()}))
"""


@pytest.fixture(scope="module")
def tokenizer():
    pairs = generate_pairs(400, seed=3)
    return train_tokenizer([s for pair in pairs for s in pair], vocab_size=300, min_frequency=1)


def _discriminating_model(tokenizer) -> torch.nn.Module:
    """A tiny untrained model and saved search under which GNMT's and Transformers' forms pick different best
    beams (an exponential length decay on eos makes hypotheses finish at several lengths), so that a door that
    ignores the form gives another translation."""
    ids = special_token_ids(tokenizer)
    shape = dict(d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, encoder_layers=2, decoder_layers=2)
    shape |= dict(encoder_attention_heads=4, decoder_attention_heads=4, max_position_embeddings=64)
    batch = tokenizer([SOURCE], return_tensors="pt")
    for seed in range(20):
        torch.manual_seed(seed)
        model = deep_nmt_hf.DeepNMTForConditionalGeneration(deep_nmt_hf.DeepNMTConfig(**shape, **ids)).eval()
        settings = translation_generation_config(model.config, num_beams=4, max_length=MAX_LENGTH)
        settings.bad_words_ids += [
            [tokenizer.convert_tokens_to_ids("▁")]
        ]  # the bare piece decodes to nothing
        settings.exponential_decay_length_penalty = (1, 1.2)
        set_length_penalty(settings, ALPHA, "fairseq")
        model.generation_config = settings
        fairseq = model.generate(**batch)
        set_length_penalty(settings, ALPHA, "gnmt")
        gnmt = model.generate(**batch)
        if fairseq.shape != gnmt.shape or not torch.equal(fairseq, gnmt):
            return model
    raise AssertionError("no seed where the two forms pick different beams: change the search settings")


@pytest.mark.slow
def test_every_door_decodes_alike(tmp_path: Path, tokenizer, monkeypatch, capsys) -> None:
    model = _discriminating_model(tokenizer)
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    batch = dict(tokenizer([SOURCE], return_tensors="pt"))
    torch.save(batch, tmp_path / "batch.pt")

    direct = model.generate(**batch, max_length=MAX_LENGTH, output_scores=True, return_dict_in_generate=True)
    torch.testing.assert_close(
        direct.sequences_scores, _gnmt_scores(model, direct, ALPHA), rtol=1e-5, atol=1e-5
    )
    text = tokenizer.decode(direct.sequences[0], skip_special_tokens=True).strip()

    remote = run_without_package(REMOTE % MAX_LENGTH, tmp_path)
    assert remote["module"].startswith("transformers_modules")
    assert remote["sequences"] == direct.sequences.tolist()
    torch.testing.assert_close(torch.tensor(remote["scores"]), direct.sequences_scores, rtol=0, atol=1e-6)

    translator = pipeline("translation", model=str(tmp_path / "model"))
    assert translator(SOURCE, max_new_tokens=MAX_LENGTH - 1) == [{"translation_text": text}]

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(f"{SOURCE}\n".encode())))
    command = ["translate", str(tmp_path / "model"), "--max-new-tokens", str(MAX_LENGTH - 1)]
    assert main(command) == 0
    assert capsys.readouterr().out == text + "\n"
    assert (
        json.loads((tmp_path / "model" / "generation_config.json").read_text())["length_penalty_form"]
        == "gnmt"
    )


def test_a_gnmt_model_folds_and_its_stock_copy_says_what_it_applies(tokenizer, caplog) -> None:
    """The stock classes have no GNMT penalty: the fold is checked under len^α for both models (under GNMT the
    original picks other beams here, which failed the check), and the folded copy says "fairseq", with a warning."""
    model = _discriminating_model(tokenizer)
    with caplog.at_level("WARNING", logger="deep_nmt_hf.publish.folding"):
        stock, report = fold_to_stock(model, batch=dict(tokenizer([SOURCE], return_tensors="pt")))
    assert report.beam_outputs_identical and type(stock).__name__ == "MarianMTModel"
    assert stock.generation_config.length_penalty_form == "fairseq"
    assert model.generation_config.length_penalty_form == "gnmt"  # the original keeps its own
    assert "length_penalty_form='gnmt'" in caplog.text
