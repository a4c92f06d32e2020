"""The report of the depth study (bench/depth_multi30k.py): table, each paper's claim with a verdict, curves.

`report(args)` reads every record of the `--epochs` budget
(bench/results/depth_multi30k/e{E}/ROW/seed{S}.json; with `--quick` the smoke-test records) and writes
bench/results/depth_multi30k.{md,json,png} (quick: depth_multi30k.quick.*): progress, settings, the table
(mean ± sd over seeds; the rows' summaries: summaries.py), the claims (claims.py) with the paper's own number
beside each verdict, every comparison's paired bootstrap over seeds and sentences with Holm's correction across
all of them, what is not finished and its CPU cost (pricing.py); depth_multi30k_claims.png is the claims' forest
plot (bench/lib/claims_plot.py), depth_multi30k_papers.png each paper's rows' curves, one panel a paper
(bench/lib/paper_curves.py). The budget pilot the study's budget was chosen from is pilot.py, rebuilt with it.

The top of the study's package: it imports the other parts (the plan from study.py) and none of them imports it.
The functions between loading and writing are pure (records in, numbers and text out), so
tests/benchmarks/test_depth_report.py runs them on synthetic records.
"""

from __future__ import annotations

import argparse
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deep_nmt_hf.science.significance import detectable_delta, seed_and_sentence_test

from ..claims_plot import forest_plot
from ..common import RESULTS, markdown_table, write_results
from ..machine_speed import reference_cpu_s
from ..paper_curves import paper_curves, paper_rows, per_epoch
from . import core, decision, sentences, study
from . import rows as depth_rows
from .claims import (
    ALPHA,
    BEST_DEEP,
    CANNOT_DECIDE,
    CLAIMS,
    CLOSE_MARGIN,
    COLLAPSE_SHARE,
    CONTRADICTS,
    INCONCLUSIVE,
    INTERIM,
    N_SAMPLES,
    NO_VERDICT,
    NOT_APPLICABLE,
    NOT_AT_SCALE,
    NOT_YET,
    PAPERS,
    POWER,
    REPRODUCES,
    RULES,
    SHORT,
    SRC_FLOOR,
    Claim,
)
from .pilot import build_pilot, pilot_report, records_by_budget
from .pricing import (
    depth,
    lost_markdown,
    lost_weights,
    not_finished_markdown,
    prior_rates,
    progress,
    remaining,
    started_runs,
)
from .style import line_style
from .summaries import FLAT, SLOPE_EPOCHS, _cell, failure, reference_row, row_summary, source_split


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


def comparison_pairs(
    records: dict[str, list[dict[str, Any]]], claims: Sequence[Claim] = CLAIMS
) -> list[tuple[str, str]]:
    """(system, baseline) of every BLEU comparison the claims make whose two rows both have records."""
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
    return pairs


def rescore_plan(
    records: dict[str, list[dict[str, Any]]], args: argparse.Namespace, claims: Sequence[Claim] = CLAIMS
) -> list[tuple[str, int, dict[str, Any]]]:
    """(row, seed, decode setting) of every run to decode again (`depth_multi30k --rescore`): both rows of each
    compared pair whose recipes decode with different beams or length penalties, each under the other's."""
    todo: list[tuple[str, int, dict[str, Any]]] = []
    for system, baseline in comparison_pairs(records, claims):
        own = {n: core.decode_setting(n, args) for n in (system, baseline)}
        if own[system] == own[baseline]:
            continue
        for name, other in ((system, baseline), (baseline, system)):
            for r in records[name]:
                if (r.get("test") or {}).get("averaged") and (name, r["seed"], own[other]) not in todo:
                    todo.append((name, r["seed"], own[other]))
    return todo


def rescored_statistics(
    name: str, records: Sequence[dict[str, Any]], setting: dict[str, Any], args: argparse.Namespace
) -> list[list[list[int]]] | None:
    """Row NAME's per-run BLEU statistics under decode SETTING: the records' own where it is the row's setting,
    else the `--rescore` results (None while any run lacks one)."""
    if core.decode_setting(name, args) == setting:
        return _averaged_statistics(records)
    runs = []
    for r in records:
        found = core._read_json(core.rescore_path(name, r["seed"], setting, args))
        if found is None:
            return None
        runs.append(found["bleu_statistics"])
    return runs


def run_comparisons(
    records: dict[str, list[dict[str, Any]]],
    claims: Sequence[Claim] = CLAIMS,
    n_samples: int = N_SAMPLES,
    args: argparse.Namespace | None = None,
) -> list[dict[str, Any]]:
    """Every comparison the claims make whose two rows both have test statistics
    (deep_nmt_hf.science.significance.seed_and_sentence_test: sentences and seeds, the seeds' variance unbiased), then
    Holm's correction across all of them together, and each one's detectable Δ. With `args`, a pair whose rows
    decode differently also gets "decoded_alike": the same comparison under each row's decode setting where
    `--rescore` has decoded it (else "decode_settings" names the difference)."""
    tests = []
    for system, baseline in comparison_pairs(records, claims):
        sys_stats, base_stats = _averaged_statistics(records[system]), _averaged_statistics(records[baseline])
        if not sys_stats or not base_stats:
            continue  # a row that diverged before its first checkpoint has no translations
        result = seed_and_sentence_test(base_stats, sys_stats, n_samples=n_samples)
        test = {"system": system, "baseline": baseline, **result}
        if args is not None:
            own = {n: core.decode_setting(n, args) for n in (system, baseline)}
            if own[system] != own[baseline]:
                test["decode_settings"] = {n: core.setting_tag(v) for n, v in own.items()}
                alike = {}
                for name in (system, baseline):
                    b = rescored_statistics(baseline, records[baseline], own[name], args)
                    x = rescored_statistics(system, records[system], own[name], args)
                    if b and x:
                        alike[name] = seed_and_sentence_test(b, x, n_samples=n_samples)
                test["decoded_alike"] = alike
        tests.append(test)
    decision.correct(tests, {})  # the tests against 0 alone; claim_verdicts adds the tests against targets
    return tests


