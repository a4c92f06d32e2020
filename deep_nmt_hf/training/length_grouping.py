"""Length-grouped batches from a preprocessed dataset's ``src_len`` column: `LengthColumnGrouping`.

The Trainer's ``group_by_length`` sampler measures every example's ``input_ids`` list; a dataset written by
`data.preprocessing` carries the lengths as a cheap int32 column, which `data.batching.LengthGroupedSampler` reads
into one numpy array instead. Overrides the Trainer's private `_get_train_sampler` (named in
tests/model/test_transformers_surfaces.py).
"""

from __future__ import annotations

from typing import Any

import datasets
import torch
from transformers import Trainer


class LengthColumnGrouping(Trainer):
    """``group_by_length`` over the ``src_len`` column where the dataset has one; the Trainer's sampler else."""

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
