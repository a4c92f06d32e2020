"""The depth study's worker (bench/lib/depth/study.py, run by `bench/depth_multi30k.py --worker`) end to end on a
tiny synthetic corpus: a run stopped after an epoch checkpoint (a sitting's end, `--until`) and resumed (`--reuse`)
ends where the same run without a stop ends. The study's runs span sittings this way, so its numbers rest on it.
Tiny models, three epochs; seconds."""

from __future__ import annotations

import argparse
import itertools
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM

import deep_nmt_hf.training
from bench.lib.depth import core, study
from deep_nmt_hf.data.tokenization import train_tokenizer

WORDS = [f"w{i}" for i in range(24)]


def corpus(n: int, seed: int) -> list[tuple[str, str]]:
    """Pairs whose target is the source's words mapped and reversed: a model must read the source."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        source = [rng.choice(WORDS) for _ in range(rng.randint(3, 8))]
        pairs.append((" ".join(source), " ".join(f"v{w[1:]}" for w in reversed(source))))
    return pairs


class Stop(Exception):
    """The end of a sitting: the worker is killed once an epoch checkpoint is on disk."""


class StopAfterFirstEpoch(deep_nmt_hf.training.DivergenceCallback):
    def on_save(self, targs, state, control, **kwargs):  # noqa: ANN001, ANN201
        raise Stop


class CountSteps(deep_nmt_hf.training.DivergenceCallback):
    steps = 0

    def on_step_end(self, targs, state, control, **kwargs):  # noqa: ANN001, ANN201
        CountSteps.steps += 1
        return super().on_step_end(targs, state, control, **kwargs)


def tiny_study(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> argparse.Namespace:
    splits = {"train": corpus(96, 0), "val": corpus(12, 1), "test_2016_flickr": corpus(12, 2)}
    texts = [text for pairs in splits.values() for pair in pairs for text in pair]
    tokenizer = train_tokenizer(texts, vocab_size=80)
    monkeypatch.setattr(study, "multi30k_tokenizer", lambda vocab_size: tokenizer)
    monkeypatch.setattr(study, "multi30k_pairs", lambda split, limit=None: splits[split][:limit])
    monkeypatch.setattr(study, "machine_probe", lambda cache: 123.0)  # tested in test_machine_speed.py
    options = "--epochs 3 --warmup-scale 0.001 --d-model 16 --vocab-size 80 --max-tokens 96 --max-length 16 "
    options += "--valid-sentences 12 --max-test-samples 12 --average 2"
    return study.build_parser().parse_args(options.split())


@pytest.mark.parametrize("name", ["post-6-6", "admin-18-6", "marian-6-6"])
def test_a_run_stopped_after_an_epoch_and_resumed_ends_as_one_without_a_stop(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same seed, same data: one run trains its 3 epochs at once; the other is stopped once its first epoch
    checkpoint is written and then resumed from it. The resumed run neither repeats nor skips an epoch, its
    learning rate continues the annealed schedule, and it ends with the same validation losses (1e-5 nats) and
    the same averaged weights (1e-5) — for ADMIN too, whose profiled ω lives in the checkpoint (the resumed run
    must not profile again over it), and for stock Marian, which trains on the study's label-smoothed loss."""
    args = tiny_study(tmp_path, monkeypatch)
    ends, trained = {}, {}
    for how in ("at once", "stopped and resumed"):
        monkeypatch.setattr(core, "RUNS", tmp_path / how / "runs")
        monkeypatch.setattr(core, "RECORDS", tmp_path / how / "records")
        if how == "stopped and resumed":
            with monkeypatch.context() as patched:
                patched.setattr(deep_nmt_hf.training, "DivergenceCallback", StopAfterFirstEpoch)
                with pytest.raises(Stop):
                    study.train_model(name, 1, args)
            assert not core.record_path(name, 1, args).exists()
            assert [e["epoch"] for e in core.run_history(name, 1, args)] == [1.0]
        with monkeypatch.context() as patched:
            patched.setattr(deep_nmt_hf.training, "DivergenceCallback", CountSteps)
            CountSteps.steps = 0
            study.train_model(name, 1, args)
        trained[how] = CountSteps.steps
        record = core._read_json(core.record_path(name, 1, args))
        averaged = AutoModelForSeq2SeqLM.from_pretrained(core.run_dir(name, 1, args) / "averaged")
        ends[how] = (record, averaged)

    (once, once_model), (resumed, resumed_model) = ends["at once"], ends["stopped and resumed"]
    assert [e["epoch"] for e in resumed["history"]] == [1.0, 2.0, 3.0]
    assert [e["probe_ms"] for e in resumed["history"]] == [123.0] * 3  # every epoch names its machine's speed
    steps = [e["step"] for e in once["history"]]
    assert trained == {"at once": steps[-1], "stopped and resumed": steps[-1] - steps[0]}  # it resumed
    assert [e["step"] for e in resumed["history"]] == [e["step"] for e in once["history"]]
    # not train_loss: the Trainer logs the mean loss since its last log, and a resumed run's first log starts
    # at the resume, so that window differs while the training does not
    for key in ("learning_rate", "valid_loss"):
        assert [e[key] for e in resumed["history"]] == pytest.approx(
            [e[key] for e in once["history"]], abs=1e-5
        )
    losses = [e["valid_loss"] for e in once["history"]]
    assert all(a - b > 1e-3 for a, b in itertools.pairwise(losses)), (
        losses
    )  # a repeated or skipped epoch shows
    for a, b in zip(once_model.state_dict().items(), resumed_model.state_dict().items(), strict=True):
        assert a[0] == b[0]
        torch.testing.assert_close(a[1], b[1], atol=1e-5, rtol=0)
    assert resumed["test"]["averaged"]["bleu"] == pytest.approx(once["test"]["averaged"]["bleu"], abs=1e-6)