def _find(tests: Sequence[dict[str, Any]], system: str, baseline: str) -> dict[str, Any] | None:
    return next((t for t in tests if t["system"] == system and t["baseline"] == baseline), None)


def p_text(p: float) -> str:
    """A p-value as the report prints it: 3 significant digits, "< 0.0001" below that."""
    return "< 0.0001" if p < 1e-4 else f"{p:.3g}"


def describe_test(test: dict[str, Any]) -> str:
    """One comparison in words: Δ BLEU with its 95% CI, raw and Holm p, the seeds on each side."""
    low, high = test["ci95"]
    return (
        f"Δ {test['delta']:+.2f} BLEU (95% CI {low:+.2f} … {high:+.2f}; se {test['se']:.2f}: sentences "
        f"{test['sentence_se']:.2f}, seeds {test['seed_se']:.2f}, df {test['df']:.3g}), p {p_text(test['p_value'])}, "
        f"Holm p {p_text(test['p_holm'])}; seeds {test['system_runs']} vs {test['baseline_runs']}"
    )


def pair_confound(claim: Claim, system: str, baseline: str, warmup_scale: float = 0.1) -> str:
    """Every confound of a comparison (issue #58): the training settings its rows differ in (decision.confounds)
    and what the claim names besides ("" where there is none)."""
    found = decision.confounds(system, baseline, warmup_scale, claim.varies)
    parts = [text for text in (found, claim.confound) if text]
    return f"confounded: {'; '.join(parts)}" if parts else ""


