"""`TrainingOptions` (everything `train` needs besides the config) and the Transformer NMT recipe as
Trainer arguments."""

from __future__ import annotations

import logging
import os
from dataclasses import MISSING, dataclass, field
from pathlib import Path
from typing import Any

from .precision import PRECISIONS, check_precision

logger = logging.getLogger(__name__)
TRAIN_SAMPLING = ("group_by_length", "random", "sequential")
ADAM_BETAS = (0.9, 0.98)
SAVE_STRATEGIES = ("steps", "epoch")


def option(default: Any, help: str, **flag: Any) -> Any:
    """A dataclass field with a command-line flag: `deep-nmt train` makes the flag from this field's metadata
    (`deep_nmt_hf/cli/flags.py`). `help` is the flag's help text; `flag` holds what the flag does not take from
    the field: flag="--lr" (the option string), dest, type, choices, metavar, flag_default (the flag's default
    where it is not the field's; None: unset unless given, so the preset's or recipe's value applies). A field
    without a default (MISSING) is a required flag."""
    return field(default=default, metadata={"help": help, **flag})


@dataclass
class TrainingOptions:
    """Everything `train` needs besides the model's config fields (those go in `config_overrides`).

    `data_source` is a directory of ``{split}.{lang}[.gz]`` files, a ``.jsonl`` file or a Hub dataset name
    (a `Path` is never looked up on the Hub). `valid_split=None` picks the first of valid / val / validation /
    dev that exists (no evaluation if none does). At the end the whole validation split (unless
    `score_valid=False`) and `test_split` (when given) are translated and scored with beam search: only their
    first `final_eval_samples` sentences when that is set, none at all when it is 0. `max_steps`
    > 0 overrides `num_train_epochs`. `eval_steps=None` evaluates only once, at the end. `tokenizer_dir` loads
    a saved tokenizer instead of training a BPE tokenizer of `vocab_size` on the training split.

    `batch_size` is per process: under `accelerate launch` / torchrun with W processes one optimizer step
    sees a global batch of W × `batch_size` sentence pairs. `train_sampling` is the Trainer's sampler:
    ``group_by_length`` (default; batches of similar length, less padding) or ``random`` / ``sequential``
    (then W processes × `batch_size` see exactly the pairs one process sees with W × `batch_size`).
    `divergence_factor` and `skip_nonfinite_batches` configure the `DivergenceCallback`.

    `fsdp` shards parameters, gradients and optimizer state over the processes with FSDP2 (`sharding.py`;
    needs several processes; checkpoints hold the full model and optimizer state, as one process writes them).
    `torch_compile` compiles the model's repeated layers with `torch.compile` (regional compilation,
    `compilation.compile_regions`; not the Trainer's whole-model `torch_compile`), with `torch_compile_backend`
    (default inductor; e.g. ``aot_eager`` traces without generating code).

    Data path (`deep_nmt_hf.data.preprocessing`): the corpus, the trained tokenizer and the tokenized splits are
    cached on disk by fingerprint under `cache_dir` (default ``$DEEP_NMT_HF_CACHE`` or the `datasets` cache)
    and reused by the next run with the same data and settings; `num_proc` processes tokenize;
    `tokenizer_sample` trains the tokenizer on that many pairs drawn with `seed` (default: every pair).
    `streaming` reads the training split as an `IterableDataset` (no Arrow copy; shuffled in a buffer of
    `shuffle_buffer_size` pairs; needs `max_steps`).

    Recipe fields (issue #14; `TrainingOptions.from_recipe` fills them from `deep_nmt_hf.science.recipes`):
    `optimizer` (adam / adamw / radam) with `adam_beta1`, `adam_beta2`, `adam_epsilon`, `weight_decay`;
    `max_grad_norm` 0 = no clipping; `max_tokens` (fairseq's --max-tokens: token-budget batches per process
    instead of `batch_size` sentences); `length_penalty` and `length_penalty_form` ("fairseq" = Transformers'
    len^α, "gnmt" = ((5+len)/6)^α) saved in generation_config.json with `num_beams`;
    `average_last_checkpoints` N: the final model is the average of the last N checkpoints (if that many were
    written; `save_total_limit` is raised to N). `recipe` names the recipe the values came from (recorded).

    `gradient_accumulation_steps` (fairseq's ``--update-freq``): one optimizer step accumulates that many
    micro-batches (sentence or token-budget batches), so a step sees N × the per-process batch; the loss is the
    token mean over all of them (`DeepNMTTrainer`). `save_strategy` "steps" writes ``checkpoint-<step>`` every
    `save_steps`; "epoch" writes ``checkpoint-<step>-epoch<E>`` at the end of every epoch (fairseq's
    ``checkpoint<E>.pt``), and `average_last_checkpoints` then averages the last N epochs, as the papers do.
    `admin_profile_tokens` / `admin_profile_positions` choose ADMIN's profiling batch (`admin.py`).

    `precision` (``fp32`` / ``bf16`` / ``fp16``; None: the recipe's, else fp32) is the Trainer's mixed precision:
    autocast in bf16 or fp16 with fp32 weights, fp16 with dynamic loss scaling; `train` resolves None and checks
    the hardware (`precision.py`: a recipe's fp16 falls back to fp32 without CUDA, an explicit one is an error).
    """

    # A field with `option(...)` has a `deep-nmt train` flag made from it (cli/flags.py): its help text,
    # choices and the flag's default live here, once; cli/train.py only places the flags. This module stays
    # importable without torch: the parser reads these fields before the package is imported.
    output_dir: str = option(MISSING, "where the trained model is saved", type=Path)
    # data_source's flags, --data-dir / --data / --dataset, are shared with evaluate (cli/common.py)
    data_source: str | os.PathLike[str]
    src_lang: str = option(MISSING, "source language code (file suffix / JSON key)")
    tgt_lang: str = option(MISSING, "target language code (file suffix / JSON key)")
    train_split: str = option("train", "training split name")
    valid_split: str | None = option(
        None, "validation split name (default: the first of valid, val, validation, dev found)"
    )
    test_split: str | None = option(None, "optional split scored at the end (reported in metrics.json)")
    variant: str = "deep_nmt"  # --variant: its help lists the registered variants (cli/train.py)
    preset: str | None = None  # --preset: a shape preset, or a paper preset that sets several fields
    tokenizer_dir: str | None = option(
        None, "load this saved tokenizer instead of training one", flag="--tokenizer", type=Path
    )
    vocab_size: int = option(8000, "joint BPE vocabulary size (when training one)")
    max_source_length: int = option(128, "source tokens kept (longer: truncated)")
    max_target_length: int = option(128, "target tokens kept (longer: truncated)")
    batch_size: int = option(32, "sentence pairs per training batch")
    eval_batch_size: int | None = option(None, "sentences per evaluation batch (default: --batch-size)")
    learning_rate: float = option(
        5e-4, "peak learning rate (default: 5e-4, or the recipe's)", flag="--lr", flag_default=None
    )
    warmup_steps: int = option(
        4000, "linear warmup, then inverse square root (default: 4000, or the recipe's)", flag_default=None
    )
    max_steps: int = option(-1, "optimizer steps (> 0 overrides --epochs)")
    num_train_epochs: float = option(
        10.0,
        "training epochs when --max-steps is not set (default: 10, or the preset's)",
        flag="--epochs",
        flag_default=None,
    )
    eval_steps: int | None = option(None, "evaluate (beam search, BLEU) every N steps (default: at end)")
    save_steps: int = option(1000, "write a checkpoint every N steps")
    save_total_limit: int = option(2, "checkpoints kept")
    logging_steps: int = option(50, "log the training loss every N steps")
    max_eval_samples: int | None = option(500, "validation sentences used during training")
    max_train_samples: int | None = option(None, "use only the first N training pairs")
    num_beams: int = option(
        4, "beam size for evaluation and generation_config (default: 4, or the recipe's)", flag_default=None
    )
    score_valid: bool = True
    final_eval_samples: int | None = option(
        None,
        "score only the first N sentences of the validation / test split after training (default: all; "
        "0 = none)",
        metavar="N",
    )
    seed: int = option(42, "random seed")
    label_smoothing: float = option(
        0.1, "label smoothing of the model's loss (default: 0.1, or the recipe's)", flag_default=None
    )
    max_grad_norm: float = option(
        1.0, "gradient clipping norm, 0 = no clipping (default: 1.0, or the recipe's)", flag_default=None
    )
    gradient_checkpointing: bool = option(False, "recompute activations in backward to save memory")
    overwrite: bool = option(False, "replace an existing output directory")
    resume: bool = option(False, "continue from the checkpoints of a failed run")
    keep_checkpoints: bool = option(False, "keep checkpoint-* dirs in the output")
    disable_tqdm: bool | None = None  # --no-progress
    train_sampling: str = option(
        "group_by_length",
        "training sampler: group_by_length (similar lengths per batch; a numpy index array, 8 bytes a "
        "pair), random (torch's sampler: a Python list of the corpus per epoch) or sequential; --batch-size is per "
        "process (global batch = processes x --batch-size); --max-tokens replaces it",
        choices=TRAIN_SAMPLING,
    )
    divergence_factor: float | None = option(
        None, "stop when a step's loss exceeds this factor x the mean of the previous 20 steps (> 1)"
    )
    skip_nonfinite_batches: int = option(
        0,
        "skip up to N batches with a NaN/inf loss (zero gradient; counted in metrics.json) before stopping",
        metavar="N",
    )
    fsdp: bool = option(
        False,
        "shard parameters, gradients and optimizer state over the processes (FSDP2 fully_shard; "
        "needs torchrun / accelerate launch with 2+ processes)",
    )
    torch_compile: bool = option(
        False,
        "compile each repeated encoder / decoder layer once with torch.compile and reuse it for every layer "
        "(regional compilation, training/compilation.py: compile time does not grow with depth; batch and "
        "length dimensions dynamic). Pays on a GPU for runs of thousands of steps, where the eager step is bound "
        "by the host launching kernels; rarely on a CPU or for short runs (compiling takes seconds to minutes)",
    )
    torch_compile_backend: str | None = option(
        None,
        "torch.compile backend for --torch-compile (default inductor; aot_eager traces without codegen)",
        metavar="NAME",
    )
    # the data path's flags (--num-proc, --tokenizer-sample, --cache-dir) are shared with `deep-nmt
    # preprocess` and written there (cli/preprocess.py)
    num_proc: int | None = None
    tokenizer_sample: int | None = None
    cache_dir: str | None = None
    streaming: bool = option(
        False,
        "stream the training split (datasets IterableDataset, no Arrow copy, shuffle buffer); needs "
        "--max-steps",
    )
    shuffle_buffer_size: int = option(10_000, "pairs in the --streaming shuffle buffer")
    recipe: str | None = option(
        None,
        "a paper's training recipe by name (admin, dsinit_matt, dlcl, shared_layers, deep_decoder, marian): "
        "variant, optimizer, lr, warmup, dropouts, token batches, clipping, beam, length penalty, averaging, "
        "embedding sharing; printed at start; flags given explicitly win",
    )
    optimizer: str = option(
        "adam",
        "optimizer (default: adam, or the recipe's)",
        choices=("adam", "adamw", "radam"),
        flag_default=None,
    )
    adam_beta1: float = option(ADAM_BETAS[0], "β1 (default: 0.9, or the recipe's)", flag_default=None)
    adam_beta2: float = option(ADAM_BETAS[1], "β2 (default: 0.98, or the recipe's)", flag_default=None)
    adam_epsilon: float = option(1e-8, "ε (default: 1e-8, or the recipe's)", flag_default=None)
    weight_decay: float = option(0.0, "weight decay (default: 0, or the recipe's)", flag_default=None)
    max_tokens: int | None = option(
        None,
        "token-budget batches (fairseq's --max-tokens): padded source and target size per batch and "
        "process <= N; replaces --batch-size for training (default: sentence batches, or the recipe's)",
    )
    length_penalty: float = option(
        1.0, "beam-search length penalty α (default: 1.0, or the recipe's)", flag_default=None
    )
    length_penalty_form: str = option(
        "fairseq",
        "fairseq = Transformers' len^α, gnmt = ((5+len)/6)^α (default: fairseq, or the recipe's)",
        choices=("fairseq", "gnmt"),
        flag_default=None,
    )
    average_last_checkpoints: int | None = option(
        None,
        "final model = average of the last N checkpoints (default: none, or the recipe's)",
        metavar="N",
    )
    gradient_accumulation_steps: int = option(
        1,
        "accumulate N batches per optimizer step (fairseq's --update-freq; works with --max-tokens, DDP and "
        "--fsdp): a step sees N x the per-process batch, the loss is the token mean over all of them (default: 1, "
        "or the recipe's)",
        flag="--update-freq",
        dest="gradient_accumulation_steps",
        metavar="N",
        flag_default=None,
    )
    save_strategy: str = option(
        "steps",
        "steps: checkpoint-STEP every --save-steps; epoch: checkpoint-STEP-epochE at every epoch's end, as "
        "fairseq's checkpointE.pt (default: steps, or the recipe's)",
        choices=SAVE_STRATEGIES,
        flag_default=None,
    )
    admin_profile_tokens: int | None = 8192  # --admin-profile-tokens: 0 means None (cli/schedule_flags.py)
    admin_profile_positions: str = option(
        "all",
        "ADMIN's profiling variances over every position, padding included (all: the authors' code, the "
        "default) or over real tokens only (non_pad)",
        choices=("all", "non_pad"),
        flag_default=None,
    )
    # fp32 / bf16 / fp16; None: the recipe's, else fp32 (precision.py); --bf16 / --fp16: aliases (cli/train.py)
    precision: str | None = option(
        None,
        "mixed precision (the Trainer's, via accelerate): bf16 or fp16 autocast with fp32 weights, fp16 with "
        "dynamic loss scaling (needs a CUDA GPU); default: the recipe's (the papers' fp16 falls back to fp32 "
        "without CUDA, with a warning), else fp32",
        choices=PRECISIONS,
    )
    # collating processes; None: 2 on CUDA, 0 without (loader.py)
    dataloader_workers: int | None = option(
        None, "processes that collate training batches (default: 2 on CUDA, 0 on CPU)", metavar="N"
    )

    @classmethod
    def from_recipe(cls, recipe: str | None, **explicit: Any) -> TrainingOptions:
        """Options from a named recipe (`deep_nmt_hf.science.recipes`), then `explicit` fields on top (they win):
        the recipe layer of `resolution.resolve_run`, which decides what else lies between the two."""
        from ..science.recipes import recipe_options

        values = recipe_options(recipe) if recipe is not None else {}
        return cls(**{**values, **explicit, "recipe": recipe})

    def __post_init__(self) -> None:
        positive = ("vocab_size", "max_source_length", "max_target_length", "batch_size", "save_steps")
        positive += ("save_total_limit", "logging_steps", "num_beams", "shuffle_buffer_size")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        optional = ("eval_steps", "eval_batch_size", "max_eval_samples", "max_train_samples", "num_proc")
        for name in (*optional, "tokenizer_sample"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}={value!r} must be a positive integer (or None)")
        value = self.final_eval_samples
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ValueError(
                f"final_eval_samples={value!r} must be an integer >= 0 (0: no final scoring) or None"
            )
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps} must be >= 0")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate} must be > 0")
        steps = self.max_steps
        if isinstance(steps, bool) or not isinstance(steps, int) or steps == 0 or steps < -1:
            raise ValueError(f"max_steps={steps!r} must be a positive integer (or -1, unset: train --epochs)")
        if self.max_steps <= 0 and not self.num_train_epochs > 0:
            raise ValueError("give max_steps > 0 or num_train_epochs > 0")
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"label_smoothing={self.label_smoothing} must lie in [0, 1)")
        if self.train_sampling not in TRAIN_SAMPLING:
            raise ValueError(f"train_sampling={self.train_sampling!r}; valid: {', '.join(TRAIN_SAMPLING)}")
        if self.divergence_factor is not None and not self.divergence_factor > 1.0:
            raise ValueError(
                f"divergence_factor={self.divergence_factor} must be > 1 (or None: no spike check)"
            )
        if self.streaming and self.max_steps <= 0:
            raise ValueError(
                "streaming=True needs max_steps > 0: a streamed corpus has no length, so epochs cannot be "
                "counted (give --max-steps)"
            )
        if self.max_grad_norm < 0:
            raise ValueError(f"max_grad_norm={self.max_grad_norm} must be >= 0 (0: no clipping)")
        check_schedule(self)
        for name in ("max_tokens", "average_last_checkpoints", "admin_profile_tokens"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}={value!r} must be a positive integer (or None)")
        if self.weight_decay < 0:
            raise ValueError(f"weight_decay={self.weight_decay} must be >= 0")
        from ..model.registry import LENGTH_PENALTY_FORMS
        from .optimizers import check_optimizer

        check_optimizer(
            self.optimizer, self.learning_rate, (self.adam_beta1, self.adam_beta2), self.adam_epsilon
        )
        if self.length_penalty_form not in LENGTH_PENALTY_FORMS:
            raise ValueError(
                f"length_penalty_form={self.length_penalty_form!r}; valid: {', '.join(LENGTH_PENALTY_FORMS)}"
            )
        if self.recipe is not None:
            from ..science.recipes import get_recipe

            get_recipe(self.recipe)
        if isinstance(self.skip_nonfinite_batches, bool) or self.skip_nonfinite_batches < 0:
            raise ValueError(
                f"skip_nonfinite_batches={self.skip_nonfinite_batches!r} must be an integer >= 0"
            )
        if self.torch_compile_backend is not None and not self.torch_compile:
            raise ValueError(
                f"torch_compile_backend={self.torch_compile_backend!r} needs torch_compile=True (--torch-compile)"
            )
        if self.fsdp and self.skip_nonfinite_batches:
            raise ValueError(
                f"skip_nonfinite_batches={self.skip_nonfinite_batches} is not available with fsdp=True (a skipped "
                "batch would leave the other ranks waiting in FSDP's gradient reduce-scatter); use 0"
            )
        check_precision(self.precision)
        if self.fsdp and self.precision == "fp16":
            raise ValueError(
                "precision='fp16' is not available with fsdp=True (the loss scaler would find overflows in each "
                "rank's shard alone, so the ranks could disagree on skipping a step); use bf16 or fp32"
            )


