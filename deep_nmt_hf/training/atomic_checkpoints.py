"""Atomic checkpoints for the Trainer: `AtomicCheckpoints`.

A checkpoint is written into ``<output_dir>/.saving/checkpoint-N`` and renamed to ``<output_dir>/checkpoint-N``
only when every file (and every rank's RNG state) is written, so a crash mid-save never leaves a
``checkpoint-N`` that `--resume` or `from_pretrained` would take for complete. With ``save_strategy="epoch"`` the
name also says the epoch it closes: ``checkpoint-N-epochE`` (`averaging.checkpoint_name`; fairseq's
``checkpointE.pt``), which `average --last-epochs` reads. Rotation (`save_total_limit`) runs after the rename.

Overrides the Trainer's private `_save_checkpoint` (the whole save) and `_get_output_dir` (where the Trainer's own
save writes meanwhile); both are named in tests/model/test_transformers_surfaces.py, with `rotate_checkpoints` and
`PREFIX_CHECKPOINT_DIR`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch
from transformers import Trainer
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from ..data.atomic import apply_umask_modes
from .averaging import checkpoint_name
from .staging import SAVING_DIR, _fsync_tree


class AtomicCheckpoints(Trainer):
    """The Trainer's checkpoints, each written into ``.saving/`` and renamed into place when complete."""

    _saving_into: Path | None = None

    def _get_output_dir(self, trial: Any) -> str:
        if self._saving_into is not None:
            return str(self._saving_into)
        return super()._get_output_dir(trial)

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        run_dir = Path(super()._get_output_dir(trial))
        scratch = run_dir / SAVING_DIR
        name = f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        if self.args.should_save:
            shutil.rmtree(scratch, ignore_errors=True)  # leftovers of a crash mid-save
            scratch.mkdir(parents=True, exist_ok=True)
        self.accelerator.wait_for_everyone()
        self._saving_into = scratch
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self._saving_into = None
        self.accelerator.wait_for_everyone()  # every rank has written its part (RNG state, shards)
        if self.args.should_save:
            target = run_dir / checkpoint_name(self.state.global_step, self._epoch_of_save())
            if target.exists():
                shutil.rmtree(target)
            apply_umask_modes(scratch / name)  # safetensors writes 0600 files whatever the umask
            _fsync_tree(scratch / name)
            os.replace(scratch / name, target)
            shutil.rmtree(scratch, ignore_errors=True)
            rotate_checkpoints(
                output_dir=str(run_dir),
                save_total_limit=self.args.save_total_limit,
                best_model_checkpoint=self.state.best_model_checkpoint,
                use_mtime=True,
            )
        self.accelerator.wait_for_everyone()

    def _epoch_of_save(self) -> int | None:
        """The epoch a checkpoint written now closes (save_strategy "epoch"), else None."""
        if str(getattr(self.args.save_strategy, "value", self.args.save_strategy)) != "epoch":
            return None
        return int(round(self.state.epoch or 0))