def verdict(
    claim: Claim,
    rows: dict[str, dict[str, Any]],
    tests: Sequence[dict[str, Any]],
    p_target_holm: dict[str, dict[str, float]] | None = None,
    warmup_scale: float = 0.1,
) -> dict[str, Any]:
    """The verdict on one claim by the one rule (depth.decision): {"paper", "claim", "system", "baseline",
    "verdict" (claims.VERDICTS), "why", "paper_number", "panel", "seeds", "test", "confound", "schedule",
    "group", "detectable", "target", "p_target", "p_target_holm", "in_family", "verdict_seed_df", ...}.
    `p_target_holm`: the corrected tests against the claims' targets by "system vs baseline", {choice: p} for
    each df choice (claim_verdicts computes them, in the one family, from a first pass, which marks the claims
    whose verdict rests on them: "in_family"). The verdict is decided under both df choices
    (decision.DF_CHOICES); where the two disagree it is inconclusive (issue #67), and "verdict_seed_df" is the
    word at the seed df."""
    system, baseline = resolve(claim, rows)
    pair = f"{system} vs {baseline}"
    out = {
        "paper": claim.paper,
        "claim": claim.text,
        "system": system,
        "baseline": baseline,
        "rule": claim.rule,
        "paper_number": claim.paper_number,
        "paper_delta": claim.paper_delta,
        "paper_comparison": claim.paper_comparison,
        "varies": list(claim.varies),
        "paper_outcome": claim.paper_outcome,
        "panel": claim.panel,
        "group": claim.group,
        "schedule": claim.schedule,
        "confound": "",
        "detectable": None,
        "seeds": None,
        "test": None,
        "target": decision.target(claim),
        "p_target": None,
        "p_target_holm": None,
        "p_target_seed": None,
        "p_target_holm_seed": None,
        "in_family": False,
        "verdict_seed_df": None,
    }

    def done(word: str, why: str) -> dict[str, Any]:
        notes = [why]
        if out["confound"]:
            notes.append(out["confound"])
        if claim.schedule:
            notes.append(claim.schedule)
        return out | {
            "verdict": word,
            "why": "; ".join(notes),
            "verdict_seed_df": out["verdict_seed_df"] or word,
        }

    if system is None:
        deep = [n for n in rows if (d := depth(n)) is not None and sum(d) > 12]
        if deep:
            return done(NOT_AT_SCALE, f"every deep row with a record fails ({', '.join(deep)})")
        return done(NOT_YET, "no deep row has a record")
    if claim.rule == "collapses":  # a diagnosis of one row: its baseline only scales the floor, said so
        if differs := decision.confounds(system, baseline, warmup_scale):
            out["confound"] = (
                f"the rows train differently ({differs}), which the verdict does not rest on: a collapse is "
                f"{system}'s own source reliance, and {baseline} only sets its floor"
            )
    else:
        out["confound"] = pair_confound(claim, system, baseline, warmup_scale)
        control = claim.control.split(" vs ") if claim.control else []
        if out["confound"] and control and not all(n in rows for n in control):
            out["confound"] += f"; control {control[1]} pending"
    missing = [n for n in (system, baseline) if n not in rows]
    needed = depth_rows.IF_FAILS.get(system)
    if system in missing and needed in rows and not failure(needed, rows):
        return done(
            NOT_APPLICABLE,
            f"its premise did not occur: {needed} does not collapse (it reads the source: src "
            f"{_cell(rows[needed]['mean']['src'], None, 2)} nats), so {system} is not run (the study runs it only "
            f"where {needed} fails)",
        )
    if baseline in missing and depth_rows.IF_TRAINS.get(baseline) == system and system in rows:
        if why := failure(system, rows):  # no comparison, so no corrected test: no verdict word (issue #58)
            return done(
                INCONCLUSIVE,
                f"no comparison: the claimed row fails: {why}, so {baseline} is not run (the study runs it only "
                f"where {system} trains)",
            )
    if missing:
        return done(NOT_YET, f"no record of {', '.join(missing)}")
    out["seeds"] = {system: rows[system]["n_seeds"], baseline: rows[baseline]["n_seeds"]}
    test = _find(tests, system, baseline)
    out["test"] = test
    reference = reference_row(baseline)
    if reference in rows and failure(reference, rows):
        return done(NOT_AT_SCALE, f"even the 6-6 reference fails: {failure(reference, rows)}")
    failed_sys, failed_base = failure(system, rows), failure(baseline, rows)
    split_sys = (
        failed_sys is not None and " seeds (" in failed_sys
    )  # some seeds train: the comparison decides
    shown = f" ({describe_test(test)})" if test else ""
    if test is not None:
        out["detectable"] = test["detectable"]
    if claim.rule == "collapses":
        # source reliance down the decoder depths this study ran (the paper's Figure 1, in nats)
        variant = depth_rows.MODELS[system].variant
        sweep = [baseline, *(n for n, row in depth_rows.MODELS.items() if row.variant == variant)]
        src = {n: rows[n]["mean"]["src"] for n in sweep if n in rows}
        shown = ", ".join(f"{n} {_cell(v, None, 2)}" for n, v in src.items() if v is not None)
        out["source_reliance"] = {n: src.get(n) for n in (system, baseline)}
        if failed_sys:
            return done(REPRODUCES, f"{failed_sys}; source reliance (nats): {shown}")
        return done(
            NOT_AT_SCALE,
            f"{system} reads the source at {depth(system)[1]} decoder layers (nats: {shown}); the paper's plain "
            "decoders collapse at 15 and 27 layers of a 512-wide model on WMT14 (Table 1)",
        )
    if claim.premise and claim.premise in rows and not failure(claim.premise, rows):
        remains = ""
        if test is not None:
            cost = [rows[n]["mean"]["train_cpu_s_per_epoch"] for n in (system, baseline)]
            ratio = f", at {cost[0] / cost[1]:.1f}× the CPU per epoch" if all(cost) else ""
            remains = f"; what remains: {system} against {baseline} when nothing collapses{shown}{ratio}"
        return done(
            NOT_APPLICABLE,
            f"its premise did not occur: the paper's +{claim.paper_delta:.1f} is a rescue from a collapsed "
            f"decoder, and {claim.premise} never collapsed (src {_cell(rows[claim.premise]['mean']['src'], None, 2)}"
            f" nats){remains}",
        )
    if test is None:  # a row with no translations (diverged before its first checkpoint): the failure decides
        if failed_sys and (claim.rule == "fails-or-behind"):
            return done(REPRODUCES, f"it fails and has no translations: {failed_sys}")
        if failed_sys and not split_sys:
            return done(CONTRADICTS, f"the claimed row fails and has no translations: {failed_sys}")
        if failed_base:
            return done(REPRODUCES, f"the counterfactual fails ({failed_base}) and has no translations")
        return done(NOT_YET, "no test statistics for the comparison")
    explained = []
    if failed_sys:
        explained.append(failed_sys)
    if failed_base:
        explained.append(f"the counterfactual fails ({failed_base})")
    if (decoded := decoded_alike_text(test)).startswith("confounded"):
        out["confound"] = "; ".join(filter(None, (out["confound"], decoded)))
        decoded = ""
    value = out["target"]
    if value is not None:
        out["p_target"] = decision.p_against(test, value)
        out["p_target_seed"] = decision.p_against(decision.at_df(test, "seed_df"), value)
    if claim.rule == "close":
        ratio = rows[system]["num_parameters"] / rows[baseline]["num_parameters"]
        explained.append(f"parameters {ratio:.0%} of {baseline}'s")
    facts = "".join(f"{text}; " for text in explained)
    tail = (f"; {decoded}" if decoded else "") + shown
    if out["confound"]:
        tests_text = f"against 0 Holm p {decision.p_short(test['p_holm'])}"
        if value is not None:
            tests_text += (
                f"; against the paper's {value:+.2f} p {decision.p_short(out['p_target'])} (uncorrected)"
            )
        return done(NO_VERDICT, f"{facts}Δ and its tests only ({tests_text}){tail}")
    out["in_family"] = value is not None
    if value is not None:
        corrected = (p_target_holm or {}).get(pair, {})
        out["p_target_holm"] = corrected.get("df", out["p_target"])
        out["p_target_holm_seed"] = corrected.get("seed_df", out["p_target_seed"])
    if claim.paper_comparison and claim.paper_delta is not None:
        facts += (
            f"tested against 0 only: the paper's {claim.paper_delta:+.2f} is {claim.paper_comparison}, not this "
            "comparison; "
        )

    def judged(t: dict[str, Any], p_target: float | None) -> tuple[str, str]:
        if decision.too_small(claim, t):
            return (
                CANNOT_DECIDE,
                f"the paper's {claim.paper_delta:+.2f} lies {decision.distance(claim):.2f} BLEU from "
                f"{decision.null(claim):g}, under the {t['detectable']:.2f} this comparison detects with "
                f"{POWER:.0%} power after Holm (df {t['df']:.3g}; against 0 Holm p {decision.p_short(t['p_holm'])};"
                f" against {value:+.2f} Holm p {decision.p_short(p_target)})",
            )
        return decision.decide(claim, t, p_target)

    word, why = judged(test, out["p_target_holm"])
    seed_word, _ = judged(decision.at_df(test, "seed_df"), out["p_target_holm_seed"])
    out["verdict_seed_df"] = seed_word
    if seed_word != word:
        flip = (
            f"the verdict rests on the df: {word} at the Welch–Satterthwaite df {test['df']:.3g}, {seed_word} at "
            f"the seed df {test['seed_df']:.3g}; "
        )
        return done(INCONCLUSIVE, facts + flip + why + tail)
    return done(word, facts + why + tail)


