"""Token-exact loss scaling across processes and accumulated micro-batches: `TokenExactLoss`.

The model returns the mean over its batch's target tokens. Under several processes (or gradient accumulation) the
Trainer passes `num_items_in_batch`, the target tokens of the whole global batch (every rank's, every accumulated
micro-batch's); the loss is rescaled by (local tokens / global tokens), so that the summed gradient equals the
gradient of the token mean over the global batch — the same as one process with the whole batch, and as fairseq
divides the summed loss of its ``--update-freq`` batches by their total tokens. Overrides `LossHook.adjust_loss`
and reads the Trainer's `model_accepts_loss_kwargs`.
"""

from __future__ import annotations

from typing import Any

import torch

from .loss_hook import LossHook


def token_exact_loss(loss: torch.Tensor, labels: torch.Tensor, num_items_in_batch: Any) -> torch.Tensor:
    """(the batch's token mean `loss`) × (this batch's target tokens / the global batch's): its sum over the ranks
    and micro-batches is the token mean of the global batch."""
    local_tokens = labels.ne(-100).sum().to(loss.device)
    return loss * (local_tokens / torch.as_tensor(num_items_in_batch, device=loss.device))


class TokenExactLoss(LossHook):
    """The model's token mean rescaled to this batch's share of the global batch."""

    def adjust_loss(
        self, loss: torch.Tensor, outputs: Any, model: torch.nn.Module, labels: Any, num_items_in_batch: Any
    ) -> torch.Tensor:
        loss = super().adjust_loss(loss, outputs, model, labels, num_items_in_batch)
        if (
            num_items_in_batch is not None
            and self.model_accepts_loss_kwargs  # the Trainer then treats the loss as a sum / global tokens
            and labels is not None
            and self.compute_loss_func is None
        ):
            # the Trainer multiplies by the world size and DDP averages the gradients
            loss = token_exact_loss(loss, labels, num_items_in_batch)
        return loss
