"""Checkpoint averaging (`deep-nmt average DIR --last N`): the mean, the files, the errors, never half-written."""

from __future__ import annotations

import json

import pytest
import torch
from factories import tiny_model
from transformers import AutoModelForSeq2SeqLM

from deep_nmt_hf.cli import main
from deep_nmt_hf.training.averaging import AveragingError, average_checkpoints, find_checkpoints


@pytest.fixture
def run_dir(tmp_path):
    """A run directory with checkpoint-5/10/20 (different weights, Trainer state files) and a tokenizer file."""
    run = tmp_path / "run"
    for seed, step in ((1, 5), (2, 10), (3, 20)):
        checkpoint = run / f"checkpoint-{step}"
        tiny_model(seed=seed, dropout=0.0).save_pretrained(checkpoint)
        (checkpoint / "optimizer.pt").write_bytes(b"state")
        (checkpoint / "trainer_state.json").write_text("{}")
    (run / "tokenizer.json").write_text('{"fake": true}')
    return run


def test_checkpoints_are_ordered_by_step(run_dir) -> None:
    (run_dir / "checkpoint-x").mkdir()
    assert [p.name for p in find_checkpoints(run_dir)] == ["checkpoint-5", "checkpoint-10", "checkpoint-20"]


def test_average_of_the_last_two_is_their_mean_and_loads(run_dir, tmp_path) -> None:
    out = average_checkpoints(run_dir, last=2, output=tmp_path / "avg")
    averaged = AutoModelForSeq2SeqLM.from_pretrained(out)
    a = AutoModelForSeq2SeqLM.from_pretrained(run_dir / "checkpoint-10").state_dict()
    b = AutoModelForSeq2SeqLM.from_pretrained(run_dir / "checkpoint-20").state_dict()
    for name, value in averaged.state_dict().items():
        torch.testing.assert_close(value, (a[name] + b[name]) / 2, rtol=1e-6, atol=1e-7, msg=name)
    assert averaged.lm_head.weight.data_ptr() == averaged.model.shared.weight.data_ptr()  # ties kept
    files = {p.name for p in out.iterdir()}
    assert {
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "averaging.json",
    } <= files
    assert not files & {"optimizer.pt", "trainer_state.json"}
    assert json.loads((out / "averaging.json").read_text())["averaged"] == ["checkpoint-10", "checkpoint-20"]


def test_cli_default_output_and_errors(run_dir, capsys) -> None:
    assert main(["average", str(run_dir), "--last", "3"]) == 0
    assert (run_dir / "averaged-last-3" / "model.safetensors").is_file()
    assert main(["average", str(run_dir), "--last", "3"]) == 2  # exists already
    assert "exists already" in capsys.readouterr().err
    assert main(["average", str(run_dir), "--last", "4"]) == 2
    err = capsys.readouterr().err
    assert "has 3 checkpoint-* directories" in err and "--last 4" in err
    leftovers = [p.name for p in run_dir.iterdir() if p.name.startswith(".")]
    assert leftovers == []  # nothing half-written


def test_mismatched_checkpoints_are_refused(run_dir) -> None:
    tiny_model(seed=4, d_model=48).save_pretrained(run_dir / "checkpoint-30")
    with pytest.raises(AveragingError, match="checkpoint-30"):
        average_checkpoints(run_dir, last=2)
    assert not (run_dir / "averaged-last-2").exists()
