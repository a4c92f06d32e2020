"""Recurrent shared layers: few unique layers applied many times in depth (recurrent-shared-layers, sec. 4).

A side owns N = `{side}_layers` unique layers and walks them `{side}_layer_repeats` = T times:

    cycle   0..N-1, 0..N-1, ...                                     T·N applications (sec. 4.1, Figure 1)
    zigzag  0..N-1, N-2..0, 1..N-1, N-2..0, ...                     N + (T-1)(N-1) applications

Reading of the closed parameter chain (sec. 4.2, Figure 2): the walk goes up the chain of unique layers and back
down, turning at each end without applying the end layer twice, so consecutive applications always use neighbouring
weight sets and the chain closes on itself. Each up or down run is one "repeat"; the paper's example, N = 4 and
T = 2, gives the 7 applications 0 1 2 3 2 1 0 with 4 weight sets. The paper does not spell the walk out beyond
that figure; this is the reading that matches its counts.

Block input re-injection (eq. 7): at the start of every repeat after the first, the block input is the previous
block's output plus the embedded input x, B_t = B_{t-1}^out + x (`{side}_reinject_input`).

The cache for generation holds one entry per layer *application*. `unroll(model)` gives each application its own
copy of the weights (`{side}_share_layers=False`, same schedule and re-injection): the same function, ready for
further fine-tuning; without re-injection it folds into a stock class.
"""

from __future__ import annotations

import copy

import torch
from torch import nn


def application_order(num_unique: int, repeats: int, order: str) -> list[int]:
    """The unique-layer index used at each application, in depth order."""
    if order == "cycle":
        return [i for _ in range(repeats) for i in range(num_unique)]
    if order != "zigzag":
        raise ValueError(f"layer order {order!r} is not 'cycle' or 'zigzag'")
    walk = list(range(num_unique))
    up = False
    for _ in range(repeats - 1):
        walk += list(range(1, num_unique)) if up else list(range(num_unique - 2, -1, -1))
        up = not up
    return walk


def repeat_starts(num_unique: int, repeats: int, order: str) -> list[int]:
    """Application indices where a repeat after the first begins (where eq. 7 re-injects x)."""
    if order == "cycle":
        return [t * num_unique for t in range(1, repeats)]
    return [num_unique + t * (num_unique - 1) for t in range(repeats - 1)]


def stack_plan(config, side: str) -> tuple[int, list[int], set[int]]:
    """(owned layers, owned-layer index per application, applications that re-inject x) for one side."""
    unique = getattr(config, f"{side}_layers")
    repeats = getattr(config, f"{side}_layer_repeats")
    order = getattr(config, f"{side}_layer_order")
    walk = application_order(unique, repeats, order)
    reinject = (
        set(repeat_starts(unique, repeats, order)) if getattr(config, f"{side}_reinject_input") else set()
    )
    if getattr(config, f"{side}_share_layers"):
        return unique, walk, reinject
    return len(walk), list(range(len(walk))), reinject


def unroll(model: nn.Module) -> nn.Module:
    """An unshared model with the same function: every layer application gets its own copy of the weights. It is
    built on `model`'s device with its dtype (never on the default device); `model` is not changed."""
    config = copy.deepcopy(model.config)
    for side in ("encoder", "decoder"):
        setattr(config, f"{side}_share_layers", False)
    parameter = next(model.parameters())
    with torch.device(parameter.device):
        unrolled = type(model)(config).to(parameter.dtype)
    state = unrolled.state_dict()
    source = model.state_dict()
    for side in ("encoder", "decoder"):
        _, walk, _ = stack_plan(model.config, side)
        for application, unique in enumerate(walk):
            old, new = f"model.{side}.layers.{unique}.", f"model.{side}.layers.{application}."
            for key, value in source.items():
                if key.startswith(old):
                    state[new + key[len(old) :]] = value.clone()
    for key, value in source.items():
        if ".layers." not in key:
            state[key] = value.clone()
    unrolled.load_state_dict(state)
    unrolled.generation_config = copy.deepcopy(model.generation_config)
    return unrolled.train(model.training)
