"""Training and evaluation: `Seq2SeqTrainer` wiring, sacreBLEU metrics, batched translation.

No hand-written training loop: `train` prepares data, tokenizer and model, then hands everything to
`transformers.Seq2SeqTrainer` with the usual Transformer NMT recipe (Adam β = (0.9, 0.98), no weight decay,
inverse-square-root schedule after a linear warmup, length-grouped batches, label smoothing 0.1).

Label smoothing lives in the model's own loss (`config.label_smoothing`), never in the Trainer
(`label_smoothing_factor` stays 0): the Trainer's label smoother would recompute the loss from the logits and
drop any extra training loss the model adds in `forward`.

Metrics are sacreBLEU's BLEU, chrF and TER (`sacrebleu.metrics`, `corpus_score`) with their signatures, so
that every reported number says how it was computed.

Output directory: everything is written into a staging sibling ``<output_dir>.partial`` (the Trainer's
checkpoints too) and renamed to ``output_dir`` only when the model, tokenizer, generation config and
``metrics.json`` are complete, so a crash never leaves a half-written model directory. If a run fails after
writing checkpoints, the staging directory is kept so that ``resume=True`` can continue it.
"""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import json
import logging
import math
import os
import platform
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import datasets
import numpy as np
import torch
from sacrebleu.metrics import BLEU, CHRF, TER
from tqdm.auto import tqdm
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    EvalPrediction,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    set_seed,
)
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR, get_last_checkpoint, rotate_checkpoints

from . import MODEL_TYPES, VARIANTS
from .admin import AdminProfilingCallback
from .configuration_deep_nmt import DeepNMTConfig
from .data import DataError, ReadReport, available_splits, load_parallel
from .modeling_deep_nmt import default_generation_config
from .tokenization import special_token_ids, train_tokenizer

logger = logging.getLogger(__name__)

__all__ = [
    "nmt_recipe",
    "DeepNMTTrainer",
    "DivergenceCallback",
    "TrainingDivergedError",
    "TrainingOptions",
    "build_config",
    "compute_translation_metrics",
    "evaluate_model",
    "load_split",
    "make_compute_metrics",
    "resolve_variant",
    "staged_output_dir",
    "tokenize_dataset",
    "train",
    "translate",
]

METRICS_FILE = "metrics.json"
SAVING_DIR = ".saving"  # checkpoints are written here, then renamed into the output directory
TRAIN_SAMPLING = ("group_by_length", "random", "sequential")
VALID_SPLIT_CANDIDATES = ("valid", "val", "validation", "dev")
ADAM_BETAS = (0.9, 0.98)
LOSS_COMPONENTS = ("nll_loss", "ddr_loss", "ald_loss")


