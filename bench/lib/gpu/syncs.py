"""Host syncs of a training step: `SyncCounter` counts the tensor reads that wait for the device."""

from __future__ import annotations

import inspect
import os
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode


class SyncCounter(TorchFunctionMode):
    """Counts the calls that read a tensor's value on the host (a device sync on CUDA): ``.item()``,
    ``float()`` / ``int()`` / ``bool()`` of a tensor, ``.tolist()``; each under `label` (set it per step) and its
    call site (the first frame outside torch). Reads inside ``torch/optim`` (the optimizers' step counters live
    on the CPU unless capturable) and ``torch/utils/data`` (the loader's CPU tensors) are not device syncs and are
    not counted."""

    READS = {"item", "__float__", "__int__", "__bool__", "tolist", "__index__"}
    SKIP = (f"torch{os.sep}optim{os.sep}", f"torch{os.sep}utils{os.sep}data{os.sep}")

    def __init__(self) -> None:
        super().__init__()
        self.label: Any = None
        self.calls: list[tuple[Any, str, str]] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in self.READS:
            site = self._site()
            if site is not None:
                self.calls.append((self.label, name, site))
        return func(*args, **(kwargs or {}))

    def _site(self) -> str | None:
        torch_dir = os.path.dirname(torch.__file__) + os.sep
        frame = inspect.currentframe()
        frame = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(torch_dir):
                if any(part in path for part in self.SKIP):
                    return None
                frame = frame.f_back
                continue
            parts = Path(path).parts
            short = "/".join(parts[-2:])
            return f"{short}:{frame.f_lineno}"
        return None

    def per_label(self) -> dict[Any, int]:
        return dict(Counter(label for label, _, _ in self.calls))

    def sites(self, labels: Any = None) -> dict[str, int]:
        keep = None if labels is None else set(labels)
        return dict(Counter(site for label, _, site in self.calls if keep is None or label in keep))
