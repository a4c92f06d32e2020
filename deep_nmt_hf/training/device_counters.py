"""The Trainer's per-micro-batch counters without host syncs (issue #48): `DeviceCounters`.

- tokens seen: the Trainer reads its count with ``.item()`` (a device sync) on every micro-batch; here one process
  adds it to a device tensor, read into `state.num_input_tokens_seen` when a line is logged or a checkpoint
  written. Several processes keep the Trainer's per-step gather.
- floating-point operations: the Trainer's estimate (6 × input tokens × non-embedding parameters) with the
  parameter count taken once (`num_parameters` walks every module and parameter).

Overrides the Trainer's private `_track_num_input_tokens` and `_save_checkpoint` (to count every token into the
saved TrainerState) and the public `floating_point_ops` and `log`; the private names are in
tests/model/test_transformers_surfaces.py.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer


class DeviceCounters(Trainer):
    """Tokens seen counted on the device, the FLOP estimate's parameter count taken once."""

    _tokens_pending: torch.Tensor | None = None
    _flop_parameters: int | None = None

    def _track_num_input_tokens(self, inputs: dict[str, Any]) -> None:
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
        main_input = getattr(self.model, "main_input_name", "input_ids")
        if main_input not in inputs or not hasattr(self.model, "num_parameters"):
            return 0
        if self._flop_parameters is None:
            self._flop_parameters = self.model.num_parameters(exclude_embeddings=True)
        return 6 * inputs[main_input].numel() * self._flop_parameters

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        self._flush_tokens_seen()  # the saved TrainerState counts every token seen
        super()._save_checkpoint(model, trial)

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        self._flush_tokens_seen()
        super().log(logs, start_time)
