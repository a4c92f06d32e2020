"""The budget pilot of the depth study (bench/depth_multi30k.py `--pilot`): the same rows recorded at several
epoch budgets (bench/results/depth_multi30k/e{E}/), compared in bench/results/depth_multi30k_pilot.{md,json,png};
the study's budget (`--epochs`) is chosen from it by `budget_rule`.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
from pathlib import Path
from typing import Any

from ..common import RESULTS, markdown_table, write_results
from ..paper_curves import per_epoch
from . import core
from .style import colour, line_style
from .summaries import FLAT, SLOPE_EPOCHS, _cell, row_summary

GAP_STABLE = (
    1.0  # BLEU: a budget is long enough when the next one moves no pilot difference between rows more
)


def pilot_summary(
    by_budget: dict[int, dict[str, list[dict[str, Any]]]],
) -> dict[str, dict[int, dict[str, Any]]]:
    """Per row recorded at two or more budgets, per budget: seeds, averaged and best test BLEU (mean, sd), the
    final validation loss, the last-epochs slope and the CPU-hours of a run (means over seeds)."""
    names = sorted({n for recs in by_budget.values() for n in recs})
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for name in names:
        budgets_ = [e for e in sorted(by_budget) if name in by_budget[e]]
        if len(budgets_) < 2:
            continue
        out[name] = {}
        for e in budgets_:
            row = row_summary(name, by_budget[e][name])
            m, s = row["mean"], row["sd"]
            out[name][e] = {
                "seeds": row["n_seeds"],
                "bleu": m["bleu"],
                "bleu_sd": s["bleu"],
                "bleu_best": m["bleu_best"],
                "final_valid_loss": m["final_valid_loss"],
                "slope": m["slope"],
                "trend": row["trend"],
                "cpu_hours": m["cpu_hours"],
            }
    return out


def budget_sentence(summary: dict[str, dict[int, dict[str, Any]]], chosen: int) -> str:
    """How the chosen budget follows from the pilot: the averaged-BLEU gain of the next larger budget against the
    seed standard deviation at the chosen one, and whether the chosen budget ends flat."""
    gains, sds, flat, costs = [], [], [], []
    for name, per in summary.items():
        larger = [e for e in per if e > chosen]
        if chosen not in per or not larger or per[chosen]["bleu"] is None:
            continue
        nxt = min(larger)
        if per[nxt]["bleu"] is None:
            continue
        gains.append((name, nxt, per[nxt]["bleu"] - per[chosen]["bleu"]))
        if per[chosen]["bleu_sd"] is not None:
            sds.append(per[chosen]["bleu_sd"])
        flat.append(f"{name} {per[chosen]['trend']}")
        if per[chosen]["cpu_hours"] and per[nxt]["cpu_hours"]:
            costs.append(per[nxt]["cpu_hours"] / per[chosen]["cpu_hours"])
    if not gains:
        return (
            f"No row has records at {chosen} epochs and at a larger budget yet: the pilot cannot justify the "
            f"{chosen}-epoch budget so far."
        )
    steps = sorted({nxt for _, nxt, _ in gains})
    text = "; ".join(
        f"from {chosen} to {nxt} epochs averaged test BLEU changes by "
        + ", ".join(f"{gain:+.2f} ({name})" for name, n, gain in gains if n == nxt)
        for nxt in steps
    )
    text = text[0].upper() + text[1:]
    text += f"; at {chosen} epochs the last epochs are: {', '.join(flat)}"
    if costs:
        text += f"; the longer budget costs {statistics.fmean(costs):.2f}× the CPU"
    largest = max(g for _, _, g in gains)
    if sds:
        sd = statistics.fmean(sds)
        text += f". The seed standard deviation at {chosen} epochs is {sd:.2f} BLEU (mean over rows): "
        if largest <= sd:
            text += (
                f"no row gains more than one seed sd from the longer budget, so {chosen} epochs is enough."
            )
        else:
            text += (
                f"the longer budget gains up to {largest:+.2f}, more than one seed sd, so at {chosen} epochs the rows' "
                "own BLEU has not converged; the claims compare rows, and the rule below weighs how far their "
                "differences still move."
            )
    else:
        text += f". With one seed per budget there is no seed sd to weigh the largest gain ({largest:+.2f}) against."
    return text


def pilot_plot(summary: dict[str, dict[int, dict[str, Any]]], by_budget: dict, path: Path) -> None:
    """Validation loss per epoch of each pilot row at each budget, and averaged test BLEU against the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (loss, bleu) = plt.subplots(1, 2, figsize=(13, 5))
    styles = ("-", "--", ":", "-.")
    for name, per in summary.items():
        for i, e in enumerate(sorted(per)):
            epochs, mean, low, high = per_epoch(by_budget[e][name], "valid_loss")
            style = {**line_style(name), "linestyle": styles[i % len(styles)]}
            loss.plot(epochs, mean, **style, label=f"{name} e{e}")
            loss.fill_between(epochs, low, high, color=style["color"], alpha=0.15, linewidth=0)
        xs = sorted(per)
        ys = [per[e]["bleu"] for e in xs]
        errors = [per[e]["bleu_sd"] or 0.0 for e in xs]
        bleu.errorbar(xs, ys, yerr=errors, color=colour(name), marker="o", capsize=3, label=name)
    loss.set(xlabel="epoch", ylabel="validation loss", title="validation loss per epoch, by budget")
    bleu.set(xlabel="budget (epochs)", ylabel="averaged test BLEU (± seed sd)", title="test BLEU by budget")
    loss.legend(fontsize=7)
    bleu.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def row_gaps(summary: dict[str, dict[int, dict[str, Any]]]) -> dict[tuple[str, str], dict[int, float]]:
    """What the verdicts measure, by budget: the averaged-BLEU difference of every two pilot rows at each budget
    both were recorded at."""
    gaps = {}
    for a, b in itertools.combinations(summary, 2):
        gaps[(a, b)] = {
            e: summary[a][e]["bleu"] - summary[b][e]["bleu"]
            for e in sorted(summary[a])
            if e in summary[b] and summary[a][e]["bleu"] is not None and summary[b][e]["bleu"] is not None
        }
    return {pair: per for pair, per in gaps.items() if len(per) >= 2}


