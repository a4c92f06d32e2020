"""The training time of a whole run, across `--resume`: Transformers' ``train_runtime`` counts only the last
`Trainer.train` call, so a resumed run reported the resumed part alone.

`TrainingClock` is an `ExportableState` callback: the Trainer writes its `state()` (the training seconds so far)
into every checkpoint's trainer_state.json (``stateful_callbacks``), and on resume the clock reads it back from
the loaded state in `on_train_begin`.
"""

from __future__ import annotations

import time
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState


class TrainingClock(TrainerCallback, ExportableState):
    """Seconds trained before this `train` call (`before_s`, from the checkpoint resumed) plus this call's."""

    def __init__(self, before_s: float = 0.0) -> None:
        self.before_s = float(before_s)
        self._start: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        saved = (state.stateful_callbacks or {}).get(type(self).__name__)
        if isinstance(saved, list):
            saved = saved[-1] if saved else None
        self.before_s = float(((saved or {}).get("attributes") or {}).get("before_s", 0.0))
        self._start = time.monotonic()
        if state.stateful_callbacks is not None:  # a checkpoint saved before the clock existed: the next save
            state.stateful_callbacks.setdefault(
                type(self).__name__, self.state()
            )  # updates the entry in place

    def elapsed_s(self) -> float:
        """Training seconds of the whole run so far."""
        return self.before_s + (time.monotonic() - self._start if self._start is not None else 0.0)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the whole run's training seconds so far (the next resume's `before_s`)."""
        return {"args": {}, "attributes": {"before_s": self.elapsed_s()}}


def whole_run_metrics(metrics: dict[str, Any], clock: TrainingClock) -> dict[str, Any]:
    """`Trainer.train`'s metrics with ``train_runtime`` counting the whole run (and, after a resume, the part
    before it as ``train_runtime_before_resume``)."""
    if clock.before_s > 0 and "train_runtime" in metrics:
        metrics = {
            **metrics,
            "train_runtime": round(metrics["train_runtime"] + clock.before_s, 4),
            "train_runtime_before_resume": round(clock.before_s, 4),
        }
    return metrics
