"""What the depth study (bench/depth_multi30k.py) has left and what it costs: each row's cost class, the CPU-s
per epoch of the runs not finished (measured on the study's own epochs where it can, else estimated), the
progress paragraph of the report (report.py) and the runs to re-train for their lost weights.

Pure functions of records and run histories, but for `started_runs` and `lost_weights`, which read the runs'
directories; tests/benchmarks/test_depth_report.py runs them on synthetic records.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..common import RESULTS
from . import core
from . import rows as depth_rows


def depth(name: str) -> tuple[int, int] | None:
    """(encoder, decoder) layer applications of a row (shared layers count every repeat), None if unknown."""
    model = depth_rows.MODELS.get(name)
    if model is None:
        return None
    f = model.fields
    return (
        f["encoder_layers"] * f.get("encoder_layer_repeats", 1),
        f["decoder_layers"] * f.get("decoder_layer_repeats", 1),
    )


def cost_class(name: str) -> tuple[Any, ...] | None:
    """What sets a row's CPU per epoch: its depth and the decoder passes of a training step (1, plus one for DDR
    and two for ALD where the row's variant or fields turn them on: deep-decoder-cad-crt sec. 4), None if
    unknown. Rows of one class price each other's unfinished runs."""
    from deep_nmt_hf import VARIANTS

    model = depth_rows.MODELS.get(name)
    if model is None:
        return None
    fields = {**getattr(VARIANTS.get(model.variant), "DEFAULTS", {}), **model.fields}
    passes = 1 + (fields.get("ddr_loss_weight", 0) > 0) + 2 * (fields.get("ald_loss_weight", 0) > 0)
    return (*depth(name), passes)


# the 12-epoch study (inverse-sqrt, one shared lr): its CPU per epoch prices the cost classes this study has not
# measured yet, scaled by this study's ratio to it where both measured (their load differed)
PRIOR = RESULTS / "depth_multi30k_12epochs.json"


SAME_COST = (
    "d_model",
    "vocab_size",
    "max_tokens",
    "max_length",
    "max_train_samples",
)  # settings that set the CPU of an epoch


def prior_rates(settings: dict[str, Any], path: Path = PRIOR) -> dict[tuple[Any, ...], float]:
    """Mean CPU-s per epoch by `cost_class` in the study at PATH (its JSON: settings, models with histories), {}
    when it is missing or differs from SETTINGS in a setting of SAME_COST."""
    if not path.exists():
        return {}
    earlier = json.loads(path.read_text())
    if any(earlier["settings"].get(k) != settings.get(k) for k in SAME_COST):
        return {}
    per_class: dict[tuple[Any, ...], list[float]] = {}
    for name, model in earlier["models"].items():
        if cost_class(name) is not None:
            per_class.setdefault(cost_class(name), []).extend(core.epoch_cpu_s(model.get("history") or []))
    return {k: statistics.fmean(v) for k, v in per_class.items() if v}


def remaining(
    planned: Sequence[tuple[str, int]],
    records: dict[str, list[dict[str, Any]]],
    epochs: int,
    partial: dict[tuple[str, int], Sequence[dict[str, Any]]] | None = None,
    prior: dict[tuple[Any, ...], float] | None = None,
) -> list[dict[str, Any]]:
    """The planned runs without a record, each with its CPU-hours still to go on the reference machine
    (machine_speed): (epochs − epochs already done) × the mean CPU-s per epoch (training + validation decoding) of a
    started run's own epochs (`partial`: its history so far; `basis` "own"), else of the row's other seeds, finished
    or started ("row"), else of the rows of the same `cost_class` (depth and decoder passes; "class"), finished or
    started. A class no run has measured is priced from PRIOR (`prior_rates`) × the median ratio of this study's
    rate to the prior's over the classes both measured (`basis` "prior"); a class neither has, from the deepest
    class no deeper in encoder or decoder with the same decoder passes × the ratio of their layer applications
    ("scaled": likely an overestimate, since the embeddings, output layer and search do not grow with depth); None
    (unknown) where there is none."""
    partial = partial or {}
    prior = prior or {}
    per_class: dict[tuple[Any, ...], list[float]] = {}
    per_row: dict[str, list[float]] = {}
    histories = [(name, r.get("history") or []) for name, recs in records.items() for r in recs]
    histories += [(name, history) for (name, _), history in partial.items()]  # started runs measure too
    for name, history in histories:
        cpu_s = core.epoch_cpu_s(history)
        per_row.setdefault(name, []).extend(cpu_s)
        if cost_class(name) is not None:
            per_class.setdefault(cost_class(name), []).extend(cpu_s)
    rates = {k: statistics.fmean(v) for k, v in per_class.items() if v}
    ratios = [rates[k] / prior[k] for k in rates if prior.get(k)]
    scale = statistics.median(ratios) if ratios else None
    known = rates | ({k: v * scale for k, v in prior.items() if k not in rates} if scale is not None else {})
    done = {(name, r["seed"]) for name, recs in records.items() for r in recs}
    left = []
    for name, seed in planned:
        if (name, seed) in done:
            continue
        key = cost_class(name)
        cpu_s, basis, source = known.get(key), "class" if key in rates else "prior", None
        history = partial.get((name, seed), [])
        own = core.epoch_cpu_s(history)
        if own:
            cpu_s, basis = statistics.fmean(own), "own"
        elif per_row.get(name):
            cpu_s, basis = statistics.fmean(per_row[name]), "row"
        if cpu_s is None and key is not None:
            shallower = [k for k in known if k[0] <= key[0] and k[1] <= key[1] and k[2:] == key[2:]]
            if shallower:
                source = max(shallower, key=lambda k: sum(k[:2]))
                cpu_s, basis = known[source] * sum(key[:2]) / sum(source[:2]), "scaled"
        epochs_done = len(history)
        left.append(
            {
                "row": name,
                "seed": seed,
                "epochs_done": epochs_done,
                "cpu_s_per_epoch": cpu_s,
                "cpu_hours": (epochs - epochs_done) * cpu_s / 3600 if cpu_s is not None else None,
                "basis": basis if cpu_s is not None else None,
                "prior_scale": scale if basis == "prior" and cpu_s is not None else None,
                "scaled_from": source,
            }
        )
    return left