def option_default(name: str) -> Any:
    """The default of `TrainingOptions` field `name`: the one place a run option's default is written (the CLI,
    `build_config` and `nmt_recipe` read it from here)."""
    field_ = TrainingOptions.__dataclass_fields__[name]
    if field_.default is MISSING:
        raise KeyError(f"TrainingOptions.{name} has no default (a required field)")
    return field_.default


def default_max_positions(max_source_length: int, max_target_length: int) -> int:
    """A run's `max_position_embeddings` when not given: max(256, both maximum lengths)."""
    return max(256, max_source_length, max_target_length)


# the tokens ADMIN's profiling pass reads (admin_profiling.admin_profile's `positions`)
PROFILE_POSITIONS = ("all", "non_pad")


def check_schedule(options: TrainingOptions) -> None:
    """Validate gradient accumulation, the checkpoint strategy and ADMIN's profiling choices."""
    value = options.gradient_accumulation_steps
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"gradient_accumulation_steps={value!r} (--update-freq) must be a positive integer (1: no accumulation)"
        )
    if options.save_strategy not in SAVE_STRATEGIES:
        raise ValueError(f"save_strategy={options.save_strategy!r}; valid: {', '.join(SAVE_STRATEGIES)}")
    if options.admin_profile_positions not in PROFILE_POSITIONS:
        raise ValueError(
            f"admin_profile_positions={options.admin_profile_positions!r}; valid: {', '.join(PROFILE_POSITIONS)}"
        )


def nmt_recipe(
    learning_rate: float,
    warmup_steps: int,
    max_grad_norm: float = option_default("max_grad_norm"),
    sampling: str = option_default("train_sampling"),
    betas: tuple[float, float] = ADAM_BETAS,
    epsilon: float = option_default("adam_epsilon"),
    weight_decay: float = option_default("weight_decay"),
) -> dict[str, Any]:
    """The Transformer NMT recipe as `Seq2SeqTrainingArguments` fields: Adam β = (0.9, 0.98) without weight
    decay, linear warmup then inverse square root, gradient clipping (0: none), length-grouped batches. Label
    smoothing stays 0 here: it is in the model's loss (config.label_smoothing), so extra loss terms are kept.
    The optimizer class itself is chosen with `optimizers.optimizer_cls_and_kwargs`."""
    return dict(
        learning_rate=learning_rate,
        lr_scheduler_type="inverse_sqrt",
        warmup_steps=warmup_steps,
        adam_beta1=betas[0],
        adam_beta2=betas[1],
        adam_epsilon=epsilon,
        weight_decay=weight_decay,
        max_grad_norm=max_grad_norm,
        label_smoothing_factor=0.0,
        train_sampling_strategy=sampling,  # 4.x: group_by_length=True
    )