# ----------------------------------------------------------------------------------------------------- metrics
def compute_translation_metrics(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """Corpus BLEU, chrF and TER (sacrebleu defaults, one reference per sentence) with their signatures.

    Returns {"bleu", "chrf", "ter", "bleu_signature", "chrf_signature", "ter_signature", "num_sentences"}.
    Raises ValueError when the lists differ in length or are empty.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: they must pair up")
    if not hypotheses:
        raise ValueError("no sentences to score: hypotheses and references are empty")
    result: dict[str, Any] = {}
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF()), ("ter", TER())):
        result[name] = float(metric.corpus_score(hypotheses, [references]).score)
        result[f"{name}_signature"] = str(metric.get_signature())
    result["num_sentences"] = len(hypotheses)
    return result


def make_compute_metrics(
    tokenizer: PreTrainedTokenizerBase, references: Sequence[str] | None = None
) -> Callable[[EvalPrediction], dict[str, Any]]:
    """A `compute_metrics` for `Seq2SeqTrainer(predict_with_generate=True)`.

    Generated ids are decoded with `skip_special_tokens` (-100 padding replaced by the pad id first). When
    `references` (the raw target sentences of the evaluation set, in order) are given and match the number of
    predictions, BLEU is computed against them; otherwise against the decoded labels (which have been
    tokenized, so unknown characters and truncation show up in them).
    """
    pad_id = tokenizer.pad_token_id

    def decode(ids: Any) -> list[str]:
        if isinstance(ids, tuple):
            ids = ids[0]
        ids = np.asarray(ids)
        ids = np.where(ids == -100, pad_id, ids)
        return [text.strip() for text in tokenizer.batch_decode(ids, skip_special_tokens=True)]

    def compute_metrics(prediction: EvalPrediction) -> dict[str, Any]:
        hypotheses = decode(prediction.predictions)
        if references is not None and len(references) == len(hypotheses):
            refs = list(references)
        else:
            refs = decode(prediction.label_ids)
        return compute_translation_metrics(hypotheses, refs)

    return compute_metrics


# -------------------------------------------------------------------------------------------- config and data
def resolve_variant(name: str) -> tuple[type, type]:
    """(config class, seq2seq LM class) for a model type (``deep_nmt``, ``deep_nmt_admin``, ...) or a short
    variant name (``base``, ``admin``, ...). ValueError listing the valid names otherwise."""
    by_type = {config_class.model_type: (config_class, lm_class) for config_class, _, lm_class in MODEL_TYPES}
    if name in by_type:
        return by_type[name]
    config_class = VARIANTS.get(name)
    if config_class is not None and config_class.model_type in by_type:
        return by_type[config_class.model_type]
    valid = sorted(by_type) + sorted(set(VARIANTS) - set(by_type))
    raise ValueError(f"variant={name!r} is unknown; valid variants: {', '.join(valid)}")


def build_config(
    tokenizer: PreTrainedTokenizerBase,
    config_class: type = DeepNMTConfig,
    max_source_length: int = 128,
    max_target_length: int = 128,
    **fields_: Any,
) -> DeepNMTConfig:
    """A model config whose special ids and vocab size come from `tokenizer` (`special_token_ids`).

    `fields_` are config fields (shape and choices); the variant's defaults fill the rest. `label_smoothing`
    defaults to 0.1 (applied in the model's loss). `max_position_embeddings` defaults to
    max(256, max_source_length, max_target_length) and must hold both maximum lengths. Invalid values raise
    the config's ValueError naming the field.
    """
    ids = special_token_ids(tokenizer)
    for key in ids:
        if key in fields_ and fields_[key] != ids[key]:
            raise ValueError(f"{key}={fields_[key]!r} contradicts the tokenizer, which has {key}={ids[key]}")
    fields_ = {**fields_, **ids}
    fields_.setdefault("label_smoothing", 0.1)
    longest = max(max_source_length, max_target_length)
    fields_.setdefault("max_position_embeddings", max(256, longest))
    if fields_["max_position_embeddings"] < longest:
        raise ValueError(
            f"max_position_embeddings={fields_['max_position_embeddings']} is shorter than the maximum "
            f"source/target length {longest}"
        )
    return config_class(**fields_)


def load_split(
    source: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
    report: ReadReport | None = None,
) -> datasets.Dataset:
    """One split via `data.load_parallel` (its bad-data policy: DataError naming file and line for undecodable
    text, empty pairs dropped and counted into `report`). A `Path` (or a path-like string) never falls back to
    the Hub: `load_parallel` makes that check."""
    return load_parallel(source, split, src_lang, tgt_lang, report=report)


def _find_valid_split(source: str | os.PathLike[str], src_lang: str, tgt_lang: str) -> str | None:
    """The first of VALID_SPLIT_CANDIDATES that the source has (a directory is listed, a Hub name probed)."""
    path = Path(source).expanduser()
    if path.is_dir():
        present = set(available_splits(path, src_lang, tgt_lang))
        return next((name for name in VALID_SPLIT_CANDIDATES if name in present), None)
    if path.is_file():
        return None  # one JSON-lines file is one split
    for name in VALID_SPLIT_CANDIDATES:
        with contextlib.suppress(DataError):
            load_split(source, name, src_lang, tgt_lang)
            return name
    return None


def tokenize_dataset(
    dataset: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    src_lang: str,
    tgt_lang: str,
    max_source_length: int = 128,
    max_target_length: int = 128,
    stats: dict[str, int] | None = None,
) -> datasets.Dataset:
    """Map ``{"translation": {src, tgt}}`` rows to ``input_ids``, ``attention_mask`` and ``labels``.

    Over-long pairs are truncated (not dropped): the source to `max_source_length` tokens and the target to
    `max_target_length` tokens, both still ending in ``</s>`` (the same ids as the tokenizer's own
    ``truncation=True``). When `stats` is given, ``stats["truncated_pairs"]`` is set to the number of pairs
    that were cut on at least one side.
    """
    eos = tokenizer.eos_token_id

    def cut(rows: list[list[int]], limit: int, flags: list[bool]) -> list[list[int]]:
        # tokenized with room for one more token: a row longer than `limit` was longer than the limit
        out = []
        for index, row in enumerate(rows):
            if len(row) > limit:
                flags[index] = True
                row = row[: limit - 1] + [eos if row[-1] == eos else row[limit - 1]]
            out.append(row)
        return out

    def encode(batch: dict[str, list]) -> dict[str, list]:
        sources = [pair[src_lang] for pair in batch["translation"]]
        targets = [pair[tgt_lang] for pair in batch["translation"]]
        source_ids = tokenizer(sources, truncation=True, max_length=max_source_length + 1)["input_ids"]
        target_ids = tokenizer(text_target=targets, truncation=True, max_length=max_target_length + 1)[
            "input_ids"
        ]
        flags = [False] * len(sources)
        source_ids = cut(source_ids, max_source_length, flags)
        target_ids = cut(target_ids, max_target_length, flags)
        return {
            "input_ids": source_ids,
            "attention_mask": [[1] * len(row) for row in source_ids],
            "labels": target_ids,
            "_truncated": flags,
        }

    tokenized = dataset.map(
        encode,
        batched=True,
        remove_columns=dataset.column_names,
        desc="Tokenizing",
        load_from_cache_file=False,
    )
    if stats is not None:
        stats["truncated_pairs"] = int(sum(tokenized["_truncated"]))
    return tokenized.remove_columns("_truncated")


# ------------------------------------------------------------------------------------------------ translation
def _device_of(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.inference_mode()
def translate(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    sentences: Sequence[str],
    num_beams: int = 4,
    batch_size: int = 32,
    max_new_tokens: int | None = None,
    progress: bool = False,
) -> list[str]:
    """Translate `sentences` with beam search, in batches of similar length; results in input order.

    Sentences are sorted by token length (longest first) so that a batch holds little padding, then the
    translations are put back in the order of the input. Empty or blank sentences translate to "" without
    running the model. Sources longer than the model's positions are truncated. `max_new_tokens=None`
    allows 2 × the longest source of the batch + 10 tokens (bounded by the model's positions and its
    generation config), so that a model that never emits ``</s>`` cannot run for hundreds of steps.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} must be at least 1")
    results = [""] * len(sentences)
    todo = [i for i, text in enumerate(sentences) if text.strip()]
    if not todo:
        return results
    max_positions = getattr(model.config, "max_position_embeddings", None)
    cap = getattr(model.generation_config, "max_length", None) or 256
    if max_positions is not None:
        cap = min(cap, max_positions)
    encoded = tokenizer(
        [sentences[i] for i in todo], truncation=max_positions is not None, max_length=max_positions
    )["input_ids"]
    order = sorted(range(len(todo)), key=lambda k: len(encoded[k]), reverse=True)
    was_training = model.training
    model.eval()
    device = _device_of(model)
    batches = range(0, len(order), batch_size)
    try:
        for start in tqdm(batches, desc="Translating", unit="batch", disable=not progress):
            chunk = order[start : start + batch_size]
            batch = tokenizer.pad({"input_ids": [encoded[k] for k in chunk]}, return_tensors="pt")
            batch = {key: value.to(device) for key, value in batch.items()}
            limit = max_new_tokens
            if limit is None:
                limit = min(cap - 1, 2 * batch["input_ids"].shape[1] + 10)
            # max_length counts the decoder start token: the same bound as max_new_tokens=limit, without the
            # warning about max_new_tokens and the generation config's max_length both being set
            output = model.generate(**batch, num_beams=num_beams, max_length=limit + 1)
            texts = tokenizer.batch_decode(output, skip_special_tokens=True)
            for k, text in zip(chunk, texts, strict=True):
                results[todo[k]] = text.strip()
    finally:
        model.train(was_training)
    return results


def evaluate_model(
    model_dir: str | os.PathLike[str],
    data_source: str | os.PathLike[str],
    split: str,
    src_lang: str,
    tgt_lang: str,
    num_beams: int = 4,
    batch_size: int = 32,
    max_length: int | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Translate one split with a saved model and score it: BLEU / chrF / TER with signatures.

    `max_length` bounds the number of generated tokens (None: the model's generation config). Returns the
    metrics plus the model, data source, split, languages and beam size.
    """
    model_dir = Path(model_dir)
    if not (model_dir / "config.json").is_file():
        raise FileNotFoundError(f"{model_dir}: not a saved model directory (no config.json)")
    dataset = load_split(data_source, split, src_lang, tgt_lang)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    pairs = dataset["translation"]
    sources = [pair[src_lang] for pair in pairs]
    references = [pair[tgt_lang] for pair in pairs]
    hypotheses = translate(
        model,
        tokenizer,
        sources,
        num_beams=num_beams,
        batch_size=batch_size,
        max_new_tokens=max_length,
        progress=progress,
    )
    result = compute_translation_metrics(hypotheses, references)
    result.update(
        model_dir=str(model_dir),
        data_source=str(data_source),
        split=split,
        src_lang=src_lang,
        tgt_lang=tgt_lang,
        num_beams=num_beams,
    )
    return result


# ---------------------------------------------------------------------------------------------------- training
@dataclass
class TrainingOptions:
    """Everything `train` needs besides the model's config fields (those go in `config_overrides`).

    `data_source` is a directory of ``{split}.{lang}[.gz]`` files, a ``.jsonl`` file or a Hub dataset name
    (a `Path` is never looked up on the Hub). `valid_split=None` picks the first of valid / val / validation /
    dev that exists (no evaluation if none does). At the end the whole validation split (unless
    `score_valid=False`) and `test_split` (when given) are translated and scored. `max_steps`
    > 0 overrides `num_train_epochs`. `eval_steps=None` evaluates only once, at the end. `tokenizer_dir` loads
    a saved tokenizer instead of training a BPE tokenizer of `vocab_size` on the training split.

    `batch_size` is per process: under `accelerate launch` / torchrun with W processes one optimizer step
    sees a global batch of W × `batch_size` sentence pairs. `train_sampling` is the Trainer's sampler:
    ``group_by_length`` (default; batches of similar length, less padding) or ``random`` / ``sequential``
    (then W processes × `batch_size` see exactly the pairs one process sees with W × `batch_size`).
    `divergence_factor` and `skip_nonfinite_batches` configure the `DivergenceCallback`.
    """

    output_dir: str
    data_source: str | os.PathLike[str]
    src_lang: str
    tgt_lang: str
    train_split: str = "train"
    valid_split: str | None = None
    test_split: str | None = None
    variant: str = "deep_nmt"
    preset: str | None = None
    tokenizer_dir: str | None = None
    vocab_size: int = 8000
    max_source_length: int = 128
    max_target_length: int = 128
    batch_size: int = 32
    eval_batch_size: int | None = None
    learning_rate: float = 5e-4
    warmup_steps: int = 4000
    max_steps: int = -1
    num_train_epochs: float = 10.0
    eval_steps: int | None = None
    save_steps: int = 1000
    save_total_limit: int = 2
    logging_steps: int = 50
    max_eval_samples: int | None = 500
    max_train_samples: int | None = None
    num_beams: int = 4
    score_valid: bool = True
    seed: int = 42
    label_smoothing: float = 0.1
    max_grad_norm: float = 1.0
    gradient_checkpointing: bool = False
    overwrite: bool = False
    resume: bool = False
    keep_checkpoints: bool = False
    disable_tqdm: bool | None = None
    train_sampling: str = "group_by_length"
    divergence_factor: float | None = None
    skip_nonfinite_batches: int = 0

    def __post_init__(self) -> None:
        positive = ("vocab_size", "max_source_length", "max_target_length", "batch_size", "save_steps")
        positive += ("save_total_limit", "logging_steps", "num_beams")
        for name in positive:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer")
        for name in ("eval_steps", "eval_batch_size", "max_eval_samples", "max_train_samples"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}={value!r} must be a positive integer (or None)")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps={self.warmup_steps} must be >= 0")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate={self.learning_rate} must be > 0")
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
        if isinstance(self.skip_nonfinite_batches, bool) or self.skip_nonfinite_batches < 0:
            raise ValueError(
                f"skip_nonfinite_batches={self.skip_nonfinite_batches!r} must be an integer >= 0"
            )


def nmt_recipe(
    learning_rate: float, warmup_steps: int, max_grad_norm: float = 1.0, sampling: str = "group_by_length"
) -> dict[str, Any]:
    """The Transformer NMT recipe as `Seq2SeqTrainingArguments` fields: Adam β = (0.9, 0.98) without weight
    decay, linear warmup then inverse square root, gradient clipping, length-grouped batches. Label smoothing
    stays 0 here: it is in the model's loss (config.label_smoothing), so extra loss terms are kept."""
    return dict(
        learning_rate=learning_rate,
        lr_scheduler_type="inverse_sqrt",
        warmup_steps=warmup_steps,
        adam_beta1=ADAM_BETAS[0],
        adam_beta2=ADAM_BETAS[1],
        weight_decay=0.0,
        max_grad_norm=max_grad_norm,
        label_smoothing_factor=0.0,
        train_sampling_strategy=sampling,  # 4.x: group_by_length=True
    )


class DeepNMTTrainer(Seq2SeqTrainer):
    """`Seq2SeqTrainer` with token-exact loss scaling, a per-step divergence guard, atomic checkpoints and
    logging of the model's loss components.

    - Loss scaling: the model returns the mean over its batch's target tokens. Under several processes (or
      gradient accumulation) the Trainer passes `num_items_in_batch`, the target tokens of the whole global
      batch; the loss is rescaled by (local tokens / global tokens) so that the summed gradient equals the
      gradient of the token mean over the global batch — the same as one process with the whole batch.
    - Divergence guard: every training micro-batch's loss is handed to the `DivergenceCallback` among the
      callbacks (if any); a batch it decides to skip contributes a zero gradient.
    - Checkpoints are written into ``<output_dir>/.saving/checkpoint-N`` and renamed to
      ``<output_dir>/checkpoint-N`` only when every file (and every rank's RNG state) is written, so a crash
      mid-save never leaves a ``checkpoint-N`` that `--resume` or `from_pretrained` would take for complete.
    - Models with collapse-reducing losses (deep-decoder-cad-crt eq. 9-11) return `nll_loss`, `ddr_loss` and
      `ald_loss` next to the total `loss`; every training log line then carries each component's mean over
      the steps since the previous log line, under those names.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._component_sums: dict[str, float] = {}
        self._component_counts: dict[str, int] = {}
        self._saving_into: Path | None = None
        guards = [cb for cb in self.callback_handler.callbacks if isinstance(cb, DivergenceCallback)]
        self.divergence: DivergenceCallback | None = guards[0] if guards else None

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
                    self._component_sums[name] = self._component_sums.get(name, 0.0) + float(value.detach())
                    self._component_counts[name] = self._component_counts.get(name, 0) + 1
        return (loss, outputs) if return_outputs else loss

    def _get_output_dir(self, trial: Any) -> str:
        if self._saving_into is not None:
            return str(self._saving_into)
        return super()._get_output_dir(trial)

    def _save_checkpoint(self, model: torch.nn.Module, trial: Any) -> None:
        """The Trainer's checkpoint, written into ``.saving/`` and renamed into place when complete."""
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
            target = run_dir / name
            if target.exists():
                shutil.rmtree(target)
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

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs and self._component_counts:
            for name, total in self._component_sums.items():
                logs[name] = round(total / self._component_counts[name], 4)
            self._component_sums.clear()
            self._component_counts.clear()
        super().log(logs, start_time)


class TrainingDivergedError(RuntimeError):
    """The training loss became NaN or infinite, or spiked beyond the divergence factor."""


def _fsync_tree(directory: Path) -> None:
    """Flush every file under `directory` to disk (so that a rename publishes complete files)."""
    for path in directory.rglob("*"):
        if path.is_file():
            with contextlib.suppress(OSError), open(path, "rb") as handle:
                os.fsync(handle.fileno())


class DivergenceCallback(TrainerCallback):
    """Divergence guard: stops training on a NaN / inf loss or a loss spike, or skips isolated bad batches.

    Checked at every optimizer step (not only at logging steps), on the loss of every training micro-batch
    (`DeepNMTTrainer.compute_loss` calls `observe`); under several processes the per-step numbers are summed
    over the ranks (one small all-reduce per step), so every rank takes the same decision.

    - A non-finite loss stops training at that step, unless `max_skipped` > 0: then the batch contributes a
      zero gradient (the optimizer still steps, with the momentum it has) and is counted in `skipped`
      (step numbers); the (max_skipped + 1)-th bad batch stops training.
    - With `factor` set, a step whose mean loss exceeds `factor` × the mean of the previous `window` step
      losses (once at least `min_history` are known) stops training.

    On a stop `diverged_at` = (step, loss) and `reason` are set, and `control.should_save` is cleared so the
    diverged weights are never written as a checkpoint. A NaN / inf logged loss (`on_log`) also stops.
    """

    def __init__(
        self, factor: float | None = None, max_skipped: int = 0, window: int = 20, min_history: int = 5
    ) -> None:
        if factor is not None and not factor > 1.0:
            raise ValueError(f"divergence_factor={factor} must be > 1 (or None to disable spike detection)")
        if max_skipped < 0:
            raise ValueError(f"skip_nonfinite_batches={max_skipped} must be >= 0")
        self.factor = factor
        self.max_skipped = max_skipped
        self.window = window
        self.min_history = min_history
        self.diverged_at: tuple[int, float] | None = None
        self.reason: str | None = None
        self.skipped: list[int] = []
        self._recent: list[float] = []
        self._sum = 0.0
        self._count = 0
        self._bad = 0

    def observe(self, loss: torch.Tensor) -> bool:
        """Record one training micro-batch's loss; True when that batch must be skipped (zero gradient)."""
        value = float(loss.detach().float())
        if not math.isfinite(value):
            self._bad += 1
            return self.max_skipped > 0
        self._sum += value
        self._count += 1
        return False

    def _stop(self, control: Any, step: int, loss: float, reason: str) -> None:
        self.diverged_at = (step, loss)
        self.reason = reason
        control.should_training_stop = True
        control.should_save = False
        control.should_evaluate = False

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        totals = [self._sum, float(self._count), float(self._bad)]
        self._sum, self._count, self._bad = 0.0, 0, 0
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            device = getattr(args, "device", None) or torch.device("cpu")
            tensor = torch.tensor(totals, dtype=torch.float64, device=device)
            torch.distributed.all_reduce(tensor)
            totals = tensor.tolist()
        loss_sum, count, bad = totals
        step = state.global_step
        if bad:
            if len(self.skipped) + 1 > self.max_skipped:
                allowed = f" (after {len(self.skipped)} skipped bad batches)" if self.skipped else ""
                self._stop(control, step, float("nan"), f"non-finite (NaN / inf) training loss{allowed}")
            else:
                self.skipped.append(step)
                logger.warning("step %d: non-finite training loss; batch skipped (zero gradient)", step)
            return
        if not count:
            return
        mean = loss_sum / count
        if self.factor is not None and len(self._recent) >= self.min_history:
            reference = sum(self._recent) / len(self._recent)
            if mean > self.factor * reference:
                self._stop(
                    control,
                    step,
                    mean,
                    f"loss spike: {mean:.4g} > divergence_factor {self.factor} x {reference:.4g} (mean of the "
                    f"previous {len(self._recent)} steps)",
                )
                return
        self._recent = (self._recent + [mean])[-self.window :]

    def on_log(self, args: Any, state: Any, control: Any, logs: dict | None = None, **kwargs: Any) -> None:
        loss = (logs or {}).get("loss")
        if isinstance(loss, (int, float)) and not math.isfinite(loss) and self.diverged_at is None:
            self._stop(control, state.global_step, float(loss), "non-finite (NaN / inf) logged training loss")


def _partial_dir(output_dir: Path) -> Path:
    return output_dir.with_name(output_dir.name + ".partial")


def _has_checkpoints(directory: Path) -> bool:
    return directory.is_dir() and any(directory.glob("checkpoint-*"))


@contextlib.contextmanager
def staged_output_dir(
    output_dir: str | os.PathLike[str], overwrite: bool = False, resume: bool = False
) -> Iterator[Path]:
    """Yield a staging directory ``<output_dir>.partial``; on success rename it to `output_dir`.

    An existing `output_dir` is an error unless `overwrite` (then it is replaced only after the new one is
    complete). On failure the staging directory is removed, unless it holds Trainer checkpoints (kept for
    `resume`). An existing staging directory is reused with `resume`, else it is an error (or, with
    `overwrite`, deleted).
    """
    final = Path(output_dir).expanduser().absolute()
    staging = _partial_dir(final)
    if final.exists() and not (final.is_dir() and not any(final.iterdir())) and not overwrite:
        raise FileExistsError(
            f"{final}: output directory exists and is not empty; pass overwrite to replace it"
        )
    if final.exists() and not final.is_dir():
        raise FileExistsError(f"{final}: exists and is not a directory")
    if staging.exists():
        if resume:
            logger.info("resuming in %s", staging)
        elif overwrite:
            shutil.rmtree(staging)
        else:
            raise FileExistsError(
                f"{staging}: a partial run exists; resume it (resume / --resume) or delete it (overwrite)"
            )
    staging.mkdir(parents=True, exist_ok=True)
    try:
        yield staging
    except BaseException:
        if _has_checkpoints(staging):
            logger.warning("run failed; its checkpoints are kept in %s (resume to continue)", staging)
        else:
            shutil.rmtree(staging, ignore_errors=True)
        raise
    old = final.with_name(f"{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def _check_output_dir(options: TrainingOptions) -> None:
    """Fail early (before any work) on an output directory that `staged_output_dir` would refuse."""
    final = Path(options.output_dir).expanduser().absolute()
    if final.exists() and not final.is_dir():
        raise FileExistsError(f"{final}: exists and is not a directory")
    if final.is_dir() and any(final.iterdir()) and not options.overwrite:
        raise FileExistsError(
            f"{final}: output directory exists and is not empty; pass overwrite to replace it"
        )
    if _partial_dir(final).exists() and not (options.resume or options.overwrite):
        raise FileExistsError(
            f"{_partial_dir(final)}: a partial run exists; resume it (resume / --resume) or delete it (overwrite)"
        )


def _versions() -> dict[str, str]:
    packages = ("deep_nmt_hf", "transformers", "torch", "tokenizers", "datasets", "accelerate", "sacrebleu")
    versions = {"python": platform.python_version()}
    for package in packages:
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = "unknown"
    return versions


def _relocate(path: str, staging: Path, final: Path) -> str:
    """A path inside the staging dir, as it will be once the staging dir is renamed to the final dir."""
    try:
        return str(final / Path(path).absolute().relative_to(staging))
    except ValueError:
        return path


def _model_summary(model: PreTrainedModel) -> dict[str, Any]:
    config = model.config.to_diff_dict()
    drop = {"transformers_version", "architectures", "auto_map", "torch_dtype", "dtype"}
    shape = {k: v for k, v in config.items() if not k.startswith("_") and k not in drop}
    return {
        "model_type": model.config.model_type,
        "architecture": type(model).__name__,
        "num_parameters": int(model.num_parameters()),
        "config": shape,
    }


def _load_training_data(
    options: TrainingOptions, report: ReadReport | None = None
) -> tuple[datasets.Dataset, datasets.Dataset | None, str | None]:
    train_set = load_split(
        options.data_source, options.train_split, options.src_lang, options.tgt_lang, report=report
    )
    valid_split = options.valid_split
    if valid_split is None:
        valid_split = _find_valid_split(options.data_source, options.src_lang, options.tgt_lang)
        if valid_split is None:
            logger.warning(
                "no validation split found (tried %s): no evaluation", ", ".join(VALID_SPLIT_CANDIDATES)
            )
    valid_set = None
    if valid_split is not None:
        valid_set = load_split(options.data_source, valid_split, options.src_lang, options.tgt_lang)
    if options.max_train_samples is not None and len(train_set) > options.max_train_samples:
        train_set = train_set.select(range(options.max_train_samples))
    return train_set, valid_set, valid_split


def _score_split(
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    dataset: datasets.Dataset,
    options: TrainingOptions,
) -> dict[str, Any]:
    pairs = dataset["translation"]
    hypotheses = translate(
        model,
        tokenizer,
        [pair[options.src_lang] for pair in pairs],
        num_beams=options.num_beams,
        batch_size=options.eval_batch_size or options.batch_size,
        progress=not options.disable_tqdm,
    )
    return compute_translation_metrics(hypotheses, [pair[options.tgt_lang] for pair in pairs])


def train(
    options: TrainingOptions,
    config_overrides: dict[str, Any] | None = None,
    *,
    staging_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Train a model with `Seq2SeqTrainer`, save it into `options.output_dir` and return its metrics record.

    Steps: load the train / validation (/ test) splits; train a joint BPE tokenizer on the training split (or
    load `options.tokenizer_dir`); build the variant's config from `config_overrides` (field name -> value)
    and the model; train; score the validation (and test) split with beam search; save model (safetensors),
    tokenizer, generation config and ``metrics.json`` (the returned dict).

    All inputs are checked before anything is written. With `staging_dir` the caller owns the staging
    directory (see `staged_output_dir`) and the final rename; otherwise `train` stages by itself.

    Several processes (`accelerate launch`, torchrun: WORLD_SIZE > 1 in the environment): every rank checks
    the output directory and loads the data; rank 0 trains the tokenizer and broadcasts it (so all ranks hold
    the same one); the Trainer shards the data (global batch = world size × `batch_size`); at the end every
    rank takes part in saving the model (needed for FSDP / DeepSpeed), then rank 0 alone reloads it, scores,
    writes ``metrics.json`` and renames the staging directory. The output directory must be on a file
    system all ranks share. Non-zero ranks return ``{"process_index": rank, "global_step": ...}``.
    """
    config_overrides = dict(config_overrides or {})
    config_class, model_class = resolve_variant(options.variant)
    distributed = _init_distributed()
    if staging_dir is None:
        _check_output_dir(options)
    if distributed is not None:
        distributed.wait_for_everyone()  # all ranks checked the output dir before rank 0 creates the staging dir
    report = ReadReport()
    train_set, valid_set, valid_split = _load_training_data(options, report)
    test_set = None
    if options.test_split is not None:
        test_set = load_split(options.data_source, options.test_split, options.src_lang, options.tgt_lang)

    if options.tokenizer_dir is not None:
        tokenizer = AutoTokenizer.from_pretrained(options.tokenizer_dir)
    else:
        tokenizer = None
        if distributed is None or distributed.is_main_process:
            pairs = train_set["translation"]
            texts = [pair[lang] for pair in pairs for lang in (options.src_lang, options.tgt_lang)]
            longest = max(options.max_source_length, options.max_target_length)
            tokenizer = train_tokenizer(
                texts,
                vocab_size=options.vocab_size,
                model_max_length=config_overrides.get("max_position_embeddings", max(256, longest)),
            )
        if distributed is not None:
            holder = [tokenizer]
            torch.distributed.broadcast_object_list(holder, src=0)
            tokenizer = holder[0]
    if options.preset is not None:
        presets = getattr(config_class, "PRESETS", {})
        if options.preset not in presets:
            raise ValueError(
                f"preset={options.preset!r} is unknown for variant {options.variant!r}; "
                f"presets: {', '.join(presets) or 'none'}"
            )
        config_overrides = {**presets[options.preset], **config_overrides}
    config_overrides.setdefault("label_smoothing", options.label_smoothing)
    config = build_config(
        tokenizer,
        config_class,
        max_source_length=options.max_source_length,
        max_target_length=options.max_target_length,
        **config_overrides,
    )

    inputs = (config, model_class, tokenizer, train_set, valid_set, valid_split, test_set, report)
    if staging_dir is not None:
        return _train_in(options, Path(staging_dir), *inputs)
    if distributed is not None and not distributed.is_main_process:
        staging = _partial_dir(Path(options.output_dir).expanduser().absolute())
        distributed.wait_for_everyone()  # rank 0 has created (or cleaned) the staging dir
        return _train_in(options, staging, *inputs)
    with staged_output_dir(options.output_dir, overwrite=options.overwrite, resume=options.resume) as staging:
        if distributed is not None:
            distributed.wait_for_everyone()
        return _train_in(options, staging, *inputs)


def _init_distributed() -> Any:
    """accelerate's `PartialState` when launched with several processes (WORLD_SIZE > 1), else None.

    Initializes the process group the way the Trainer would (nccl on GPUs, gloo on CPU), early, so that the
    ranks can agree on the output directory and the tokenizer before the Trainer exists.
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return None
    from accelerate import PartialState

    state = PartialState(cpu=not torch.cuda.is_available())
    return state if state.num_processes > 1 else None


def _train_in(
    options: TrainingOptions,
    staging: Path,
    config: DeepNMTConfig,
    model_class: type,
    tokenizer: PreTrainedTokenizerBase,
    train_set: datasets.Dataset,
    valid_set: datasets.Dataset | None,
    valid_split: str | None,
    test_set: datasets.Dataset | None,
    report: ReadReport | None = None,
) -> dict[str, Any]:
    final = Path(options.output_dir).expanduser().absolute()
    resume_from = get_last_checkpoint(str(staging)) if options.resume and staging.is_dir() else None
    if resume_from is not None and config.residual_scaling == "admin":
        # ω is in the checkpoint's weights: do not profile again over them
        saved = json.loads((Path(resume_from) / "config.json").read_text(encoding="utf-8"))
        config.admin_profiled = bool(saved.get("admin_profiled", config.admin_profiled))
    set_seed(options.seed)
    model = model_class(config)
    model.generation_config = default_generation_config(config)
    model.generation_config.num_beams = options.num_beams

    lengths = (options.max_source_length, options.max_target_length)
    token_stats: dict[str, int] = {}
    train_tokens = tokenize_dataset(
        train_set, tokenizer, options.src_lang, options.tgt_lang, *lengths, stats=token_stats
    )
    eval_tokens = eval_refs = None
    if valid_set is not None:
        eval_subset = valid_set
        if options.max_eval_samples is not None and len(valid_set) > options.max_eval_samples:
            eval_subset = valid_set.select(range(options.max_eval_samples))
        eval_tokens = tokenize_dataset(eval_subset, tokenizer, options.src_lang, options.tgt_lang, *lengths)
        eval_refs = [pair[options.tgt_lang] for pair in eval_subset["translation"]]
    evaluate_during = eval_tokens is not None and options.eval_steps is not None

    args = Seq2SeqTrainingArguments(
        output_dir=str(staging),
        per_device_train_batch_size=options.batch_size,
        per_device_eval_batch_size=options.eval_batch_size or options.batch_size,
        **nmt_recipe(
            options.learning_rate, options.warmup_steps, options.max_grad_norm, options.train_sampling
        ),
        max_steps=options.max_steps,
        num_train_epochs=options.num_train_epochs,
        activation_checkpointing=options.gradient_checkpointing,  # 4.x: gradient_checkpointing
        eval_strategy="steps" if evaluate_during else "no",
        eval_steps=options.eval_steps if evaluate_during else None,
        save_strategy="steps",
        save_steps=options.save_steps,
        save_total_limit=options.save_total_limit,
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
        dataloader_num_workers=0,
    )
    divergence = DivergenceCallback(options.divergence_factor, options.skip_nonfinite_batches)
    callbacks: list[TrainerCallback] = [divergence]
    if config.residual_scaling == "admin":
        # rank 0 profiles on the first global batch: the same ω for any number of processes
        profile_size = options.batch_size * args.world_size
        callbacks.append(AdminProfilingCallback(batch_size=profile_size, seed=options.seed))
    trainer = DeepNMTTrainer(
        model=model,
        args=args,
        train_dataset=train_tokens,
        eval_dataset=eval_tokens if evaluate_during else None,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        compute_metrics=make_compute_metrics(tokenizer, eval_refs) if evaluate_during else None,
        callbacks=callbacks,
    )
    train_output = trainer.train(resume_from_checkpoint=resume_from)
    if divergence.diverged_at is not None:
        step, loss = divergence.diverged_at
        last_good = get_last_checkpoint(str(staging))
        kept = (
            f"the last good checkpoint is {last_good} (kept; continue with --resume, e.g. after lowering the "
            "learning rate)"
            if last_good
            else "no checkpoint was written before it"
        )
        raise TrainingDivergedError(
            f"training diverged at step {step}: {divergence.reason} (loss={loss}); {kept}; try a lower "
            "learning rate, more warmup, pre-LN or a residual-scaling variant"
        )

    if trainer.args.world_size > 1:
        # every rank takes part in gathering the weights (FSDP / DeepSpeed); only rank 0 writes
        trainer.save_model(str(staging))
        if not trainer.is_world_process_zero():
            return {"process_index": trainer.args.process_index, "global_step": trainer.state.global_step}
        model = model_class.from_pretrained(staging)
        model.generation_config = trainer.model.generation_config
    else:
        model = trainer.model
    model.config.use_cache = True  # the Trainer sets it to args.use_cache (False) for training
    scores: dict[str, dict[str, Any]] = {}
    final_splits = [(options.test_split, test_set)]
    if options.score_valid or test_set is None:
        final_splits.insert(0, (valid_split, valid_set))
    for split, dataset in final_splits:
        if split is not None and dataset is not None:
            logger.info("scoring split %r (%d sentences, beam %d)", split, len(dataset), options.num_beams)
            scores[split] = _score_split(model, tokenizer, dataset, options)

    shutil.rmtree(staging / SAVING_DIR, ignore_errors=True)
    if not options.keep_checkpoints:
        for checkpoint in staging.glob("checkpoint-*"):
            shutil.rmtree(checkpoint)
    model.save_pretrained(staging)  # safetensors, config.json, generation_config.json (+ code via auto_map)
    tokenizer.save_pretrained(staging)

    train_metrics = dict(train_output.metrics)
    runtime = train_metrics.get("train_runtime")
    tokens_seen = trainer.state.num_input_tokens_seen
    if runtime and tokens_seen:
        train_metrics["train_source_tokens_per_second"] = round(tokens_seen / runtime, 1)
        train_metrics["num_input_tokens_seen"] = int(tokens_seen)
    train_metrics["skipped_nonfinite_batches"] = len(divergence.skipped)
    train_metrics["skipped_nonfinite_steps"] = list(divergence.skipped)
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    headline_split = options.test_split if options.test_split in scores else valid_split
    hyperparameters = {
        key: value for key, value in asdict(options).items() if key not in ("output_dir", "data_source")
    }
    hyperparameters.update(
        optimizer="adamw (weight_decay=0, i.e. Adam)",
        adam_betas=list(ADAM_BETAS),
        weight_decay=0.0,
        lr_scheduler="inverse_sqrt",
        train_sampling_strategy=options.train_sampling,
        world_size=trainer.args.world_size,
        distributed_type=str(trainer.accelerator.distributed_type.value),
        global_batch_size=options.batch_size * trainer.args.world_size,
    )
    record: dict[str, Any] = {
        "task": "translation",
        "src_lang": options.src_lang,
        "tgt_lang": options.tgt_lang,
        "data_source": _relocate(os.fspath(options.data_source), staging, final),
        "train_split": options.train_split,
        "valid_split": valid_split,
        "test_split": options.test_split,
        "num_train_examples": len(train_set),
        "data": {
            "train_pairs_read": report.total if report is not None else len(train_set),
            "train_pairs_dropped_empty": report.dropped if report is not None else 0,
            "train_first_dropped_line": report.first_dropped if report is not None else None,
            "train_pairs_truncated": token_stats.get("truncated_pairs", 0),
            "max_source_length": options.max_source_length,
            "max_target_length": options.max_target_length,
        },
        "eval_split": headline_split,
    }
    if headline_split is not None:
        record.update(scores[headline_split])
    record.update(
        {
            "metrics": scores,
            "global_step": trainer.state.global_step,
            "epoch": trainer.state.epoch,
            "train": {
                **train_metrics,
                "first_logged_loss": losses[0] if losses else None,
                "last_logged_loss": losses[-1] if losses else None,
            },  # fmt: skip
            "log_history": trainer.state.log_history,
            "hyperparameters": hyperparameters,
            "model": _model_summary(model),
            "tokenizer": {
                "vocab_size": len(tokenizer),
                "source": options.tokenizer_dir or "trained (joint BPE)",
            },
            "versions": _versions(),
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        }
    )
    (staging / METRICS_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
    return record