def budget_rule(summary: dict[str, dict[int, dict[str, Any]]]) -> tuple[int | None, str]:
    """(budget, sentence): the smallest pilot budget whose rows all end flat and after which the next budget moves
    no difference between two rows by GAP_STABLE BLEU or more; None when no budget of the pilot is long enough."""
    gaps = row_gaps(summary)
    if not gaps:
        return None, ""
    text = "Difference between rows (averaged test BLEU) by budget: " + "; ".join(
        f"{a} − {b}: {', '.join(f'{g:+.2f} at {e}' for e, g in per.items())} epochs"
        for (a, b), per in gaps.items()
    )
    budgets_ = sorted({e for per in gaps.values() for e in per})
    for e, nxt in itertools.pairwise(budgets_):
        moves = [abs(per[nxt] - per[e]) for per in gaps.values() if e in per and nxt in per]
        flat = all(per[e]["trend"] == "flat" for per in summary.values() if e in per)
        if moves and flat and max(moves) < GAP_STABLE:
            return e, text + (
                f". Rule: the smallest budget whose rows end flat and after which the next "
                f"budget moves no difference by {GAP_STABLE:g} BLEU or more: {e} epochs (from {e} to {nxt} the "
                f"differences move by at most {max(moves):.2f})."
            )
    return None, text + (
        f". Rule: the smallest budget whose rows end flat and after which the next budget "
        f"moves no difference by {GAP_STABLE:g} BLEU or more: no budget of the pilot meets it yet (the differences "
        f"still move by {GAP_STABLE:g} or more up to {budgets_[-1]} epochs)."
    )


def build_pilot(
    by_budget: dict[int, dict[str, list[dict[str, Any]]]], chosen: int
) -> tuple[str, dict[str, Any]]:
    """(markdown, payload) of the pilot: the rows recorded at several budgets."""
    summary = pilot_summary(by_budget)
    header = [
        "row",
        "budget (epochs)",
        "seeds",
        "BLEU avg",
        "BLEU best",
        "final valid loss",
        "slope (nats/ep)",
    ]
    header += ["end", "CPU-hours per run"]
    body = [
        [
            name,
            e,
            v["seeds"],
            _cell(v["bleu"], v["bleu_sd"], 2),
            _cell(v["bleu_best"], None, 2),
            _cell(v["final_valid_loss"], None, 3),
            _cell(v["slope"], None, 3, signed=True),
            v["trend"],
            _cell(v["cpu_hours"], None, 2),
        ]
        for name, per in summary.items()
        for e, v in sorted(per.items())
    ]
    ruled, rule = budget_rule(summary)
    sentence = " ".join(x for x in (budget_sentence(summary, chosen), rule) if x)
    markdown = "\n\n".join(
        [
            "# The budget pilot of the depth study: the same rows at several epoch budgets",
            "Each budget is its own annealed run (warmup, then linear decay to 0 at its last epoch), so a longer "
            f"budget is not a continuation of a shorter one. End: flat when |slope| < {FLAT:g} nats/epoch over the "
            f"last {SLOPE_EPOCHS} epochs. The study's budget is {chosen} epochs (`--epochs`).",
            markdown_table(header, body) if body else "No row is recorded at two budgets yet.",
            sentence,
        ]
    )
    payload = {"chosen_budget": chosen, "rule_budget": ruled, "rows": summary, "conclusion": sentence}
    return markdown, payload


def records_by_budget(args: argparse.Namespace) -> dict[int, dict[str, list[dict[str, Any]]]]:
    """Every budget's records (core.load_records), by budget."""
    root = core.records_root(args)
    return {e: core.load_records(root, e) for e in core.budgets(root)}


def pilot_report(args: argparse.Namespace, echo: bool = True) -> dict[str, Any]:
    """Write bench/results/depth_multi30k_pilot.{md,json,png} (quick: depth_multi30k_pilot.quick.*): the rows
    recorded at several budgets, and how the chosen budget (`--epochs`) follows from them; its payload (the
    study's report quotes its conclusion)."""
    by_budget = records_by_budget(args)
    markdown, payload = build_pilot(by_budget, args.epochs)
    name = core._output_name("depth_multi30k_pilot", args)
    if payload["rows"]:
        pilot_plot(payload["rows"], by_budget, RESULTS / f"{name}.png")
        markdown += f"\n\n![validation loss per epoch by budget, test BLEU by budget]({name}.png)"
    write_results(name, payload, markdown)
    if echo:
        print(markdown)
    return payload
