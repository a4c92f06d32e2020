"""`DeepNMTTrainer`: `Seq2SeqTrainer` composed of one small piece per concern (issue #57 item 6).

Each piece is a `Trainer` subclass in its own module, overriding only the hooks of its concern, and the trainer
puts them together (cooperative `super()` calls, in the order of the bases below):

| piece | module | concern | Trainer hooks |
|---|---|---|---|
| `LossComponents` | `loss_components` | the model's loss components in the log | `adjust_loss`, `log` |
| `DivergenceGuard` | `divergence_guard` | a diverging batch skipped / the run stopped | `adjust_loss` |
| `TokenExactLoss` | `token_scaling` | the token mean over the global batch | `adjust_loss` |
| `LossHook` | `loss_hook` | the three above share one `compute_loss`, which calls their `adjust_loss` | `compute_loss` |
| `DeviceCounters` | `device_counters` | tokens seen and FLOPs without host syncs | `_track_num_input_tokens`, `_save_checkpoint`, `floating_point_ops`, `log` |
| `AtomicCheckpoints` | `atomic_checkpoints` | ``.saving/`` then rename; epoch names | `_save_checkpoint`, `_get_output_dir` |
| `ShardedSaves` | `sharded_saves` | FSDP2 saves and resumes as full models | `save_model`, `_save_optimizer_and_scheduler`, `_load_from_checkpoint`, `_load_optimizer_and_scheduler` |
| `TiedWeightsResume` | `tied_resume` | resuming a checkpoint that holds a tied embedding once | `_issue_warnings_after_load` |
| `TokenBudgetBatches` | `token_budget` | ``max_tokens`` batches | `get_train_dataloader` |
| `LengthColumnGrouping` | `length_grouping` | ``group_by_length`` from the ``src_len`` column | `_get_train_sampler` |

`PRIVATE_TRAINER_SURFACES` lists every private `Trainer` name the pieces override or call, with the parameters
they rely on; tests/model/test_transformers_surfaces.py has one test per name and checks that the trainer overrides no
other. Gradient accumulation (``gradient_accumulation_steps``, fairseq's ``--update-freq``) needs nothing more:
`TokenExactLoss` divides by the tokens of all accumulated micro-batches. `optimizer_cls_and_kwargs`
(`optimizers.optimizer_cls_and_kwargs`): Adam / AdamW / RAdam with β's and ε.
"""

from __future__ import annotations

from typing import Any

from transformers import Seq2SeqTrainer

from .atomic_checkpoints import AtomicCheckpoints
from .device_counters import DeviceCounters
from .divergence_guard import DivergenceGuard
from .length_grouping import LengthColumnGrouping
from .loss_components import LOSS_COMPONENTS, LossComponents
from .sharded_saves import ShardedSaves
from .tied_resume import TiedWeightsResume
from .token_budget import TokenBudgetBatches
from .token_scaling import TokenExactLoss

__all__ = ["LOSS_COMPONENTS", "PRIVATE_TRAINER_SURFACES", "DeepNMTTrainer"]

# every private Trainer method a piece overrides or calls -> the parameters it relies on (one test each)
PRIVATE_TRAINER_SURFACES: dict[str, tuple[str, ...]] = {
    "_save": ("output_dir", "state_dict"),  # called by ShardedSaves
    "_save_optimizer_and_scheduler": ("output_dir",),
    "_load_from_checkpoint": ("resume_from_checkpoint", "model"),
    "_load_optimizer_and_scheduler": ("checkpoint",),
    "_get_train_sampler": (),
    "_remove_unused_columns": ("dataset", "description"),  # called by TokenBudgetBatches
    "_get_output_dir": ("trial",),
    "_save_checkpoint": ("model", "trial"),
    "_issue_warnings_after_load": ("load_result",),
    "_track_num_input_tokens": ("inputs",),
}


class DeepNMTTrainer(
    LossComponents,
    DivergenceGuard,
    TokenExactLoss,
    DeviceCounters,
    AtomicCheckpoints,
    ShardedSaves,
    TiedWeightsResume,
    TokenBudgetBatches,
    LengthColumnGrouping,
    Seq2SeqTrainer,
):
    """`Seq2SeqTrainer` with token-exact loss scaling, a per-step divergence guard, atomic checkpoints, FSDP2 saves,
    token-budget and length-column batches, and logging of the model's loss components (see the module's table).

    `max_tokens` / `train_lengths`: `TokenBudgetBatches`; `optimizer_cls_and_kwargs`: the optimizer class and its
    arguments (Trainer takes it, Seq2SeqTrainer does not forward it)."""

    def __init__(
        self, *args: Any, optimizer_cls_and_kwargs: tuple[type, dict[str, Any]] | None = None, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        if optimizer_cls_and_kwargs is not None:  # what Trainer.create_optimizer reads
            self.optimizer_cls_and_kwargs = optimizer_cls_and_kwargs
