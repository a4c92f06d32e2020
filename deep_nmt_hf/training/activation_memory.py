"""What autograd keeps for backward: the bytes of the distinct tensors a forward pass saves (issue #25).

`saved_activation_bytes(fn, model)` runs `fn()` under `torch.autograd.graph.saved_tensors_hooks` and adds up the
storages of the tensors autograd saves for backward, each storage once (a tensor saved by several operations, or
views of one tensor, count once: that is the memory they hold) and the model's parameters left out (they are not
activations). The tensors stay alive until backward, so no storage is freed and reused while it is counted.
It measures the graph, not the allocator: temporaries freed during the forward pass are not in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn


def saved_activation_bytes(fn: Callable[[], Any], model: nn.Module | None = None) -> tuple[int, Any]:
    """(bytes of the distinct storages saved for backward while `fn()` runs, minus `model`'s parameters; what
    `fn` returned — keep it alive until backward, or the saved tensors are freed with it)."""
    parameters = set()
    if model is not None:
        parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn()
    return sum(storages.values()), result
