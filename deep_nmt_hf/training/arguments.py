"""The `Seq2SeqTrainingArguments` and callbacks of a `train` run, from its `TrainingOptions`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import Seq2SeqTrainingArguments, TrainerCallback

from ..model.configuration_deep_nmt import DeepNMTConfig
from ..model.transformers_compat import checkpointing_argument
from .admin_profiling import AdminProfilingCallback
from .divergence import DivergenceCallback
from .loader import loader_arguments
from .options import TrainingOptions, nmt_recipe
from .precision import trainer_precision_arguments


def training_arguments(
    options: TrainingOptions, staging: Path, evaluate_during: bool
) -> Seq2SeqTrainingArguments:
    """The Trainer's arguments: the NMT recipe, batches and accumulation, checkpoints (every `save_steps` or at
    every epoch's end), logging and evaluation."""
    by_epoch = options.save_strategy == "epoch"
    return Seq2SeqTrainingArguments(
        output_dir=str(staging),
        per_device_train_batch_size=options.batch_size,
        per_device_eval_batch_size=options.eval_batch_size or options.batch_size,
        gradient_accumulation_steps=options.gradient_accumulation_steps,
        **nmt_recipe(
            options.learning_rate,
            options.warmup_steps,
            options.max_grad_norm,
            options.train_sampling,
            betas=(options.adam_beta1, options.adam_beta2),
            epsilon=options.adam_epsilon,
            weight_decay=options.weight_decay,
        ),
        max_steps=options.max_steps,
        num_train_epochs=options.num_train_epochs,
        **{checkpointing_argument(): options.gradient_checkpointing},
        eval_strategy="steps" if evaluate_during else "no",
        eval_steps=options.eval_steps if evaluate_during else None,
        save_strategy="epoch" if by_epoch else "steps",
        save_steps=options.save_steps,
        save_total_limit=max(options.save_total_limit, options.average_last_checkpoints or 0),
        logging_strategy="steps",
        logging_steps=options.logging_steps,
        logging_first_step=True,
        logging_nan_inf_filter=False,  # the divergence guard must see NaN / inf losses
        include_num_input_tokens_seen="non_padding",
        predict_with_generate=True,
        generation_num_beams=options.num_beams,
        generation_max_length=options.max_target_length + 1,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),
        seed=options.seed,
        disable_tqdm=options.disable_tqdm,
        **loader_arguments(options.dataloader_workers),  # workers + pinned memory on CUDA (loader.py)
        # --torch-compile compiles the layers (regional compilation, compilation.py), not the Trainer's whole model
        **trainer_precision_arguments(options.precision),  # bf16 / fp16 autocast (precision.py)
    )


def training_callbacks(
    options: TrainingOptions, config: DeepNMTConfig, args: Seq2SeqTrainingArguments
) -> tuple[DivergenceCallback, list[TrainerCallback]]:
    """The divergence guard and, for ADMIN, the profiling callback (rank 0 profiles one batch of
    `admin_profile_tokens` tokens, or the first global sentence batch: the same ω for any number of processes)."""
    divergence = DivergenceCallback(options.divergence_factor, options.skip_nonfinite_batches)
    callbacks: list[Any] = [divergence]
    if config.residual_scaling == "admin":
        callbacks.append(
            AdminProfilingCallback(
                batch_size=options.batch_size * args.world_size,
                seed=options.seed,
                max_tokens=options.admin_profile_tokens,
                positions=options.admin_profile_positions,
            )
        )
    return divergence, callbacks
