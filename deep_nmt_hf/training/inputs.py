"""Config and data for training: variant lookup, config from a tokenizer, splits, tokenization."""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path
from typing import Any

import datasets
from transformers import (
    PreTrainedTokenizerBase,
)

from .. import MODEL_TYPES, VARIANTS
from ..data import DataError, ReadReport, available_splits, load_parallel
from ..data.corpus import TrainingCorpus
from ..data.preprocessing import main_process_first
from ..data.tokenization import special_token_ids
from ..model.configuration_deep_nmt import DeepNMTConfig
from .options import TrainingOptions, default_max_positions, option_default

logger = logging.getLogger(__name__)

VALID_SPLIT_CANDIDATES = ("valid", "val", "validation", "dev")


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
    max_source_length: int = option_default("max_source_length"),
    max_target_length: int = option_default("max_target_length"),
    **fields_: Any,
) -> DeepNMTConfig:
    """A model config whose special ids and vocab size come from `tokenizer` (`special_token_ids`).

    `fields_` are config fields (shape and choices); the variant's defaults fill the rest. `label_smoothing`
    defaults to the run's (`TrainingOptions.label_smoothing`; applied in the model's loss).
    `max_position_embeddings` defaults to `default_max_positions` (max(256, both lengths)) and must hold both
    maximum lengths. Invalid values raise the config's ValueError naming the field.
    """
    ids = special_token_ids(tokenizer)
    for key in ids:
        if key in fields_ and fields_[key] != ids[key]:
            raise ValueError(f"{key}={fields_[key]!r} contradicts the tokenizer, which has {key}={ids[key]}")
    fields_ = {**fields_, **ids}
    fields_.setdefault("label_smoothing", option_default("label_smoothing"))
    fields_.setdefault("max_position_embeddings", default_max_positions(max_source_length, max_target_length))
    check_max_positions(fields_["max_position_embeddings"], max_source_length, max_target_length)
    return config_class(**fields_)


def check_max_positions(positions: Any, max_source_length: int, max_target_length: int) -> None:
    """ValueError unless `positions` (`max_position_embeddings`) holds both maximum lengths."""
    longest = max(max_source_length, max_target_length)
    if isinstance(positions, int) and not isinstance(positions, bool) and positions < longest:
        raise ValueError(
            f"max_position_embeddings={positions} is shorter than the maximum source/target length {longest}"
        )


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
            load_parallel(source, name, src_lang, tgt_lang)
            return name
    return None


def training_corpus(options: TrainingOptions) -> TrainingCorpus:
    """The training split as `options` asks for it: map-style, or streamed with ``--streaming``."""
    return TrainingCorpus(
        options.data_source,
        options.train_split,
        options.src_lang,
        options.tgt_lang,
        streaming=options.streaming,
        seed=options.seed,
        buffer_size=options.shuffle_buffer_size,
        cache_dir=options.cache_dir,
        num_proc=options.num_proc,
    )


def _load_training_data(
    options: TrainingOptions, report: ReadReport | None = None
) -> tuple[datasets.Dataset | datasets.IterableDataset, datasets.Dataset | None, str | None]:
    """Train (a stream with `options.streaming`), validation split and its name."""
    with main_process_first():  # the main process builds the Arrow cache entries, the other ranks load them
        return _read_training_data(options, report)


def _read_training_data(
    options: TrainingOptions, report: ReadReport | None = None
) -> tuple[datasets.Dataset | datasets.IterableDataset, datasets.Dataset | None, str | None]:
    langs = (options.src_lang, options.tgt_lang)
    train_set = training_corpus(options).pairs(report, limit=options.max_train_samples)
    valid_split = options.valid_split
    if valid_split is None:
        valid_split = _find_valid_split(options.data_source, options.src_lang, options.tgt_lang)
        if valid_split is None:
            logger.warning(
                "no validation split found (tried %s): no evaluation", ", ".join(VALID_SPLIT_CANDIDATES)
            )
    valid_set = None
    if valid_split is not None:
        valid_set = load_parallel(options.data_source, valid_split, *langs, cache_dir=options.cache_dir)
    return train_set, valid_set, valid_split
