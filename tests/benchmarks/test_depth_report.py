"""The depth study's report (bench/lib/depth/report.py, summaries.py) on synthetic records: verdict rules, Holm
across every comparison, the slope rule; pricing.py's: what is left and its cost; pilot.py's budget sentence; the
plan and the scheduler of study.py. No data files, no training; seconds."""

from __future__ import annotations

import argparse
import json
import random
import statistics
from pathlib import Path

import pytest

from bench.lib import machine_speed
from bench.lib.depth import claims as depth_claims
from bench.lib.depth import core, pilot, pricing, report, study, summaries
from bench.lib.depth import rows as depth_rows
from bench.lib.depth.style import line_style
from deep_nmt_hf.science.significance import (  # noqa: E402
    bleu_from_statistics,
    bleu_statistics,
    detectable_delta,
    holm,
    t_ppf,
    t_sf,
)

WORDS = [f"w{i}" for i in range(40)]
REFERENCES = [
    " ".join(random.Random(i).choice(WORDS) for _ in range(random.Random(i + 1000).randint(4, 12)))
    for i in range(120)
]
N_SAMPLES = 200  # enough for the rules; the bootstrap itself is tested in test_significance.py


def args(epochs: int = 5) -> argparse.Namespace:
    """The study's default command line with `epochs`."""
    return study.build_parser().parse_args(["--epochs", str(epochs)])


def record(
    name: str,
    seed: int,
    error: float,
    src: float = 2.5,
    diverged: dict | None = None,
    epochs: int = 5,
    final_slope: float = 0.0,
    parameters: int = 1_000_000,
) -> dict:
    """A finished run: translations with word error rate `error`, source reliance `src` nats, a validation loss
    falling to a plateau with `final_slope` nats per epoch over its last epochs."""
    rng = random.Random(seed * 7919 + int(error * 1000))
    hypotheses = [
        " ".join(w if rng.random() > error else rng.choice(WORDS) for w in r.split()) for r in REFERENCES
    ]
    stats = bleu_statistics(hypotheses, REFERENCES)
    bleu = bleu_from_statistics([sum(column) for column in zip(*stats, strict=True)])
    scores = {
        "bleu": bleu,
        "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0",
        "chrf": 50.0,
        "chrf_signature": "chrF sig",
        "ter": 50.0,
        "ter_signature": "TER sig",
        "length_ratio": 1.0,
        "bleu_statistics": stats,
        "checkpoints": [],
        "decode_tokens_per_cpu_s": 1000.0,
    }
    nll = {"train": 2.0, "val": 2.2, "val_wrong_source": 2.2 + src}
    history = [
        {
            "epoch": float(e),
            "step": 100 * e,
            "train_cpu_s": 100.0,
            "valid_decode_cpu_s": 10.0,
            "train_loss": 3.0,
            "grad_norm": 1.0,
            "learning_rate": 1e-3 * (1 - e / epochs),
            "valid_loss": 3.0 + 1.0 / e + final_slope * e,
        }
        for e in range(1, epochs + 1)
    ]
    return {
        "name": name,
        "seed": seed,
        "description": name,
        "variant": "base",
        "recipe": "admin",
        "baseline": depth_rows.MODELS[name].baseline,
        "options": {"learning_rate": 1e-3, "warmup_steps": 400, "num_beams": 4, "length_penalty": 0.6},
        "num_parameters": parameters,
        "epochs": float(epochs),
        "best_epoch": float(epochs),
        "history": history,
        "test": {"best": scores, "averaged": scores},
        "nll": {"best": nll, "averaged": nll},
        "settings": core.settings(args(epochs)),
        "saved": "/nowhere",
        "diverged": diverged,
    }


def by_name(verdicts: list[dict], system: str, baseline: str) -> dict:
    return next(v for v in verdicts if v["system"] == system and v["baseline"] == baseline)


def write_records(recs: dict[str, list[dict]], a: argparse.Namespace) -> None:
    """Commit RECS as the study's finished runs (under the monkeypatched RECORDS)."""
    for name, runs in recs.items():
        for rec in runs:
            core._write_json(core.record_path(name, rec["seed"], a), rec)


@pytest.fixture(scope="module")
def records() -> dict[str, list[dict]]:
    """ADMIN's trio with three seeds each: post-6-6 and ADMIN 18-6 train, default post-LN 18-6 is clearly worse."""
    return {
        "post-6-6": [record("post-6-6", s, 0.30) for s in (1, 2, 3)],
        "post-18-6": [record("post-18-6", s, 0.45) for s in (1, 2, 3)],
        "admin-18-6": [record("admin-18-6", s, 0.20) for s in (1, 2, 3)],
    }


def test_rows_without_records_cannot_be_tested_yet(records: dict) -> None:
    verdicts, _ = report.claim_verdicts(records, n_samples=N_SAMPLES)
    dlcl = by_name(verdicts, "dlcl-18-6", "pre-18-6")
    assert dlcl["verdict"] == "cannot be tested yet"
    assert "dlcl-18-6" in dlcl["why"] and "pre-18-6" in dlcl["why"]
    marian = next(v for v in verdicts if v["baseline"] == "marian-6-6")
    assert marian["system"] == "admin-18-6"  # the best deep row that trained
    assert marian["verdict"] == "cannot be tested yet"
    assert "no record of marian-6-6" in marian["why"]
    assert by_name(verdicts, "admin-18-6", "post-18-6")["verdict"] == "reproduces"
    behind = by_name(verdicts, "post-18-6", "post-6-6")
    assert behind["verdict"] == "reproduces" and "falls behind" in behind["why"]
    assert behind["seeds"] == {"post-18-6": 3, "post-6-6": 3}


def test_holm_is_applied_across_every_comparison(records: dict) -> None:
    tests = report.run_comparisons(records, n_samples=N_SAMPLES)
    pairs = {(t["system"], t["baseline"]) for t in tests}
    assert pairs == {("post-18-6", "post-6-6"), ("admin-18-6", "post-18-6"), ("admin-18-6", "post-6-6")}
    assert [t["p_holm"] for t in tests] == pytest.approx(holm([t["p_value"] for t in tests]))
    assert all(t["p_holm"] >= t["p_value"] for t in tests)
    assert all(t["system_runs"] == t["baseline_runs"] == 3 for t in tests)


def test_failure_signatures_decide_the_verdicts() -> None:
    """A diverged counterfactual (its translations as bad as a diverged model's) makes "X beats it" hold, by the
    test, the failure named; a plain deep decoder that stops reading the source collapses; a 6-6 reference that
    fails makes its claims untestable at this scale."""
    diverged = {"step": 3, "loss": float("nan"), "reason": "non-finite (NaN / inf) training loss"}
    recs = {
        "post-6-6": [record("post-6-6", 1, 0.3)],
        "post-18-6": [record("post-18-6", 1, 0.9, diverged=diverged)],
        "admin-18-6": [record("admin-18-6", 1, 0.3)],
        "pre-6-6": [record("pre-6-6", 1, 0.3, src=2.6)],
        "deep-decoder-6-12-plain": [record("deep-decoder-6-12-plain", 1, 0.9, src=0.2)],
        "deep-decoder-6-12": [record("deep-decoder-6-12", 1, 0.3, src=2.4)],
    }
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    assert by_name(verdicts, "admin-18-6", "post-18-6")["verdict"] == "reproduces"
    fails = by_name(verdicts, "post-18-6", "post-6-6")
    assert fails["verdict"] == "reproduces" and "diverged in 1 of 1" in fails["why"]
    collapse = by_name(verdicts, "deep-decoder-6-12-plain", "pre-6-6")
    assert collapse["verdict"] == "reproduces" and "0.20" in collapse["why"]
    rescue = by_name(verdicts, "deep-decoder-6-12", "deep-decoder-6-12-plain")
    assert rescue["verdict"] not in ("not applicable", "no verdict (confounded)")
    assert (
        not rescue["in_family"] and rescue["target"] is None
    )  # the paper's +28.5 is at 15-15: against 0 only

    recs["pre-6-6"] = [record("pre-6-6", 1, 0.3, src=0.01)]  # nothing reads the source at these settings
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    untestable = by_name(verdicts, "deep-decoder-6-12", "deep-decoder-6-12-plain")
    assert untestable["verdict"] == "cannot be tested at this scale"


def test_a_row_whose_seeds_disagree_fails_and_names_them() -> None:
    """One seed that stops reading the source fails its row even when the mean over seeds stays above the floor
    (0.1 and 4.0 nats: mean 2.05 > 0.5 × 2.5); the verdict names the failed seed and the one that trained, and
    the table gives its BLEU and source reliance seed by seed. A reliance that rounds to zero prints as 0.00."""
    recs = {
        "post-6-6": [record("post-6-6", s, 0.3, src=2.5) for s in (1, 2)],
        # no reliance at all: it reads 0.00 nats, not -0.00
        "post-36-6": [record("post-36-6", s, 0.9, src=-0.001) for s in (1, 2)],
        "admin-36-6": [record("admin-36-6", 1, 0.9, src=0.1), record("admin-36-6", 2, 0.3, src=4.0)],
        "deepnorm-36-6": [record("deepnorm-36-6", s, 0.3, src=2.4) for s in (1, 2)],
    }
    rows = {name: summaries.row_summary(name, runs) for name, runs in recs.items()}
    assert rows["admin-36-6"]["mean"]["src"] > depth_claims.COLLAPSE_SHARE * 2.5
    why = summaries.failure("admin-36-6", rows)
    assert why is not None and "on 1 of 2 seeds (seed 1 src 0.10 nats" in why and "on seed 2 src 4.00" in why
    assert summaries.failure("deepnorm-36-6", rows) is None
    assert summaries.failure("post-36-6", rows) == (
        "post-36-6 barely reads the source (src 0.00 nats < 0.5 × post-6-6's 2.50)"
    )
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    pair = by_name(verdicts, "admin-36-6", "post-36-6")
    assert pair["verdict"] == "inconclusive" and "on 1 of 2 seeds" in pair["why"]
    assert by_name(verdicts, "deepnorm-36-6", "post-36-6")["verdict"] == "reproduces"
    table = {
        line.split(" | ")[0].strip("| "): line.split(" | ")
        for line in report.results_table(rows).splitlines()
    }
    bleu = [f"{s['bleu']:.1f}" for s in rows["admin-36-6"]["seeds"]]
    assert table["admin-36-6"][5] == f"s1 {bleu[0]} · s2 {bleu[1]}"  # each seed, not a mean between the two
    assert table["admin-36-6"][12] == "s1 +0.10 · s2 +4.00"
    assert table["deepnorm-36-6"][5].count("±") == 1 and table["post-36-6"][12] == "+0.00"


