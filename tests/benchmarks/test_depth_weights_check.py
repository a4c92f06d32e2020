"""bench/depth_weights_check.py: a run's committed float16 weights, reloaded and decoded again, reproduce what its
record measured on the float32 model; another model's weights under its name do not. A tiny model trained on a
copy task, 24 sentences; seconds."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

import pytest
import torch
from factories import VOCAB, variant_model

from bench import depth_weights_check as check
from bench.lib import common
from bench.lib.depth import core
from bench.lib.study_weights import save_weights, tokenizer_digest
from deep_nmt_hf.data.tokenization import train_tokenizer
from deep_nmt_hf.science.significance import bleu_from_statistics, bleu_statistics
from deep_nmt_hf.training import translate

WORDS = [a + b for a in "bdfgklmnpst" for b in "aeiou"]
TEXTS = [" ".join(WORDS[(i * k) % len(WORDS)] for k in (1, 3, 7, 11, 13)) for i in range(24)]
PAIRS = [(text, text) for text in TEXTS]  # a copy task: a model's score says how far it learned it


@functools.cache
def copy_tokenizer():
    return train_tokenizer(TEXTS, vocab_size=VOCAB)


@pytest.fixture
def tiny_study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    tokenizer = copy_tokenizer()
    assert len(tokenizer) == VOCAB and tokenizer.pad_token_id == VOCAB - 1  # the factories' id layout
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(core, "STUDY_CACHE", tmp_path / "cache")
    monkeypatch.setattr(check, "multi30k_tokenizer", lambda vocab_size: tokenizer)
    monkeypatch.setattr(check, "multi30k_pairs", lambda split, limit=None: PAIRS[:limit])
    monkeypatch.setattr(common, "RESULTS", tmp_path / "results")
    return tokenizer, argparse.Namespace(epochs=30, quick=False)


@functools.cache
def copier(steps: int):
    """A tiny model trained `steps` Adam steps on the copy task: at 30 steps it copies some sentences and not
    others (a random tiny model repeats one token everywhere, which would hide a wrong file); at 15 steps most
    of its translations differ from the 30-step model's (a half-trained checkpoint)."""
    tokenizer = copy_tokenizer()
    model = variant_model("base", seed=1).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    batch = tokenizer(TEXTS, text_target=TEXTS, padding=True, return_tensors="pt")
    batch["labels"][batch["labels"] == tokenizer.pad_token_id] = -100
    for _ in range(steps):
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.generation_config.num_beams = 3
    model.generation_config.max_length = 12
    return model.eval()


def finished_run(tokenizer, args: argparse.Namespace, name: str, seed: int) -> None:
    """What `depth_multi30k.finish` leaves: a record with the float32 model's test statistics, and its weights."""
    model = copier(30)
    hypotheses = translate(model, tokenizer, [s for s, _ in PAIRS], num_beams=3, batch_size=64)
    statistics = bleu_statistics(hypotheses, [t for _, t in PAIRS])
    assert len({tuple(s) for s in statistics}) > 5  # its scores differ between sentences
    record = {
        "name": name,
        "seed": seed,
        "options": {"num_beams": 3},
        "settings": {"vocab_size": VOCAB},
        "tokenizer_sha256": tokenizer_digest(tokenizer),
        "test": {
            "averaged": {
                "bleu": float(bleu_from_statistics([sum(c) for c in zip(*statistics, strict=True)])),
                "bleu_statistics": statistics,
                "num_sentences": len(PAIRS),
            }
        },
    }
    core._write_json(core.record_path(name, seed, args), record)
    save_weights(model, core.weights_path(name, seed, args), tokenizer_digest(tokenizer))


def test_committed_weights_reproduce_and_foreign_ones_do_not(tiny_study, monkeypatch) -> None:
    tokenizer, args = tiny_study
    finished_run(tokenizer, args, "pre-18-6", 1)
    finished_run(tokenizer, args, "marian-6-6", 2)
    core._write_json(core.record_path("pre-18-6", 2, args), {"name": "pre-18-6"})  # a record without weights
    assert check.committed_runs(args) == [("marian-6-6", 2), ("pre-18-6", 1)]  # the study's row order

    result = check.check_run("pre-18-6", 1, args)
    assert result["reproduces"] and result["sentences"] == len(PAIRS)
    assert result["same_sentences"] >= 0.9 * len(PAIRS) and abs(result["delta"]) <= check.MAX_DELTA

    # cached by the file's digest: a second check does not decode again
    import deep_nmt_hf.training

    with monkeypatch.context() as patched:
        patched.setattr(deep_nmt_hf.training, "translate", lambda *a, **k: pytest.fail("decoded again"))
        assert check.check_run("pre-18-6", 1, args) == result


def test_another_models_weights_are_caught_and_reported(tiny_study, capsys) -> None:
    tokenizer, args = tiny_study
    finished_run(tokenizer, args, "pre-18-6", 1)
    finished_run(tokenizer, args, "pre-18-6", 2)
    assert check.main([]) == 0
    assert "2 of 2 committed runs reproduce their record" in (common.RESULTS / f"{check.NAME}.md").read_text()

    # seed 2's file replaced by a half-trained checkpoint's weights: a new digest, checked again, and caught
    save_weights(copier(15), core.weights_path("pre-18-6", 2, args), tokenizer_digest(tokenizer))
    assert check.main([]) == 1
    markdown = (common.RESULTS / f"{check.NAME}.md").read_text()
    assert "1 of 2 committed runs reproduce their record (not: pre-18-6 seed 2)" in markdown
    wrong = check.check_run("pre-18-6", 2, args)
    assert not wrong["reproduces"] and wrong["same_sentences"] < 0.5 * len(PAIRS)

    # --only prints one row and writes nothing; an unknown row is named with the rows that have weights
    (common.RESULTS / f"{check.NAME}.md").unlink()
    capsys.readouterr()
    assert check.main(["--only", "pre-18-6", "--seeds", "1"]) == 0
    assert "1 of 1 committed runs reproduce" in capsys.readouterr().out
    assert not (common.RESULTS / f"{check.NAME}.md").exists()
    with pytest.raises(
        SystemExit, match=r"no committed weights for post-18-6; rows with weights: \['pre-18-6'\]"
    ):
        check.main(["--only", "post-18-6"])
