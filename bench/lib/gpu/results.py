"""The result file: rows written after every measurement (a short GPU session keeps what it measured)."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from ..common import provenance
from .models import ROW_FIELDS
from .steps import peak_rate


class Results:
    """The json written after every row (a short GPU session keeps what it measured) and the markdown at the end."""

    def __init__(self, path: Path, args: argparse.Namespace) -> None:
        self.path, self.args = path, args
        self.started = time.monotonic()
        self.data: dict[str, Any] = {
            "provenance": provenance(),
            "device": device_info(torch.device(args.device)),
            "settings": {k: v for k, v in vars(args).items() if k != "out"},
            "train": [],
            "trainer": [],
            "generate": [],
            "split": {},
            "stalls": [],
            "notes": NOTES,
        }
        self.write()

    def over_budget(self) -> bool:
        return self.args.budget_s is not None and time.monotonic() - self.started > self.args.budget_s

    def add(self, section: str, row: dict, fn: Callable[[], dict] | None) -> dict:
        """Measure one row (`fn`'s fields merged in), recording an error or a budget skip instead of raising."""
        for field in ROW_FIELDS.get(section, ()):
            row.setdefault(field, None)
        if fn is not None and self.over_budget():
            row["status"] = f"skipped: over the --budget-s {self.args.budget_s} s"
        elif fn is not None:
            started = time.perf_counter()
            try:
                row.update(fn())
                row["status"] = row.get("status") or "ok"
            except Exception as error:  # noqa: BLE001 - one failure is one error row
                row["status"] = f"error: {type(error).__name__}: {str(error)[:300]}"
            row["seconds"] = round(time.perf_counter() - started, 2)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        self.data[section].append(row)
        self.write()
        print(
            json.dumps({section: {k: v for k, v in row.items() if not isinstance(v, (list, dict))}}),
            flush=True,
        )
        return row

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=2, default=str) + "\n")


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"type": device.type}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {
            "name": props.name,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "cuda": torch.version.cuda,
        }
    info["peak_bf16_flops"], info["peak_source"] = peak_rate(device)
    return info


NOTES = [
    "step_ms: mean over --steps steps between two device synchronisations, after --warmup steps; on CPU the wall "
    "clock on a machine that may be shared (cpu_ms_per_step: process CPU time, less disturbed).",
    "target_tokens_per_s: non-padding target tokens of the measured batches / wall time.",
    "flops_per_step: torch.utils.flop_counter.FlopCounterMode over one forward + backward of the first batch "
    "(matmuls and attention; the optimizer and elementwise work are not counted); share_of_bf16_peak divides "
    "flops_per_step / step time by the chip's dense bf16 peak (PEAK_BF16, source in device.peak_source), also "
    "for the fp32 rows.",
    "raw loop: batches pre-collated on the device; the trainer section runs DeepNMTTrainer over the same "
    "token-budget batches (its own loader and collator), so trainer_over_raw includes the whole input pipeline.",
    "split: 'old' reproduces the pipeline before issue #48 in this run (LegacyTrainer, exact-length padding, "
    "budget on exact lengths); 'new' is the code as committed.",
]