def test_the_table_at_a_glance_has_a_line_per_claim(records: dict) -> None:
    """One line per claim in the claims' order; a tested claim shows its Δ with the CI and Holm p, a collapse
    claim its source reliance, and the paper column its Δ or, where it has none, its outcome in words."""
    recs = records | {
        "pre-6-6": [record("pre-6-6", 1, 0.3, src=2.6)],
        "deep-decoder-6-12-plain": [record("deep-decoder-6-12-plain", 1, 0.3, src=0.2)],
    }
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    lines = report.glance_table(verdicts).splitlines()[2:]
    assert len(lines) == len(depth_claims.CLAIMS)
    cells = {tuple(c.strip() for c in line.strip("|").split("|"))[1]: line for line in lines}
    trio = by_name(verdicts, "admin-18-6", "post-6-6")["test"]
    admin = cells["admin-18-6 vs post-6-6"]
    assert (
        f"| 3 vs 3 | {trio['delta']:+.2f} ({trio['ci95'][0]:+.2f} … {trio['ci95'][1]:+.2f}) | +2.50 at 60L-12L "
        "vs 6L-6L (not tested against) |" in admin
    )
    assert report.tests_note(by_name(verdicts, "admin-18-6", "post-6-6"), trio) in admin
    assert "against 0" in admin and "against +2.50" not in admin  # the paper's Δ is from other depths
    assert "| Default diverges (60L-12L) |" in cells["admin-18-6 vs post-18-6"]
    collapse = cells["deep-decoder-6-12-plain vs pre-6-6"]
    assert "| src 0.20 vs 2.60 nats |" in collapse and "**reproduces**" in collapse and "Holm" not in collapse
    assert (
        "| — | — |" in cells["admin-36-6 vs post-36-6"]
        and "cannot be tested yet" in cells["admin-36-6 vs post-36-6"]
    )


def test_the_deeper_decoder_runs_only_where_its_plain_twin_collapses(tmp_path: Path, monkeypatch) -> None:
    """Plain 6-24 reading the source: its CAD + CRT twin is not planned and its claim cannot be tested at this
    scale; plain 6-24 collapsed: the twin is planned right after the first pass and the collapse claim holds."""
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    a = args(epochs=5)
    recs = {
        "pre-6-6": [record("pre-6-6", 1, 0.3, src=2.6)],
        "deep-decoder-6-12-plain": [record("deep-decoder-6-12-plain", 1, 0.3, src=2.5)],
        "deep-decoder-6-24-plain": [record("deep-decoder-6-24-plain", 1, 0.3, src=2.4)],
    }
    write_records(recs, a)
    assert ("deep-decoder-6-24", 1) not in study.plan(a)
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    twin = by_name(verdicts, "deep-decoder-6-24", "deep-decoder-6-24-plain")
    assert twin["verdict"] == "not applicable" and "is not run" in twin["why"]
    no_collapse = by_name(verdicts, "deep-decoder-6-24-plain", "pre-6-6")
    assert no_collapse["verdict"] == "cannot be tested at this scale"
    assert "at 24 decoder layers" in no_collapse["why"]
    assert "pre-6-6 2.60, deep-decoder-6-12-plain 2.50, deep-decoder-6-24-plain 2.40" in no_collapse["why"]

    recs["deep-decoder-6-24-plain"] = [record("deep-decoder-6-24-plain", 1, 0.3, src=0.2)]
    write_records(recs, a)
    planned = study.plan(a)
    first = len(depth_rows.FIRST_PASS)
    assert planned[: first + 1] == [*((n, 1) for n in depth_rows.FIRST_PASS), ("deep-decoder-6-24", 1)]
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    assert by_name(verdicts, "deep-decoder-6-24-plain", "pre-6-6")["verdict"] == "reproduces"
    assert (
        by_name(verdicts, "deep-decoder-6-24", "deep-decoder-6-24-plain")["verdict"] == "cannot be tested yet"
    )
    assert "the first pass (seed 1) has 3 of 16 rows" in pricing.progress(planned, recs, [])


def test_the_dsinit_dropout_control_changes_only_the_dropouts(tmp_path: Path, monkeypatch) -> None:
    """The control row trains DS-Init + MAtt 18-6 with the paper's 6-layer dropouts and nothing else changed, runs
    last (after the 36-6 rows), and has its own claim against post-6-6 beside the recipe's."""
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    control, recipe = depth_rows.MODELS["dsinit-matt-18-6-low-dropout"], depth_rows.MODELS["dsinit-matt-18-6"]
    assert (control.variant, control.recipe, control.baseline) == (recipe.variant, recipe.recipe, "post-6-6")
    assert {k: v for k, v in control.fields.items() if recipe.fields.get(k) != v} == {
        "dropout": 0.1,
        "attention_dropout": 0.1,
    }
    assert core._recipe("dsinit-matt-18-6", args(epochs=5))[1]["dropout"] == 0.3  # what the control changes
    assert pricing.cost_class("dsinit-matt-18-6-low-dropout") == pricing.cost_class("dsinit-matt-18-6")
    planned = study.plan(args(epochs=5))
    assert [run for run in planned if run[1] == 1 and run[0] not in depth_rows.CONTROLS][-1] == (
        "dsinit-matt-18-6-low-dropout",
        1,
    )
    recs = {
        "post-6-6": [record("post-6-6", 1, 0.3)],
        "dsinit-matt-18-6": [record("dsinit-matt-18-6", 1, 0.45)],
        "dsinit-matt-18-6-low-dropout": [record("dsinit-matt-18-6-low-dropout", 1, 0.2)],
    }
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    recipe_row = by_name(verdicts, "dsinit-matt-18-6", "post-6-6")
    control_row = by_name(verdicts, "dsinit-matt-18-6-low-dropout", "post-6-6")
    # both against ADMIN's 6-6 (issue #58): confounded, no verdict word; the control differs from it in all but
    # the dropouts, and both are judged against the paper's +1.08
    assert recipe_row["verdict"] == control_row["verdict"] == "no verdict (confounded)"
    assert "dropout 0.3 vs 0.1, attention dropout 0.2 vs 0.1" in recipe_row["confound"]
    assert (
        "attention dropout" not in control_row["confound"] and "lr 0.0007 vs 0.001" in control_row["confound"]
    )
    assert recipe_row["target"] is control_row["target"] is None  # the paper's +1.08 is 20 vs 6 layers
    assert recipe_row["paper_delta"] == control_row["paper_delta"] == 1.08


def test_the_admin_lr_control_runs_only_where_admin_36_6_fails(tmp_path: Path, monkeypatch) -> None:
    """ADMIN 36-6 reading the source: the lower-lr control is not planned and its claim is not run; ADMIN 36-6
    stopped reading it: the control runs after the LATER rows (not in the first pass), with only the peak lr
    changed, and has its own claim against post-6-6."""
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    a = args(epochs=5)
    control, admin = depth_rows.MODELS["admin-36-6-low-lr"], depth_rows.MODELS["admin-36-6"]
    assert (control.variant, control.recipe, control.fields) == (admin.variant, admin.recipe, admin.fields)
    (options, _), (paper, _) = core._recipe("admin-36-6-low-lr", a), core._recipe("admin-36-6", a)
    assert {k: v for k, v in options.items() if paper[k] != v} == {"learning_rate": 5e-4}
    assert paper["learning_rate"] == 1e-3
    recs = {
        "post-6-6": [record("post-6-6", 1, 0.3, src=2.6)],
        "post-36-6": [record("post-36-6", 1, 0.6, src=0.1)],
        "admin-36-6": [record("admin-36-6", 1, 0.3, src=2.4)],
    }
    write_records(recs, a)
    assert ("admin-36-6-low-lr", 1) not in study.plan(a)
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    skipped = by_name(verdicts, "admin-36-6-low-lr", "post-6-6")
    assert skipped["verdict"] == "not applicable"
    assert "admin-36-6 does not collapse (it reads the source: src 2.40 nats)" in skipped["why"]

    recs["admin-36-6"] = [record("admin-36-6", 1, 0.6, src=0.1)]
    write_records(recs, a)
    planned = study.plan(a)
    seed_1 = [n for n, s in planned if s == 1 and n not in depth_rows.CONTROLS]
    assert seed_1[: len(depth_rows.FIRST_PASS)] == list(depth_rows.FIRST_PASS)
    assert seed_1[-len(depth_rows.LATER) - 1 :] == [*depth_rows.LATER, "admin-36-6-low-lr"]
    assert ("admin-36-6-low-lr", depth_rows.SECOND_SEED) in planned
    assert "the rest (36-6 and the controls, seed 1) 2 of 5" in pricing.progress(planned, recs, [])
    recs["admin-36-6-low-lr"] = [record("admin-36-6-low-lr", 1, 0.2, src=2.5)]
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    both_fail = by_name(
        verdicts, "admin-36-6", "post-36-6"
    )  # the test decides: no difference between failures
    assert both_fail["verdict"] == "inconclusive" and "admin-36-6 barely reads the source" in both_fail["why"]
    control = by_name(verdicts, "admin-36-6-low-lr", "post-6-6")  # lr 5e-4 against lr 1e-3: confounded
    assert (
        control["verdict"] == "no verdict (confounded)"
        and control["confound"] == "confounded: lr 0.0005 vs 0.001"
    )