def decoded_alike_text(test: dict[str, Any]) -> str:
    """The length-penalty confound of a pair whose rows decode differently: Δ under each row's setting (after
    `--rescore`), or the confound named while that is pending; "" where both rows decode alike."""
    settings = test.get("decode_settings")
    if not settings:
        return ""
    alike = test.get("decoded_alike") or {}
    differ = " vs ".join(f"{n} {t}" for n, t in settings.items())
    if not alike:
        return (
            f"confounded: the two rows decode with different settings ({differ}); rescoring both under each "
            "setting (--rescore) pending"
        )
    parts = [
        f"under {name}'s setting ({settings[name]}) Δ {r['delta']:+.2f} ({r['ci95'][0]:+.2f} … {r['ci95'][1]:+.2f})"
        for name, r in alike.items()
    ]
    return "decoded alike (the rows' own settings differ: " + differ + "): " + "; ".join(parts)


def claim_verdicts(
    records: dict[str, list[dict[str, Any]]],
    claims: Sequence[Claim] = CLAIMS,
    n_samples: int = N_SAMPLES,
    args: argparse.Namespace | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(verdicts, comparisons): every claim's verdict, and the Holm-corrected comparisons they rest on (with
    `args`, the rescored comparisons of pairs that decode differently, where `--rescore` ran). Two passes: the
    first finds the claims whose verdict rests on a test against their target, Holm corrects those tests and
    every comparison's test against 0 as one family (decision.correct, under each df choice), the second decides
    with the corrected p."""
    rows = {name: row_summary(name, recs) for name, recs in records.items()}
    tests = run_comparisons(records, claims, n_samples, args)
    scale = next(
        (r["settings"]["warmup_scale"] for recs in records.values() for r in recs if r.get("settings")), 0.1
    )
    first = [verdict(claim, rows, tests, warmup_scale=scale) for claim in claims]
    targets = {
        f"{v['system']} vs {v['baseline']}": {"df": v["p_target"], "seed_df": v["p_target_seed"]}
        for v in first
        if v["in_family"]
    }
    family = decision.correct(tests, targets)  # one Holm family: every test against 0 and against a target
    verdicts = [verdict(claim, rows, tests, family, scale) for claim in claims]
    return with_controls(verdicts, claims), tests


def with_controls(verdicts: list[dict[str, Any]], claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """A confounded claim whose control claim was measured names the control's outcome in its own row, and is
    marked `controlled_by` (it counts once, through its control: issue #50 item 3)."""
    by_pair = {f"{v['system']} vs {v['baseline']}": v for v in verdicts}
    for claim, v in zip(claims, verdicts, strict=True):
        control = by_pair.get(claim.control or "")
        if control is None or not control["test"] or not v["confound"]:
            continue
        t = control["test"]
        low, high = t["ci95"]
        outcome = (
            f"{v['confound']}; controlled: {claim.control} gives Δ {t['delta']:+.2f} ({low:+.2f} … {high:+.2f}), "
            "decided in its own row"
        )
        if v["test"] and v["test"]["p_holm"] < ALPHA and t["p_holm"] >= ALPHA:
            outcome += ": the difference here is not significant once the confound is removed"
        v["why"] = v["why"].replace(v["confound"], outcome)
        v["confound"], v["controlled_by"] = outcome, claim.control
    return verdicts


# ------------------------------------------------------------------------------------------ the markdown
def _per_seed(row: dict[str, Any], key: str, digits: int, signed: bool = False) -> str:
    """A row's KEY seed by seed ("s1 2.4 · s2 29.4"): for a row whose seeds disagree, where mean ± sd says little."""
    return " · ".join(f"s{s['seed']} {_cell(s[key], None, digits, signed)}" for s in row["seeds"])


def results_table(rows: dict[str, dict[str, Any]]) -> str:
    """The table: one line per row, numbers as mean ± sd over its seeds; BLEU avg and src seed by seed where
    the row's seeds disagree on reading the source (`source_split`)."""
    header = ["row", "recipe", "params (M)", "seeds", "CPU-s/epoch", "BLEU avg", "chrF avg", "TER avg"]
    header += ["BLEU best", "slope (nats/ep)", "annealed end", "gap", "src", "len", "decode tok/CPU-s"]
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
    """One line per claim: the comparison, the seeds, the measured Δ BLEU with its 95% CI beside the paper's Δ, the
    smallest Δ the comparison can detect, and the verdict with its Holm p and the confound, if any. Claims that
    rest on one phenomenon (a claim's `group`) come first, marked with it, so that they count once."""
    body = []
    grouped = [v for v in verdicts if v.get("group")] + [v for v in verdicts if not v.get("group")]
    for v in grouped:
        test = v["test"] if v["rule"] != "collapses" else None  # a collapse is judged by source reliance
        measured = "—"
        if test:
            low, high = test["ci95"]
            measured = f"{test['delta']:+.2f} ({low:+.2f} … {high:+.2f})"
        elif v.get("source_reliance"):
            measured = (
                "src " + " vs ".join(_cell(x, None, 2) for x in v["source_reliance"].values()) + " nats"
            )
        word = f"**{v['verdict']}**" if v["verdict"] in (REPRODUCES, CONTRADICTS) else v["verdict"]
        notes = [note for note in (v.get("confound"), v.get("schedule")) if note]
        if test and (decoded := decoded_alike_text(test)) and not decoded.startswith("confounded"):
            notes.append(decoded)
        body.append(
            [
                (v["group"].split(" ")[0] + " " if v.get("group") else "") + SHORT[v["paper"]],
                f"{v['system'] or BEST_DEEP} vs {v['baseline']}",
                " vs ".join(str(k) for k in v["seeds"].values()) if v["seeds"] else "—",
                measured,
                v["paper_outcome"]
                if v["paper_delta"] is None
                else _cell(v["paper_delta"], None, 2, signed=True)
                + (f" at {v['paper_comparison']} (not tested against)" if v.get("paper_comparison") else ""),
                f"{v['detectable']:.2f}" if v.get("detectable") is not None else "—",
                word + tests_note(v, test) + "".join(f"; {n}" for n in notes),
                v.get("verdict_seed_df") or v["verdict"],
            ]
        )
    header = ["paper", "system vs baseline", "seeds", "Δ BLEU (95% CI)", "the paper (Δ BLEU)", "detectable Δ"]
    return markdown_table(header + ["verdict", "at seed df"], body)


def tests_note(v: dict[str, Any], test: dict[str, Any] | None) -> str:
    """ " (Holm p … against 0; … against the paper's Δ)": the corrected tests a verdict rests on ("" without a
    test; a confounded row's test against the paper's Δ is uncorrected: it is in no family)."""
    if test is None:
        return ""
    parts = [f"Holm p {decision.p_short(test['p_holm'])} against 0"]
    if v.get("p_target_holm") is not None:
        parts.append(f"{decision.p_short(v['p_target_holm'])} against {v['target']:+.2f}")
    return f" ({'; '.join(parts)})"


def glance_summary(verdicts: Sequence[dict[str, Any]], tests: Sequence[dict[str, Any]]) -> str:
    """The verdicts counted with each phenomenon once, and the test set's detectable Δ in words."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for v in verdicts:
        if v.get("group"):
            groups.setdefault(v["group"], []).append(v)
    counted = sentences.counted(verdicts)
    lines = []
    for group, members in groups.items():
        words = sorted({m["verdict"] for m in members})
        tally = ", ".join(f"{sum(m['verdict'] == w for m in members)} {w}" for w in words)
        lines.append(
            f"{group.split(' ')[0]} marks {len(members)} claims that rest on one observation,"
            f" {group.split(' ', 1)[1]} ({tally}; {sum('DeepNorm' in m['paper_outcome'] for m in members)} of them "
            f"concern DeepNorm, which is in none of the five papers): counted once, by its first line "
            f"({members[0]['system']} vs {members[0]['baseline']}: {members[0]['verdict']})."
        )
    lines.extend(
        f"{v['system']} vs {v['baseline']} is confounded and counts once, through its control "
        f"{v['controlled_by']}."
        for v in verdicts
        if v.get("controlled_by")
    )
    lines.append(
        "Counted so: "
        + ", ".join(f"{n} {w}" for w, n in counted.items())
        + f" ({sentences.counted_lines(verdicts)} counted of {len(verdicts)} claim lines)."
    )
    trained = [t for t in tests if abs(t["delta"]) < 10]  # pairs where both rows translate
    if trained:
        floor = statistics.median(t["sentence_se"] for t in trained)
        m = tests[0].get("family", len(tests))
        lines.append(
            f"**What this test set can detect.** With {trained[0]['sentences']} test sentences and Holm over the {m} "
            f"tests of this report, the smallest Δ found with {POWER:.0%} power is (t_df(1 − {ALPHA:g}/(2·{m})) + "
            f"t_df({POWER:g})) × se, with each comparison's own df: "
            f"{detectable_delta(floor, ALPHA, m, POWER):.2f} BLEU from the sentences alone (median sentence se "
            f"{floor:.2f} over the {len(trained)} comparisons between rows that both translate; df ∞), "
            f"{statistics.median(t['detectable'] for t in trained):.2f} BLEU with the seeds' variance added (median "
            "of those comparisons at the Welch–Satterthwaite df; each comparison's own in the column), "
            f"{statistics.median(t['detectable_seed'] for t in trained):.2f} BLEU at the seed df. A target closer to "
            f"its null than a comparison's own cannot be decided by it: {CANNOT_DECIDE}."
        )
    return "\n\n".join(lines)


def comparisons_table(tests: Sequence[dict[str, Any]], verdicts: Sequence[dict[str, Any]] = ()) -> str:
    """Every comparison: Δ, interval, df, p and Holm p against 0, and for the claims whose verdict rests on a test
    against their target that target with its p and Holm p (one Holm family over all of these tests); the df, p
    and Holm p at the seed df beside."""
    family = {(v["system"], v["baseline"]): v for v in verdicts if v.get("in_family")}
    header = [
        "system",
        "baseline",
        "seeds",
        "BLEU system",
        "BLEU baseline",
        "Δ BLEU",
        "95% CI",
        "df",
        "p",
        "Holm p",
        "seed df",
        "Holm p (seed df)",
    ]
    header += ["target", "p (target)", "Holm p (target)", "Holm p (target, seed df)"]
    body = []
    for t in tests:
        v = family.get((t["system"], t["baseline"]))
        body.append(
            [
                t["system"],
                t["baseline"],
                f"{t['system_runs']} vs {t['baseline_runs']}",
                f"{t['system_bleu']:.2f}",
                f"{t['baseline_bleu']:.2f}",
                f"{t['delta']:+.2f}",
                f"{t['ci95'][0]:+.2f} … {t['ci95'][1]:+.2f}",
                f"{t['df']:.3g}",
                p_text(t["p_value"]),
                p_text(t["p_holm"]),
                f"{t['seed_df']:.3g}",
                p_text(t["p_holm_seed"]),
                f"{v['target']:+.2f}" if v else "—",
                p_text(v["p_target"]) if v else "—",
                p_text(v["p_target_holm"]) if v else "—",
                p_text(v["p_target_holm_seed"]) if v else "—",
            ]
        )
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
        f"Every row trains {s['epochs']} epochs with its paper's recipe (deep_nmt_hf.science.recipes): the recipe's warmup "
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
            options, _ = core._recipe(name, args)
        why = depth_rows.MODELS[name].why
        lines.append(
            f"- {name} ({depth_rows.MODELS[name].recipe}): lr {options['learning_rate']:g}, warmup "
            f"{options['warmup_steps']} steps" + (f" — override: {why}" if why else "")
        )
    return text + "\n".join(lines)


def annealing_facts(records: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """What "flat" means under the linear decay: the last epochs' learning rate as a share of the run's peak, the
    runs whose validation loss still fell over the last 5 epochs, and those whose best epoch is one of the last
    two."""
    runs = [r for recs in records.values() for r in recs if len(r.get("history") or []) >= 6]
    shares, falling, late = [], 0, 0
    for r in runs:
        history = r["history"]
        peak = max((e.get("learning_rate") or 0.0) for e in history)
        if peak > 0:
            shares.append([(e.get("learning_rate") or 0.0) / peak for e in history[-3:]])
        losses = [e.get("valid_loss") for e in history]
        if losses[-1] is not None and losses[-6] is not None and losses[-1] < losses[-6]:
            falling += 1
        if r.get("best_epoch") is not None and r["best_epoch"] >= len(history) - 1:
            late += 1
    last = [statistics.fmean(s[i] for s in shares) for i in range(3)] if shares else []
    return {
        "runs": len(runs),
        "last_lr_shares": last,
        "valid_loss_falling": falling,
        "best_in_last_two": late,
    }


def annealing_markdown(records: dict[str, list[dict[str, Any]]], epochs: int) -> str:
    """The annealed budget in words (issue #50 item 4): flat by construction, not converged."""
    facts = annealing_facts(records)
    if not facts["runs"] or not facts["last_lr_shares"]:
        return ""
    shares = ", ".join(f"{x:.1%}" for x in facts["last_lr_shares"])
    return (
        f"**Annealed, not converged.** Under the linear decay the last three epochs run at {shares} of the peak "
        f'learning rate, so the "annealed end" column is flat by construction. The validation loss still falls '
        f"between epochs {epochs - 5} and {epochs} in {facts['valid_loss_falling']} of {facts['runs']} runs, and "
        f"the best epoch is one of the last two in {facts['best_in_last_two']}: the study compares the rows at an "
        f"equal annealed budget of {epochs} epochs, which is what it measured, not at convergence. The budget "
        "pilot that chose it checked one difference, between two 6-6 rows (Marian 6-6 − post-6-6), on "
        "test_2016_flickr, the test set the verdicts use."
    )


BUDGET_PAIR = (
    "pre-18-6",
    "pre-6-6",
)  # the deep-vs-shallow pair the budget rule is checked on (issue #50 item 4)


def budget_check_markdown(
    records: dict[str, list[dict[str, Any]]], pair: tuple[str, str] = BUDGET_PAIR, step: int = 5
) -> str:
    """The pilot's rule (a later budget moves no difference between rows by 1 BLEU or more) checked on one
    deep-vs-shallow pair from the validation curves (mean over seeds, validation BLEU) of the study's own runs:
    the difference at every `step` epochs. Not an annealed run of each budget (the learning rate at epoch 20 of
    a 30-epoch run is not 0), so an indication only."""
    if not all(n in records for n in pair):
        return ""
    curves = {n: dict(zip(*per_epoch(records[n], "valid_bleu")[:2], strict=True)) for n in pair}
    epochs = [e for e in sorted(curves[pair[0]]) if e in curves[pair[1]] and int(e) % step == 0]
    if len(epochs) < 2:
        return ""
    gaps = {e: curves[pair[0]][e] - curves[pair[1]][e] for e in epochs}
    moved = abs(gaps[epochs[-1]] - gaps[epochs[-2]])
    listed = ", ".join(f"{gaps[e]:+.2f} at {int(e)}" for e in epochs)
    return (
        f"**The budget rule on a deep-vs-shallow pair.** From the validation curves (validation BLEU, beam 4, mean "
        f"over seeds) of the 30-epoch runs, {pair[0]} − {pair[1]}: {listed} epochs. Over the last {step} epochs "
        f"the difference moves by {moved:.2f} BLEU, {'under' if moved < 1 else 'not under'} the rule's 1 BLEU. "
        "These are epochs of one annealed run, not annealed runs of each budget, so this indicates, and does not "
        "replace, a pilot of a deep row at 40 epochs."
    )


# issue #48's H200 measurements (bf16, 25k target tokens per step): ms per training step
GPU_STEP_MS = {
    "Marian 6-6": 62.5,  # 59-66
    "pre-LN 18-6": 89,
    "ADMIN 18-6": 98,
    "DeepNorm 18-6": 97,
    "DS-Init + MAtt 18-6": 85,
    "shared layers": 156,
    "ADMIN 60L-12L": 255,
    "nn.Transformer 6-6": 67,
    "nn.Transformer 18-6": 107,
    "nn.Transformer 36-6": 164,
    "nn.Transformer 60-12": 273,
}
GPU_UPDATES = 100_000  # updates of 25k target tokens a run: ≈ 19 epochs of WMT14 En-De (≈ 130M target tokens)
GPU_SEEDS = 3


def gpu_hours(ms: float, updates: int = GPU_UPDATES) -> float:
    """H200 hours of one run of `updates` steps at `ms` per step (issue #48's raw step times)."""
    return updates * ms / 1000 / 3600


def limits_markdown() -> str:
    """What the study cannot say, and what testing the papers' own settings would take (issue #50 item 8)."""
    plan = (
        (
            "ADMIN 18-6 / 60L-12L vs default post-LN and 6-6",
            (
                "nn.Transformer 6-6",
                "nn.Transformer 18-6",
                "ADMIN 18-6",
                "DeepNorm 18-6",
                "nn.Transformer 60-12",
                "ADMIN 60L-12L",
            ),
        ),
        (
            "DLCL: pre-LN 18-6 vs pre-LN 6-6 (at both lrs), DLCL 18-6",
            ("Marian 6-6", "Marian 6-6", "pre-LN 18-6", "pre-LN 18-6"),
        ),
        (
            "DS-Init + MAtt 18-6 vs MAtt 18-6 and a 6-6 of its recipe",
            ("DS-Init + MAtt 18-6", "DS-Init + MAtt 18-6", "Marian 6-6"),
        ),
        ("shared layers vs the unshared 18-6", ("shared layers", "pre-LN 18-6")),
    )
    lines = []
    total = 0.0
    for claim, rows in plan:
        hours = GPU_SEEDS * sum(gpu_hours(GPU_STEP_MS[r]) for r in rows)
        total += hours
        lines.append([claim, len(rows), GPU_SEEDS * len(rows), f"{hours:.0f}"])
    table = markdown_table(["claims", "rows", "runs", "H200-hours"], lines)
    return (
        "The papers' gains were measured on WMT14 En-De (4.5M sentence pairs; ADMIN also En-Fr, 36M), with "
        "updates of 25k-65k target tokens (16-40× this study's 1536) and d_model 512 and up; this study trains "
        "29k pairs at d_model 64. Its verdicts say what these recipes do at this scale: they neither confirm nor "
        "refute the papers' numbers at theirs, and a gain the papers measured (+0.2 to +2.5 BLEU) can be below "
        "what 1000 test sentences detect. Testing them at their own scale would take WMT14 En-De (and En-Fr for "
        "ADMIN), the papers' batch sizes and schedules (inverse-sqrt), 3 seeds per row and newstest2014 (3003 "
        f"sentences) as test set. At {GPU_UPDATES // 1000}k updates of 25k target tokens a run (≈ 19 epochs of "
        "WMT14 En-De), from the raw step times measured on one H200 in bf16 (issue #48: stock Marian 6-6 59-66 "
        "ms, pre-LN 18-6 89, ADMIN 18-6 98, DeepNorm 18-6 97, DS-Init + MAtt 18-6 85, shared layers 156, ADMIN "
        "60L-12L 255 ms; nn.Transformer 67 / 107 / 164 / 273 ms at 6-6 / 18-6 / 36-6 / 60-12 — raw step times "
        "with no data loading or evaluation), the rows each claim needs (a row without its own measurement "
        "priced as the nearest measured one: default post-LN as nn.Transformer, DLCL as pre-LN 18-6):\n\n"
        + table
        + f"\n\nAbout {total:.0f} H200-hours in all ({total / 24:.0f} GPU-days), before evaluation, the deep "
        "decoder's rows (15-15 and 27-27 with CAD + CRT, not measured on the GPU) and any En-Fr run. Through "
        "`deep-nmt train` the first H200 run of bench/gpu_training.py (bench/results/gpu_h200) measured the "
        "Trainer at the raw loop's step time in fp32 but at twice it in bf16 (ADMIN 18-6, 8k-token batches), and "
        "DLCL 18-6 at 1.2-1.3× pre-LN 18-6: until the bf16 gap is closed, the hours above are a lower bound."
    )


LIMITS = limits_markdown()


COLUMNS = (
    "Columns: params in millions; seeds = runs behind the row; CPU-s/epoch = training CPU seconds per epoch "
    "(one thread; on the reference machine: an epoch another machine trained is scaled by the ratio of the two "
    "machines' speed probes, bench/lib/machine_speed.py); BLEU / chrF / TER of the averaged model (avg) and BLEU of "
    "the best-validation checkpoint (best), "
    "mean ± sd over seeds (a row whose seeds disagree, some reading the source and some not, gives BLEU avg "
    "and src seed by seed: s1 … · s2 …); slope = least-squares slope of the validation loss over the last "
    f"{SLOPE_EPOCHS} epochs, nats per epoch, mean over seeds; annealed end = flat when |slope| < {FLAT:g} "
    "nats/epoch, otherwise still improving (falling) or rising: flat by construction under the decay to 0, not "
    "converged (see below); gap = eval-mode token NLL on validation minus training pairs "
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
    re-train for their weights (`lost_weights`); `pilot`: the budget pilot's payload (pilot.build_pilot),
    whose conclusion the settings quote."""
    rows = {name: row_summary(name, recs) for name, recs in records.items()}
    verdicts, tests = claim_verdicts(primary_records(records), CLAIMS, n_samples, args)
    interim = interim_markdown(records, n_samples, args)
    all_settings = [r["settings"] for recs in records.values() for r in recs if r.get("settings")]
    settings = {**core.settings(args), **(all_settings[0] if all_settings else {})}
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
        f"# Depth that pays? Each paper's claim on Multi30k en→de at an equal annealed budget of {args.epochs} "
        "epochs",
        progress(planned, records, left, lost),
        "## Verdicts at a glance",
        decision.rule_text(len(tests), sum(v["in_family"] for v in verdicts)),
        glance_table(verdicts),
        glance_summary(verdicts, tests),
        *([interim] if interim else []),
        "Each claim in words, the rules behind the verdicts and the paper's own tables: [Claims](#claims); "
        "the same at a glance as a plot: [depth_multi30k_claims.png](depth_multi30k_claims.png).",
        "## Settings",
        settings_markdown(settings, rows, args),
    ]
    budget = pilot["conclusion"] if pilot and pilot["rows"] else None
    if budget:
        page = f"{core._output_name('depth_multi30k_pilot', args)}.md"
        markdown.append(
            f"**The budget.** {args.epochs} epochs, from the budget pilot ([{page}]({page}): the 6-6 rows trained "
            f"at several budgets, each its own annealed run). {budget}"
        )
    if differing:
        markdown.append(
            f"**Warning:** the records differ in {', '.join(differing)}; the numbers mix settings."
        )
    markdown += ["## Results", results_table(rows) if rows else "No finished run yet.", COLUMNS]
    if facts := annealing_markdown(records, args.epochs):
        markdown.append(facts)
    if check := budget_check_markdown(records):
        markdown.append(check)
    if rerun := rerun_markdown(records):
        markdown.append(rerun)
    markdown += ["## Claims", RULES, claims_markdown(verdicts)]
    markdown += [
        "### Every test, Holm-corrected in one family",
        comparisons_table(tests, verdicts) if tests else "None yet.",
    ]
    markdown += ["## What this study cannot say", LIMITS]
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
            "decision": decision.rule_text(len(tests), sum(v["in_family"] for v in verdicts)),
            "families": {
                "zero": len(tests),
                "paper": sorted(f"{v['system']} vs {v['baseline']}" for v in verdicts if v["in_family"]),
            },
            "alpha": ALPHA,
            "flat_nats_per_epoch": FLAT,
            "slope_epochs": SLOPE_EPOCHS,
            "close_margin_bleu": CLOSE_MARGIN,
            "collapse_share": COLLAPSE_SHARE,
            "src_floor_nats": SRC_FLOOR,
            "bootstrap_samples": n_samples,
            "power": POWER,
        },
        "progress": progress(planned, records, left, lost),
        "rows": rows,
        "significance": tests,
        "claims": verdicts,
        "summaries": sentences.summary_sentences(verdicts, tests),
        "annealing": annealing_facts(records),
        "not_finished": left,
        "weights_lost": list(lost),
        "budget_pilot": budget,
    }
    return "\n\n".join(markdown), payload


# -------------------------------------------------------------------------------------------------- plots
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
def primary_records(records: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    """The records the verdicts use: of a row in claims.INTERIM, only the seeds fixed before its result was
    looked at (issue #67: a seed added because of an interim look is not a fixed-n test)."""
    return {
        name: [r for r in recs if name not in INTERIM or r["seed"] <= INTERIM[name][0]]
        for name, recs in records.items()
    }


def interim_markdown(
    records: dict[str, list[dict[str, Any]]],
    n_samples: int = N_SAMPLES,
    args: argparse.Namespace | None = None,
) -> str:
    """The seeds added after an interim look (claims.INTERIM), disclosed: which, why, and each comparison of the
    row with every seed, beside the verdicts', which use the seeds fixed before looking ("" where none)."""
    lines = []
    for name, (fixed, why) in INTERIM.items():
        later = [r["seed"] for r in records.get(name, []) if r["seed"] > fixed]
        if not later:
            continue
        claims = [c for c in CLAIMS if name in (c.system, c.baseline)]
        tests = run_comparisons(records, claims, n_samples, args)
        shown = "; ".join(
            f"{t['system']} vs {t['baseline']}: Δ {t['delta']:+.2f} (95% CI {t['ci95'][0]:+.2f} … "
            f"{t['ci95'][1]:+.2f}, df {t['df']:.3g}), p {p_text(t['p_value'])} (uncorrected)"
            for t in tests
        )
        seeds = ", ".join(str(s) for s in later)
        lines.append(
            f"**Seeds added after a look.** {name} seed {seeds}: {why}. A seed added because of what the first ones "
            f"showed makes the test sequential, so the verdicts use seeds 1-{fixed} of {name}, fixed before "
            f"looking; with every seed ({len(records[name])}), not used by any verdict: {shown}."
        )
    return "\n\n".join(lines)


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


def report_from_records(
    args: argparse.Namespace,
) -> tuple[dict[str, list[dict[str, Any]]], str, dict[str, Any]]:
    """(records, markdown, payload) of the report of `args.epochs`, from the committed records alone (no file
    written; the figures' lines and the provenance footer are added by `report` and write_results): what
    tests/benchmarks/test_depth_summaries.py compares with the committed report."""
    records = core.load_records(core.records_root(args), args.epochs)
    planned = study.plan(argparse.Namespace(**{**vars(args), "only": None}))
    _, pilot = build_pilot(records_by_budget(args), args.epochs)
    markdown, payload = build_report(
        records, args, planned, started_runs(planned, args), lost=lost_weights(records, args), pilot=pilot
    )
    return records, markdown, payload


def report(args: argparse.Namespace) -> None:
    """Write bench/results/depth_multi30k.{md,json,png} (with `--quick`: depth_multi30k.quick.*) from the records
    of the `--epochs` budget, and the budget pilot's (pilot.pilot_report) beside it."""
    pilot_report(args, echo=False)  # rebuilt with the report, so it never lags the records
    records, markdown, payload = report_from_records(args)
    name = core._output_name("depth_multi30k", args)
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
    if not args.quick:  # the READMEs quote the committed report's sentences (depth.sentences)
        for path in sentences.requote_files(RESULTS.parents[1], payload["summaries"]):
            print(f"requoted the study's sentences in {path}")
    print(markdown)
