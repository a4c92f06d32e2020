"""Mixed precision for `train` (issue #48): which precision a run uses, and how the Trainer gets it.

`TrainingOptions.precision` is ``fp32``, ``bf16``, ``fp16`` or None: the recipe's (`recipes.recipe_precision`),
else fp32. The run's precision becomes the Trainer's own switches (`Seq2SeqTrainingArguments(bf16=..., fp16=...)`),
so accelerate does the work: the model's forward runs under `torch.autocast` (bf16 or fp16; the weights, the
optimizer state and the gradients stay fp32) and fp16 scales the loss dynamically (accelerate's `GradScaler`: a
step whose gradients overflow is skipped and the scale halved; `DivergenceCallback` counts those steps as
overflows, not as divergence, and stops once the scale falls below `MIN_LOSS_SCALE`).

Where a precision cannot run:

- an explicit ``fp16`` (``--fp16`` / ``--precision fp16``) without a CUDA GPU is an error (autocast fp16 and its
  loss scaler need CUDA here: `train` runs on the CPU whenever no CUDA device is visible); so is an explicit
  ``bf16`` on a CUDA GPU without bfloat16 (before Ampere);
- a recipe's ``fp16`` (every paper trained its fp16 on GPUs) falls back with a warning: to **fp32** on a machine
  without CUDA — bf16 autocast on a CPU is emulated, and slower than fp32, unless the CPU has native bf16
  (AVX512-BF16 / AMX), and fp32 keeps CPU runs comparable with the runs before issue #48 (all fp32); ``--bf16``
  asks for it explicitly — and to bf16 (or fp32 on a GPU without bf16) with ``fsdp=True``;
- ``fp16`` with ``fsdp=True`` is refused by `TrainingOptions`: our FSDP2 sharding (`sharding.py`) gets accelerate's
  plain `GradScaler`, which finds overflows in each rank's shard alone, so the ranks could disagree on skipping.

A launcher's own setting (``accelerate launch --mixed_precision bf16``, i.e. ``ACCELERATE_MIXED_PRECISION``) is
honoured when no precision is given, and contradicting it with an explicit ``fp32`` is an error (the Trainer would
otherwise train in the launcher's precision while the record said fp32). What ran is read back from the
accelerator (`precision_used`) for ``metrics.json`` and the model card.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any

logger = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16", "fp16")  # `deep-nmt train --help` lists them: this module imports no torch
# fairseq's --min-loss-scale default: below it the fp16 gradients overflow at any useful scale (the loss explodes)
MIN_LOSS_SCALE = 1e-4
_FLAGS = {
    "fp32": "--precision fp32",
    "bf16": "--bf16 / --precision bf16",
    "fp16": "--fp16 / --precision fp16",
}
_ACCELERATE = {"no": "fp32", "bf16": "bf16", "fp16": "fp16"}


def check_precision(value: Any) -> None:
    """ValueError naming the field, the value and what is valid, unless `value` is None or a known precision."""
    if value is not None and value not in PRECISIONS:
        raise ValueError(
            f"precision={value!r}; valid: {', '.join(PRECISIONS)} (or None: the recipe's, else fp32)"
        )


@dataclasses.dataclass(frozen=True)
class Hardware:
    """What the machine offers: a CUDA GPU, and bfloat16 on it."""

    cuda: bool
    bf16_gpu: bool

    @classmethod
    def here(cls) -> Hardware:
        import torch

        cuda = torch.cuda.is_available()
        return cls(cuda=cuda, bf16_gpu=cuda and torch.cuda.is_bf16_supported())


def _launcher_precision() -> str | None:
    value = _ACCELERATE.get(os.environ.get("ACCELERATE_MIXED_PRECISION", "no").lower())
    return value if value in ("bf16", "fp16") else None


def choose_precision(options: Any, hardware: Hardware | None = None) -> tuple[str, str | None]:
    """(the precision the run uses, a warning to log or None) for `options`; ValueError where an explicit
    precision cannot run here."""
    from ..science.recipes import recipe_precision

    hardware = hardware or Hardware.here()
    explicit, launcher = options.precision, _launcher_precision()
    if explicit == "fp32" and launcher is not None:
        raise ValueError(
            f"precision='fp32' ({_FLAGS['fp32']}) contradicts the launcher's mixed precision "
            f"(ACCELERATE_MIXED_PRECISION={launcher}, e.g. accelerate launch --mixed_precision {launcher}): give "
            "one of them, or the same value to both"
        )
    requested = explicit or launcher
    if requested is not None:
        flag = (
            _FLAGS[requested] if explicit else f"from the launcher's ACCELERATE_MIXED_PRECISION={requested}"
        )
        if requested == "fp16" and not hardware.cuda:
            raise ValueError(
                f"precision='fp16' ({flag}) needs a CUDA GPU: fp16 autocast and its dynamic loss "
                "scaling run on CUDA only, and no CUDA device is visible, so this run would train on the CPU; valid "
                f"here: fp32 (the default) or bf16 ({_FLAGS['bf16']}: autocast on the CPU)"
            )
        if requested == "bf16" and hardware.cuda and not hardware.bf16_gpu:
            raise ValueError(
                f"precision='bf16' ({flag}) needs a GPU with bfloat16 (NVIDIA Ampere or newer) and this "
                f"one has none; valid here: fp16 ({_FLAGS['fp16']}, dynamic loss scaling) or fp32"
            )
        return requested, None
    if options.recipe is None:
        return "fp32", None
    wanted = recipe_precision(options.recipe)
    if wanted == "fp16" and not hardware.cuda:
        return "fp32", (
            f"recipe {options.recipe!r} trains in fp16, which needs a CUDA GPU (fp16 autocast and dynamic loss "
            "scaling run on CUDA only) and none is visible: this run trains in fp32 instead (bf16 autocast on a CPU "
            "is slower than fp32 without native bf16 support, and fp32 keeps CPU runs comparable with earlier "
            f"ones; pass {_FLAGS['bf16']} to train in bf16 anyway)"
        )
    if wanted == "fp16" and options.fsdp:
        fallback = "bf16" if hardware.bf16_gpu else "fp32"
        return fallback, (
            f"recipe {options.recipe!r} trains in fp16, which --fsdp does not support (the loss scaler would "
            f"decide on each rank's shard alone): this run trains in {fallback} instead"
        )
    if wanted == "bf16" and hardware.cuda and not hardware.bf16_gpu:
        return "fp32", (
            f"recipe {options.recipe!r} trains in bf16, which this GPU lacks (before Ampere): this run trains in "
            "fp32 instead"
        )
    return wanted, None


def resolve_precision(options: Any, hardware: Hardware | None = None) -> Any:
    """`options` with `precision` set to what the run uses (explicit, launcher, recipe with its fallback, else
    fp32); logs the recipe fallback's warning; ValueError where an explicit precision cannot run here."""
    used, warning = choose_precision(options, hardware)
    if warning:
        logger.warning("%s", warning)
    return options if options.precision == used else dataclasses.replace(options, precision=used)


