"""Logging the model's loss components: `LossComponents`.

Models with collapse-reducing losses (deep-decoder-cad-crt eq. 9-11) return `nll_loss`, `ddr_loss` and `ald_loss`
next to the total `loss`; every training log line then carries each component's mean over the training
micro-batches since the previous line, under those names. The sums stay device tensors until a line is logged
(no host sync per micro-batch, issue #48). Overrides `LossHook.adjust_loss` and `log`.
"""

from __future__ import annotations

from typing import Any

import torch

from .loss_hook import LossHook

LOSS_COMPONENTS = ("nll_loss", "ddr_loss", "ald_loss")


class LossComponents(LossHook):
    """Each `LOSS_COMPONENTS` output's mean since the last log line, added to the training log."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._component_sums: dict[str, torch.Tensor] = {}
        self._component_counts: dict[str, int] = {}

    def adjust_loss(
        self, loss: torch.Tensor, outputs: Any, model: torch.nn.Module, labels: Any, num_items_in_batch: Any
    ) -> torch.Tensor:
        loss = super().adjust_loss(loss, outputs, model, labels, num_items_in_batch)
        if model.training and hasattr(outputs, "get"):
            for name in LOSS_COMPONENTS:
                value = outputs.get(name)
                if value is not None:
                    value = value.detach().float()
                    previous = self._component_sums.get(name)
                    self._component_sums[name] = value if previous is None else previous + value
                    self._component_counts[name] = self._component_counts.get(name, 0) + 1
        return loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._component_counts:
            for name, total in self._component_sums.items():
                logs[name] = round(float(total) / self._component_counts[name], 4)
            self._component_sums.clear()
            self._component_counts.clear()
        super().log(logs, start_time)
