"""Residual scaling: how a post-LN sublayer combines its input with its output.

    none      x_i = LN(x_{i-1} + f_i(x_{i-1}))                       Vaswani et al. (2017)
    admin     x_i = LN(ω_i ⊙ x_{i-1} + f_i(x_{i-1}))                 ADMIN, eq. 2 (admin-very-deep-transformers-nmt)
    deepnorm  x_i = LN(α · x_{i-1} + f_i(x_{i-1}))                   DeepNet (Wang et al., 2022), sec. 3

`build_residual_scale` returns the module that scales the skip branch of one sublayer, or None where the skip
branch is the identity. Under ADMIN the first sublayer of the encoder and of the decoder reads the embeddings; its
ω is 1 and stays 1 (there is no LayerNorm before it to fold ω into), so it gets no module at all.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .configuration_deep_nmt import DeepNMTConfig


def sublayers_per_layer(config: DeepNMTConfig, side: str) -> int:
    """2 for an encoder layer; 3 for a decoder layer (self, cross, FFN), 2 with merged attention."""
    if side == "encoder":
        return 2
    return 2 if config.decoder_attention == "merged" else 3


def num_sublayers(config: DeepNMTConfig, side: str) -> int:
    """Residual sublayers N of one side (ADMIN counts ω over these)."""
    layers = config.encoder_layers if side == "encoder" else config.decoder_layers
    return layers * sublayers_per_layer(config, side)


def analytic_omega(num_residual_sublayers: int) -> float:
    """admin-torch's profiling-free ω = sqrt((N + 1) / ln(N + 1) - 1) for N residual sublayers."""
    n = num_residual_sublayers
    return math.sqrt((n + 1) / math.log(n + 1) - 1)


def deepnorm_constants(config: DeepNMTConfig, side: str) -> tuple[float, float]:
    """DeepNet's encoder-decoder (α, β) for N encoder and M decoder layers:
    encoder α = 0.81 (N⁴M)^(1/16), β = 0.87 (N⁴M)^(-1/16); decoder α = (3M)^(1/4), β = (12M)^(-1/4)."""
    n, m = config.encoder_layers, config.decoder_layers
    if side == "encoder":
        return 0.81 * (n**4 * m) ** (1 / 16), 0.87 * (n**4 * m) ** (-1 / 16)
    return (3 * m) ** 0.25, (12 * m) ** -0.25


class AdminOmega(nn.Module):
    """ω of one ADMIN sublayer: a trainable per-dimension vector, or a fixed scalar (saved as a buffer).

    Both start at 1 (or the analytic value) and are set by profiling (admin.py)."""

    def __init__(self, d_model: int, trainable: bool, side: str) -> None:
        super().__init__()
        self.trainable = trainable
        self.side = side
        if trainable:
            self.omega = nn.Parameter(torch.ones(d_model))
        else:
            self.register_buffer("omega", torch.ones(1))

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states * self.omega.to(hidden_states.dtype)

    def value(self, device: torch.device | str | None = None) -> torch.Tensor:
        """ω as a (d_model,) or (1,) tensor, on `device` (default: where ω lives)."""
        omega = self.omega.detach()
        return omega if device is None else omega.to(device)

    @torch.no_grad()
    def set_(self, value: float) -> None:
        self.omega.fill_(value)


class DeepNormAlpha(nn.Module):
    """The constant α of a DeepNorm sublayer (derived from the depth; nothing to save)."""

    def __init__(self, alpha: float) -> None:
        super().__init__()
        self.alpha = alpha

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states * self.alpha

    def value(self, device: torch.device | str | None = None) -> torch.Tensor:
        """α as a (1,) tensor on `device` (default: the CPU — never torch's default device, which may be
        another one than the model's)."""
        return torch.tensor([self.alpha], device=device if device is not None else "cpu")

    def extra_repr(self) -> str:
        return f"alpha={self.alpha:.4f}"


def build_residual_scale(config: DeepNMTConfig, side: str, sublayer_index: int) -> nn.Module | None:
    """The skip-branch scale of sublayer `sublayer_index` (0-based over the whole `side` stack), or None."""
    if config.residual_scaling == "admin":
        if sublayer_index == 0 and not getattr(config, "admin_first_omega", False):
            return None  # reads the embeddings: ω = 1, kept so that the model folds
        return AdminOmega(config.d_model, trainable=config.admin_omega == "trainable", side=side)
    if config.residual_scaling == "deepnorm":
        return DeepNormAlpha(deepnorm_constants(config, side)[0])
    return None


def initial_omega(config: DeepNMTConfig, side: str) -> float:
    """The ω a fresh ADMIN model starts with: the analytic value, or 1 until profiling sets it."""
    if config.admin_init == "analytic":
        return analytic_omega(num_sublayers(config, side))
    return 1.0


def residual_sublayers(model: nn.Module) -> dict[str, list[nn.Module]]:
    """Every residual sublayer of `model` (a base model or one with ``.model``), per side."""
    base = model.model if hasattr(model, "model") else model
    return {"encoder": base.encoder.sublayers(), "decoder": base.decoder.sublayers()}


def current_omegas(model: nn.Module) -> dict[str, list[float]]:
    """The mean skip-branch scale of every sublayer: ADMIN's ω (eq. 5), DeepNorm's α, 1.0 where none."""
    return {
        side: [
            1.0 if s.residual_scale is None else s.residual_scale.value().float().mean().item() for s in subs
        ]
        for side, subs in residual_sublayers(model).items()
    }
