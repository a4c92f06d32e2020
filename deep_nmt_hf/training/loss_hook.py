"""One `compute_loss` for the trainer's pieces that read or adjust the training loss: `LossHook`.

`DivergenceGuard`, `TokenExactLoss` and `LossComponents` each need the loss together with the model's outputs.
`LossHook.compute_loss` asks the Trainer for both once and hands them to `adjust_loss`, which each piece overrides
(calling `super().adjust_loss` first): the piece last among the trainer's bases sees the Trainer's loss first, as
with the nested `compute_loss` overrides this replaces. Overrides the public `compute_loss`.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer


class LossHook(Trainer):
    """`compute_loss` with the outputs always computed, the loss passed through `adjust_loss`."""

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        labels = inputs.get("labels")  # before the Trainer pops them (label smoothing, compute_loss_func)
        loss, outputs = super().compute_loss(
            model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
        )
        loss = self.adjust_loss(loss, outputs, model, labels, num_items_in_batch)
        return (loss, outputs) if return_outputs else loss

    def adjust_loss(
        self, loss: torch.Tensor, outputs: Any, model: torch.nn.Module, labels: Any, num_items_in_batch: Any
    ) -> torch.Tensor:
        """The loss a piece passes on, given the Trainer's `loss`, the model's `outputs`, the batch's `labels` and
        the Trainer's `num_items_in_batch`; here unchanged."""
        return loss


__all__ = ["LossHook"]
