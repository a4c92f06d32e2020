"""Saving and resuming an FSDP2-sharded model (`train --fsdp`, `sharding.py`) through the Trainer: `ShardedSaves`.

A sharded model is not wrapped in DDP (the Trainer is told the model owns its placement and gradient reduction);
its saves are gathered into a full model (and, in checkpoints, a full optimizer state) written by rank 0 as one
process writes them, and resuming loads both back into the shards. An unsharded model takes the Trainer's own
paths unchanged.

Why not accelerate's FSDP2 (read in accelerate 1.15): its plugin engages only where `AcceleratorState` sets
``DistributedType.FSDP``, which happens for accelerator devices alone (the MULTI_GPU / NPU / XPU ... branch of
`state.py`); on a CPU with gloo the type stays MULTI_CPU and the plugin is ignored, so CPU runs and our CI's FSDP
tests would take a second path. Its checkpoints (`save_fsdp_model`) are DCP shards or a ``pytorch_model_fsdp.bin``,
not a `save_pretrained` directory that loads in one process, and its full state dict (`Accelerator.get_state_dict`,
gated on ``is_fsdp2``) is the same `torch.distributed.checkpoint.state_dict` call `sharding.full_state_dict` makes.
Its wrap policy is the one `sharding.shard_units` uses (the model's `_no_split_modules`).

Overrides the public `save_model` and the Trainer's private `_save_optimizer_and_scheduler`,
`_load_from_checkpoint`, `_load_optimizer_and_scheduler`, and calls its private `_save` (each named in
tests/model/test_transformers_surfaces.py, with `OPTIMIZER_NAME` / `SCHEDULER_NAME`).
"""

from __future__ import annotations

import os
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME

from .sharding import full_optimizer_state_dict, full_state_dict, is_sharded, load_full_checkpoint, own_class


class ShardedSaves(Trainer):
    """Full-model saves and resumes of an FSDP2-sharded model; the Trainer's own for any other."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if is_sharded(self.model):
            if self.is_fsdp_enabled:
                raise ValueError(
                    "the model is sharded by --fsdp (sharding.py) and the accelerate config enables FSDP too: "
                    "launch --fsdp with a DDP config (e.g. examples/accelerate/cpu_ddp_2proc.yaml) or torchrun, "
                    "or drop --fsdp to let accelerate's FSDP plugin shard"
                )
            # the model owns its placement and gradient reduction, so the Trainer must not wrap it in DDP — the
            # switch transformers uses for models it shards at load time
            self.is_distributed_loading_by_transformers = True

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """As the Trainer's; a sharded model is gathered (every rank takes part) and rank 0 writes a full
        `save_pretrained` directory."""
        if not is_sharded(self.model):
            super().save_model(output_dir, _internal_call)
            return
        state_dict = full_state_dict(self.model)
        if self.args.should_save:
            with own_class(self.model):
                self._save(output_dir, state_dict=state_dict)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        """A sharded model: the full optimizer state (gathered, written by rank 0) instead of rank 0's shard."""
        if not is_sharded(self.model):
            super()._save_optimizer_and_scheduler(output_dir)
            return
        state = full_optimizer_state_dict(self.model, self.optimizer)
        if self.args.should_save:
            torch.save(state, os.path.join(output_dir, OPTIMIZER_NAME))
            torch.save(self.lr_scheduler.state_dict(), os.path.join(output_dir, SCHEDULER_NAME))

    def _load_from_checkpoint(
        self, resume_from_checkpoint: str, model: torch.nn.Module | None = None
    ) -> None:
        if not is_sharded(self.model):
            super()._load_from_checkpoint(resume_from_checkpoint, model)
            return
        load_full_checkpoint(self.model, resume_from_checkpoint)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        if checkpoint is None or not is_sharded(self.model):
            super()._load_optimizer_and_scheduler(checkpoint)
            return
        load_full_checkpoint(self.model, checkpoint, optimizer=self.optimizer, optimizer_file=OPTIMIZER_NAME)
        scheduler = torch.load(os.path.join(checkpoint, SCHEDULER_NAME), weights_only=True)
        self.lr_scheduler.load_state_dict(scheduler)
