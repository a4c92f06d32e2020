"""A forest plot of a study's claims: per claim, the measured Δ BLEU with its 95% CI beside the paper's own Δ.

`forest_plot(verdicts, path, ...)` draws one line per claim (the verdict dicts of depth.report.claim_verdicts):
the bootstrap Δ of system − baseline with its 95% CI (filled when Holm-significant, hollow when not), the paper's
own Δ as an open diamond where the paper states one (grey where it was measured at other depths: quoted, not
tested against), and the verdict, coloured, at the right. Differences past
±`limit` BLEU (a row that fails against one that trains: ±25-30) are drawn at the edge as an arrow with their
value written beside it, so the small differences the claims turn on stay readable. Claims without a BLEU
comparison (a collapse is a source-reliance diagnosis; a row with no record yet) keep their line, verdict only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

VERDICT_COLOURS = {
    "reproduces": "tab:green",
    "contradicts": "tab:red",
    "inconclusive": "tab:orange",
    "cannot decide at this size": "tab:brown",
    "no verdict (confounded)": "tab:olive",
    "not applicable": "tab:purple",
    "cannot be tested at this scale": "tab:grey",
    "cannot be tested yet": "silver",
}
LIMIT = 8.0  # BLEU: the x axis spans ±LIMIT; larger differences are drawn clipped at its edge


def clip(value: float, limit: float = LIMIT) -> tuple[float, int]:
    """(value clipped to [−limit, limit], side): side −1 / +1 when it was clipped below / above, else 0."""
    if value > limit:
        return limit, 1
    if value < -limit:
        return -limit, -1
    return value, 0


def _edge_value(ax: Any, x: float, y: float, side: int, text: str, above: float, **style: Any) -> None:
    """Write a clipped point's true value beside it, inside the axis, `above` points over (negative: under) it."""
    ax.annotate(
        text,
        (x, y),
        xytext=(-8 * side, above),
        textcoords="offset points",
        ha="right" if side > 0 else "left",
        **style,
    )


def _p(p: float) -> str:
    return "< 0.0001" if p < 1e-4 else f"{p:.2g}"


def holm_note(test: Mapping[str, Any] | None, verdict: Mapping[str, Any] | None = None) -> str:
    """ " (Holm p …)" for a verdict that rests on a comparison, "" for one that does not; with the verdict, its
    corrected test against the paper's Δ too, where it has one (" (Holm p 1 against 0; 0.002 against +2.50)")."""
    if test is None:
        return ""
    if verdict is not None and verdict.get("p_target_holm") is not None:
        return f" (Holm p {_p(test['p_holm'])} against 0; {_p(verdict['p_target_holm'])} against {verdict['target']:+.2f})"
    return f" (Holm p {_p(test['p_holm'])})"


def forest_plot(
    verdicts: Sequence[Mapping[str, Any]],
    path: Path,
    title: str,
    groups: Mapping[str, str] | None = None,
    alpha: float = 0.05,
    close_margin: float | None = None,
    limit: float = LIMIT,
) -> list[str]:
    """Write the forest plot of `verdicts` (keys: paper, system, baseline, rule, verdict, test — None or
    {delta, ci95, p_holm} — and paper_delta, None where the paper states no Δ) to `path`. `groups` names each
    paper on its lines; `close_margin` draws the −margin line of the "close" rule on its claims. Returns the
    lines' labels, top to bottom."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(verdicts)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.42 * n))
    ax.axvline(0.0, color="black", linewidth=0.8)
    labels = []
    for i, v in enumerate(verdicts):
        y = n - 1 - i
        group = (groups or {}).get(v["paper"], v["paper"])
        labels.append(f"{group}: {v['system'] or '—'} vs {v['baseline']}")
        colour = VERDICT_COLOURS.get(v["verdict"], "black")
        test = v.get("test")
        if test is not None:
            x, side = clip(test["delta"], limit)
            low, high = (clip(c, limit)[0] for c in test["ci95"])
            significant = test["p_holm"] < alpha
            marker = {0: "o", 1: ">", -1: "<"}[side]
            ax.plot([low, high], [y, y], color=colour, linewidth=2)
            ax.plot(
                x,
                y,
                marker=marker,
                markersize=8,
                color=colour,
                markerfacecolor=colour if significant else "white",
            )
            if side:
                _edge_value(ax, x, y, side, f"{test['delta']:+.1f}", 7, fontsize=8, color=colour)
        if v.get("paper_delta") is not None:
            px, side = clip(v["paper_delta"], limit)
            other = "grey" if v.get("paper_comparison") else "black"  # measured at other depths: not a target
            ax.plot(px, y, marker="D", markersize=7, color=other, markerfacecolor="none")
            if side:
                _edge_value(ax, px, y, side, f"paper {v['paper_delta']:+.1f}", -11, fontsize=7)
        if close_margin is not None and v.get("rule") == "close":
            ax.plot([-close_margin] * 2, [y - 0.35, y + 0.35], color="black", linestyle=":", linewidth=1)
        word = v["verdict"] + holm_note(test, v)
        if v.get("rule") == "collapses":
            word += " — by source reliance, not BLEU"
        ax.annotate(
            word,
            (1.01, y),
            xycoords=("axes fraction", "data"),
            va="center",
            fontsize=8,
            color=colour,
            fontweight="bold" if v["verdict"] in ("reproduces", "contradicts") else "normal",
        )
    ax.set_yticks(range(n - 1, -1, -1), labels, fontsize=8)
    ax.set_ylim(-0.7, n - 0.3)
    ax.set_xlim(-limit * 1.05, limit * 1.05)
    ax.set_xlabel(f"Δ BLEU, system − baseline (95% CI; beyond ±{limit:g} drawn at the edge with its value)")
    ax.grid(axis="x", alpha=0.3)
    legend = [
        plt.Line2D([], [], marker="o", color="black", linestyle="", label=f"measured, Holm p < {alpha:g}"),
        plt.Line2D(
            [], [], marker="o", color="black", markerfacecolor="white", linestyle="", label="not significant"
        ),
        plt.Line2D(
            [], [], marker="D", color="black", markerfacecolor="none", linestyle="", label="the paper's Δ"
        ),
        plt.Line2D(
            [],
            [],
            marker="D",
            color="grey",
            markerfacecolor="none",
            linestyle="",
            label="the paper's Δ at other depths (not tested against)",
        ),
    ]
    if close_margin is not None:
        legend.append(
            plt.Line2D([], [], color="black", linestyle=":", label=f"−{close_margin:g}: the 'close' margin")
        )
    ax.legend(handles=legend, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.6 / n - 0.05), ncol=4)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return labels