def test_the_lr_controls_counterfactual_runs_only_where_the_control_trains(
    tmp_path: Path, monkeypatch
) -> None:
    """Default post-LN 36-6 at the control's peak lr 5e-4 (nothing else changed) runs right after the ADMIN lr
    control, only where the control trains: then ADMIN 36-6 must beat it at that lr. Where the control fails
    too, it is not run and the pair's claim does not hold."""
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    a = args(epochs=5)
    low, post = depth_rows.MODELS["post-36-6-low-lr"], depth_rows.MODELS["post-36-6"]
    assert (low.variant, low.recipe, low.fields, low.baseline) == (
        post.variant,
        post.recipe,
        post.fields,
        "post-6-6",
    )
    (options, _), (paper, _) = core._recipe("post-36-6-low-lr", a), core._recipe("post-36-6", a)
    assert {k: v for k, v in options.items() if paper[k] != v} == {"learning_rate": 5e-4}
    recs = {
        "post-6-6": [record("post-6-6", 1, 0.3, src=2.6)],
        "post-36-6": [record("post-36-6", 1, 0.6, src=0.1)],
        "admin-36-6": [record("admin-36-6", 1, 0.6, src=0.1)],
    }
    write_records(recs, a)
    assert ("post-36-6-low-lr", 1) not in study.plan(a)  # the control has no record yet

    recs["admin-36-6-low-lr"] = [record("admin-36-6-low-lr", 1, 0.2, src=2.5)]
    write_records(recs, a)
    planned = study.plan(a)
    seed_1 = [n for n, s in planned if s == 1 and n not in depth_rows.CONTROLS]
    assert seed_1[-3:] == [depth_rows.LATER[-1], "admin-36-6-low-lr", "post-36-6-low-lr"]
    assert ("post-36-6-low-lr", depth_rows.SECOND_SEED) in planned
    assert "the rest (36-6 and the controls, seed 1) 3 of 6" in pricing.progress(planned, recs, [])
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    assert by_name(verdicts, "admin-36-6-low-lr", "post-36-6-low-lr")["verdict"] == "cannot be tested yet"
    recs["post-36-6-low-lr"] = [record("post-36-6-low-lr", 1, 0.6, src=0.1)]
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    pair = by_name(verdicts, "admin-36-6-low-lr", "post-36-6-low-lr")
    assert pair["verdict"] == "reproduces" and pair["why"].startswith("the counterfactual fails")

    del recs["post-36-6-low-lr"]
    recs["admin-36-6-low-lr"] = [record("admin-36-6-low-lr", 1, 0.6, src=0.1)]
    write_records(recs, a)
    assert ("post-36-6-low-lr", 1) not in study.plan(a)
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    pair = by_name(verdicts, "admin-36-6-low-lr", "post-36-6-low-lr")
    assert pair["verdict"] == "inconclusive"  # issue #58: no comparison, no corrected test, no verdict word
    assert "the claimed row fails: admin-36-6-low-lr barely reads the source" in pair["why"]
    assert "post-36-6-low-lr is not run" in pair["why"]


