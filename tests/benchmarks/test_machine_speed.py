"""bench/lib/machine_speed.py: the probe that puts CPU-seconds of different machines on one scale, and how the depth
study prices and reports with it (an epoch of a slower machine counts as fewer reference seconds; `--until`
starts a run only where this machine finishes it). Synthetic histories; seconds."""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

import pytest
import torch

from bench.lib import machine_speed
from bench.lib.depth import core, pricing, study, summaries

REF = machine_speed.REFERENCE_PROBE_MS
RECORDS = Path(__file__).resolve().parents[2] / "bench" / "results" / "depth_multi30k"


def epoch(cpu: float, probe: float | None = None, at: float = 1.0) -> dict:
    entry = {"epoch": at, "train_cpu_s": cpu - 10.0, "valid_decode_cpu_s": 10.0, "valid_loss": 3.0}
    return entry | ({"probe_ms": probe} if probe else {})


def test_the_probe_times_training_steps_on_one_thread() -> None:
    threads = torch.get_num_threads()
    ms = machine_speed.probe_ms(steps=2, warmup=1)
    assert math.isfinite(ms) and 1.0 < ms < 60_000.0
    assert torch.get_num_threads() == threads  # the caller's threads are restored


def test_epochs_of_a_slower_machine_count_in_reference_seconds() -> None:
    """An epoch of a machine whose probe is 2.5× the reference's counts 1/2.5 of its CPU-s; an epoch without a
    probe was trained on the reference machine and counts as measured; the status line speaks of this machine."""
    history = [epoch(100.0), epoch(250.0, 2.5 * REF, at=2.0)]
    assert core.epoch_cpu_s(history) == pytest.approx([100.0, 100.0])
    assert core.epoch_cpu_s(history, reference=False) == pytest.approx([100.0, 250.0])
    assert core._cpu_s_per_epoch(history) == pytest.approx(175.0)
    summary = summaries.seed_summary(
        {"seed": 1, "history": history, "test": {"averaged": {"decode_tokens_per_cpu_s": 1000.0}}}
    )
    assert summary["decode_tokens_per_cpu_s"] == pytest.approx(2500.0)  # scored on the slower machine
    assert summary["cpu_s_per_epoch"] == pytest.approx(100.0)
    assert summary["train_cpu_s_per_epoch"] == pytest.approx((90.0 + 240.0 / 2.5) / 2)
    assert summary["cpu_hours"] == pytest.approx(200.0 / 3600)
    # a row with a seed on each machine prices its next seed at one rate, not at the mean of the two machines
    records = {"post-18-6": [{"seed": 1, "history": [epoch(100.0)] * 4}, {"seed": 2, "history": history}]}
    (left,) = pricing.remaining([("post-18-6", 3)], records, epochs=5)
    assert (left["basis"], left["cpu_s_per_epoch"]) == ("row", pytest.approx(100.0))


def test_until_prices_a_run_at_this_machines_speed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that the reference machine ends before `--until` does not start on a machine 2.3× slower."""
    monkeypatch.setattr(core, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    a = study.build_parser().parse_args(["--epochs", "30", "--until", "17:15"])
    core._write_json(core.run_dir("pre-18-6", 1, a) / "epochs.json", [epoch(230.0, 2.3 * REF)] * 10)
    hours = study.hours_left("pre-18-6", 1, a)
    assert hours == pytest.approx(21 * 100.0 / 3600)  # reference hours: 20 epochs + the scoring at 100 CPU-s
    end = time.time() + 2100 * study.WALL_PER_CPU + 60
    assert study.too_late("pre-18-6", 1, a, end) == ""
    late = study.too_late("pre-18-6", 1, a, end, machine_speed.machine_factor(2.3 * REF))
    assert (
        "needs ≈ 1.3 CPU-hours here (0.6 on the reference machine)" in late and "past --until 17:15" in late
    )


def test_a_resumed_run_stamps_the_epochs_this_machine_trained_with_its_probe() -> None:
    """Epochs whose checkpoint was written since boot were trained here and carry this boot's probe (stamped or
    not before); older ones, or epochs without a checkpoint, keep what they carry."""
    booted = 1000.0
    history = [epoch(100.0), epoch(100.0), epoch(200.0, 500.0), epoch(100.0), epoch(300.0, 600.0)]
    written = [900.0, 1100.0, 1200.0, None, 900.0]
    stamped = machine_speed.stamp_since_boot(history, written, 400.0, booted)
    assert [e.get("probe_ms") for e in stamped] == [None, 400.0, 400.0, None, 600.0]
    assert "probe_ms" not in history[1]  # the input is not changed
    unknown = machine_speed.stamp_since_boot(history, [1100.0] * 5, 400.0, None)  # no /proc/stat
    assert [e.get("probe_ms") for e in unknown] == [None, None, 500.0, None, 600.0]
    assert machine_speed.boot_time() is None or machine_speed.boot_time() < time.time()


def test_the_probe_is_measured_once_per_boot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    measured = []
    monkeypatch.setattr(machine_speed, "probe_ms", lambda: measured.append(1) or 100.0 + len(measured))
    monkeypatch.setattr(machine_speed, "boot_id", lambda: "boot-a")
    assert machine_speed.machine_probe(tmp_path) == machine_speed.machine_probe(tmp_path) == 101.0
    assert len(measured) == 1  # every run of the boot is stamped with one value
    monkeypatch.setattr(machine_speed, "boot_id", lambda: "boot-b")  # a new boot, perhaps a new machine
    assert machine_speed.machine_probe(tmp_path) == 102.0
    monkeypatch.setattr(machine_speed, "boot_id", lambda: None)  # cannot tell: measured each time, not kept
    assert machine_speed.machine_probe(tmp_path) == 103.0
    assert machine_speed.machine_probe(tmp_path) == 104.0


def test_the_reference_probe_agrees_with_the_rows_trained_on_both_machines() -> None:
    """REFERENCE_PROBE_MS (the machine that trained the first 40 runs was not probed) is what the committed
    records of the rows trained on both it and a probed machine say it was: their median within 10%, every row
    within 20%, since one scalar probe does not scale every row alike (inferred 179-220 ms over the nine rows of
    2026-11-27, median 193; the deepest, post-36-6, ADMIN 36-6 at lr 5e-4 and the plain 6-24 decoder, slow down
    less on the slower machine than the probe does)."""
    inferred = machine_speed.infer_reference(core.load_records(RECORDS, 30))
    assert inferred, "no committed row has seeds on both the reference machine and a probed one"
    assert statistics.median(inferred.values()) == pytest.approx(REF, rel=0.10)
    for name, probe in inferred.items():
        assert probe == pytest.approx(REF, rel=0.20), name
