"""How the depth study's figures draw a row (the report's and the budget pilot's): a colour family per claim, a
marker by place in it, and a line style by the row's part in the claims.
"""

from __future__ import annotations

from typing import Any

from . import rows as depth_rows
from .claims import CLAIMS

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
