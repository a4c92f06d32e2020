"""Optimizer choice reaches the Trainer: class, lr, β's, ε, weight decay; max_grad_norm 0 means no clipping."""

from __future__ import annotations

import pytest
import torch
from factories import tiny_model
from transformers import Seq2SeqTrainingArguments

from deep_nmt_hf.training import DeepNMTTrainer, nmt_recipe
from deep_nmt_hf.training.optimizers import optimizer_cls_and_kwargs


@pytest.mark.parametrize(
    ("name", "cls"), [("adam", torch.optim.Adam), ("adamw", torch.optim.AdamW), ("radam", torch.optim.RAdam)]
)
def test_trainer_builds_the_chosen_optimizer(tmp_path, name: str, cls: type) -> None:
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        report_to="none",
        use_cpu=True,
        **nmt_recipe(2e-3, 10, 0.0, betas=(0.9, 0.997), epsilon=1e-9, weight_decay=0.01),
    )
    assert args.max_grad_norm == 0.0  # the Trainer clips only when max_grad_norm > 0
    trainer = DeepNMTTrainer(
        model=tiny_model(),
        args=args,
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs(name, 2e-3, (0.9, 0.997), 1e-9),
    )
    optimizer = trainer.create_optimizer()
    assert type(optimizer) is cls
    groups = optimizer.param_groups
    assert all(g["lr"] == 2e-3 and g["betas"] == (0.9, 0.997) and g["eps"] == 1e-9 for g in groups)
    assert sorted({g["weight_decay"] for g in groups}) == [
        0.0,
        0.01,
    ]  # the Trainer's groups (no decay on norms)


def test_bad_optimizer_values_name_the_field() -> None:
    with pytest.raises(ValueError, match="optimizer='sgd' is unknown; valid: adam, adamw, radam"):
        optimizer_cls_and_kwargs("sgd", 1e-3)
    with pytest.raises(ValueError, match="adam_beta2=1.0"):
        optimizer_cls_and_kwargs("adam", 1e-3, (0.9, 1.0))
    with pytest.raises(ValueError, match="adam_epsilon=0"):
        optimizer_cls_and_kwargs("adam", 1e-3, (0.9, 0.98), 0)
