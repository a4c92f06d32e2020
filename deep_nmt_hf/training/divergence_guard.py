"""The per-step divergence guard inside the Trainer's loss: `DivergenceGuard`.

Every training micro-batch's loss is handed to the `divergence.DivergenceCallback` among the callbacks (if any); a
batch it decides to skip contributes a zero gradient that still reaches every parameter, so that DDP's gradient
all-reduce sees the same parameters on every rank. The guard also watches the accelerator, so that under fp16 a
step the loss scaler skipped counts as an overflow, not a divergence. Overrides `LossHook.adjust_loss`.
"""

from __future__ import annotations

from typing import Any

import torch

from .divergence import DivergenceCallback
from .loss_hook import LossHook


class DivergenceGuard(LossHook):
    """Each training loss shown to the `DivergenceCallback`, which may skip the batch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        guards = [cb for cb in self.callback_handler.callbacks if isinstance(cb, DivergenceCallback)]
        self.divergence: DivergenceCallback | None = guards[0] if guards else None
        if self.divergence is not None:  # fp16: it reads the loss scaler's skipped steps
            self.divergence.watch(self.accelerator)

    def adjust_loss(
        self, loss: torch.Tensor, outputs: Any, model: torch.nn.Module, labels: Any, num_items_in_batch: Any
    ) -> torch.Tensor:
        loss = super().adjust_loss(loss, outputs, model, labels, num_items_in_batch)
        if model.training and self.divergence is not None:
            raw = outputs.get("loss") if hasattr(outputs, "get") else None
            if raw is not None and self.divergence.observe(raw):
                # skip this batch: a zero loss that still reaches every parameter
                loss = sum((p.sum() * 0.0 for p in model.parameters() if p.requires_grad), loss.new_zeros(()))
        return loss
