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

The package has one module per job: `options` (TrainingOptions, the NMT recipe), `resolution` (`resolve_run`:
where each value of a run comes from), `inputs` (variant, config, splits, tokenization), `trainer` (DeepNMTTrainer), `divergence`, `staging`, `metrics`, `translation`, `run`
(`train`).
"""

from ..data.corpus import tokenize_dataset
from .divergence import DivergenceCallback, TrainingDivergedError
from .inputs import VALID_SPLIT_CANDIDATES, build_config, resolve_variant, training_corpus
from .metrics import compute_translation_metrics, make_compute_metrics, paired_bootstrap
from .options import ADAM_BETAS, TRAIN_SAMPLING, TrainingOptions, nmt_recipe
from .resolution import ResolvedRun, resolve_run
from .run import train
from .staging import METRICS_FILE, SAVING_DIR, staged_output_dir
from .trainer import LOSS_COMPONENTS, DeepNMTTrainer
from .translation import evaluate_model, translate

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
