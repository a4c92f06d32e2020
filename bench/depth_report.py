"""The report of the depth study (bench/depth_multi30k.py): table, each paper's claim with a verdict, curves.

`report(args)` reads every record of the `--epochs` budget
(bench/results/depth_multi30k/e{E}/ROW/seed{S}.json; with `--quick` the smoke-test records) and writes
bench/results/depth_multi30k.{md,json,png} (quick: depth_multi30k.quick.*): progress, settings, the table
(mean ± sd over seeds), the claims (depth_claims.py) with the paper's own number beside each verdict, every
comparison's paired bootstrap over seeds and sentences with Holm's correction across all of them, what is not
finished and its CPU cost (depth_pricing.py); depth_multi30k_claims.png is the claims' forest plot
(claims_plot.py), depth_multi30k_papers.png each paper's rows' curves, one panel a paper (paper_curves.py).
The budget pilot the study's budget was chosen from is depth_pilot.py.

The functions between loading and writing are pure (records in, numbers and text out), so
tests/test_depth_report.py runs them on synthetic records.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import depth_multi30k as study
import depth_rows
from claims_plot import forest_plot, holm_note
from common import RESULTS, markdown_table, write_results
from depth_claims import (
    ALPHA,
    BEST_DEEP,
    CLAIMS,
    CLOSE_MARGIN,
    COLLAPSE_SHARE,
    N_SAMPLES,
    PAPERS,
    RULES,
    SHORT,
    SRC_FLOOR,
    Claim,
)
from depth_pricing import (
    depth,
    lost_markdown,
    lost_weights,
    not_finished_markdown,
    prior_rates,
    progress,
    remaining,
    started_runs,
)
from machine_speed import reference_cpu_s, reference_rate
from paper_curves import paper_curves, paper_rows, per_epoch

from deep_nmt_hf.significance import holm, seeded_paired_bootstrap

SLOPE_EPOCHS = 3  # the valid-loss slope is fitted over the last this many epochs
FLAT = 0.005  # nats per epoch: |slope| below it is "flat"


# ---------------------------------------------------------------------------------------------------- records
def load_records(root: Path, epochs: int) -> dict[str, list[dict[str, Any]]]:
    """Every record of the `epochs` budget under `root` (e{epochs}/ROW/seed{S}.json), by row in MODELS order
    (rows no longer in MODELS last), each row's seeds in order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((root / f"e{epochs}").glob("*/seed*.json")):
        record = json.loads(path.read_text())
        found.setdefault(record["name"], []).append(record)
    return {
        name: sorted(found[name], key=lambda r: r["seed"]) for name in sorted(found, key=depth_rows.row_order)
    }


def budgets(root: Path) -> list[int]:
    """The epoch budgets that have records under `root`, ascending."""
    return sorted(int(p.name[1:]) for p in root.glob("e*") if p.is_dir() and p.name[1:].isdigit())


def valid_slope(history: Sequence[dict[str, Any]], epochs: int = SLOPE_EPOCHS) -> float | None:
    """Least-squares slope of the validation loss over the last `epochs` epochs, in nats per epoch (None with
    fewer than two finite values)."""
    points = [
        (float(e["epoch"]), float(e["valid_loss"]))
        for e in history
        if e.get("valid_loss") is not None and math.isfinite(e["valid_loss"])
    ][-epochs:]
    if len(points) < 2:
        return None
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread


def trend(slope: float | None) -> str:
    """What a slope says: flat when |slope| < FLAT nats per epoch, else still improving (falling) or rising."""
    if slope is None:
        return "—"
    if abs(slope) < FLAT:
        return "flat"
    return "still improving" if slope < 0 else "rising"


