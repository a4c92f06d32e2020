"""Token-budget training batches (fairseq's ``--max-tokens``) for the Trainer: `TokenBudgetBatches`.

With `max_tokens` the training loader draws its batches from `data.batching.TokenBudgetBatchSampler` (padded
source and target size ≤ max_tokens per process; every rank its own batches, reproducible from the seed) and
`per_device_train_batch_size` is ignored for training. `train_lengths` may hand over the (source, target) length
arrays; otherwise they are read from the dataset's token columns. Overrides the public `get_train_dataloader`
and calls the Trainer's private `_remove_unused_columns` (tests/model/test_transformers_surfaces.py names it).
"""

from __future__ import annotations

from typing import Any

import datasets
from transformers import Trainer


class TokenBudgetBatches(Trainer):
    """The Trainer's training loader, or with `max_tokens` one over `TokenBudgetBatchSampler` batches."""

    def __init__(
        self,
        *args: Any,
        max_tokens: int | None = None,
        train_lengths: tuple[Any, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.max_tokens = max_tokens
        self.train_lengths = train_lengths

    def get_train_dataloader(self) -> Any:
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