@pytest.mark.slow
def test_a_run_that_ends_replans_the_sitting(tmp_path: Path, monkeypatch) -> None:
    """When a run ends the orchestrator plans again, so a row its result adds (an IF_FAILS row, a new best deep
    row) starts in the same sitting; a run begun this sitting is not started twice."""
    import subprocess
    import time

    monkeypatch.setattr(core, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(study, "multi30k_dir", lambda: tmp_path)
    monkeypatch.setattr(study, "multi30k_tokenizer", lambda vocab_size: None)
    monkeypatch.setattr(study, "machine_probe", lambda cache: machine_speed.REFERENCE_PROBE_MS)
    sleep = time.sleep
    monkeypatch.setattr(study.time, "sleep", lambda seconds: sleep(0.05))
    a = argparse.Namespace(**{**vars(args()), "until": None, "kept": False, "reuse": False, "jobs": 1})
    a.status_every, a.seeds = 300.0, [1]

    def plan(_: argparse.Namespace) -> list[tuple[str, int]]:
        base = [("admin-36-6", 1), ("pre-18-6", 1)]
        return base + [("admin-36-6-low-lr", 1)] * core.record_path("admin-36-6", 1, a).exists()

    started: list[str] = []

    def start_worker(name: str, seed: int, _: argparse.Namespace) -> subprocess.Popen:
        started.append(name)
        if name == "admin-36-6":  # it finishes and fails; pre-18-6 exits without a record (it crashed)
            core._write_json(core.record_path(name, seed, a), record(name, seed, 0.6, src=0.1))
        return subprocess.Popen(["true"])

    monkeypatch.setattr(study, "plan", plan)
    monkeypatch.setattr(study, "start_worker", start_worker)
    study.orchestrate(a)
    assert started == ["admin-36-6", "pre-18-6", "admin-36-6-low-lr"]
    assert json.loads(
        (core.run_dir("admin-36-6-low-lr", 1, a) / "settings.json").read_text()
    ) == core.settings(a)


def test_every_row_gets_a_second_seed_last_cheapest_first(tmp_path: Path, monkeypatch) -> None:
    """After the headline seeds and the LATER rows, every row with only seed 1 gets seed 2, ordered by layer
    applications × decoder passes (the 6-12 with CAD + CRT, four passes, last); the headline rows get no
    fourth run, and the progress paragraph counts the pass on its own."""
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    planned = study.plan(args(epochs=5))
    assert len(planned) == len(set(planned))
    first_seed_2 = next(i for i, (n, s) in enumerate(planned) if s == 2 and n not in depth_rows.HEADLINE)
    assert all(s == 1 for _, s in planned[first_seed_2 - len(depth_rows.LATER) : first_seed_2])
    second = [n for n, s in planned[first_seed_2:] if n not in depth_rows.CONTROLS]
    assert planned[-2:] == [(n, s) for n in depth_rows.CONTROLS for s in depth_rows.CONTROL_SEEDS]
    assert set(second) == {n for n, s in planned if s == 1} - set(depth_rows.HEADLINE) - set(
        depth_rows.CONTROLS
    )
    assert second[0] == "deep-decoder-6-12-plain" and second[-1] == "deep-decoder-6-12"
    assert (
        second.index("deepnorm-18-6") < second.index("deep-decoder-6-24-plain") < second.index("admin-36-6")
    )
    recs = {"post-6-6": [record("post-6-6", 1, 0.3)], "matt-18-6": [record("matt-18-6", 2, 0.3)]}
    text = pricing.progress(planned, recs, [])
    assert f"a second seed of every other row 1 of {len(second)}" in text
    assert "the headline rows' extra seeds 0 of 14" in text


def test_progress_counts_what_is_left_in_words() -> None:
    """One run left reads "1 run", not "1 runs"; "whose cost is known" appears only beside runs whose cost is not,
    a started run is named with its epochs, and the finished runs' cost is their epochs' CPU (5 × 110 s)."""
    planned = [("post-6-6", 1), ("post-36-6", 2), ("deep-decoder-6-24", 1)]
    recs = {"post-6-6": [record("post-6-6", 1, 0.3)]}
    priced = {"row": "post-36-6", "seed": 2, "cpu_hours": 1.5, "basis": "own", "epochs_done": 1}
    text = pricing.progress(planned, recs, [priced])
    assert "Left: 1 run, about 1.5 CPU-hours (reference machine)." in text
    assert text.startswith("**Progress.** 1 run finished:")
    assert "Started and resumable: post-36-6 seed 2 (1 epoch done)." in text
    unpriced = {"row": "deep-decoder-6-24", "seed": 1, "cpu_hours": None, "basis": None, "epochs_done": 0}
    text = pricing.progress(planned, recs, [priced, unpriced])
    assert (
        "Left: 2 runs, about 1.5 CPU-hours (reference machine) for the 1 whose cost is known, and 1 of a"
        in text
    )
    assert "Their epochs took 0.2 CPU-hours (reference machine). Left: 2 runs" in text
    assert pricing.progress(planned[:1], recs, []).endswith("Nothing of the plan is left.")


def test_shared_layers_close_rule() -> None:
    """Shared layers: "close" is tested against −1 BLEU, Holm-corrected like every target (issue #58): the old rule
    took an uncorrected interval above −1 as "reproduces" and "significantly different from 0 with Δ < −1" as
    "contradicts"; now only the corrected test against −1 decides, and a paper Δ (−0.1) closer to −1 than the
    detectable Δ cannot be decided. The verdict names the parameters' share."""
    claim = _claim("shared-18-6", "unshared-18-6")
    inside = _t(-0.4, -0.9, 0.1, 0.3, df=40, detectable=0.8)  # interval above −1, but p against −1 is 0.048
    assert report.decision.decide(claim, inside, 0.048 * 5)[0] == "inconclusive"  # the old rule: reproduces
    assert report.decision.decide(claim, inside, 0.01)[0] == "reproduces"
    behind = _t(
        -1.7, -2.3, -1.1, 0.001, df=40, detectable=0.8
    )  # significantly below 0, not below −1 after Holm
    assert report.decision.decide(claim, behind, 0.06)[0] == "inconclusive"  # the old rule: contradicts
    assert report.decision.decide(claim, behind, 0.01)[0] == "contradicts"
    assert report.decision.too_small(claim, _t(-0.7, -1.5, 0.1, 0.9, df=13, detectable=1.8))
    assert not report.decision.too_small(claim, inside)
    recs = {
        "pre-6-6": [record("pre-6-6", 1, 0.3)],
        "unshared-18-6": [record("unshared-18-6", 1, 0.25)],
        "shared-18-6": [record("shared-18-6", 1, 0.25, parameters=500_000)],
    }
    close = by_name(report.claim_verdicts(recs, n_samples=N_SAMPLES)[0], "shared-18-6", "unshared-18-6")
    assert (
        close["target"] == -1 and close["in_family"] and "parameters 50% of unshared-18-6's" in close["why"]
    )


def test_slope_and_the_flat_rule() -> None:
    history = [{"epoch": float(e), "valid_loss": 5.0 - 0.02 * e} for e in range(1, 8)]
    assert summaries.valid_slope(history) == pytest.approx(-0.02)
    assert summaries.trend(-0.02) == "still improving"
    assert summaries.trend(0.004) == "flat"
    assert summaries.trend(0.006) == "rising"
    assert summaries.valid_slope(history[:1]) is None


def test_what_is_left_and_its_cost(records: dict) -> None:
    planned = [("post-6-6", 1), ("dlcl-18-6", 1), ("deep-decoder-6-12", 1)]
    started = [{"valid_loss": 3.0}] * 2  # two epochs done, no CPU measure in them: priced by its class
    partial = {("dlcl-18-6", 1): started}
    left = {x["row"]: x for x in pricing.remaining(planned, records, epochs=5, partial=partial)}
    assert set(left) == {"dlcl-18-6", "deep-decoder-6-12"}
    assert left["dlcl-18-6"]["cpu_hours"] == pytest.approx(
        3 * 110.0 / 3600
    )  # measured at 18-6: 110 CPU-s/epoch
    assert left["deep-decoder-6-12"]["cpu_hours"] is None  # no 6-12 row has finished: unknown
    # a finished plain 6-12 does not price the one with CAD + CRT (three more decoder passes a step)
    plain = record("deep-decoder-6-12-plain", 1, 0.3)
    left = {x["row"]: x for x in pricing.remaining(planned, {**records, plain["name"]: [plain]}, epochs=5)}
    assert left["deep-decoder-6-12"]["cpu_hours"] is None
    assert pricing.cost_class("deep-decoder-6-12") == (6, 12, 4)
    assert pricing.cost_class("deep-decoder-6-12-plain") == (6, 12, 1)
    assert pricing.cost_class("shared-18-6") == pricing.cost_class("post-18-6") == (18, 6, 1)

    # a row's own finished seeds price its other seeds before its class does (Marian 6-6 trains faster than ours)
    slow = [
        {**r, "history": [{**e, "train_cpu_s": 190.0} for e in r["history"]]} for r in records["admin-18-6"]
    ]
    left = pricing.remaining([("admin-18-6", 4), ("dlcl-18-6", 1)], {**records, "admin-18-6": slow}, epochs=5)
    assert [(x["basis"], x["cpu_s_per_epoch"]) for x in left] == [("row", 200.0), ("class", 155.0)]
    # and a started run's own epochs before both (the orchestrator's `hours_left` prices it the same way); they
    # count for its row's other seeds too: 15 finished epochs at 200 CPU-s and 3 started ones at 300
    own = {("admin-18-6", 5): [{"train_cpu_s": 290.0, "valid_decode_cpu_s": 10.0}] * 3}
    planned = [("admin-18-6", 4), ("admin-18-6", 5)]
    left = pricing.remaining(planned, {**records, "admin-18-6": slow}, epochs=5, partial=own)
    row_rate = (15 * 200.0 + 3 * 300.0) / 18
    assert [(x["basis"], x["epochs_done"], x["cpu_hours"] * 3600) for x in left] == [
        ("row", 0, pytest.approx(5 * row_rate)),
        ("own", 3, pytest.approx(2 * 300.0)),
    ]
    line = pricing.not_finished_markdown(left)
    assert f"seed 4: {row_rate:.0f} CPU-s/epoch measured on its other seeds" in line
    assert "seed 5: 300 CPU-s/epoch measured on its own epochs so far" in line
    assert line.startswith(
        "- admin-18-6: seeds 4, 5 (3 epochs done); ≈ 0.5 CPU-hours ("
    )  # (1083 + 600) / 3600
    assert [pricing.epochs_done({"epochs_done": n}) for n in (1, 3)] == ["1 epoch done", "3 epochs done"]


def test_unmeasured_classes_are_priced_from_the_earlier_study(records: dict, tmp_path: Path) -> None:
    planned = [("dlcl-18-6", 1), ("deep-decoder-6-12", 1), ("admin-36-6", 1)]
    # the earlier study ran 18-6 at 220 CPU-s/epoch, this one at 110: its 6-12 CAD + CRT's 400 scales to 200
    prior = {(18, 6, 1): 220.0, (6, 12, 4): 400.0}
    left = {x["row"]: x for x in pricing.remaining(planned, records, epochs=5, prior=prior)}
    assert left["dlcl-18-6"]["basis"] == "class" and left["dlcl-18-6"]["cpu_s_per_epoch"] == 110.0
    assert left["deep-decoder-6-12"]["basis"] == "prior"
    assert left["deep-decoder-6-12"]["cpu_hours"] == pytest.approx(5 * 200.0 / 3600)
    # in neither study: scaled up from the deepest shallower class with as many decoder passes (18-6 here)
    assert left["admin-36-6"]["basis"] == "scaled"
    assert left["admin-36-6"]["cpu_s_per_epoch"] == pytest.approx(110.0 * 42 / 24)
    markdown = pricing.not_finished_markdown(list(left.values()))
    assert "estimated: the 12-epoch study's rate at depth 6-12 × 0.50" in markdown
    assert "estimated: the rate at depth 18-6 × 42/24 layer applications" in markdown
    # never scaled down (that would underestimate), from a deeper encoder, nor across decoder passes
    deep_decoder = pricing.remaining([("deep-decoder-6-24-plain", 1)], records, epochs=5)[0]
    assert deep_decoder["scaled_from"] == (6, 6, 1)  # not 18-6: more encoder layers than 6-24 has
    assert deep_decoder["cpu_s_per_epoch"] == pytest.approx(110.0 * 30 / 12)
    assert (
        pricing.remaining([("pre-6-6", 1)], {"admin-18-6": records["admin-18-6"]}, epochs=5)[0]["cpu_hours"]
        is None
    )
    # no class measured in both: nothing to scale by, so the prior prices nothing
    alone = pricing.remaining([("deep-decoder-6-12", 1)], records, epochs=5, prior={(6, 12, 4): 400.0})
    assert alone[0]["cpu_hours"] is None
    # the prior file is read only when its cost settings match this study's
    path = tmp_path / "earlier.json"
    history = [{"train_cpu_s": 390.0, "valid_decode_cpu_s": 10.0}] * 2
    earlier = {
        "d_model": 64,
        "vocab_size": 4000,
        "max_tokens": 1536,
        "max_length": 64,
        "max_train_samples": None,
    }
    path.write_text(json.dumps({"settings": earlier, "models": {"deep-decoder-6-12": {"history": history}}}))
    assert pricing.prior_rates(earlier, path) == {(6, 12, 4): 400.0}
    assert pricing.prior_rates({**earlier, "max_tokens": 4096}, path) == {}
    assert pricing.prior_rates(earlier, tmp_path / "missing.json") == {}


def test_report_markdown_and_json(records: dict) -> None:
    markdown, payload = report.build_report(
        records, args(), [("post-6-6", 1), ("dlcl-18-6", 1)], n_samples=N_SAMPLES
    )
    assert "cannot be tested yet" in markdown and "| admin-18-6 |" in markdown
    assert "**Progress.** 9 runs finished" in markdown
    seeds = payload["rows"]["admin-18-6"]["seeds"]
    assert [s["seed"] for s in seeds] == [1, 2, 3]
    assert "bleu_statistics" not in seeds[0]["test"]["averaged"]
    assert payload["rows"]["admin-18-6"]["mean"]["bleu"] > payload["rows"]["post-18-6"]["mean"]["bleu"]
    assert all("p_holm" in t for t in payload["significance"])


def test_the_claims_plot_has_a_line_per_claim_and_clips_large_differences(
    records: dict, tmp_path: Path
) -> None:
    from bench.lib import claims_plot

    assert claims_plot.clip(28.9, 8.0) == (8.0, 1)
    assert claims_plot.clip(-30.0, 8.0) == (-8.0, -1)
    assert claims_plot.clip(-0.6, 8.0) == (-0.6, 0)
    verdicts, _ = report.claim_verdicts(records, n_samples=N_SAMPLES)
    assert by_name(verdicts, "admin-18-6", "post-6-6")["paper_delta"] == 2.5
    assert by_name(verdicts, "admin-18-6", "post-18-6")["paper_delta"] is None  # the paper's Default diverged
    path = tmp_path / "claims.png"
    labels = claims_plot.forest_plot(
        verdicts, path, "claims", depth_claims.SHORT, depth_claims.ALPHA, depth_claims.CLOSE_MARGIN
    )
    assert len(labels) == len(depth_claims.CLAIMS)
    assert labels[0] == "ADMIN: post-18-6 vs post-6-6" and labels[-1].startswith("vs Marian: ")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_pilot_budget_sentence() -> None:
    by_budget = {
        e: {
            "post-6-6": [record("post-6-6", s, error, epochs=e) for s in (1, 2)],
            "marian-6-6": [record("marian-6-6", 1, error, epochs=e)],
        }
        for e, error in ((10, 0.40), (20, 0.30), (30, 0.295))
    }
    markdown, payload = pilot.build_pilot(by_budget, chosen=20)
    assert set(payload["rows"]) == {"post-6-6", "marian-6-6"}
    assert "From 20 to 30 epochs averaged test BLEU changes by" in payload["conclusion"]
    assert "| post-6-6 | 30 | 2 |" in markdown
    # one seed sd weighs the longer budget's gain: the rows' own BLEU, not the differences the claims test
    rows = payload["rows"]
    sd = rows["post-6-6"][20]["bleu_sd"]
    gain = max(rows[n][30]["bleu"] - rows[n][20]["bleu"] for n in rows)
    assert f"The seed standard deviation at 20 epochs is {sd:.2f} BLEU" in payload["conclusion"]
    enough = "no row gains more than one seed sd from the longer budget, so 20 epochs is enough"
    short = f"gains up to {gain:+.2f}, more than one seed sd, so at 20 epochs the rows' own BLEU has not converged"
    assert (enough if gain <= sd else short) in payload["conclusion"]
    # the study's report quotes the pilot's conclusion under its settings
    recs = {"post-6-6": [record("post-6-6", 1, 0.3)]}
    quoted, out = report.build_report(recs, args(epochs=20), [], n_samples=N_SAMPLES, pilot=payload)
    assert "**The budget.** 20 epochs, from the budget pilot ([depth_multi30k_pilot.md]" in quoted
    assert payload["conclusion"] in quoted and out["budget_pilot"] == payload["conclusion"]
    assert "**The budget.**" not in report.build_report(recs, args(epochs=20), [], n_samples=N_SAMPLES)[0]
    # the difference the verdicts measure, at each budget both rows have (one entry per budget)
    gap = payload["conclusion"].split("Difference between rows (averaged test BLEU) by budget: ")[1]
    rows = payload["rows"]
    diffs = [rows["marian-6-6"][e]["bleu"] - rows["post-6-6"][e]["bleu"] for e in (10, 20, 30)]
    assert gap.startswith(
        f"marian-6-6 − post-6-6: {diffs[0]:+.2f} at 10, {diffs[1]:+.2f} at 20, {diffs[2]:+.2f} at 30 epochs. Rule:"
    )


def test_budget_rule_takes_the_first_budget_after_which_the_differences_stop_moving() -> None:
    """A budget is long enough when its rows end flat and the next budget moves no difference between rows by
    GAP_STABLE (1 BLEU) or more: here the gap is 11.0, 5.6, 3.8, 3.6 at 10-40 epochs, so 30."""

    def summary(marian: dict[int, float], post: dict[int, float], trend: str = "flat") -> dict:
        return {
            name: {e: {"bleu": b, "trend": trend if e == 30 else "flat"} for e, b in per.items()}
            for name, per in (("marian-6-6", marian), ("post-6-6", post))
        }

    marian = {10: 26.0, 20: 33.0, 30: 34.6, 40: 35.2}
    budget, text = pilot.budget_rule(summary(marian, {10: 15.0, 20: 27.4, 30: 30.8, 40: 31.6}))
    assert budget == 30 and "move by at most 0.20" in text
    # the gap still moves by 1 BLEU from 30 to 40: no budget of the pilot is long enough
    budget, text = pilot.budget_rule(summary(marian, {10: 15.0, 20: 27.4, 30: 30.8, 40: 32.6}))
    assert budget is None and "no budget of the pilot meets it yet" in text
    # a budget whose rows still improve at their end is never chosen, however stable the gap
    budget, _ = pilot.budget_rule(
        summary(marian, {10: 15.0, 20: 27.4, 30: 30.8, 40: 31.6}, "still improving")
    )
    assert budget is None


def test_a_run_diverged_before_its_first_checkpoint_is_finished(tmp_path: Path, monkeypatch) -> None:
    """depth_multi30k.finish writes a record with null test and NLL for a run that diverged before its first
    epoch checkpoint (before: it raised on the empty history, and the run was retried in every sitting); the report
    counts the row as failed and the claim against it holds without a test."""
    monkeypatch.setattr(core, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")

    class Model:
        def num_parameters(self) -> int:
            return 123

    options = {"learning_rate": 1e-3, "warmup_steps": 400, "num_beams": 4, "length_penalty": 0.6}
    diverged = {"step": 7, "loss": float("nan"), "reason": "non-finite (NaN / inf) training loss"}
    study.finish("post-18-6", 1, args(), None, [], Model(), options, diverged)
    recs = core.load_records(tmp_path / "records", 5)
    assert recs["post-18-6"][0]["test"] is None and recs["post-18-6"][0]["diverged"]["step"] == 7
    recs |= {"post-6-6": [record("post-6-6", 1, 0.3)], "admin-18-6": [record("admin-18-6", 1, 0.3)]}
    verdicts, tests = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    assert {(t["system"], t["baseline"]) for t in tests} == {("admin-18-6", "post-6-6")}
    admin = by_name(verdicts, "admin-18-6", "post-18-6")
    assert admin["verdict"] == "reproduces" and "counterfactual fails" in admin["why"]
    assert by_name(verdicts, "post-18-6", "post-6-6")["verdict"] == "reproduces"
    markdown, _ = report.build_report(recs, args(), [], n_samples=N_SAMPLES)
    assert "| post-18-6 | admin | 0.00 | 1 |" in markdown and "diverged (1/1)" in markdown


def test_until_is_the_next_such_time_of_day() -> None:
    import datetime

    afternoon = datetime.datetime(2026, 11, 25, 16, 0).timestamp()
    assert study.deadline("17:15", now=afternoon) == datetime.datetime(2026, 11, 25, 17, 15).timestamp()
    assert study.deadline("09:30", now=afternoon) == datetime.datetime(2026, 11, 26, 9, 30).timestamp()
    for bad in ("25:00", "5pm", "17"):
        with pytest.raises(SystemExit, match=f"--until '{bad}': expected a time of day HH:MM"):
            study.deadline(bad)


def test_until_starts_only_runs_that_finish_before_it(tmp_path: Path, monkeypatch) -> None:
    """A run starts before `--until` only when its measured cost (its own epochs so far, else its depth's
    finished or started runs; the final scoring counted as one more epoch) ends before it; an unknown cost never starts."""
    import time

    monkeypatch.setattr(core, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    a = argparse.Namespace(**{**vars(args(epochs=30)), "until": "17:15", "kept": False})
    assert "cost is unknown" in study.too_late("pre-18-6", 1, a, time.time() + 10 * 3600)
    kept = argparse.Namespace(**{**vars(a), "kept": True})  # a kept machine resumes it in a later sitting
    assert study.too_late("pre-18-6", 1, kept, time.time() + 60) == ""
    # its own 10 epochs at 100 CPU-s: 21 epochs left with the scoring, 2100 CPU-s ≈ 0.58 CPU-hours
    history = [{"train_cpu_s": 95.0, "valid_decode_cpu_s": 5.0, "valid_loss": 3.0}] * 10
    core._write_json(core.run_dir("pre-18-6", 1, a) / "epochs.json", history)
    assert study.hours_left("pre-18-6", 1, a) == pytest.approx(2100 / 3600)
    assert study.too_late("pre-18-6", 1, a, time.time() + 2100 * study.WALL_PER_CPU + 60) == ""
    late = study.too_late("pre-18-6", 1, a, time.time() + 2100 * study.WALL_PER_CPU - 60)
    assert "needs ≈ 0.6 CPU-hours" in late and "past --until 17:15" in late
    finished = record("post-18-6", 1, 0.3)
    finished["history"] = [
        {"epoch": e, "train_cpu_s": 190.0, "valid_decode_cpu_s": 10.0, "valid_loss": 3.0}
        for e in range(1, 31)
    ]
    core._write_json(core.record_path("post-18-6", 1, a), finished)
    # a row of a depth other runs measured: 30 epochs + scoring at the mean of that depth's epochs, the finished
    # row's 30 at 200 CPU-s and the started pre-18-6's 10 at 100 (a started run measures its class too)
    assert study.hours_left("admin-18-6", 1, a) == pytest.approx(31 * (30 * 200 + 10 * 100) / 40 / 3600)
    # a depth only a started run has measured prices the row's other seeds and its cost class too, as the report
    # does: 36-6 from post-36-6 seed 1's 4 epochs at 300 CPU-s (not from an estimate off the 12-epoch study)
    started = [{"train_cpu_s": 290.0, "valid_decode_cpu_s": 10.0, "valid_loss": 4.0}] * 4
    core._write_json(core.run_dir("post-36-6", 1, a) / "epochs.json", started)
    assert study.hours_left("post-36-6", 2, a) == pytest.approx(31 * 300 / 3600)
    assert study.hours_left("admin-36-6", 1, a) == pytest.approx(31 * 300 / 3600)


@pytest.mark.slow
def test_the_workers_stop_at_until(tmp_path: Path, monkeypatch) -> None:
    """At `--until` the orchestrator ends its workers (they resume later from their last epoch checkpoint) and
    returns, and it never starts a run that would end after it."""
    import subprocess
    import time

    monkeypatch.setattr(core, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(study, "multi30k_dir", lambda: tmp_path)
    monkeypatch.setattr(study, "multi30k_tokenizer", lambda vocab_size: None)
    monkeypatch.setattr(study, "machine_probe", lambda cache: machine_speed.REFERENCE_PROBE_MS)
    started: list[tuple[str, subprocess.Popen]] = []

    def start_worker(name: str, seed: int, a: argparse.Namespace) -> subprocess.Popen:
        started.append((name, subprocess.Popen(["sleep", "120"])))
        return started[-1][1]

    monkeypatch.setattr(study, "start_worker", start_worker)
    monkeypatch.setattr(study, "hours_left", lambda name, seed, a: 0.5 if name == "pre-18-6" else 1e-4)
    begun = time.time()
    monkeypatch.setattr(study, "deadline", lambda until, now=None: begun + 3)
    a = argparse.Namespace(
        **{
            **vars(args(epochs=30)),
            "until": "17:15",
            "kept": False,
            "reuse": False,
            "jobs": 2,
            "status_every": 300.0,
        }
    )
    a.only, a.seeds = ["pre-18-6", "dlcl-18-6"], [1]
    study.orchestrate(a)
    assert time.time() - begun < 30
    assert [name for name, _ in started] == ["dlcl-18-6"]  # pre-18-6 needs 0.5 CPU-hours: not started
    assert started[0][1].returncode is not None  # ended at the deadline


@pytest.mark.slow
def test_a_run_whose_weights_were_lost_is_retrained_last_and_keeps_its_first_numbers(
    tmp_path: Path, monkeypatch
) -> None:
    """A finished run with test scores but no weights (committed or in this machine's run directory) is found by
    the study and recorded as lost in the committed weights.json (which alone the report reads), then re-trained
    after every other run, with the same seed; its new record keeps what the first run measured. A run with
    weights, or one that diverged before its first checkpoint (no scores, no weights), is not re-trained."""
    import subprocess

    monkeypatch.setattr(core, "RUNS", tmp_path / "runs")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    monkeypatch.setattr(study, "multi30k_dir", lambda: tmp_path)
    monkeypatch.setattr(study, "multi30k_tokenizer", lambda vocab_size: None)
    monkeypatch.setattr(study, "machine_probe", lambda cache: machine_speed.REFERENCE_PROBE_MS)
    a = argparse.Namespace(**{**vars(args()), "until": None, "kept": False, "reuse": False, "jobs": 1})
    a.status_every, a.only, a.seeds = 300.0, ["pre-18-6", "post-6-6", "admin-18-6", "post-18-6"], [1]
    first = record("post-6-6", 1, 0.3)
    for rec in (first, record("admin-18-6", 1, 0.3), {**record("post-18-6", 1, 0.3), "test": None}):
        core._write_json(core.record_path(rec["name"], 1, a), rec)
    core.weights_path("admin-18-6", 1, a).write_bytes(b"kept")
    assert not any(core.weights_lost(n, 1, a) for n in a.only)  # nothing recorded as lost yet
    assert [core.find_lost_weights(n, 1, a) for n in a.only] == [False, True, False, False]
    assert [core.weights_lost(n, 1, a) for n in a.only] == [False, True, False, False]  # now recorded
    assert core._read_json(core.weights_facts_path(a))["e5"]["lost"] == [["post-6-6", 1]]

    started: list[str] = []

    def start_worker(name: str, seed: int, _: argparse.Namespace) -> subprocess.Popen:
        started.append(name)
        return subprocess.Popen(["true"])

    monkeypatch.setattr(study, "start_worker", start_worker)
    study.orchestrate(a)
    assert started == ["pre-18-6", "post-6-6"]  # the unfinished run first, the re-training last

    records = core.load_records(tmp_path / "records", 5)
    lost = pricing.lost_weights(records, a)
    assert [(x["row"], x["seed"]) for x in lost] == [("post-6-6", 1)]
    assert lost[0]["cpu_hours"] == pytest.approx(5 * 110 / 3600)  # its row's 110 CPU-s an epoch, 5 epochs
    markdown, payload = report.build_report(records, a, [], n_samples=N_SAMPLES, lost=lost)
    assert (
        "- post-6-6 seed 1: finished (its numbers are in the tables), but on a machine not handed on"
        in markdown
    )
    assert "Then, to keep their weights: 1 finished run re-trained with the same seed" in payload["progress"]

    class Model:
        def num_parameters(self) -> int:
            return 123

    options = {"learning_rate": 1e-3, "warmup_steps": 400, "num_beams": 4, "length_penalty": 0.6}
    diverged = {"step": 7, "loss": float("nan"), "reason": "non-finite (NaN / inf) training loss"}
    study.finish("post-6-6", 1, a, None, [], Model(), options, diverged)  # the re-training's record
    again = core.load_records(tmp_path / "records", 5)["post-6-6"][0]
    assert again["first_run"]["bleu"] == first["test"]["averaged"]["bleu"]
    assert again["first_run"]["valid_loss"] == first["history"][-1]["valid_loss"]
    assert not core.weights_lost("post-6-6", 1, a)
    rerun = report.rerun_markdown({"post-6-6": [{**first, "first_run": again["first_run"]}]})
    bleu = first["test"]["averaged"]["bleu"]
    assert f"post-6-6 seed 1: averaged test BLEU {bleu:.2f} (first run {bleu:.2f})" in rerun


def test_the_paper_curves_panel_each_paper_with_the_rows_its_claims_compare(
    records: dict, tmp_path: Path, monkeypatch
) -> None:
    """paper_curves: a panel a paper (ADMIN's 36-6 claims a second one) holding exactly the rows its claims compare
    that have records, each the mean of its seeds' validation BLEU per epoch."""
    from bench.lib import paper_curves

    with_bleu = {
        name: [
            {**r, "history": [{**e, "valid_bleu": 10.0 * r["seed"] + e["epoch"]} for e in r["history"]]}
            for r in recs
        ]
        for name, recs in records.items()
    }
    verdicts, _ = report.claim_verdicts(with_bleu, n_samples=N_SAMPLES)
    groups = paper_curves.paper_rows(verdicts)
    papers = list(depth_claims.PAPERS)
    assert list(groups) == [papers[0], f"admin {depth_claims.DEEPER_PANEL}", *papers[1:]]
    assert groups["admin"] == ["post-18-6", "post-6-6", "admin-18-6", "deepnorm-18-6", "pre-18-6"]
    # ADMIN's 36-6 rows: a panel apart
    assert groups["admin 36-6"][:3] == ["post-36-6", "post-6-6", "admin-36-6"]
    assert groups["admin 36-6"][-2:] == ["admin-36-6-low-lr", "post-36-6-low-lr"]
    assert groups["marian"] == ["admin-18-6", "marian-6-6"]  # the best deep row, resolved from the records
    from matplotlib.figure import Figure

    titles: list[str] = []
    savefig = Figure.savefig

    def saved(fig: Figure, *a, **k) -> None:  # the titles as drawn
        titles.extend([fig.get_suptitle(), *(ax.get_title() for ax in fig.axes if ax.get_visible())])
        savefig(fig, *a, **k)

    monkeypatch.setattr(Figure, "savefig", saved)
    path = tmp_path / "papers.png"
    drawn = paper_curves.paper_curves(with_bleu, groups, path, "curves", depth_claims.SHORT, line_style)
    assert titles == ["curves", "ADMIN", "ADMIN 36-6", *(depth_claims.SHORT[p] for p in papers[1:])]
    assert list(drawn["admin"]) == ["post-18-6", "post-6-6", "admin-18-6"]  # the rows with records
    assert drawn["dlcl"] == {"post-18-6": drawn["admin"]["post-18-6"]}
    assert drawn["admin"]["admin-18-6"] == [20.0 + e for e in range(1, 6)]  # seeds 1-3: 11, 21, 31 at epoch 1
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------------------------------------ issue #50
def _t(
    delta: float, low: float, high: float, p_holm: float, df: float = 30.0, detectable: float = 1.5
) -> dict:
    """A comparison as the rule sees it: Δ, its interval (se from it, at df), the Holm p against 0."""
    se = (high - low) / 2 / t_ppf(0.975, df)
    return {
        "delta": delta,
        "ci95": [low, high],
        "p_holm": p_holm,
        "se": se,
        "df": df,
        "detectable": detectable,
    }


def _claim(system: str, baseline: str) -> depth_claims.Claim:
    return next(c for c in depth_claims.CLAIMS if (c.system, c.baseline) == (system, baseline))


def _same(system: str, baseline: str) -> depth_claims.Claim:
    """The claim as if the paper had measured this very comparison: its Δ is then the target (issue #67)."""
    import dataclasses

    return dataclasses.replace(_claim(system, baseline), paper_comparison="")


def test_the_verdict_is_one_rule_with_corrected_tests_both_ways() -> None:
    """Issue #58 item 1: the old rule let "contradicts" rest on the uncorrected interval (the paper's Δ outside it)
    while "reproduces" needed Holm; now both need a corrected test: against the paper's Δ for "contradicts"
    (Holm within the claims tested against a paper's Δ), against 0 for "reproduces"; otherwise inconclusive."""
    admin = _same("admin-18-6", "post-6-6")  # the paper's +2.50, as if at 18-6 vs 6-6
    outside = _t(0.9, 0.05, 1.75, 0.3)  # +2.50 outside the interval, p against it ≈ 0.0006 raw
    raw = report.decision.p_against(outside, 2.5)
    assert raw < 0.05
    assert (
        report.decision.decide(admin, outside, min(1.0, raw * 100))[0] == "inconclusive"
    )  # old: contradicts
    word, why = report.decision.decide(admin, outside, raw * 5)
    assert word == "contradicts" and "short of the paper's +2.50" in why
    assert report.decision.decide(admin, _t(2.3, 1.5, 3.1, 0.001), 0.6)[0] == "reproduces"
    assert report.decision.decide(admin, _t(2.3, 1.5, 3.1, 0.2), 0.6)[0] == "inconclusive"  # Holm says no
    assert (
        report.decision.decide(admin, _t(-3.0, -3.9, -2.1, 0.001), 0.9)[0] == "contradicts"
    )  # the other way
    larger = report.decision.decide(admin, _t(6.0, 5.2, 6.8, 0.001), 0.001)  # beyond the paper's gain
    assert larger[0] == "reproduces"
    # a claim without a paper Δ: the test against 0 alone
    trains = _claim("admin-18-6", "post-18-6")
    assert report.decision.decide(trains, _t(1.2, 0.4, 2.0, 0.01), None)[0] == "reproduces"
    assert report.decision.decide(trains, _t(-1.2, -2.0, -0.4, 0.01), None)[0] == "contradicts"
    assert report.decision.decide(trains, _t(1.2, 0.4, 2.0, 0.08), None)[0] == "inconclusive"


def test_an_interval_that_excludes_0_is_never_said_to_hold_it() -> None:
    """Issue #58: the old inconclusive wording read "both 0 and the paper's Δ are inside the CI" wherever the paper's
    Δ was inside, even for an interval that excludes 0 but whose Holm p is ≥ 0.05."""
    claim = _same("dlcl-18-6", "pre-18-6")  # the paper's +0.20, as if at 18L
    word, why = report.decision.decide(claim, _t(0.6, 0.1, 1.1, 0.3), 0.7)
    assert word == "inconclusive" and "both 0" not in why
    assert "excludes 0 and holds the paper's +0.20" in why
    assert (
        "holds 0 and holds the paper's +0.20"
        in report.decision.decide(claim, _t(0.1, -0.4, 0.6, 1.0), 1.0)[1]
    )


def test_a_rescue_whose_collapse_did_not_occur_is_not_applicable() -> None:
    """Issue #50 item 2: CAD + CRT's +28.5 rescues a collapsed decoder; where the plain 6-12 reads the source the
    claim is not applicable (today: 'does not hold'), and the verdict reports what remains and its CPU cost."""
    recs = {
        "pre-6-6": [record("pre-6-6", s, 0.3, src=2.6) for s in (1, 2)],
        "deep-decoder-6-12-plain": [record("deep-decoder-6-12-plain", s, 0.3, src=2.5) for s in (1, 2)],
        "deep-decoder-6-12": [record("deep-decoder-6-12", s, 0.33, src=2.4) for s in (1, 2)],
    }
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    rescue = by_name(verdicts, "deep-decoder-6-12", "deep-decoder-6-12-plain")
    assert rescue["verdict"] == "not applicable"
    assert (
        "never collapsed" in rescue["why"]
        and "what remains" in rescue["why"]
        and "× the CPU" in rescue["why"]
    )


def test_the_detectable_delta_uses_the_intervals_t_and_decides_nothing_below_it() -> None:
    """Issue #58 item 2: the detectable Δ took normal quantiles while the interval takes t at its df (2-4 for two
    seeds a side): for the equal-lr control's se 0.44 at df 4.1 that was 1.73 BLEU, under the paper's +1.8, where t
    gives ≈ 3.4. A paper Δ below a comparison's detectable Δ now reads "cannot decide at this size", not a verdict."""
    normal = detectable_delta(0.441, 0.05, 22, 0.8)
    with_t = detectable_delta(0.441, 0.05, 22, 0.8, df=4.04)
    assert normal == pytest.approx(1.73, abs=0.02) and with_t > 3.3 and with_t > 1.8 > normal
    assert detectable_delta(0.441, 0.05, 22, 0.8, df=1e9) == pytest.approx(normal, abs=1e-3)
    recs = {
        "pre-6-6": [record("pre-6-6", s, 0.3) for s in (1, 2)],
        "post-18-6": [record("post-18-6", s, 0.3) for s in (1, 2)],
        "pre-18-6": [record("pre-18-6", s, 0.3) for s in (3, 4)],
        "dlcl-18-6": [record("dlcl-18-6", s, 0.3) for s in (5, 6)],
    }
    claims = tuple(  # the DLCL paper's +0.2 as if measured at 18 layers: a target to decide against
        _same(c.system, c.baseline) if (c.system, c.baseline) == ("dlcl-18-6", "pre-18-6") else c
        for c in depth_claims.CLAIMS
    )
    verdicts, tests = report.claim_verdicts(recs, claims, n_samples=N_SAMPLES)
    dlcl = by_name(verdicts, "dlcl-18-6", "pre-18-6")
    test = dlcl["test"]
    assert test["family"] == len(tests) + sum(v["in_family"] for v in verdicts)  # one family (issue #67)
    assert dlcl["detectable"] == pytest.approx(
        detectable_delta(test["se"], depth_claims.ALPHA, test["family"], depth_claims.POWER, test["df"])
    )
    assert dlcl["detectable"] > 0.2 and dlcl["verdict"] == "cannot decide at this size"
    assert "| detectable Δ |" in report.glance_table(verdicts)
    confounded = by_name(verdicts, "pre-18-6", "pre-6-6")
    assert "lr 0.002 vs 0.001, warmup 1600 vs 800" in confounded["why"]
    assert "control pre-6-6-lr2e-3 pending" in confounded["why"]


def test_a_measured_control_is_named_in_the_confounded_row_which_counts_once_through_it() -> None:
    """Issue #50 item 3: pre-LN 18-6's gain over pre-LN 6-6 came with a 2× lr; once the control (pre-LN 6-6 at the
    deep row's lr) is measured and erases the gain, the confounded row says so, and the count takes the claim
    once, through its control (the old report said "controlled by the claim" and counted both lines)."""
    recs = {
        "pre-6-6": [record("pre-6-6", s, 0.45) for s in (1, 2, 3)],
        "pre-18-6": [record("pre-18-6", s, 0.2) for s in (4, 5, 6)],
        "pre-6-6-lr2e-3": [record("pre-6-6-lr2e-3", s, 0.2) for s in (7, 8)],
    }
    verdicts, tests = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    confounded = by_name(verdicts, "pre-18-6", "pre-6-6")
    control = by_name(verdicts, "pre-18-6", "pre-6-6-lr2e-3")
    assert confounded["test"]["p_holm"] < 0.05 and control["test"]["ci95"][0] < 0 < control["test"]["ci95"][1]
    delta = f"Δ {control['test']['delta']:+.2f}"
    assert delta in confounded["why"] and "decided in its own row" in confounded["confound"]
    assert "not significant once the confound is removed" in confounded["why"]
    assert confounded["verdict"] == "no verdict (confounded)"
    assert confounded["controlled_by"] == "pre-18-6 vs pre-6-6-lr2e-3"
    summary = report.glance_summary(verdicts, tests)
    assert "pre-18-6 vs pre-6-6 is confounded and counts once, through its control" in summary
    counted = summary.split("Counted so: ")[1].split(" (")[0]
    total = sum(int(part.split(" ")[0]) for part in counted.split(", "))
    grouped = {v["group"] for v in verdicts if v.get("group")}
    assert total == len(verdicts) - 1 - sum(  # each group once, whatever its lines' verdicts (issue #67)
        len([v for v in verdicts if v.get("group") == g]) - 1 for g in grouped
    )


def test_the_seed_variance_is_unbiased_and_leaves_a_split_row_undecided() -> None:
    """Issue #50 item 5: resampling 2 seeds with replacement halves their variance, so today's bootstrap puts
    ADMIN 36-6 (seeds 2.4 and 29.4) significantly below post-6-6; with the unbiased seed variance (t, df ≈ 1) the
    interval holds 0, and since its seeds disagree the failure rule does not decide it: inconclusive."""
    from deep_nmt_hf.science.significance import seed_and_sentence_test, seeded_paired_bootstrap

    base = [record("post-6-6", s, 0.3)["test"]["averaged"]["bleu_statistics"] for s in (1, 2, 3)]
    split = [record("admin-36-6", 1, 0.95)["test"]["averaged"]["bleu_statistics"], base[0]]
    old = seeded_paired_bootstrap(base, split, n_samples=N_SAMPLES)
    new = seed_and_sentence_test(base, split, n_samples=N_SAMPLES)
    assert new["ci95"][0] < 0 < new["ci95"][1] and new["df"] < 2
    assert new["ci95"][1] - new["ci95"][0] > 3 * (old["ci95"][1] - old["ci95"][0])
    bleu = [
        [bleu_from_statistics([sum(c) for c in zip(*r, strict=True)]) for r in runs] for runs in (split, base)
    ]
    unbiased = sum(statistics.variance(b) / len(b) for b in bleu)  # s²/n a side, not s²(n−1)/n²
    assert new["seed_se"] ** 2 == pytest.approx(unbiased)
    recs = {
        "post-6-6": [record("post-6-6", s, 0.3, src=2.5) for s in (1, 2, 3)],
        "admin-36-6": [record("admin-36-6", 1, 0.95, src=0.1), record("admin-36-6", 2, 0.3, src=2.5)],
    }
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    pair = by_name(verdicts, "admin-36-6", "post-6-6")  # df ≈ 1; tested against 0 only (the +2.5 is 60L-12L)
    assert pair["verdict"] == "inconclusive" and "on 1 of 2 seeds" in pair["why"]
    assert "inverse-sqrt" in pair["why"]  # item 7: the schedule difference is in the row


def test_every_confound_is_named_and_a_confounded_row_has_no_verdict_word() -> None:
    """Issue #58 item 3: ADMIN 18-6 against pre-LN 18-6 compared rows with a 2× lr (and RAdam against Adam, β2 0.98
    against 0.997) and still read "contradicts"; every setting two rows train with differently is now found from
    their recipes and named in the row, which carries Δ and the confound, no verdict word. In the committed report
    too: no confounded comparison keeps a verdict word."""
    recs = {
        "post-6-6": [record("post-6-6", s, 0.3) for s in (1, 2)],
        "post-18-6": [record("post-18-6", s, 0.9, src=0.0) for s in (1, 2)],
        "admin-18-6": [record("admin-18-6", s, 0.35) for s in (1, 2)],
        "pre-18-6": [record("pre-18-6", s, 0.2) for s in (3, 4)],
    }
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    pair = by_name(verdicts, "admin-18-6", "pre-18-6")
    assert pair["test"]["p_holm"] < 0.05 and pair["verdict"] == "no verdict (confounded)"
    assert (
        "optimizer radam vs adam, Adam β2 0.98 vs 0.997, lr 0.001 vs 0.002, warmup 400 vs 1600" in pair["why"]
    )
    assert "**" not in report.glance_table([pair]).splitlines()[-1]  # no bold verdict word in its line
    assert by_name(verdicts, "admin-18-6", "post-18-6")["confound"] == ""  # one recipe: nothing to name
    committed = json.loads(
        (Path(__file__).resolve().parents[2] / "bench/results/depth_multi30k.json").read_text()
    )
    for v in committed["claims"]:
        if v["rule"] == "collapses" or v["verdict"] in ("not applicable", "cannot be tested yet"):
            continue
        found = report.decision.confounds(v["system"], v["baseline"], varies=tuple(v["varies"]))
        if found:
            assert v["verdict"] == "no verdict (confounded)" and found in v["confound"], (
                v["system"],
                v["baseline"],
            )


# ------------------------------------------------------------------------------------------------ issue #67
def test_a_paper_delta_from_other_depths_is_quoted_not_tested_against() -> None:
    """Issue #67 item 1: "admin-18-6 vs post-6-6" was "contradicts: significantly short of the paper's +2.50", a
    gain the paper measured at 60L-12L. A target is the paper's Δ for the same comparison only; a Δ from other
    depths is quoted with them and the claim is tested against 0 alone, which the row says. In the committed
    report too: the only target left is "close"'s margin."""
    recs = {
        "post-6-6": [record("post-6-6", s, 0.3) for s in (1, 2, 3)],
        "admin-18-6": [record("admin-18-6", s, 0.3) for s in (4, 5, 6)],
    }
    verdicts, _ = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    admin = by_name(verdicts, "admin-18-6", "post-6-6")
    assert admin["target"] is None and not admin["in_family"] and admin["paper_delta"] == 2.5
    assert "tested against 0 only: the paper's +2.50 is 60L-12L vs 6L-6L, not this comparison" in admin["why"]
    assert "short of the paper" not in admin["why"]
    committed = json.loads(
        (Path(__file__).resolve().parents[2] / "bench/results/depth_multi30k.json").read_text()
    )
    for v in committed["claims"]:
        assert v["target"] is None or (v["rule"] == "close" and v["target"] == -depth_claims.CLOSE_MARGIN)
        if v["paper_delta"] is not None and v["rule"] == "better":
            assert v["paper_comparison"], (
                f"{v['system']} vs {v['baseline']}: whose comparison is the paper's?"
            )


def test_one_holm_family_and_a_verdict_that_rests_on_the_df_is_inconclusive() -> None:
    """Issue #67 items 2 and 4: the tests against 0 and against a target were corrected in two families (22 and 5);
    now one family holds every test the report makes. Every test is made under both df choices (Welch–
    Satterthwaite and the seed variance's own): a verdict that differs between them is inconclusive, and the
    word at the seed df is shown beside."""
    recs = {
        "post-18-6": [record("post-18-6", s, 0.3) for s in (1, 2)],
        "admin-18-6": [record("admin-18-6", s, 0.3) for s in (3, 4)],
        "unshared-18-6": [record("unshared-18-6", s, 0.3) for s in (5, 6)],
        "shared-18-6": [record("shared-18-6", s, 0.3) for s in (7, 8)],
    }
    verdicts, tests = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    shared = by_name(verdicts, "shared-18-6", "unshared-18-6")
    assert shared["in_family"] and tests[0]["family"] == len(tests) + 1
    raw = [t["p_value"] for t in tests] + [shared["p_target"]]
    adjusted = holm(raw)
    assert [t["p_holm"] for t in tests] == pytest.approx(adjusted[:-1])
    assert shared["p_target_holm"] == pytest.approx(adjusted[-1])
    assert all(t["seed_df"] == 2 for t in tests)  # two seeds a side: 1 + 1

    # a gain significant at the Welch–Satterthwaite df (30) and not at the seed df (2): inconclusive
    rows = {name: summaries.row_summary(name, r) for name, r in recs.items()}
    test = next(t for t in tests if (t["system"], t["baseline"]) == ("admin-18-6", "post-18-6"))
    test |= {"delta": 2.0, "se": 0.55, "df": 30.0, "seed_df": 2.0, "p_value": 2 * t_sf(2.0 / 0.55, 30.0)}
    test["ci95"] = [2.0 - t_ppf(0.975, 30.0) * 0.55, 2.0 + t_ppf(0.975, 30.0) * 0.55]
    report.decision.correct([test], {})
    assert test["p_holm"] < 0.05 < test["p_holm_seed"]
    v = report.verdict(_claim("admin-18-6", "post-18-6"), rows, [test])
    assert v["verdict"] == "inconclusive" and v["verdict_seed_df"] == "inconclusive"
    assert "the verdict rests on the df: reproduces at the Welch–Satterthwaite df 30" in v["why"]
    assert report.glance_table([v]).splitlines()[-1].endswith("| inconclusive |")
    assert "| at seed df |" in report.glance_table([v])
    test |= {"seed_df": 30.0}
    report.decision.correct([test], {})
    assert report.verdict(_claim("admin-18-6", "post-18-6"), rows, [test])["verdict"] == "reproduces"


def test_a_seed_added_after_a_look_is_disclosed_and_not_used_by_the_verdict(tmp_path: Path) -> None:
    """Issue #67 item 3: the lr control's third seed was run because its two-seed row could not decide; a seed
    added after a look makes the test sequential, so the verdict uses the seeds fixed before looking, the report
    says so and shows the three-seed result beside, and the run count's parts add up to it."""
    recs = {
        "pre-18-6": [record("pre-18-6", s, 0.3) for s in (1, 2, 3)],
        "pre-6-6-lr2e-3": [record("pre-6-6-lr2e-3", s, 0.3) for s in (1, 2, 3)],
    }
    planned = [("pre-18-6", s) for s in (1, 2, 3)] + [("pre-6-6-lr2e-3", s) for s in (1, 2)]
    markdown, payload = report.build_report(recs, args(), planned, n_samples=N_SAMPLES)
    control = by_name(payload["claims"], "pre-18-6", "pre-6-6-lr2e-3")
    assert control["seeds"] == {"pre-18-6": 3, "pre-6-6-lr2e-3": 2}
    assert "**Seeds added after a look.** pre-6-6-lr2e-3 seed 3:" in markdown
    assert "the verdicts use seeds 1-2 of pre-6-6-lr2e-3" in markdown
    assert "with every seed (3), not used by any verdict: pre-18-6 vs pre-6-6-lr2e-3: Δ" in markdown
    assert "6 runs finished" in payload["progress"]
    assert "beyond the plan 1 (pre-6-6-lr2e-3 seed 3)" in payload["progress"]


def test_the_recipe_sentence_on_dropouts_passes_through_the_rule() -> None:
    """Issue #67 item 4: docs/recipes.md said DS-Init's dropouts "under-fit" at small scale (25.3 ± 1.0 against
    30.9 ± 0.1), a difference no test had made. It is a claim of the report now, decided by the one rule in the
    one family; the dropouts it varies are not its confound, the rest of the recipe is the same."""
    recs = {
        "dsinit-matt-18-6": [record("dsinit-matt-18-6", s, 0.45) for s in (1, 2)],
        "dsinit-matt-18-6-low-dropout": [record("dsinit-matt-18-6-low-dropout", s, 0.2) for s in (3, 4)],
    }
    verdicts, tests = report.claim_verdicts(recs, n_samples=N_SAMPLES)
    v = by_name(verdicts, "dsinit-matt-18-6-low-dropout", "dsinit-matt-18-6")
    assert v["confound"] == "" and v["test"] is not None and v["varies"] == ["dropout", "attention_dropout"]
    assert v["verdict"] in ("reproduces", "inconclusive", "contradicts")
    assert ("dsinit-matt-18-6-low-dropout", "dsinit-matt-18-6") in {
        (t["system"], t["baseline"]) for t in tests
    }
    assert "dropout" in report.decision.confounds("dsinit-matt-18-6-low-dropout", "dsinit-matt-18-6")


def test_which_runs_lost_their_weights_is_committed_data(tmp_path: Path, monkeypatch) -> None:
    """Issue #68 item 1: whether a finished run lost its weights was read from this machine's cache, so the report
    differed between machines. It is committed data now (weights.json beside the records): a run listed as lost is
    lost on every machine, one left out on purpose is neither lost nor re-trained, and an empty cache changes
    nothing."""
    monkeypatch.setattr(core, "RUNS", tmp_path / "empty-cache")
    monkeypatch.setattr(core, "RECORDS", tmp_path / "records")
    a = args()
    for name in ("post-6-6", "pre-6-6"):
        core._write_json(core.record_path(name, 1, a), record(name, 1, 0.3))
    assert not core.weights_lost("post-6-6", 1, a)  # no weights anywhere, but not recorded as lost
    core._write_json(
        core.weights_facts_path(a), {"e5": {"lost": [["post-6-6", 1]], "not_committed": [["pre-6-6", 1]]}}
    )
    assert core.weights_lost("post-6-6", 1, a) and not core.weights_lost("pre-6-6", 1, a)
    assert core.weights_left_out("pre-6-6", 1, a) and not core.find_lost_weights("pre-6-6", 1, a)
    lost = pricing.lost_weights(core.load_records(tmp_path / "records", 5), a)
    assert [(x["row"], x["seed"]) for x in lost] == [("post-6-6", 1)]