def hours_text(hours: float) -> str:
    return f"{hours:.1f} CPU-hours" if hours >= 0.1 else f"{60 * hours:.1f} CPU-minutes"


def _how_priced(run: dict[str, Any]) -> str:
    """How `remaining` priced RUN: measured (its own epochs, its row's seeds, its cost class) or estimated."""
    at = "-".join(map(str, depth(run["row"])))
    if run["basis"] == "prior":
        return (
            f"estimated: the 12-epoch study's rate at depth {at} × {run['prior_scale']:.2f}, this study's ratio to "
            "it where both measured"
        )
    if run["basis"] == "scaled":
        (enc, dec, _), (to_enc, to_dec, _) = run["scaled_from"], cost_class(run["row"])
        return (
            f"estimated: the rate at depth {enc}-{dec} × {to_enc + to_dec}/{enc + dec} layer applications, likely "
            "an overestimate (embeddings, output layer and search do not grow with depth)"
        )
    return {"own": "measured on its own epochs so far", "row": "measured on its other seeds"}.get(
        run["basis"], f"measured at depth {at}"
    )


def plural(word: str, count: int) -> str:
    """WORD as it reads beside COUNT: "run" for 1, "runs" otherwise."""
    return word if count == 1 else f"{word}s"


def epochs_done(run: dict[str, Any]) -> str:
    """The words "1 epoch done" or "N epochs done" for a started run of `remaining`."""
    done = run["epochs_done"]
    return f"{done} {plural('epoch', done)} done"


def not_finished_markdown(left: Sequence[dict[str, Any]]) -> str:
    """One line per row: the seeds still to run and their CPU cost (per epoch, measured on the run's own epochs,
    its row or its cost class, or estimated: `_how_priced`); seeds priced alike share one parenthesis."""
    lines = []
    for name in dict.fromkeys(x["row"] for x in left):
        runs = [x for x in left if x["row"] == name]
        seeds = ", ".join(f"{x['seed']}" + (f" ({epochs_done(x)})" if x["epochs_done"] else "") for x in runs)
        if all(x["cpu_hours"] is not None for x in runs):
            alike: dict[tuple[str, str], list[int]] = {}
            for x in runs:
                alike.setdefault((f"{x['cpu_s_per_epoch']:.0f}", _how_priced(x)), []).append(x["seed"])
            rates = "; ".join(
                (f"{plural('seed', len(s))} {', '.join(map(str, s))}: " if len(alike) > 1 else "")
                + f"{rate} CPU-s/epoch {how}"
                for (rate, how), s in alike.items()
            )
            cost = f"≈ {hours_text(sum(x['cpu_hours'] for x in runs))} ({rates})"
        else:
            cost = "cost unknown: neither this study nor the 12-epoch one finished a row of this depth (or a shallower one) and decoder passes"
        lines.append(f"- {name}: {plural('seed', len(runs))} {seeds}; {cost}")
    return "\n".join(lines)


