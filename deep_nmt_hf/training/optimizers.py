"""Optimizer choice for training: Adam, AdamW or RAdam with β's and ε, as `Trainer(optimizer_cls_and_kwargs=...)`.

The papers differ here: ADMIN trains with RAdam (admin-very-deep-transformers-nmt, sec. 5), the others with Adam
(β2 0.98 in fairseq's Transformer recipe, 0.997 in prenorm-dlcl, ε 1e-9 in recurrent-shared-layers). Weight decay
is the Trainer's (`weight_decay`, put in the parameter groups): L2 for ``adam`` / ``radam``, decoupled for
``adamw``; with weight decay 0 (our default) Adam and AdamW are the same update.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# torch.optim.Adam, AdamW, RAdam (`optimizer_classes`); the names alone, so that options are checked before torch
OPTIMIZER_NAMES = ("adam", "adamw", "radam")


def optimizer_classes() -> dict[str, type[torch.optim.Optimizer]]:
    """{name: torch.optim class} for every name of OPTIMIZER_NAMES."""
    import torch

    return {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "radam": torch.optim.RAdam}


def check_optimizer(
    name: str, learning_rate: float, betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-8
) -> None:
    """ValueError naming the bad field for an unknown optimizer, β outside [0, 1), ε or learning rate ≤ 0
    (standard library only: `TrainingOptions` runs it before torch is imported)."""
    if name not in OPTIMIZER_NAMES:
        raise ValueError(f"optimizer={name!r} is unknown; valid: {', '.join(OPTIMIZER_NAMES)}")
    for field, value in (("adam_beta1", betas[0]), ("adam_beta2", betas[1])):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{field}={value} must lie in [0, 1)")
    if not eps > 0:
        raise ValueError(f"adam_epsilon={eps} must be > 0")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate={learning_rate} must be > 0")


def optimizer_cls_and_kwargs(
    name: str, learning_rate: float, betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-8
) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """(optimizer class, kwargs) for `Trainer(optimizer_cls_and_kwargs=...)`. The Trainer adds the parameter
    groups (with its weight decay) but not the learning rate, so the peak `learning_rate` is in the kwargs (the
    schedule scales it). ValueError naming the bad field otherwise."""
    check_optimizer(name, learning_rate, betas, eps)
    beta1, beta2 = betas
    return optimizer_classes()[name], {
        "lr": float(learning_rate),
        "betas": (float(beta1), float(beta2)),
        "eps": float(eps),
    }
