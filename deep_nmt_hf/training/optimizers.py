"""Optimizer choice for training: Adam, AdamW or RAdam with β's and ε, as `Trainer(optimizer_cls_and_kwargs=...)`.

The papers differ here: ADMIN trains with RAdam (admin-very-deep-transformers-nmt, sec. 5), the others with Adam
(β2 0.98 in fairseq's Transformer recipe, 0.997 in prenorm-dlcl, ε 1e-9 in recurrent-shared-layers). Weight decay
is the Trainer's (`weight_decay`, put in the parameter groups): L2 for ``adam`` / ``radam``, decoupled for
``adamw``; with weight decay 0 (our default) Adam and AdamW are the same update.
"""

from __future__ import annotations

from typing import Any

import torch

OPTIMIZERS: dict[str, type[torch.optim.Optimizer]] = {
    "adam": torch.optim.Adam,
    "adamw": torch.optim.AdamW,
    "radam": torch.optim.RAdam,
}


def optimizer_cls_and_kwargs(
    name: str, learning_rate: float, betas: tuple[float, float] = (0.9, 0.98), eps: float = 1e-8
) -> tuple[type[torch.optim.Optimizer], dict[str, Any]]:
    """(optimizer class, kwargs) for `Trainer(optimizer_cls_and_kwargs=...)`. The Trainer adds the parameter
    groups (with its weight decay) but not the learning rate, so the peak `learning_rate` is in the kwargs (the
    schedule scales it). ValueError naming the bad field otherwise."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer={name!r} is unknown; valid: {', '.join(OPTIMIZERS)}")
    beta1, beta2 = betas
    for field, value in (("adam_beta1", beta1), ("adam_beta2", beta2)):
        if not 0.0 <= value < 1.0:
            raise ValueError(f"{field}={value} must lie in [0, 1)")
    if not eps > 0:
        raise ValueError(f"adam_epsilon={eps} must be > 0")
    if not learning_rate > 0:
        raise ValueError(f"learning_rate={learning_rate} must be > 0")
    return OPTIMIZERS[name], {
        "lr": float(learning_rate),
        "betas": (float(beta1), float(beta2)),
        "eps": float(eps),
    }
