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

The public names below are lazy (PEP 562: each module is imported when a name of it is first read). The
package has one module per job: `options` (TrainingOptions, the NMT recipe), `resolution` (`resolve_run`: where
each value of a run comes from), `inputs` (variant, config, splits, tokenization), `trainer` (DeepNMTTrainer), `divergence`, `staging`, `metrics`, `translation`, `run`
(`train`).
"""

import importlib
import importlib.util
from typing import Any

# public name -> the module that defines it (relative to this package): read on first use (PEP 562), so that
# `deep-nmt --help` imports `training.options` (standard library only) without torch, transformers or datasets
_EXPORTS: dict[str, str] = {
    "tokenize_dataset": "..data.corpus",
    **dict.fromkeys(("DivergenceCallback", "TrainingDivergedError"), ".divergence"),
    **dict.fromkeys(
        ("VALID_SPLIT_CANDIDATES", "build_config", "resolve_variant", "training_corpus"), ".inputs"
    ),
    **dict.fromkeys(("compute_translation_metrics", "make_compute_metrics", "paired_bootstrap"), ".metrics"),
    **dict.fromkeys(("ADAM_BETAS", "TRAIN_SAMPLING", "TrainingOptions", "nmt_recipe"), ".options"),
    **dict.fromkeys(("ResolvedRun", "resolve_run"), ".resolution"),
    "train": ".run",
    **dict.fromkeys(("METRICS_FILE", "SAVING_DIR", "staged_output_dir"), ".staging"),
    **dict.fromkeys(("LOSS_COMPONENTS", "DeepNMTTrainer"), ".trainer"),
    **dict.fromkeys(("evaluate_model", "translate"), ".translation"),
}


def __getattr__(name: str) -> Any:
    """PEP 562: a public name, or a module of this package (`training.run`), imported on first use."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "ADAM_BETAS",
    "LOSS_COMPONENTS",
    "METRICS_FILE",
    "SAVING_DIR",
    "TRAIN_SAMPLING",
    "VALID_SPLIT_CANDIDATES",
    "DeepNMTTrainer",
    "DivergenceCallback",
    "TrainingDivergedError",
    "ResolvedRun",
    "TrainingOptions",
    "build_config",
    "compute_translation_metrics",
    "evaluate_model",
    "make_compute_metrics",
    "paired_bootstrap",
    "nmt_recipe",
    "resolve_run",
    "resolve_variant",
    "staged_output_dir",
    "tokenize_dataset",
    "training_corpus",
    "train",
    "translate",
]
