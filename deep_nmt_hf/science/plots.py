"""Plots of what a trained model learned: ADMIN ω per sublayer, DLCL combination weights (prenorm-dlcl Fig. 5)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_omegas(omegas: dict[str, list[float]], path: str | Path) -> Path:
    """Save a PNG of ADMIN's ω per sublayer for the encoder and the decoder."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for side, values in omegas.items():
        ax.plot(range(1, len(values) + 1), values, marker="o", markersize=3, label=side)
    ax.set_xlabel("sublayer i (counted per side)")
    ax.set_ylabel("ω_i")
    ax.set_title("ADMIN residual scale ω per sublayer")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def dlcl_weights(model: nn.Module) -> dict[str, torch.Tensor]:
    """The learned DLCL matrices W (masked: zeros outside the lower triangle / window) per side that has DLCL."""
    base = model.model if hasattr(model, "model") else model
    out = {}
    for side in ("encoder", "decoder"):
        aggregation = getattr(base, side).aggregation
        if aggregation is not None:
            out[side] = aggregation.weights().detach().float().cpu()
    if not out:
        raise ValueError("the model has no DLCL layer aggregation (encoder/decoder_layer_aggregation='dlcl')")
    return out


def plot_dlcl_weights(model: nn.Module, path: str | Path) -> Path:
    """Heatmap of W per side, like the paper's Figure 5: row l = the input of layer l+1 (last row: the output),
    column k = the weight given to y_k (y_0 = the embeddings)."""
    plt = _pyplot()
    from matplotlib.ticker import MaxNLocator

    matrices = dlcl_weights(model)
    fig, axes = plt.subplots(1, len(matrices), figsize=(5.2 * len(matrices), 4.6), squeeze=False)
    for ax, (side, weights) in zip(axes[0], matrices.items(), strict=True):
        shown = weights.masked_fill(
            torch.triu(torch.ones_like(weights, dtype=torch.bool), diagonal=1), float("nan")
        )
        image = ax.imshow(shown.numpy(), cmap="viridis")
        ax.set_title(f"DLCL weights W ({side})")
        ax.set_xlabel("k: output y_k (0 = embeddings)")
        ax.set_ylabel("row l: input of layer l+1 (last: output)")
        for axis in (ax.xaxis, ax.yaxis):  # layer indices: no half-integer ticks on a short (decoder) side
            axis.set_major_locator(MaxNLocator(integer=True))
        fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
