"""The plots' axes: the DLCL heatmap's ticks are layer indices (integers) on both sides, however short."""

from __future__ import annotations

from pathlib import Path

import pytest
from factories import tiny_model

from deep_nmt_hf.science.plots import plot_dlcl_weights


def test_dlcl_heatmap_ticks_are_integers_on_a_two_layer_decoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import matplotlib.pyplot as plt

    figures = []
    monkeypatch.setattr(plt, "close", figures.append)  # keep the figure the function would close
    model = tiny_model(seed=0, encoder_layer_aggregation="dlcl", decoder_layer_aggregation="dlcl")
    assert model.config.decoder_layers == 2  # a 3 x 3 matrix: matplotlib's default ticks fall at halves
    plot_dlcl_weights(model, tmp_path / "dlcl.png")
    (figure,) = figures
    figure.canvas.draw()
    heatmaps = [ax for ax in figure.axes if ax.images]
    assert len(heatmaps) == 2
    for ax in heatmaps:
        for ticks, (low, high) in (
            (ax.get_xticks(), ax.get_xlim()),
            (ax.get_yticks(), sorted(ax.get_ylim())),
        ):
            shown = [tick for tick in ticks if low <= tick <= high]
            assert shown and all(float(tick).is_integer() for tick in shown), (ax.get_title(), list(ticks))