def trainer_precision_arguments(precision: str | None) -> dict[str, bool]:
    """The `Seq2SeqTrainingArguments` switches of a precision (None: fp32)."""
    check_precision(precision)
    return {"bf16": precision == "bf16", "fp16": precision == "fp16"}


def precision_used(accelerator: Any) -> str | None:
    """The precision an accelerator trains in (fp32 / bf16 / fp16), or None when it cannot say."""
    value = getattr(accelerator, "mixed_precision", None)
    return _ACCELERATE.get(str(value).lower()) if value is not None else None


def step_was_skipped(source: Any) -> bool:
    """Whether the last optimizer step was skipped by the loss scaler (fp16 overflow): `source` is an accelerate
    `Accelerator` (`optimizer_step_was_skipped`) or `AcceleratedOptimizer` (`step_was_skipped`). A Python bool
    accelerate set in `step()` (whose `GradScaler.step` already synced): reading it costs no device sync."""
    if source is None:
        return False
    skipped = getattr(source, "optimizer_step_was_skipped", None)
    if skipped is None:
        skipped = getattr(source, "step_was_skipped", False)
    return bool(skipped)


def loss_scale(source: Any) -> float | None:
    """The current loss scale of `source`'s `GradScaler` (an Accelerator / AcceleratedOptimizer with `.scaler`),
    or None without an enabled scaler. `get_scale()` reads a device tensor: call it on overflow steps only."""
    return float(source.scaler.get_scale()) if has_loss_scaler(source) else None


def has_loss_scaler(source: Any) -> bool:
    """Whether `source` (an Accelerator / AcceleratedOptimizer) scales the loss (fp16)."""
    scaler = getattr(source, "scaler", None)
    return scaler is not None and getattr(scaler, "is_enabled", lambda: True)()


def precision_record(accelerator: Any, divergence: Any) -> dict[str, Any]:
    """What `metrics.json` records of the run's precision: `precision` (what the accelerator trained in) and, with
    fp16, the steps the loss scaler skipped and the final loss scale. Nothing the run did not measure."""
    record: dict[str, Any] = {}
    used = precision_used(accelerator)
    if used is not None:
        record["precision"] = used
    if has_loss_scaler(accelerator):
        record["fp16_overflow_steps"] = list(getattr(divergence, "overflow_steps", []))
        record["final_loss_scale"] = loss_scale(accelerator)
    return record
