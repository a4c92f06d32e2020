"""Per paper, the training curves of the rows its claims compare: one panel a paper.

The depth study's main figure draws every row in one axis, which shows the families but not one claim's rows side
by side. `paper_curves` draws, per paper, the validation BLEU per epoch (mean over seeds, min-max shaded) of
exactly the rows that paper's claims compare (`paper_rows`: system and baseline of each claim, in claim order),
so a failing counterfactual, the row that fixes it and its 6-6 reference read in one panel; e.g. ADMIN's panel
holds post-LN 6-6 and 18-6, ADMIN and DeepNorm 18-6 and pre-LN 18-6, and a second one (a claim's `panel`) its
36-6 rows: post-LN, ADMIN and DeepNorm 36-6 and both learning-rate controls.
`per_epoch` is the one mean-over-seeds reduction both figures use.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def per_epoch(
    records: Sequence[dict[str, Any]], key: str
) -> tuple[list[float], list[float], list[float], list[float]]:
    """(epochs, mean, min, max) of history[key] over seeds, epoch by epoch (seeds that have the epoch)."""
    by_epoch: dict[float, list[float]] = {}
    for r in records:
        for e in r.get("history") or []:
            value = e.get(key)
            if value is not None and math.isfinite(value):
                by_epoch.setdefault(float(e["epoch"]), []).append(float(value))
    epochs = sorted(by_epoch)
    return (
        epochs,
        [statistics.fmean(by_epoch[e]) for e in epochs],
        [min(by_epoch[e]) for e in epochs],
        [max(by_epoch[e]) for e in epochs],
    )


def panel_key(verdict: Mapping[str, Any]) -> str:
    """The panel a claim's rows are drawn in: its paper, or "paper panel" for a claim with a panel of its own."""
    return " ".join(filter(None, (verdict["paper"], verdict.get("panel"))))


def panel_title(key: str, names: Mapping[str, str]) -> str:
    """The title of the panel `key` (`panel_key`): the paper's name in `names`, then the panel's own name, if any."""
    paper, _, panel = key.partition(" ")
    return f"{names.get(paper, paper)} {panel}".strip()


def paper_rows(verdicts: Sequence[Mapping[str, Any]]) -> dict[str, list[str]]:
    """{panel: the rows its claims compare}, a panel a paper (`panel_key`: a paper's claims with a panel of their
    own, ADMIN's 36-6 ones, get a second): each claim's system, then its baseline, first mention first, in the
    order of the claims (a claim whose system is not resolved yet, the best deep row, adds only its baseline)."""
    groups: dict[str, list[str]] = {}
    for v in verdicts:
        rows = groups.setdefault(panel_key(v), [])
        rows += [name for name in (v["system"], v["baseline"]) if name is not None and name not in rows]
    return groups


def paper_curves(
    records: Mapping[str, Sequence[dict[str, Any]]],
    groups: Mapping[str, Sequence[str]],
    path: Path,
    title: str,
    names: Mapping[str, str],
    style: Callable[[str], dict[str, Any]],
    key: str = "valid_bleu",
) -> dict[str, dict[str, list[float]]]:
    """Draw one panel per key of `groups` (`paper_rows`; titled by `panel_title`): history[key] per epoch of each
    of its rows that has records, mean over seeds with the min-max range shaded, in `style(row)`, in two lines of
    panels; write `path`. Returns {panel: {row: the means drawn}}."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = max(3, math.ceil(len(groups) / 2))
    lines = math.ceil(len(groups) / columns)
    fig, axes = plt.subplots(lines, columns, figsize=(5.2 * columns, 4.2 * lines), squeeze=False)
    drawn: dict[str, dict[str, list[float]]] = {}
    for ax, (paper, rows) in zip(axes.flat, groups.items(), strict=False):
        drawn[paper] = {}
        for name in rows:
            if not records.get(name):
                continue
            epochs, mean, low, high = per_epoch(records[name], key)
            line_style = {**style(name), "label": f"{name} ({len(records[name])})"}
            ax.plot(epochs, mean, **line_style)
            ax.fill_between(epochs, low, high, color=line_style["color"], alpha=0.2, linewidth=0)
            drawn[paper][name] = mean
        ax.set(title=panel_title(paper, names), xlabel="epoch", ylabel="validation BLEU (beam 4)")
        if drawn[paper]:
            ax.legend(fontsize=7, title="row (seeds)", title_fontsize=7)
    for ax in list(axes.flat)[len(groups) :]:
        ax.set_visible(False)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return drawn