def progress(
    planned: Sequence[tuple[str, int]],
    records: dict[str, list[dict[str, Any]]],
    left: Sequence[dict[str, Any]],
    lost: Sequence[dict[str, Any]] = (),
) -> str:
    """What has finished and what it cost, what is left (with `lost`, the finished runs to re-train for their
    weights), in a paragraph."""
    finished = [(n, r["seed"]) for n, recs in records.items() for r in recs]
    done = set(finished)
    first_pass, rest = depth_rows.stages([n for n in depth_rows.CONDITIONAL if (n, 1) in planned])
    first = [n for n in first_pass if any(r["seed"] == 1 for r in records.get(n, []))]
    later = [n for n in rest if any(r["seed"] == 1 for r in records.get(n, []))]
    # the rows planned with every seed
    headline = {n for n, s in planned if s == max(depth_rows.HEADLINE_SEEDS)}
    extra = [(n, s) for n, s in planned if s != 1 and n in headline]
    extra_done = [run for run in extra if run in done]
    second = [
        (n, s)
        for n, s in planned
        if s == depth_rows.SECOND_SEED and n not in headline and n not in depth_rows.CONTROLS
    ]
    controls = [(n, s) for n, s in planned if n in depth_rows.CONTROLS]
    beyond = [run for run in finished if run not in set(planned)]  # so that the parts add up to the count
    running = [f"{x['row']} seed {x['seed']} ({epochs_done(x)})" for x in left if x["epochs_done"]]
    known = [x["cpu_hours"] for x in left if x["cpu_hours"] is not None]
    unknown = [f"{x['row']} seed {x['seed']}" for x in left if x["cpu_hours"] is None]
    text = (
        f"**Progress.** {len(finished)} {plural('run', len(finished))} finished: "
        f"the first pass (seed 1) has {len(first)} of "
        f"{len(first_pass)} rows, the headline rows' extra seeds {len(extra_done)} of {len(extra)}"
        f"{' (' + ', '.join(f'{n} seed {s}' for n, s in extra_done) + ')' if extra_done else ''}, "
        f"the rest (36-6 and the controls, seed 1) {len(later)} of {len(rest)}, a second "
        f"seed of every other row {sum(run in done for run in second)} of {len(second)}"
        + (
            f", the controls of issue #50 {sum(run in done for run in controls)} of {len(controls)}"
            if controls
            else ""
        )
        + (
            f", beyond the plan {len(beyond)} ({', '.join(f'{n} seed {s}' for n, s in beyond)})"
            if beyond
            else ""
        )
        + ". "
    )
    spent = sum(sum(core.epoch_cpu_s(r.get("history") or [])) for recs in records.values() for r in recs)
    if spent:  # what the finished runs cost, beside the estimate of what is left
        text += f"Their epochs took {hours_text(spent / 3600)} (reference machine). "
    tail = ""
    if lost:
        tail = (
            f" Then, to keep their weights: {len(lost)} finished {plural('run', len(lost))} re-trained with "
            f"the same seed, about {hours_text(sum(x['cpu_hours'] for x in lost))}."
        )
    if not left:
        return text + "Nothing of the plan is left." + tail
    text += f"Left: {len(left)} {plural('run', len(left))}"
    if known:
        estimated = sum(x["basis"] == "prior" for x in left)
        scaled = sum(x["basis"] == "scaled" for x in left)
        text += f", about {hours_text(sum(known))} (reference machine)"
        if unknown:
            text += f" for the {len(known)} whose cost is known"
        if estimated or scaled:
            how = [f"{estimated} estimated from the 12-epoch study"] * bool(estimated)
            how += [f"{scaled} scaled up from a shallower depth"] * bool(scaled)
            text += f" ({' and '.join(how)})"
    if unknown:
        text += f"{', and' if known else ':'} {len(unknown)} of a depth not measured yet (cost unknown)"
    text += "."
    if running:
        text += f" Started and resumable: {', '.join(running)}."
    return text + tail


def started_runs(
    planned: Sequence[tuple[str, int]], args: argparse.Namespace
) -> dict[tuple[str, int], list[dict[str, Any]]]:
    """The epochs so far of every planned run that has started (its epochs.json beside its checkpoints)."""
    return {run: history for run in planned if (history := core.run_history(*run, args))}


def lost_weights(records: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The finished runs whose averaged weights were lost with their machine (`core.weights_lost`; the study
    re-trains them last, same seed), each with its epochs re-trained so far and the CPU-hours left at its row's
    measured CPU-s per epoch."""
    lost = []
    for name, recs in records.items():
        rate = statistics.fmean(core.epoch_cpu_s([e for r in recs for e in r["history"]]) or [math.nan])
        for r in recs:
            if core.weights_lost(name, r["seed"], args):
                done = len(core.run_history(name, r["seed"], args))
                hours = (args.epochs - done) * rate / 3600
                lost.append({"row": name, "seed": r["seed"], "epochs_done": done, "cpu_hours": hours})
    return lost


def lost_markdown(lost: Sequence[dict[str, Any]]) -> str:
    """The runs to re-train for their weights, one line each."""
    return "\n".join(
        f"- {x['row']} seed {x['seed']}: finished (its numbers are in the tables), but on a machine not handed on, "
        f"so its averaged weights were not kept; re-trained last with the same seed to keep them "
        f"(≈ {hours_text(x['cpu_hours'])}" + (f"; {epochs_done(x)}" if x["epochs_done"] else "") + ")"
        for x in lost
    )
