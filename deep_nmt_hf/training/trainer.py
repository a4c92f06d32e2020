"""`DeepNMTTrainer`: Seq2SeqTrainer with token-exact loss scaling, divergence guard, atomic checkpoints."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

import datasets
import torch
from transformers import (
    Seq2SeqTrainer,
)
from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, rotate_checkpoints

from ..data.atomic import apply_umask_modes
from .averaging import checkpoint_name
from .divergence import DivergenceCallback
from .sharding import (
    full_optimizer_state_dict,
    full_state_dict,
    is_sharded,
    load_full_checkpoint,
    own_class,
)
from .staging import SAVING_DIR, _fsync_tree

logger = logging.getLogger(__name__)

LOSS_COMPONENTS = ("nll_loss", "ddr_loss", "ald_loss")


class DeepNMTTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` with token-exact loss scaling, a per-step divergence guard, atomic checkpoints and
    logging of the model's loss components.

    - Loss scaling: the model returns the mean over its batch's target tokens. Under several processes (or
      gradient accumulation) the Trainer passes `num_items_in_batch`, the target tokens of the whole global
      batch; the loss is rescaled by (local tokens / global tokens) so that the summed gradient equals the
      gradient of the token mean over the global batch — the same as one process with the whole batch.
    - Divergence guard: every training micro-batch's loss is handed to the `DivergenceCallback` among the
      callbacks (if any); a batch it decides to skip contributes a zero gradient. It also watches the
      accelerator, so that under fp16 a step the loss scaler skipped counts as an overflow, not a divergence.
    - Checkpoints are written into ``<output_dir>/.saving/checkpoint-N`` and renamed to
      ``<output_dir>/checkpoint-N`` only when every file (and every rank's RNG state) is written, so a crash
      mid-save never leaves a ``checkpoint-N`` that `--resume` or `from_pretrained` would take for complete.
      With ``save_strategy="epoch"`` the name also says the epoch it closes: ``checkpoint-N-epochE``
      (`averaging.checkpoint_name`; fairseq's ``checkpointE.pt``), which `average --last-epochs` reads.
    - Gradient accumulation (``gradient_accumulation_steps``, fairseq's ``--update-freq``) needs nothing more: the
      Trainer counts the target tokens of all accumulated micro-batches (of every rank) into `num_items_in_batch`,
      and the loss scaling below divides each micro-batch's token sum by that total, as fairseq divides the summed
      loss of its ``update_freq`` batches by their total tokens.
    - `optimizer_cls_and_kwargs` (`optimizers.optimizer_cls_and_kwargs`): Adam / AdamW / RAdam with β's and ε.
    - `max_tokens` (fairseq's ``--max-tokens``): the training batches come from `batching.TokenBudgetBatchSampler`
      (padded source and target size ≤ max_tokens per process; every rank its own batches, reproducible from
      the seed); `per_device_train_batch_size` is then ignored for training. `train_lengths` may hand over the
      (source, target) length arrays; otherwise they are read from the dataset's token columns.
    - Models with collapse-reducing losses (deep-decoder-cad-crt eq. 9-11) return `nll_loss`, `ddr_loss` and
      `ald_loss` next to the total `loss`; every training log line then carries each component's mean over
      the steps since the previous log line, under those names.
    - An FSDP2-sharded model (`train --fsdp`, sharding.py) is not wrapped in DDP; its saves are gathered into a
      full model (and a full optimizer state in checkpoints) written by rank 0, and resuming loads them back into
      the shards.
    - Length-grouped batches read the ``src_len`` column of a preprocessed dataset (`preprocessing`), a
      cheap int32 column, instead of loading every ``input_ids`` list to measure it.
    """

    def __init__(
        self,
        *args: Any,
        max_tokens: int | None = None,
        train_lengths: tuple[Any, Any] | None = None,
        optimizer_cls_and_kwargs: tuple[type, dict[str, Any]] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        # Trainer takes it, Seq2SeqTrainer does not forward it: set what Trainer.create_optimizer reads
        if optimizer_cls_and_kwargs is not None:
            self.optimizer_cls_and_kwargs = optimizer_cls_and_kwargs
        self.max_tokens = max_tokens
        self.train_lengths = train_lengths
        # host syncs (issue #48): the loss components and the tokens seen add up as device tensors and are read
        # only when a line is logged (or a checkpoint written), not every micro-batch
        self._component_sums: dict[str, torch.Tensor] = {}
        self._component_counts: dict[str, int] = {}
        self._tokens_pending: torch.Tensor | None = None
        self._flop_parameters: int | None = None
        self._saving_into: Path | None = None
        guards = [cb for cb in self.callback_handler.callbacks if isinstance(cb, DivergenceCallback)]
        self.divergence: DivergenceCallback | None = guards[0] if guards else None
        if self.divergence is not None:  # fp16: it reads the loss scaler's skipped steps
            self.divergence.watch(self.accelerator)
        if is_sharded(self.model):
            if self.is_fsdp_enabled:
                raise ValueError(
                    "the model is sharded by --fsdp (sharding.py) and the accelerate config enables FSDP too: "
                    "launch --fsdp with a DDP config (e.g. examples/accelerate/cpu_ddp_2proc.yaml) or torchrun, "
                    "or drop --fsdp to let accelerate's FSDP plugin shard"
                )
            # FSDP2 (sharding.py): the model owns its placement and gradient reduction, so the Trainer must not
            # wrap it in DDP — the switch transformers uses for models it shards at load time
            self.is_distributed_loading_by_transformers = True

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        """As the Trainer's; an FSDP2-sharded model is gathered (every rank takes part) and rank 0 writes a
        full `save_pretrained` directory."""
        if not is_sharded(self.model):
            super().save_model(output_dir, _internal_call)
            return
        state_dict = full_state_dict(self.model)
        if self.args.should_save:
            with own_class(self.model):
                self._save(output_dir, state_dict=state_dict)

    def _save_optimizer_and_scheduler(self, output_dir: str) -> None:
        """FSDP2: the full optimizer state (gathered, written by rank 0) instead of rank 0's shard."""
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

    def _get_train_sampler(self, train_dataset: Any = None) -> torch.utils.data.Sampler | None:
        dataset = self.train_dataset
        if (
            self.args.train_sampling_strategy == "group_by_length"
            and isinstance(dataset, datasets.Dataset)
            and "src_len" in dataset.column_names
        ):
            from ..data.batching import LengthGroupedSampler, length_column

            # one int32 column, no token lists; the order in one numpy array
            lengths = length_column(dataset, "src_len")
            return LengthGroupedSampler(
                lengths, self.args.train_batch_size * self.args.gradient_accumulation_steps
            )
        return super()._get_train_sampler(train_dataset)

    def compute_loss(
        self,
        model: torch.nn.Module,
        inputs: dict[str, Any],
        return_outputs: bool = False,
        num_items_in_batch: Any = None,
    ) -> Any:
        labels = inputs.get("labels")
        loss, outputs = super().compute_loss(
            model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch
        )
        if (
            num_items_in_batch is not None
            and self.model_accepts_loss_kwargs  # the Trainer then treats the loss as a sum / global tokens
            and labels is not None
            and self.compute_loss_func is None
        ):
            # the model's loss is a mean over this batch's tokens: make it (sum over this batch) / (tokens of
            # the global batch); the Trainer multiplies by the world size and DDP averages the gradients
            local_tokens = labels.ne(-100).sum().to(loss.device)
            loss = loss * (local_tokens / torch.as_tensor(num_items_in_batch, device=loss.device))
        if model.training and self.divergence is not None:
            raw = outputs.get("loss") if hasattr(outputs, "get") else None
            if raw is not None and self.divergence.observe(raw):
                # skip this batch: a zero loss that still reaches every parameter, so that DDP's gradient
                # all-reduce sees the same parameters on every rank
                loss = sum((p.sum() * 0.0 for p in model.parameters() if p.requires_grad), loss.new_zeros(()))
        if model.training and hasattr(outputs, "get"):
            for name in LOSS_COMPONENTS:
                value = outputs.get(name)
                if value is not None:
                    value = value.detach().float()
                    previous = self._component_sums.get(name)
                    self._component_sums[name] = value if previous is None else previous + value
                    self._component_counts[name] = self._component_counts.get(name, 0) + 1
        return (loss, outputs) if return_outputs else loss

    def get_train_dataloader(self) -> Any:
        """The Trainer's loader, or with `max_tokens` one over `TokenBudgetBatchSampler` batches."""
        if self.max_tokens is None:
            return super().get_train_dataloader()
        from torch.utils.data import DataLoader

        from ..data.batching import TokenBudgetBatchSampler, dataset_lengths

        if self.train_dataset is None:
            raise ValueError("Trainer: training requires a train_dataset.")
        lengths = self.train_lengths or dataset_lengths(self.train_dataset)
        sampler = TokenBudgetBatchSampler(
            *lengths,
            max_tokens=self.max_tokens,
            seed=self.args.seed,
            num_replicas=self.args.world_size,
            rank=self.args.process_index,
            # the collator's padding multiple (loader.PAD_MULTIPLE): the budget holds for the padded batch
            pad_to_multiple_of=getattr(self.data_collator, "pad_to_multiple_of", None) or 1,
            length_buckets=getattr(self.data_collator, "length_buckets", None),  # BucketPadding's (issue #55)
        )
        dataset = self.train_dataset
        if isinstance(dataset, datasets.Dataset):
            dataset = self._remove_unused_columns(dataset, description="Training")
        workers = self.args.dataloader_num_workers
        loader = self.accelerator.prepare(
            DataLoader(
                dataset,
                batch_sampler=sampler,
                collate_fn=self.data_collator,
                num_workers=workers,
                pin_memory=self.args.dataloader_pin_memory,
                persistent_workers=workers > 0 and self.args.dataloader_persistent_workers,
                prefetch_factor=self.args.dataloader_prefetch_factor if workers else None,
            )
        )
        # the sampler is already rank-aware: make accelerate's batch-sampler shard a passthrough (as the
        # Trainer does for its own rank-aware BatchRebalanceSampler)
        shard = getattr(loader, "batch_sampler", None)
        if shard is not None and getattr(shard, "batch_sampler", None) is sampler:
            shard.num_processes, shard.process_index = 1, 0
        return loader

    def _get_output_dir(self, trial: Any) -> str:
        if self._saving_into is not None:
            return str(self._saving_into)
        return super()._get_output_dir(trial)

    def _track_num_input_tokens(self, inputs: dict[str, Any]) -> None:
        """As the Trainer's, without its ``.item()`` (a device sync) every micro-batch: one process adds the
        count to a device tensor, read into `state.num_input_tokens_seen` when a line is logged or a checkpoint
        written (`_flush_tokens_seen`). Several processes keep the Trainer's per-step gather."""
        if self.args.include_num_input_tokens_seen == "no" or self.args.world_size > 1:
            super()._track_num_input_tokens(inputs)
            return
        if self.args.include_num_input_tokens_seen == "non_padding" and "attention_mask" in inputs:
            count = inputs["attention_mask"].sum()
        else:
            seen, self.state.num_input_tokens_seen = self.state.num_input_tokens_seen, 0
            super()._track_num_input_tokens(inputs)  # the Trainer's other counts (numel: no sync)
            count, self.state.num_input_tokens_seen = self.state.num_input_tokens_seen, seen
        count = torch.as_tensor(count, dtype=torch.int64, device=self.args.device)
        self._tokens_pending = count if self._tokens_pending is None else self._tokens_pending + count

    def _flush_tokens_seen(self) -> None:
        if self._tokens_pending is not None:
            self.state.num_input_tokens_seen += int(self._tokens_pending)
            self._tokens_pending = None

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """The Trainer's estimate (6 × input tokens × non-embedding parameters) with the parameter count taken
        once: `num_parameters` walks every module and parameter, host work on every micro-batch otherwise."""
        main_input = getattr(self.model, "main_input_name", "input_ids")
        if main_input not in inputs or not hasattr(self.model, "num_parameters"):
            return 0
        if self._flop_parameters is None:
            self._flop_parameters = self.model.num_parameters(exclude_embeddings=True)
        return 6 * inputs[main_input].numel() * self._flop_parameters

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        """The Trainer's checkpoint, written into ``.saving/`` and renamed into place when complete."""
        self._flush_tokens_seen()  # the saved TrainerState counts every token seen
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

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        """A checkpoint holds the shared embedding once (save_pretrained drops the stacks' `embed_tokens` and a
        tied `lm_head.weight`); loading it back is complete, not a "missing keys" case: tie and do not warn."""
        tied = getattr(self.model, "all_tied_weights_keys", None) or {}
        missing = [key for key in load_result.missing_keys if key not in tied]
        if len(missing) < len(load_result.missing_keys):
            self.model.tie_weights()
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        self._flush_tokens_seen()
        if "loss" in logs and self._component_counts:
            for name, total in self._component_sums.items():
                logs[name] = round(float(total) / self._component_counts[name], 4)
            self._component_sums.clear()
            self._component_counts.clear()
        super().log(logs, start_time)
