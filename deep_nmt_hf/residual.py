"""Residual scaling: how a sublayer combines its input with its output.

`residual_scaling="none"` is the plain residual `x + f(x)` of Vaswani et al. (2017). The ADMIN (x·ω + f(x)) and
DeepNorm (α·x + f(x)) rules plug in here: `build_residual_scale` returns the module that scales the skip branch of
one sublayer, or None when the skip branch is the identity.
"""

from __future__ import annotations

from torch import nn

from .configuration_deep_nmt import DeepNMTConfig


def build_residual_scale(config: DeepNMTConfig, side: str, sublayer_index: int) -> nn.Module | None:
    """The skip-branch scale of sublayer `sublayer_index` (0-based, counted over the whole stack) of `side`.

    `side` is "encoder" or "decoder". With `residual_scaling="none"` there is nothing to scale: returns None.
    """
    if config.residual_scaling == "none":
        return None
    raise ValueError(f"residual_scaling={config.residual_scaling!r} is not implemented")
