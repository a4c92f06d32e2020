"""The divergence guard: stop on NaN / inf or a loss spike, or skip isolated non-finite batches; under fp16, count
the steps the loss scaler skips (overflows) apart and stop only when the loss scale collapses."""

from __future__ import annotations

import logging
import math
from typing import Any

import torch
from transformers import TrainerCallback

from .distributed import process_group_is_up
from .precision import MIN_LOSS_SCALE, has_loss_scaler, loss_scale, step_was_skipped

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
    diverged weights are never written as a checkpoint. A NaN / inf logged loss (`on_log`) also stops, unless it
    comes from a step the fp16 loss scaler skipped.

    fp16 (`watch` hands over the Trainer's accelerator; without it, `on_step_end`'s `optimizer` keyword if it is an
    `AcceleratedOptimizer`): a step whose update the loss scaler skipped (gradient overflow; a non-finite loss
    included, it overflows the gradients) is an overflow, not a divergence nor a bad batch: its step number goes
    to `overflow_steps` with a warning, and training goes on at the halved scale. Under a loss scaler `observe`
    never zeroes a batch (the scaler drops the whole step instead). When the scale falls below `min_loss_scale`
    (fairseq's --min-loss-scale, 1e-4) the gradients overflow at any useful scale: training stops.

    Host syncs: the losses add up on their device and are read once per optimizer step (`on_step_end`), not
    every micro-batch — except with `max_skipped` > 0 and no loss scaler, where `observe` must know at once
    whether to zero the batch. Whether the scaler skipped a step is a Python flag accelerate keeps; the scale
    itself is read on overflow steps only.
    """

    def __init__(
        self,
        factor: float | None = None,
        max_skipped: int = 0,
        window: int = 20,
        min_history: int = 5,
        min_loss_scale: float = MIN_LOSS_SCALE,
    ) -> None:
        if factor is not None and not factor > 1.0:
            raise ValueError(f"divergence_factor={factor} must be > 1 (or None to disable spike detection)")
        if max_skipped < 0:
            raise ValueError(f"skip_nonfinite_batches={max_skipped} must be >= 0")
        self.factor = factor
        self.max_skipped = max_skipped
        self.window = window
        self.min_history = min_history
        self.min_loss_scale = min_loss_scale
        self.diverged_at: tuple[int, float] | None = None
        self.reason: str | None = None
        self.skipped: list[int] = []
        self.overflow_steps: list[int] = []
        self._recent: list[float] = []
        self._pending: torch.Tensor | None = None  # (loss sum, finite count, non-finite count) of this step
        self._bad = 0  # non-finite losses already seen on the host (max_skipped > 0 without a loss scaler)
        self._mixed: Any = None
        self._nonfinite_overflows = 0  # overflow steps with a non-finite loss since the last logged line

    def watch(self, accelerator: Any) -> None:
        """Read the loss scaler's decisions from `accelerator` (the Trainer's; fp16 has a `GradScaler`)."""
        self._mixed = accelerator

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
        value = loss.detach().reshape(()).to(torch.float64)
        if self.max_skipped > 0 and not has_loss_scaler(self._mixed):
            if not bool(torch.isfinite(value)):  # the caller zeroes this batch now: a host sync
                self._bad += 1
                return True
        finite = torch.isfinite(value)
        entry = torch.stack(
            [torch.where(finite, value, torch.zeros_like(value)), finite.double(), (~finite).double()]
        )
        self._pending = entry if self._pending is None else self._pending + entry
        return False

    def _stop(self, control: Any, step: int, loss: float, reason: str) -> None:
        self.diverged_at = (step, loss)
        self.reason = reason
        control.should_training_stop = True
        control.should_save = False
        control.should_evaluate = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        totals, host_bad = self._pending, self._bad
        self._pending, self._bad = None, 0
        if totals is None or host_bad or process_group_is_up():
            device = (
                totals.device if totals is not None else getattr(args, "device", None) or torch.device("cpu")
            )
            extra = torch.tensor([0.0, 0.0, float(host_bad)], dtype=torch.float64, device=device)
            totals = extra if totals is None else totals + extra
        if process_group_is_up():
            torch.distributed.all_reduce(totals)
        loss_sum, count, bad = totals.tolist()  # the one host sync of the step
        step = state.global_step
        source = self._mixed if self._mixed is not None else kwargs.get("optimizer")
        if step_was_skipped(source):
            self._overflow(
                control, step, loss_scale(source), loss_sum / count if count else float("nan"), bad
            )
            return
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

    def _overflow(self, control: Any, step: int, scale: float | None, loss: float, bad: float) -> None:
        """A step the fp16 loss scaler skipped: counted, and a stop once the scale has collapsed."""
        self.overflow_steps.append(step)
        self._nonfinite_overflows += bool(bad)
        what = "non-finite loss" if bad else "gradient overflow"
        if scale is not None and scale < self.min_loss_scale:
            self._stop(
                control,
                step,
                float("nan") if bad else loss,
                f"fp16 loss scale collapsed to {scale:.3g} (< min_loss_scale {self.min_loss_scale:g}) after "
                f"{len(self.overflow_steps)} overflow steps: the gradients overflow fp16 at any useful scale, so the "
                "loss is probably exploding (train in bf16 or fp32 to see it, or lower the learning rate)",
            )
            return
        logger.warning(
            "step %d: fp16 %s; the loss scaler skipped this update (loss scale now %s; %d overflow steps so far)",
            step,
            what,
            f"{scale:g}" if scale is not None else "unknown",
            len(self.overflow_steps),
        )

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        loss = (logs or {}).get("loss")
        if not isinstance(loss, (int, float)):
            return
        overflowed, self._nonfinite_overflows = self._nonfinite_overflows, 0
        if not math.isfinite(loss) and self.diverged_at is None and not overflowed:
            # (a non-finite loss on a step the fp16 loss scaler skipped reaches the logged mean too: not a stop)
            self._stop(control, state.global_step, float(loss), "non-finite (NaN / inf) logged training loss")
