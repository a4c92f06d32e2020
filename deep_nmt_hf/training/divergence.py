"""The divergence guard: stop on NaN / inf or a loss spike, or skip isolated non-finite batches."""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
from transformers import TrainerCallback

from ..distributed import process_group_is_up

logger = logging.getLogger(__name__)


class TrainingDivergedError(RuntimeError):
    """The training loss became NaN or infinite, or spiked beyond the divergence factor."""


class DivergenceCallback(TrainerCallback):
    """Divergence guard: stops training on a NaN / inf loss or a loss spike, or skips isolated bad batches.

    Checked at every optimizer step (not only at logging steps), on the loss of every training micro-batch
    (`DeepNMTTrainer.compute_loss` calls `observe`); under several processes the per-step numbers are summed
    over the ranks (one small all-reduce per step), so every rank takes the same decision.

    - A non-finite loss stops training at that step, unless `max_skipped` > 0: then the batch contributes a
      zero gradient (the optimizer still steps, with the momentum it has) and is counted in `skipped`
      (step numbers); the (max_skipped + 1)-th bad batch stops training.
    - With `factor` set, a step whose mean loss exceeds `factor` × the mean of the previous `window` step
      losses (once at least `min_history` are known) stops training.

    On a stop `diverged_at` = (step, loss) and `reason` are set, and `control.should_save` is cleared so the
    diverged weights are never written as a checkpoint. A NaN / inf logged loss (`on_log`) also stops.
    """

    def __init__(
        self, factor: float | None = None, max_skipped: int = 0, window: int = 20, min_history: int = 5
    ) -> None:
        if factor is not None and not factor > 1.0:
            raise ValueError(f"divergence_factor={factor} must be > 1 (or None to disable spike detection)")
        if max_skipped < 0:
            raise ValueError(f"skip_nonfinite_batches={max_skipped} must be >= 0")
        self.factor = factor
        self.max_skipped = max_skipped
        self.window = window
        self.min_history = min_history
        self.diverged_at: tuple[int, float] | None = None
        self.reason: str | None = None
        self.skipped: list[int] = []
        self._recent: list[float] = []
        self._sum = 0.0
        self._count = 0
        self._bad = 0

    def error(self, last_good: Any) -> TrainingDivergedError:
        """The error that ends a diverged run, naming the last good checkpoint (`last_good`, or None)."""
        step, loss = self.diverged_at or (None, None)
        kept = (
            f"the last good checkpoint is {last_good} (kept; continue with --resume, e.g. after lowering the "
            "learning rate)"
            if last_good
            else "no checkpoint was written before it"
        )
        return TrainingDivergedError(
            f"training diverged at step {step}: {self.reason} (loss={loss}); {kept}; try a lower "
            "learning rate, more warmup, pre-LN or a residual-scaling variant"
        )

    def observe(self, loss: torch.Tensor) -> bool:
        """Record one training micro-batch's loss; True when that batch must be skipped (zero gradient)."""
        value = float(loss.detach().float())
        if not math.isfinite(value):
            self._bad += 1
            return self.max_skipped > 0
        self._sum += value
        self._count += 1
        return False

    def _stop(self, control: Any, step: int, loss: float, reason: str) -> None:
        self.diverged_at = (step, loss)
        self.reason = reason
        control.should_training_stop = True
        control.should_save = False
        control.should_evaluate = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        totals = [self._sum, float(self._count), float(self._bad)]
        self._sum, self._count, self._bad = 0.0, 0, 0
        if process_group_is_up():
            device = getattr(args, "device", None) or torch.device("cpu")
            tensor = torch.tensor(totals, dtype=torch.float64, device=device)
            torch.distributed.all_reduce(tensor)
            totals = tensor.tolist()
        loss_sum, count, bad = totals
        step = state.global_step
        if bad:
            if len(self.skipped) + 1 > self.max_skipped:
                allowed = f" (after {len(self.skipped)} skipped bad batches)" if self.skipped else ""
                self._stop(control, step, float("nan"), f"non-finite (NaN / inf) training loss{allowed}")
            else:
                self.skipped.append(step)
                logger.warning("step %d: non-finite training loss; batch skipped (zero gradient)", step)
            return
        if not count:
            return
        mean = loss_sum / count
        if self.factor is not None and len(self._recent) >= self.min_history:
            reference = sum(self._recent) / len(self._recent)
            if mean > self.factor * reference:
                self._stop(
                    control,
                    step,
                    mean,
                    f"loss spike: {mean:.4g} > divergence_factor {self.factor} x {reference:.4g} (mean of the "
                    f"previous {len(self._recent)} steps)",
                )
                return
        self._recent = (self._recent + [mean])[-self.window :]

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        loss = (logs or {}).get("loss")
        if isinstance(loss, (int, float)) and not math.isfinite(loss) and self.diverged_at is None:
            self._stop(control, state.global_step, float(loss), "non-finite (NaN / inf) logged training loss")
