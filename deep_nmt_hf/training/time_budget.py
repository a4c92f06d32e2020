"""A run that keeps its promised wall-clock time on a shared machine: threads that follow the load, and training
planned from the measured speed to end, with its learning rate annealed, when the promised time is reached.

torch's threads wait for each other at every operation, so a run with more threads than free cores collapses
when another job takes a core (the demo measured 4-5 steps/s falling to 0.26 for six minutes: issue #59). The
callback here re-reads the machine's load between steps and sets torch's threads to the free cores (the
runnable tasks of other processes, from ``/proc``, are what it subtracts), then, once a few steps have measured
the speed, promises a finishing time (the forecast, at most `budget_s`) and stops training when the steps left
plus the work after training (final scoring, counted in training steps at the speed of the moment) would run
past it: past the budget, or more than `SLACK` past a forecast under the budget (the promise is kept to ±30%;
the slack spares a short run from stopping at every passing slowdown). A run that cannot train all its steps is
planned, not cut short: from the measured speed the callback sets the steps that fit (`planned_steps`, shortened
again if the machine slows down later, lengthened if it speeds up before the cool-down begins) and cools the learning rate down linearly to zero over the last
`COOLDOWN_SHARE` of them, so the schedule completes inside the budget (a model cut off at its peak learning rate
read as noise: BLEU 1.89 at step 576 of 800 on a busy machine). What it did is in `summary()` (threads per step range, the promise, where training stopped).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

logger = logging.getLogger(__name__)

SLACK = 0.15  # a forecast under the budget may be overrun by this share before training stops early
# the share of a shortened run's planned steps over which the learning rate cools down linearly to zero, so that
# a run that cannot train all its steps in the budget still ends with its schedule complete (annealed), not cut off
COOLDOWN_SHARE = 0.25


def own_running_threads() -> int:
    """Threads of this process that are runnable now (state R in /proc/self/task/*/stat); 1 where unknown."""
    running = 0
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return 1
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rfind(")") + 2 : stat.rfind(")") + 3] == "R":
            running += 1
    return max(1, running)


def others_running() -> float | None:
    """Runnable tasks of other processes now: /proc/loadavg's running count less this process's own runnable
    threads (its spinning OpenMP threads are not other jobs); None where /proc is unavailable."""
    try:
        total = int(Path("/proc/loadavg").read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return float(max(0, total - own_running_threads()))


def process_age() -> float:
    """Seconds since this process started (its imports count towards a promised time); 0 where unknown."""
    try:
        start_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def free_cores(usable: int, cap: int, others: float) -> int:
    """The threads to run with: the usable cores less the other jobs' runnable tasks, 1 to `cap`."""
    return max(1, min(cap, usable - round(others)))


class WallClockBudget(TrainerCallback):
    """Threads that follow the load, and a promised end time that training stops early to keep.

    `start`: `time.monotonic()` when the run (data, tokenizer included) began; `budget_s`: the most the promise
    may be (None: no budget, the forecast is printed and training never stops early); `after_training_steps`: the work left once training ends (scoring, saving) measured in training
    steps; `usable_cores` / `max_threads`: the cores this process may use and the thread cap; `follow_load`:
    adapt threads (off when the user fixed them with --threads / OMP_NUM_THREADS); `sample`: the other jobs'
    runnable tasks (tests pass their own).
    """

    def __init__(
        self,
        start: float,
        budget_s: float | None,
        after_training_steps: float,
        usable_cores: int,
        max_threads: int,
        follow_load: bool = True,
        calibration_steps: int = 20,
        check_every: int = 5,
        sample: Callable[[], float | None] = others_running,
        clock: Callable[[], float] = time.monotonic,
        announce: Callable[[str], None] | None = None,
    ) -> None:
        self.start = start
        self.budget_s = budget_s
        self.after_training_steps = after_training_steps
        self.usable_cores = usable_cores
        self.max_threads = max_threads
        self.follow_load = follow_load
        self.calibration_steps = calibration_steps
        self.check_every = check_every
        self.sample = sample
        self.clock = clock
        self.announce = announce or (lambda line: logger.info("%s", line))
        self.promised_s: float | None = None
        self.planned_steps: int | None = None  # the steps that fit the promise, when fewer than max_steps
        self.stopped_at: int | None = None
        self.full_run_s: float | None = None  # at the stop: what all the steps would have taken at that speed
        self.training_ended_s: float | None = None
        self.threads: list[list[int]] = []  # [first step, threads] per change
        self._samples: list[float] = []
        self._times: deque[tuple[int, float]] = deque(maxlen=calibration_steps + 1)

    def seconds_per_step(self) -> float | None:
        """The recent speed: the mean step time over the last `calibration_steps` steps."""
        if len(self._times) < 2:
            return None
        (first_step, first_time), (last_step, last_time) = self._times[0], self._times[-1]
        return (last_time - first_time) / max(1, last_step - first_step)

    def _set_threads(self, step: int, threads: int) -> None:
        if self.threads and self.threads[-1][1] == threads:
            return
        torch.set_num_threads(threads)
        self.threads.append([step, threads])

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.threads = [[state.global_step, torch.get_num_threads()]]
        self._times.append((state.global_step, self.clock()))

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        step, now = state.global_step, self.clock()
        self._times.append((step, now))
        if self.follow_load:
            others = self.sample()
            if others is not None:
                self._samples.append(others)
            if step % self.check_every == 0 and self._samples:
                others = statistics.median(self._samples)
                self._samples.clear()
                self._set_threads(step, free_cores(self.usable_cores, self.max_threads, others))
        per_step = self.seconds_per_step()
        if per_step is None:
            return
        elapsed = now - self.start
        if self.promised_s is None:
            if step < self.calibration_steps:
                return
            forecast = elapsed + (state.max_steps - step + self.after_training_steps) * per_step
            budget = math.inf if self.budget_s is None else self.budget_s
            self.promised_s = min(forecast, budget)
            capped = " (the time budget: training stops early to keep it)" if forecast > budget else ""
            self.announce(
                f"expected time: about {format_duration(self.promised_s)} in all{capped}; measured "
                f"{1 / per_step:.1f} steps/s with {torch.get_num_threads()} thread(s) after {step} steps"
            )
        if self.budget_s is None or step >= state.max_steps:
            return
        deadline = min(self.budget_s, self.promised_s * (1 + SLACK))
        fit = step + math.floor((deadline - elapsed) / per_step - self.after_training_steps)
        if (
            self.planned_steps is not None
            and fit > self.planned_steps
            and step < cooldown_start(self.planned_steps)
        ):
            # the machine got faster before the cool-down began (threads back, another job gone): plan more steps
            self.planned_steps = fit if fit < state.max_steps else None
            if self.planned_steps is None:
                self.announce(f"faster now: all {state.max_steps} steps fit the expected time again")
        elif fit < (self.planned_steps or state.max_steps):  # plan (or shorten) the run at the measured speed
            first = self.planned_steps is None
            self.planned_steps = max(step, fit)
            self.full_run_s = elapsed + (state.max_steps - step + self.after_training_steps) * per_step
            if first:
                self.announce(
                    f"planned {self.planned_steps} of {state.max_steps} steps at the measured speed, the learning "
                    f"rate cooling down to zero over the last {COOLDOWN_SHARE:.0%} of them (all would take "
                    f"{format_duration(self.full_run_s)} here now: --time-budget {math.ceil(self.full_run_s / 60)})"
                )
        if self.planned_steps is None:
            return
        if step >= self.planned_steps:
            self.stopped_at = step
            control.should_training_stop = True
            self.announce(
                f"training ends at step {step} of {state.max_steps}, as planned to keep the expected time"
            )
            return
        optimizer = kwargs.get("optimizer")
        if optimizer is not None:  # after the scheduler's step: the next step's rate, cooled down
            factor = cooldown_factor(step, self.planned_steps)
            for group in optimizer.param_groups:
                group["lr"] *= factor

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.training_ended_s = self.clock() - self.start

    def summary(self, total_s: float | None = None) -> dict[str, Any]:
        """What the run did, for metrics.json."""
        return {
            "cores_usable": self.usable_cores,
            "threads": [{"from_step": step, "threads": n} for step, n in self.threads],
            "threads_follow_load": self.follow_load,
            "budget_s": None if self.budget_s is None else round(self.budget_s, 1),
            "promised_s": None if self.promised_s is None else round(self.promised_s, 1),
            "training_s": None if self.training_ended_s is None else round(self.training_ended_s, 1),
            "total_s": None if total_s is None else round(total_s, 1),
            "planned_steps": self.planned_steps,
            "stopped_early_at_step": self.stopped_at,
            "all_steps_would_take_s": None if self.full_run_s is None else round(self.full_run_s, 1),
            "load_average": [round(value, 2) for value in _loadavg()],
        }


def fits(
    seconds_per_step: float, steps: int, after_steps: float, time_left_s: float | None, margin: float = 0.85
) -> bool:
    """Whether `steps` training steps and the work after them (`after_steps`, in the same model's training steps)
    fit `margin` of `time_left_s` at the measured `seconds_per_step` (the margin: the corpus and the tokenizer,
    and a speed that varies); always without a budget (None)."""
    return time_left_s is None or (steps + after_steps) * seconds_per_step <= margin * time_left_s


def probe_seconds_per_step(
    model: torch.nn.Module, batch_size: int, length: int, vocab_size: int, steps: int = 3
) -> float:
    """Seconds one Adam training step of `model` takes on a random batch of `batch_size` x `length` tokens (after
    one untimed step): the speed a run of it would have on this machine now. The model is left as it was."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(4, vocab_size - 1, (batch_size, length), generator=generator)
    state = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    model.train()
    times = []
    for step in range(steps + 1):
        begin = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step:
            times.append(time.perf_counter() - begin)
    model.load_state_dict(state)
    return statistics.median(times)


def cooldown_start(planned: int, share: float = COOLDOWN_SHARE) -> int:
    """The step after which a run planned to end at step `planned` cools its learning rate down."""
    return planned - max(1, round(share * planned))


def cooldown_factor(done: int, planned: int, share: float = COOLDOWN_SHARE) -> float:
    """The learning-rate factor of step ``done + 1`` of a run planned to end at step `planned`: 1, then falling
    linearly over the last `share` of the planned steps to 1 / (cool-down length) at the last step."""
    length = max(1, round(share * planned))
    return min(1.0, max(0.0, (planned - done) / length))


def _loadavg() -> tuple[float, ...]:
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return ()


def format_duration(seconds: float) -> str:
    """``4.6 min`` from a minute up, else ``40 s``."""
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