def mean_sd(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the values that are not None (sd None with fewer than two)."""
    present = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not present:
        return None, None
    return statistics.fmean(present), statistics.stdev(present) if len(present) > 1 else None


def _without_statistics(scores: dict[str, Any] | None) -> dict[str, Any] | None:
    if scores is None:
        return None
    return {kind: {k: v for k, v in s.items() if k != "bleu_statistics"} for kind, s in scores.items()}


def seed_summary(record: dict[str, Any]) -> dict[str, Any]:
    """One run's results: test scores (without the per-sentence statistics), NLL and the diagnosis from it,
    epochs, the valid-loss slope and what it says, CPU time."""
    history = record.get("history") or []
    test, nll = record.get("test"), record.get("nll")
    averaged = (test or {}).get("averaged") or {}
    best = (test or {}).get("best") or {}
    nll_avg = (nll or {}).get("averaged") or {}
    slope = valid_slope(history)
    decode = averaged.get("decode_tokens_per_cpu_s")  # scored by the worker of the last epoch, on its machine
    train_cpu = [reference_cpu_s(e["train_cpu_s"], e) for e in history if e.get("train_cpu_s") is not None]
    all_cpu = study.epoch_cpu_s(history)
    return {
        "seed": record["seed"],
        "epochs": record.get("epochs"),
        "best_epoch": record.get("best_epoch"),
        "diverged": record.get("diverged"),
        "test": _without_statistics(test),
        "nll": nll,
        "bleu": averaged.get("bleu"),
        "chrf": averaged.get("chrf"),
        "ter": averaged.get("ter"),
        "bleu_best": best.get("bleu"),
        "length_ratio": averaged.get("length_ratio"),
        "decode_tokens_per_cpu_s": reference_rate(decode, history[-1]) if decode and history else decode,
        "gap": nll_avg["val"] - nll_avg["train"] if nll_avg else None,
        "src": nll_avg["val_wrong_source"] - nll_avg["val"] if nll_avg else None,
        "final_valid_loss": history[-1]["valid_loss"] if history else None,
        "slope": slope,
        "trend": "diverged" if record.get("diverged") else trend(slope),
        "train_cpu_s_per_epoch": statistics.fmean(train_cpu) if train_cpu else None,
        "cpu_s_per_epoch": statistics.fmean(all_cpu) if all_cpu else None,
        "cpu_hours": sum(all_cpu) / 3600 if all_cpu else None,
    }


SUMMARISED = ("bleu", "chrf", "ter", "bleu_best", "length_ratio", "decode_tokens_per_cpu_s", "gap", "src")
SUMMARISED += ("final_valid_loss", "slope", "train_cpu_s_per_epoch", "cpu_s_per_epoch", "cpu_hours")


def row_summary(name: str, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A row over its seeds: each seed's summary and the mean and sd of every number."""
    seeds = [seed_summary(r) for r in records]
    means, sds = {}, {}
    for key in SUMMARISED:
        means[key], sds[key] = mean_sd([s[key] for s in seeds])
    model = depth_rows.MODELS.get(name)
    first = records[0]
    return {
        "description": first.get("description"),
        "recipe": first.get("recipe"),
        "variant": first.get("variant"),
        "baseline": first.get("baseline"),
        "options": first.get("options"),
        "why": model.why if model else "",
        "num_parameters": first.get("num_parameters"),
        "n_seeds": len(records),
        "diverged": sum(1 for r in records if r.get("diverged")),
        "trend": trend(means["slope"]),
        "mean": means,
        "sd": sds,
        "seeds": seeds,
    }


def reference_row(name: str) -> str:
    """The 6-6 reference of a row: where its chain of baselines ends (post-6-6, pre-6-6 or marian-6-6)."""
    seen = {name}
    while name in depth_rows.MODELS and depth_rows.MODELS[name].baseline is not None:
        name = depth_rows.MODELS[name].baseline
        if name in seen:
            break
        seen.add(name)
    return name


def source_split(
    name: str, rows: dict[str, dict[str, Any]]
) -> tuple[dict[int, float], dict[int, float], str]:
    """Row NAME's seeds by source reliance (see RULES): those below the floor, those at or above it (seed → src
    nats; seeds without a measure are in neither) and what the floor is ("0.5 × post-6-6's 3.24")."""
    row = rows[name]
    srcs = {s["seed"]: s["src"] for s in row["seeds"] if s["src"] is not None}
    reference = reference_row(name)
    ref_src = rows[reference]["mean"]["src"] if reference != name and reference in rows else None
    if ref_src is not None:
        floor, against = (
            COLLAPSE_SHARE * ref_src,
            f"{COLLAPSE_SHARE:g} × {reference}'s {_cell(ref_src, None, 2)}",
        )
    else:
        floor, against = SRC_FLOOR, f"the floor {SRC_FLOOR:g}"
    low = {seed: src for seed, src in srcs.items() if src < floor}
    return low, {seed: src for seed, src in srcs.items() if seed not in low}, against


def failure(name: str, rows: dict[str, dict[str, Any]]) -> str | None:
    """Why row NAME counts as failed to train (see RULES), or None when it trained: a seed diverged, or a seed's
    source reliance is below the floor. Seeds that disagree are named, so a row that trains on some seeds and
    stops reading the source on others reads as such, not as a mean between the two."""
    row = rows[name]
    if row["diverged"]:
        return f"{name} diverged in {row['diverged']} of {row['n_seeds']} seeds"
    low, kept, against = source_split(name, rows)
    if not low:
        return None
    if not kept:
        return f"{name} barely reads the source (src {_cell(row['mean']['src'], None, 2)} nats < {against})"

    def listed(seeds: dict[int, float]) -> str:
        return ", ".join(f"seed {seed} src {_cell(src, None, 2)}" for seed, src in sorted(seeds.items()))

    return (
        f"{name} barely reads the source on {len(low)} of {len(low) + len(kept)} seeds ({listed(low)} nats < "
        f"{against}; it reads it on {listed(kept)})"
    )


# ------------------------------------------------------------------------------------------------ the claims
def best_deep_row(rows: dict[str, dict[str, Any]]) -> str | None:
    """The deep row (more than 6 + 6 layer applications) with the highest mean averaged test BLEU that did not
    fail, or None."""
    candidates = {
        name: row["mean"]["bleu"]
        for name, row in rows.items()
        if (d := depth(name)) is not None
        and sum(d) > 12
        and row["mean"]["bleu"] is not None
        and failure(name, rows) is None
    }
    return max(candidates, key=candidates.get) if candidates else None


def _averaged_statistics(records: Sequence[dict[str, Any]]) -> list[list[list[int]]]:
    return [
        r["test"]["averaged"]["bleu_statistics"] for r in records if (r.get("test") or {}).get("averaged")
    ]


def resolve(claim: Claim, rows: dict[str, dict[str, Any]]) -> tuple[str | None, str]:
    """(system, baseline) of a claim: the best deep row stands in for BEST_DEEP (None while there is none)."""
    return (best_deep_row(rows) if claim.system == BEST_DEEP else claim.system), claim.baseline


def run_comparisons(
    records: dict[str, list[dict[str, Any]]], claims: Sequence[Claim] = CLAIMS, n_samples: int = N_SAMPLES
) -> list[dict[str, Any]]:
    """The paired bootstrap over seeds and sentences (averaged models) of every comparison the claims make whose
    two rows both have test statistics, then Holm's correction across all of them together."""
    rows = {name: row_summary(name, recs) for name, recs in records.items()}
    pairs: list[tuple[str, str]] = []
    for claim in claims:
        if claim.rule == "collapses":
            continue  # a diagnosis of one row, not a BLEU comparison
        system, baseline = resolve(claim, rows)
        if system is None or (system, baseline) in pairs:
            continue
        if system in records and baseline in records:
            pairs.append((system, baseline))
    tests = []
    for system, baseline in pairs:
        sys_stats, base_stats = _averaged_statistics(records[system]), _averaged_statistics(records[baseline])
        if not sys_stats or not base_stats:
            continue  # a row that diverged before its first checkpoint has no translations
        result = seeded_paired_bootstrap(base_stats, sys_stats, n_samples=n_samples)
        tests.append({"system": system, "baseline": baseline, **result})
    for test, adjusted in zip(tests, holm([t["p_value"] for t in tests]), strict=True):
        test["p_holm"] = adjusted
    return tests


def _find(tests: Sequence[dict[str, Any]], system: str, baseline: str) -> dict[str, Any] | None:
    return next((t for t in tests if t["system"] == system and t["baseline"] == baseline), None)


def describe_test(test: dict[str, Any]) -> str:
    """One comparison in words: Δ BLEU with its 95% CI, raw and Holm p, the seeds on each side."""
    low, high = test["ci95"]
    return (
        f"Δ {test['delta']:+.2f} BLEU (95% CI {low:+.2f} … {high:+.2f}), p {test['p_value']:.3g}, Holm p "
        f"{test['p_holm']:.3g}; seeds {test['system_runs']} vs {test['baseline_runs']}"
    )


def verdict(claim: Claim, rows: dict[str, dict[str, Any]], tests: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The verdict on one claim by RULES: {"paper", "claim", "system", "baseline", "verdict" (holds / does not
    hold / cannot be tested yet / cannot be tested at this scale), "why", "paper_number", "panel", "seeds", "test"}."""
    system, baseline = resolve(claim, rows)
    out = {
        "paper": claim.paper,
        "claim": claim.text,
        "system": system,
        "baseline": baseline,
        "rule": claim.rule,
        "paper_number": claim.paper_number,
        "paper_delta": claim.paper_delta,
        "paper_outcome": claim.paper_outcome,
        "panel": claim.panel,
        "seeds": None,
        "test": None,
    }

    def done(word: str, why: str) -> dict[str, Any]:
        return out | {"verdict": word, "why": why}

    if system is None:
        deep = [n for n in rows if (d := depth(n)) is not None and sum(d) > 12]
        if deep:
            return done(
                "cannot be tested at this scale", f"every deep row with a record fails ({', '.join(deep)})"
            )
        return done("cannot be tested yet", "no deep row has a record")
    missing = [n for n in (system, baseline) if n not in rows]
    needed = depth_rows.IF_FAILS.get(system)
    if system in missing and needed in rows and not failure(needed, rows):
        return done(
            "cannot be tested at this scale",
            f"{needed} does not fail (it reads the source: src {_cell(rows[needed]['mean']['src'], None, 2)} "
            f"nats), so {system} is not run (the study runs it only where {needed} fails)",
        )
    if baseline in missing and depth_rows.IF_TRAINS.get(baseline) == system and system in rows:
        if why := failure(system, rows):
            return done(
                "does not hold",
                f"the claimed row fails: {why}, so {baseline} is not run (the study runs it only where {system} "
                "trains)",
            )
    if missing:
        return done("cannot be tested yet", f"no record of {', '.join(missing)}")
    out["seeds"] = {system: rows[system]["n_seeds"], baseline: rows[baseline]["n_seeds"]}
    test = _find(tests, system, baseline)
    out["test"] = test
    reference = reference_row(baseline)
    if reference in rows and failure(reference, rows):
        return done(
            "cannot be tested at this scale", f"even the 6-6 reference fails: {failure(reference, rows)}"
        )
    failed_sys, failed_base = failure(system, rows), failure(baseline, rows)
    shown = f" ({describe_test(test)})" if test else ""
    significant = test is not None and test["p_holm"] < ALPHA
    if claim.rule == "collapses":
        # source reliance down the decoder depths this study ran (the paper's Figure 1, in nats)
        variant = depth_rows.MODELS[system].variant
        sweep = [baseline, *(n for n, row in depth_rows.MODELS.items() if row.variant == variant)]
        src = {n: rows[n]["mean"]["src"] for n in sweep if n in rows}
        shown = ", ".join(f"{n} {_cell(v, None, 2)}" for n, v in src.items() if v is not None)
        out["source_reliance"] = {n: src.get(n) for n in (system, baseline)}
        if failed_sys:
            return done("holds", f"{failed_sys}; source reliance (nats): {shown}")
        return done(
            "cannot be tested at this scale",
            f"{system} reads the source at {depth(system)[1]} decoder layers (nats: {shown}); the paper's plain "
            "decoders collapse at 15 and 27 layers of a 512-wide model on WMT14 (Table 1)",
        )
    if claim.rule == "fails-or-behind":
        if failed_sys:
            return done("holds", f"it fails: {failed_sys}" + shown)
        if test is None:
            return done("cannot be tested yet", "no test statistics for the comparison")
        if significant and test["delta"] < 0:
            return done("holds", "it trains but falls behind" + shown)
        return done("does not hold", "it trains and is not behind" + shown)
    if failed_sys and failed_base:
        return done("does not hold", f"both fail: {failed_sys}; {failed_base}")
    if failed_sys:
        return done("does not hold", f"the claimed row fails: {failed_sys}" + shown)
    if test is None:
        if failed_base:
            return done("holds", f"the counterfactual fails ({failed_base}) and the claimed row trains")
        return done("cannot be tested yet", "no test statistics for the comparison")
    if claim.rule == "close":
        ratio = rows[system]["num_parameters"] / rows[baseline]["num_parameters"]
        params = f"; parameters {ratio:.0%} of {baseline}'s"
        if test["ci95"][0] > -CLOSE_MARGIN:
            return done("holds", f"within {CLOSE_MARGIN:g} BLEU" + shown + params)
        if significant and test["delta"] < -CLOSE_MARGIN:
            return done("does not hold", f"more than {CLOSE_MARGIN:g} BLEU behind" + shown + params)
        # how far the CI reaches below Δ: "close" needs a Δ that far above −margin
        below = test["delta"] - test["ci95"][0]
        return done(
            "cannot be tested at this scale",
            f"the CI reaches below −{CLOSE_MARGIN:g} BLEU without a significant larger deficit"
            + shown
            + params
            + f"; the CI reaches {below:.2f} BLEU below Δ (seeds and {test['sentences']} test sentences), so "
            f'"within {CLOSE_MARGIN:g} BLEU" needs Δ above {below - CLOSE_MARGIN:+.2f}',
        )
    if failed_base:
        return done("holds", f"the counterfactual fails ({failed_base}) and the claimed row trains" + shown)
    if significant and test["delta"] > 0:
        return done("holds", "better" + shown)
    if significant:
        return done("does not hold", "significantly worse" + shown)
    return done("does not hold", "no significant difference" + shown)


def claim_verdicts(
    records: dict[str, list[dict[str, Any]]], claims: Sequence[Claim] = CLAIMS, n_samples: int = N_SAMPLES
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(verdicts, comparisons): every claim's verdict, and the Holm-corrected comparisons they rest on."""
    rows = {name: row_summary(name, recs) for name, recs in records.items()}
    tests = run_comparisons(records, claims, n_samples)
    return [verdict(claim, rows, tests) for claim in claims], tests


# ------------------------------------------------------------------------------------------ the markdown
def _cell(mean: float | None, sd: float | None, digits: int = 1, signed: bool = False) -> str:
    """MEAN (± SD) to DIGITS; a value that rounds to zero reads 0, never "-0.00" (a source reliance of -0.001
    nats is no reliance, not a negative one)."""
    if mean is None:
        return "—"
    mean = round(mean, digits) + 0.0  # + 0.0 turns round's -0.0 into 0.0
    text = f"{mean:+.{digits}f}" if signed else f"{mean:.{digits}f}"
    return text + (f" ± {sd:.{digits}f}" if sd is not None else "")


def _per_seed(row: dict[str, Any], key: str, digits: int, signed: bool = False) -> str:
    """A row's KEY seed by seed ("s1 2.4 · s2 29.4"): for a row whose seeds disagree, where mean ± sd says little."""
    return " · ".join(f"s{s['seed']} {_cell(s[key], None, digits, signed)}" for s in row["seeds"])


def results_table(rows: dict[str, dict[str, Any]]) -> str:
    """The table: one line per row, numbers as mean ± sd over its seeds; BLEU avg and src seed by seed where
    the row's seeds disagree on reading the source (`source_split`)."""
    header = ["row", "recipe", "params (M)", "seeds", "CPU-s/epoch", "BLEU avg", "chrF avg", "TER avg"]
    header += ["BLEU best", "slope (nats/ep)", "end", "gap", "src", "len", "decode tok/CPU-s"]
    body = []
    for name, row in rows.items():
        m, s = row["mean"], row["sd"]
        low, kept, _ = source_split(name, rows)
        split = bool(low and kept)  # some seeds stopped reading the source: each seed, not their mean
        body.append(
            [
                name,
                row["recipe"],
                f"{row['num_parameters'] / 1e6:.2f}" if row["num_parameters"] else "—",
                row["n_seeds"],
                _cell(m["train_cpu_s_per_epoch"], None, 0),
                _per_seed(row, "bleu", 1) if split else _cell(m["bleu"], s["bleu"]),
                _cell(m["chrf"], s["chrf"]),
                _cell(m["ter"], s["ter"]),
                _cell(m["bleu_best"], s["bleu_best"]),
                _cell(m["slope"], None, 3, signed=True),
                f"diverged ({row['diverged']}/{row['n_seeds']})" if row["diverged"] else row["trend"],
                _cell(m["gap"], None, 2, signed=True),
                _per_seed(row, "src", 2, signed=True) if split else _cell(m["src"], None, 2, signed=True),
                _cell(m["length_ratio"], None, 2),
                _cell(m["decode_tokens_per_cpu_s"], None, 0),
            ]
        )
    return markdown_table(header, body)


def claims_markdown(verdicts: Sequence[dict[str, Any]]) -> str:
    """Per paper: each claim's verdict, why, the seeds behind it and the paper's own number."""
    parts = []
    for paper, (_, title) in PAPERS.items():
        lines = [f"### {title}", ""]
        for v in (v for v in verdicts if v["paper"] == paper):
            seeds = ""
            if v["seeds"]:
                seeds = " Seeds: " + ", ".join(f"{n} {k}" for n, k in v["seeds"].items()) + "."
            lines.append(
                f"- {v['claim']} ({v['system'] or '—'} vs {v['baseline']}): **{v['verdict']}** — {v['why']}."
                f"{seeds} Paper: {v['paper_number']}."
            )
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def glance_table(verdicts: Sequence[dict[str, Any]]) -> str:
    """One line per claim, in the order of the claims: the comparison, the seeds, the measured Δ BLEU with its 95%
    CI beside the paper's Δ, and the verdict with its Holm p (the details, the rules and the paper's tables below)."""
    body = []
    for v in verdicts:
        test = v["test"] if v["rule"] != "collapses" else None  # a collapse is judged by source reliance
        measured = "—"
        if test:
            low, high = test["ci95"]
            measured = f"{test['delta']:+.2f} ({low:+.2f} … {high:+.2f})"
        elif v.get("source_reliance"):
            measured = (
                "src " + " vs ".join(_cell(x, None, 2) for x in v["source_reliance"].values()) + " nats"
            )
        word = f"**{v['verdict']}**" if v["verdict"] in ("holds", "does not hold") else v["verdict"]
        body.append(
            [
                SHORT[v["paper"]],
                f"{v['system'] or BEST_DEEP} vs {v['baseline']}",
                " vs ".join(str(k) for k in v["seeds"].values()) if v["seeds"] else "—",
                measured,
                v["paper_outcome"]
                if v["paper_delta"] is None
                else _cell(v["paper_delta"], None, 2, signed=True),
                word + holm_note(test),
            ]
        )
    header = ["paper", "system vs baseline", "seeds", "Δ BLEU (95% CI)", "the paper (Δ BLEU)", "verdict"]
    return markdown_table(header, body)


def comparisons_table(tests: Sequence[dict[str, Any]]) -> str:
    header = [
        "system",
        "baseline",
        "seeds",
        "BLEU system",
        "BLEU baseline",
        "Δ BLEU",
        "95% CI",
        "p",
        "Holm p",
    ]
    body = [
        [
            t["system"],
            t["baseline"],
            f"{t['system_runs']} vs {t['baseline_runs']}",
            f"{t['system_bleu']:.2f}",
            f"{t['baseline_bleu']:.2f}",
            f"{t['delta']:+.2f}",
            f"{t['ci95'][0]:+.2f} … {t['ci95'][1]:+.2f}",
            f"{t['p_value']:.3g}",
            f"{t['p_holm']:.3g}",
        ]
        for t in tests
    ]
    return markdown_table(header, body)


def settings_markdown(
    settings: dict[str, Any], rows: dict[str, dict[str, Any]], args: argparse.Namespace
) -> str:
    """The settings paragraph, then each row's learning rate and warmup and why a row overrides its recipe."""
    s = settings
    stopping = "no early stopping"
    if s.get("patience"):
        stopping = f"stopped after {s['patience']} epochs without a better validation loss"
    text = (
        f"Every row trains {s['epochs']} epochs with its paper's recipe (deep_nmt_hf.recipes): the recipe's warmup "
        f"× {s['warmup_scale']:g}, then the learning rate decays {s['schedule']}ly to 0 at the last epoch "
        f"(fairseq's polynomial_decay with power 1 for linear), so every run ends annealed; "
        f"{stopping}. "
        f"One batch size for every row: ≤ {s['max_tokens']} padded tokens per side (the papers' 25k-65k-token "
        "updates would give 8-20 updates an epoch on Multi30k's 29k pairs). Width d_model "
        f"{s['d_model']}, a joint BPE vocabulary of {s['vocab_size']}, sentences ≤ {s['max_length']} tokens"
        f"{', the first ' + str(s['max_train_samples']) + ' training pairs' if s.get('max_train_samples') else ''}. "
        f"Validation after every epoch: loss (the training loss: label-smoothed) and BLEU (beam 4) on "
        f"{s['valid_sentences']} sentences. Test: test_2016_flickr"
        f"{' (first ' + str(s['max_test_samples']) + ' sentences)' if s.get('max_test_samples') else ''}, the "
        f"recipe's beam and length penalty, on the best-validation-loss epoch checkpoint (best) and the average of "
        f"the last {s['average']} epoch checkpoints (avg, the papers' protocol); sacreBLEU BLEU / chrF / TER."
    )
    lines = ["", "", "Learning rate and warmup (after scaling) per row:", ""]
    for name in depth_rows.MODELS:
        if name in rows and rows[name]["options"]:
            options = rows[name]["options"]
        else:
            options, _ = study._recipe(name, args)
        why = depth_rows.MODELS[name].why
        lines.append(
            f"- {name} ({depth_rows.MODELS[name].recipe}): lr {options['learning_rate']:g}, warmup "
            f"{options['warmup_steps']} steps" + (f" — override: {why}" if why else "")
        )
    return text + "\n".join(lines)


COLUMNS = (
    "Columns: params in millions; seeds = runs behind the row; CPU-s/epoch = training CPU seconds per epoch "
    "(one thread; on the reference machine: an epoch another machine trained is scaled by the ratio of the two "
    "machines' speed probes, bench/machine_speed.py); BLEU / chrF / TER of the averaged model (avg) and BLEU of "
    "the best-validation checkpoint (best), "
    "mean ± sd over seeds (a row whose seeds disagree, some reading the source and some not, gives BLEU avg "
    "and src seed by seed: s1 … · s2 …); slope = least-squares slope of the validation loss over the last "
    f"{SLOPE_EPOCHS} epochs, nats per epoch, mean over seeds; end = flat when |slope| < {FLAT:g} nats/epoch, "
    "otherwise still improving (falling) or rising; gap = eval-mode token NLL on validation minus training pairs "
    "(over-fitting); src = validation NLL with every source replaced by another sentence's minus the true one "
    "(source reliance: near 0, the decoder ignores the source); len = hypothesis / reference length on test (below "
    "1 BLEU's brevity penalty bites); gap, src and len of the averaged model; decode tok/CPU-s = test tokens the "
    "averaged model decodes per CPU-s, on the reference machine as CPU-s/epoch."
)


def build_report(
    records: dict[str, list[dict[str, Any]]],
    args: argparse.Namespace,
    planned: Sequence[tuple[str, int]],
    partial: dict[tuple[str, int], Sequence[dict[str, Any]]] | None = None,
    n_samples: int = N_SAMPLES,
    lost: Sequence[dict[str, Any]] = (),
    pilot: dict[str, Any] | None = None,
) -> tuple[str, dict[str, Any]]:
    """(markdown, JSON payload) of the report of `args.epochs` from its records; `lost`: the finished runs to
    re-train for their weights (`lost_weights`); `pilot`: the budget pilot's payload (depth_pilot.build_pilot),
    whose conclusion the settings quote."""
    rows = {name: row_summary(name, recs) for name, recs in records.items()}
    verdicts, tests = claim_verdicts(records, CLAIMS, n_samples)
    all_settings = [r["settings"] for recs in records.values() for r in recs if r.get("settings")]
    settings = {**study.settings(args), **(all_settings[0] if all_settings else {})}
    differing = sorted({k for s in all_settings for k in s if s.get(k) != settings.get(k)})
    left = remaining(planned, records, args.epochs, partial, prior_rates(settings))
    signatures = sorted(
        {
            r["test"][kind][f"{m}_signature"]
            for recs in records.values()
            for r in recs
            if r.get("test")
            for kind in r["test"]
            for m in ("bleu", "chrf", "ter")
        }
    )
    markdown = [
        f"# Depth that pays? Each paper's claim on Multi30k en→de, {args.epochs} annealed epochs",
        progress(planned, records, left, lost),
        "## Verdicts at a glance",
        glance_table(verdicts),
        "Each claim in words, the rules behind the verdicts and the paper's own tables: [Claims](#claims); "
        "the same at a glance as a plot: [depth_multi30k_claims.png](depth_multi30k_claims.png).",
        "## Settings",
        settings_markdown(settings, rows, args),
    ]
    budget = pilot["conclusion"] if pilot and pilot["rows"] else None
    if budget:
        page = f"{_output_name('depth_multi30k_pilot', args)}.md"
        markdown.append(
            f"**The budget.** {args.epochs} epochs, from the budget pilot ([{page}]({page}): the 6-6 rows trained "
            f"at several budgets, each its own annealed run). {budget}"
        )
    if differing:
        markdown.append(
            f"**Warning:** the records differ in {', '.join(differing)}; the numbers mix settings."
        )
    markdown += ["## Results", results_table(rows) if rows else "No finished run yet.", COLUMNS]
    if rerun := rerun_markdown(records):
        markdown.append(rerun)
    markdown += ["## Claims", RULES, claims_markdown(verdicts)]
    markdown += [
        "### Every comparison, Holm-corrected together",
        comparisons_table(tests) if tests else "None yet.",
    ]
    if left or lost:
        markdown += [
            "## Not finished yet",
            "\n".join(filter(None, (not_finished_markdown(left), lost_markdown(lost)))),
        ]
    if signatures:
        markdown.append("Signatures: " + "; ".join(f"`{s}`" for s in signatures))
    payload = {
        "budget": args.epochs,
        "settings": settings,
        "rules": {
            "text": RULES,
            "alpha": ALPHA,
            "flat_nats_per_epoch": FLAT,
            "slope_epochs": SLOPE_EPOCHS,
            "close_margin_bleu": CLOSE_MARGIN,
            "collapse_share": COLLAPSE_SHARE,
            "src_floor_nats": SRC_FLOOR,
            "bootstrap_samples": n_samples,
        },
        "progress": progress(planned, records, left, lost),
        "rows": rows,
        "significance": tests,
        "claims": verdicts,
        "not_finished": left,
        "weights_lost": list(lost),
        "budget_pilot": budget,
    }
    return "\n\n".join(markdown), payload


# -------------------------------------------------------------------------------------------------- plots
FAMILIES = {
    "Reds": (
        "post-6-6",
        "post-18-6",
        "admin-18-6",
        "deepnorm-18-6",
        "post-36-6",
        "admin-36-6",
        "deepnorm-36-6",
        "post-36-6-low-lr",
        "admin-36-6-low-lr",
    ),
    "Blues": ("pre-6-6", "pre-18-6", "dlcl-18-6"),
    "Greens": ("matt-18-6", "dsinit-matt-18-6", "dsinit-matt-18-6-low-dropout"),
    "Purples": (
        "deep-decoder-6-12-plain",
        "deep-decoder-6-12",
        "deep-decoder-6-24-plain",
        "deep-decoder-6-24",
    ),
    "Oranges": ("unshared-18-6", "shared-18-6"),
    "Greys": ("marian-6-6",),
}


def colour(name: str) -> Any:
    """Rows of one claim in one colour family (ADMIN reds, DLCL blues, DS-Init greens, deep decoder purples,
    shared layers oranges, Marian grey), darker further down the family."""
    import matplotlib

    for cmap, names in FAMILIES.items():
        if name in names:
            share = names.index(name) / (len(names) - 1) if len(names) > 1 else 0.6
            return matplotlib.colormaps[cmap](0.4 + 0.55 * share)
    return "black"


MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def line_style(name: str) -> dict[str, Any]:
    """Colour by claim family, a marker by place in it; dotted: the 6-6 references, dashed: the counterfactual
    rows (the baseline a claim measures another row against), solid: the claimed rows."""
    marker = next(
        (MARKERS[names.index(name) % len(MARKERS)] for names in FAMILIES.values() if name in names), "."
    )
    model = depth_rows.MODELS.get(name)
    counterfactual = any(claim.baseline == name for claim in CLAIMS)
    linestyle = ":" if model is not None and model.baseline is None else "--" if counterfactual else "-"
    return {"color": colour(name), "marker": marker, "markersize": 4, "linestyle": linestyle}


def plot(records: dict[str, list[dict[str, Any]]], path: Path, title: str) -> None:
    """Validation loss per epoch (mean over seeds, min-max shaded), learning rate per epoch (the anneal),
    validation BLEU against cumulative training CPU-hours, mean gradient norm per epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((loss, rate), (cost, norm)) = plt.subplots(2, 2, figsize=(13, 9))
    for name, recs in records.items():
        style = {**line_style(name), "label": f"{name} ({len(recs)})"}
        epochs, mean, low, high = per_epoch(recs, "valid_loss")
        loss.plot(epochs, mean, **style)
        loss.fill_between(epochs, low, high, color=style["color"], alpha=0.2, linewidth=0)
        epochs, mean, _, _ = per_epoch(recs, "learning_rate")
        rate.plot(epochs, mean, **style)
        epochs, mean, _, _ = per_epoch(recs, "grad_norm")
        norm.plot(epochs, mean, **style)
        hours: dict[int, list[float]] = {}
        bleu: dict[int, list[float]] = {}
        for r in recs:
            total = 0.0
            for i, e in enumerate(r.get("history") or []):
                total += reference_cpu_s(e.get("train_cpu_s") or 0.0, e)
                if e.get("valid_bleu") is not None:
                    hours.setdefault(i, []).append(total / 3600)
                    bleu.setdefault(i, []).append(e["valid_bleu"])
        index = sorted(hours)
        cost.plot(
            [statistics.fmean(hours[i]) for i in index], [statistics.fmean(bleu[i]) for i in index], **style
        )
    loss.set(
        xlabel="epoch", ylabel="validation loss (label-smoothed)", title="validation loss (seeds: min-max)"
    )
    rate.set(
        xlabel="epoch",
        ylabel="learning rate (last logged in the epoch)",
        title="learning rate: the anneal",
    )
    cost.set(
        xlabel="training CPU-hours (reference machine)",
        ylabel="validation BLEU (beam 4)",
        title="BLEU against training cost",
    )
    norm.set(xlabel="epoch", ylabel="mean gradient norm (before clipping)", title="gradient norm per epoch")
    norm.set_yscale("log")
    cost.legend(fontsize=7, title="row (seeds)", title_fontsize=7)
    fig.suptitle(title + "; dotted: the 6-6 references, dashed: counterfactual rows, solid: claimed rows")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ------------------------------------------------------------------------------------------------ the report
def _output_name(base: str, args: argparse.Namespace) -> str:
    return f"{base}.quick" if args.quick else base


def rerun_markdown(records: dict[str, list[dict[str, Any]]]) -> str:
    """Runs re-trained with the same seed to keep their weights, beside what the first run measured: how far
    one seed's result reproduces on another machine."""
    runs = [
        f"{name} seed {r['seed']}: averaged test BLEU {r['test']['averaged']['bleu']:.2f} (first run "
        f"{r['first_run']['bleu']:.2f}), best {r['test']['best']['bleu']:.2f} ({r['first_run']['bleu_best']:.2f}), "
        f"last validation loss {r['history'][-1]['valid_loss']:.3f} ({r['first_run']['valid_loss']:.3f})"
        for name, recs in records.items()
        for r in recs
        if r.get("first_run") and r.get("test")
    ]
    if not runs:
        return ""
    return (
        "Re-trained with the same seed, to keep the weights the first run's machine took with it (the tables use "
        "the re-training): " + "; ".join(runs) + "."
    )


def report(args: argparse.Namespace) -> None:
    """Write bench/results/depth_multi30k.{md,json,png} (with `--quick`: depth_multi30k.quick.*) from the records
    of the `--epochs` budget, and the budget pilot's (depth_pilot.pilot_report) beside it."""
    records = load_records(study.records_root(args), args.epochs)
    planned = study.plan(argparse.Namespace(**{**vars(args), "only": None}))
    from depth_pilot import pilot_report  # here: depth_pilot imports this module

    pilot = pilot_report(args, echo=False)  # rebuilt with the report, so it never lags the records
    markdown, payload = build_report(
        records, args, planned, started_runs(planned, args), lost=lost_weights(records, args), pilot=pilot
    )
    name = _output_name("depth_multi30k", args)
    if records:
        plot(
            records,
            RESULTS / f"{name}.png",
            f"Multi30k en→de, {args.epochs} annealed epochs (mean over seeds)",
        )
        markdown += f"\n\n![validation loss, learning rate, BLEU against training CPU-hours, gradient norm]({name}.png)"
        forest_plot(
            payload["claims"],
            RESULTS / f"{name}_claims.png",
            f"Each paper's claim on Multi30k en→de, {args.epochs} annealed epochs: measured Δ BLEU and the "
            "paper's own",
            SHORT,
            ALPHA,
            CLOSE_MARGIN,
        )
        markdown += f"\n\n![every claim: measured Δ BLEU with its 95% CI, the paper's Δ, the verdict]({name}_claims.png)"
        paper_curves(
            records,
            paper_rows(payload["claims"]),
            RESULTS / f"{name}_papers.png",
            f"Per paper, the rows its claims compare: validation BLEU per epoch, {args.epochs} annealed epochs "
            "(mean over seeds, min-max shaded)",
            SHORT,
            line_style,
        )
        markdown += (
            f"\n\n![per paper: validation BLEU per epoch of the rows its claims compare]({name}_papers.png)"
        )
    write_results(name, payload, markdown)
    print(markdown)
