"""A run's and a row's numbers from their records, and when a row counts as failed to train.

`seed_summary` (one run), `row_summary` (a row over its seeds: mean and sd of every number), the valid-loss slope
and what it says (`trend`), and `failure` (the rule the plan's conditional rows and the report's verdicts both
turn on: a seed diverged, or its source reliance is below the floor of depth.claims). Pure functions of records.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from ..machine_speed import reference_cpu_s, reference_rate
from . import core
from . import rows as depth_rows
from .claims import COLLAPSE_SHARE, SRC_FLOOR

SLOPE_EPOCHS = 3  # the valid-loss slope is fitted over the last this many epochs
FLAT = 0.005  # nats per epoch: |slope| below it is "flat"


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
    all_cpu = core.epoch_cpu_s(history)
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


def _cell(mean: float | None, sd: float | None, digits: int = 1, signed: bool = False) -> str:
    """MEAN (± SD) to DIGITS; a value that rounds to zero reads 0, never "-0.00" (a source reliance of -0.001
    nats is no reliance, not a negative one)."""
    if mean is None:
        return "—"
    mean = round(mean, digits) + 0.0  # + 0.0 turns round's -0.0 into 0.0
    text = f"{mean:+.{digits}f}" if signed else f"{mean:.{digits}f}"
    return text + (f" ± {sd:.{digits}f}" if sd is not None else "")
