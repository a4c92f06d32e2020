"""Each paper's training recipe by name, as data: `deep-nmt train --recipe admin` (explicit flags win).

A recipe fills `TrainingOptions` fields (optimizer, β's, ε, learning rate, warmup, token batches, gradient
accumulation, clipping, label smoothing, beam, length penalty, checkpoint strategy and averaging, precision) and config fields
(dropouts, embedding sharing) plus the variant, each value with where its paper says it, or the authors' released
script when the paper is silent (named by repository and file: Transformer-Clinic and microsoft/deepnmt for ADMIN,
wangqiangneu/dlcl, bzhangGo/zero for DS-Init + MAtt), or, where neither says, "our choice" and why. The values
are the papers' WMT14 En-De base settings (per GPU); at toy scale (Multi30k on CPU) lower `max_tokens`, the
warmup and the learning rate explicitly.

Precedence: `training/resolution.py`'s `resolve_run`, the one path for every value of a run (defaults < shape
preset < the recipe < a paper preset < ``--set`` < explicit options and config fields; the CLI passes only flags
the user gave). `marian` is this project's recipe before issue #14 (the one every variant used to train with), kept as
the baseline.

`precision` is resolved when `train` starts, not by `TrainingOptions.from_recipe` (`RUNTIME_FIELDS`), so that an
explicit precision can be told from the recipe's: the recipe's fp16 falls back to fp32 on a machine without CUDA
(with a warning), an explicit one is an error there (`training/precision.py`). Of the papers only DS-Init states
its precision (mixed precision for its big models only); ADMIN's fp16 is in the authors' fairseq commands, DLCL's
script asks for fp16 "if possible"; the other two are our choice, said so in their sources.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Setting:
    """One recipe value and where it comes from (paper section, or "our choice: why")."""

    value: Any
    source: str


# TrainingOptions fields a recipe may set; every other key is a config field (or "variant")
OPTION_FIELDS = (
    "variant",
    "optimizer",
    "adam_beta1",
    "adam_beta2",
    "adam_epsilon",
    "weight_decay",
    "learning_rate",
    "warmup_steps",
    "max_tokens",
    "max_grad_norm",
    "label_smoothing",
    "num_beams",
    "length_penalty",
    "length_penalty_form",
    "average_last_checkpoints",
    "gradient_accumulation_steps",
    "save_strategy",
    "precision",
)
# option fields resolved by `train` against the hardware (precision.py), not filled in by `recipe_options`
RUNTIME_FIELDS = ("precision",)

CLINIC = "Transformer-Clinic nmt-experiments/"  # ADMIN's released fairseq recipes (LiyuanLucasLiu/Transformer-Clinic)
DEEPNMT = "microsoft/deepnmt run_wmt14_en_fr.sh"  # the released 60L-12L En-Fr training script
DLCL_SCRIPT = "wangqiangneu/dlcl runs/train-wmt-en2de-deep-prenorm-dlcl.sh"
ZERO = "bzhangGo/zero run.py"  # DS-Init + MAtt's released TensorFlow toolkit (its defaults)

# fairseq-style batches: the share of a per-process token budget that becomes real target tokens. Ott et al.
# (2018) train with --max-tokens 3584 on 8 GPUs and report about 25k tokens a batch: 25000 / (8 × 3584) ≈ 0.87
# (the rest is padding, the cut that leaves a batch below its budget, and a source side longer than the target)
TARGET_FILL = 0.87
# dsinit-merged-attention Table 3 (rows 1, 11, 14) and sec. 6 "Effect of Model Depth" (18 and 30 layers): target
# tokens per update by depth (base models)
DSINIT_TARGET_TOKENS = {6: 25_000, 12: 40_000, 18: 42_000, 20: 44_000, 30: 48_000}
DSINIT_PROCESSES = 8  # the paper does not state its GPU count; 8 as every other paper here (our choice)


def budget_for_target_tokens(target_tokens: int, processes: int, update_freq: int = 1) -> int:
    """The per-process `max_tokens` whose batches hold about `target_tokens` real target tokens per update over
    `processes` × `update_freq` batches: target_tokens / (processes × update_freq × TARGET_FILL), rounded up to
    a multiple of 8. Our budget counts padded tokens per side; the DS-Init paper counts target tokens per update."""
    raw = target_tokens / (processes * update_freq * TARGET_FILL)
    return int(-(-raw // 8) * 8)


_FAIRSEQ_SILENT = "paper silent; fairseq's default (the paper trains with fairseq)"


def _shared_embeddings(source: str) -> dict[str, Setting]:
    return {
        "share_encoder_decoder_embeddings": Setting(True, source),
        "tie_word_embeddings": Setting(True, source),
    }


RECIPES: dict[str, dict[str, Setting]] = {
    "admin": {
        "variant": Setting("admin", "admin-very-deep-transformers-nmt"),
        "optimizer": Setting("radam", "sec. 4: 'RAdam is our optimizer'"),
        "adam_beta1": Setting(0.9, "paper silent; fairseq Transformer recipe (Adam/RAdam β1 0.9)"),
        "adam_beta2": Setting(0.98, "paper silent; fairseq Transformer recipe (β2 0.98)"),
        "adam_epsilon": Setting(1e-8, _FAIRSEQ_SILENT),
        "weight_decay": Setting(0.0, _FAIRSEQ_SILENT),
        "learning_rate": Setting(1e-3, "footnote 8: lr 0.001 for WMT14 En-De (7e-4 for En-Fr)"),
        "warmup_steps": Setting(
            4000,
            "footnote 8: 4000 warmup steps for En-De (8000 for En-Fr; " + CLINIC + "wmt14_en-de.md: 8000)",
        ),
        "max_tokens": Setting(
            3584,
            "footnote 8: max 3584 tokens per batch, following Ott et al. (2019) ("
            + CLINIC
            + "wmt14_en-de.md: "
            "8192 on 4 GPUs; " + DEEPNMT + ": 3200 on 16 GPUs)",
        ),
        "gradient_accumulation_steps": Setting(
            1, "paper silent; " + CLINIC + "wmt14_en-de.md --update-freq 1 (" + DEEPNMT + ": 8 for En-Fr)"
        ),
        "save_strategy": Setting(
            "epoch", "footnote 8 counts epochs (max 50); fairseq writes checkpoint<E>.pt"
        ),
        "max_grad_norm": Setting(0.0, _FAIRSEQ_SILENT + " (--clip-norm 0: no clipping)"),
        "label_smoothing": Setting(
            0.1, "sec. 4: fairseq's Transformer hyper-parameters (label smoothing 0.1)"
        ),
        "dropout": Setting(0.1, "sec. 4: fairseq's Transformer (transformer_wmt_en_de: dropout 0.1)"),
        "attention_dropout": Setting(
            0.1, CLINIC + "wmt14_en-de.md and " + DEEPNMT + ": --attention-dropout 0.1 (paper silent)"
        ),
        "activation_dropout": Setting(
            0.1, CLINIC + "wmt14_en-de.md and " + DEEPNMT + ": --relu-dropout 0.1 (paper silent)"
        ),
        "num_beams": Setting(4, CLINIC + "eval_wmt_en-de.sh: --beam 4 (En-Fr eval_wmt_en-fr.sh: 5)"),
        "length_penalty": Setting(
            0.6, CLINIC + "eval_wmt_en-de.sh: --lenpen 0.6 (En-Fr eval_wmt_en-fr.sh: 0.8)"
        ),
        "length_penalty_form": Setting("fairseq", "fairseq-generate's --lenpen (len^α)"),
        "average_last_checkpoints": Setting(
            10,
            CLINIC + "eval_wmt_en-de.sh: average_checkpoints.py --num-epoch-checkpoints 10 (CP_POINT_NUM=10)",
        ),
        "precision": Setting(
            "fp16",
            "paper silent; "
            + CLINIC
            + "wmt14_en-de.md and "
            + DEEPNMT
            + ": --fp16 --fp16-scale-window 256 --threshold-loss-scale 0.03125 (dynamic loss scaling)",
        ),
        **_shared_embeddings(CLINIC + "wmt14_en-de.md: --share-all-embeddings (joined dictionary)"),
    },
    "dsinit_matt": {
        "variant": Setting("dsinit_matt", "dsinit-merged-attention"),
        "optimizer": Setting("adam", "sec. 5.1: Adam"),
        "adam_beta1": Setting(0.9, "sec. 5.1: 0.9/0.98 for base"),
        "adam_beta2": Setting(0.98, "sec. 5.1: 0.9/0.98 for base (0.998 for big)"),
        "adam_epsilon": Setting(1e-9, "paper silent; " + ZERO + ": epsilon=1e-9"),
        "weight_decay": Setting(0.0, "paper silent; " + ZERO + " has no weight decay"),
        "learning_rate": Setting(
            7e-4,
            "sec. 5.1: Vaswani et al.'s schedule, whose peak at d 512 and warmup 4k is 512^-0.5 · 4000^-0.5 ≈ 7e-4 "
            "(the same curve as our inverse_sqrt with that peak)",
        ),
        "warmup_steps": Setting(4000, "sec. 5.1: warm-up 4K for base (16K for big)"),
        "max_tokens": Setting(
            budget_for_target_tokens(DSINIT_TARGET_TOKENS[12], DSINIT_PROCESSES),
            "Table 3 row 11/13: 40K target tokens per update for the 12-layer default (25K at 6, 44K at 20: the "
            "paper presets); per process on 8 processes, converted with TARGET_FILL (budget_for_target_tokens)",
        ),
        "gradient_accumulation_steps": Setting(1, "our choice: the 40K are spread over 8 processes instead"),
        "save_strategy": Setting(
            "steps", "sec. 5.1 trains by steps (300K); " + ZERO + " saves every save_freq"
        ),
        "max_grad_norm": Setting(
            5.0, ZERO + ": clip_grad_norm=5.0 (sec. 6's clipping at 1.0 is an ablation of a failing model)"
        ),
        "label_smoothing": Setting(0.1, "sec. 5.1: label smoothing 0.1"),
        "dropout": Setting(
            0.3, "Table 3 rows 11 and 14: dp_r 0.3 for the deep (12/20-layer) models (0.1 at 6)"
        ),
        "attention_dropout": Setting(0.2, "Table 3 rows 11 and 14: dp_a 0.2 for the deep models (0.1 at 6)"),
        "activation_dropout": Setting(0.0, "sec. 5.1: dropout only on residuals and attention weights"),
        "num_beams": Setting(4, "sec. 5.1: beam size 4"),
        "length_penalty": Setting(0.6, "sec. 5.1: length penalty 0.6"),
        "length_penalty_form": Setting("gnmt", "the authors' TensorFlow toolkit uses GNMT's ((5+len)/6)^α"),
        "average_last_checkpoints": Setting(5, "sec. 5.1: averaging the last 5 checkpoints"),
        "precision": Setting(
            "fp32",
            "sec. 5.1: 'we apply mixed-precision training to all big models' — not to the base-width models of "
            "this recipe",
        ),
        "share_encoder_decoder_embeddings": Setting(
            False, "sec. 5.1: target embedding not shared with the source"
        ),
        "tie_word_embeddings": Setting(True, "sec. 5.1: target embedding shared with the softmax projection"),
    },
    "dlcl": {
        "variant": Setting("dlcl", "prenorm-dlcl"),
        "optimizer": Setting("adam", "sec. 4.1: Adam"),
        "adam_beta1": Setting(0.9, "sec. 4.1: β1 0.9"),
        "adam_beta2": Setting(0.997, "sec. 4.1: β2 0.997 for pre-norm"),
        "adam_epsilon": Setting(1e-8, "sec. 4.1: ε 1e-8"),
        "weight_decay": Setting(0.0, _FAIRSEQ_SILENT),
        "learning_rate": Setting(2e-3, "appendix Table 7: deep models lr 2e-3 (1e-3 for pre-norm base)"),
        "warmup_steps": Setting(16000, "appendix Table 7: deep models warmup 16k (8k for pre-norm base)"),
        "max_tokens": Setting(4096, DLCL_SCRIPT + ": batch_size=4096 tokens per GPU"),
        "gradient_accumulation_steps": Setting(
            2,
            DLCL_SCRIPT
            + ": update_freq=2 (8192 per GPU, appendix Table 7's deep batch; lr 2e-3 is tuned for it)",
        ),
        "save_strategy": Setting("epoch", "sec. 4.1: checkpoints 'saved at the end of an epoch'"),
        "max_grad_norm": Setting(0.0, _FAIRSEQ_SILENT + " (--clip-norm 0: no clipping)"),
        "label_smoothing": Setting(0.1, "sec. 4.1: label smoothing 0.1"),
        "dropout": Setting(0.1, "sec. 4.1: Transformer-Base residual dropout 0.1"),
        "attention_dropout": Setting(0.1, "sec. 4.1: P_att 0.1 for pre-norm"),
        "activation_dropout": Setting(0.1, "sec. 4.1: P_ff 0.1 for pre-norm"),
        "num_beams": Setting(4, "sec. 4.1: beam 4 (En-De)"),
        "length_penalty": Setting(0.6, "sec. 4.1: length penalty 0.6 (En-De)"),
        "length_penalty_form": Setting("fairseq", "fairseq-py's --lenpen (len^α)"),
        "average_last_checkpoints": Setting(
            5, "sec. 4.1: the last 5 epoch checkpoints (" + DLCL_SCRIPT + ": --num-epoch-checkpoints 5)"
        ),
        "precision": Setting(
            "fp16",
            "paper silent (sec. 4.1: fairseq-py on 8 Titan V GPUs); "
            + DLCL_SCRIPT
            + ": '# set fp16=1 if possible' (fairseq --fp16; the released script leaves it unset, fp32)",
        ),
        **_shared_embeddings("sec. 4.1: a shared source/target vocabulary (fairseq --share-all-embeddings)"),
    },
    "shared_layers": {
        "variant": Setting("shared_layers", "recurrent-shared-layers"),
        "optimizer": Setting("adam", "sec. 5.1: Adam"),
        "adam_beta1": Setting(0.9, "sec. 5.1: β1 0.9"),
        "adam_beta2": Setting(0.98, "sec. 5.1: β2 0.98"),
        "adam_epsilon": Setting(1e-9, "sec. 5.1: ε 1e-9"),
        "weight_decay": Setting(0.0, _FAIRSEQ_SILENT),
        "learning_rate": Setting(
            2e-3, "paper silent ('followed fairseq'); our choice: prenorm-dlcl's deep 2e-3"
        ),
        "warmup_steps": Setting(16000, "sec. 5.1: warmup_steps 16000"),
        "max_tokens": Setting(8196, "sec. 5.1: 8196 tokens per GPU (sic)"),
        "gradient_accumulation_steps": Setting(
            1, "sec. 5.1: 8196 tokens per GPU on 8 GPUs, no accumulation stated"
        ),
        "save_strategy": Setting("epoch", "paper silent; fairseq's default: a checkpoint per epoch"),
        "max_grad_norm": Setting(0.0, _FAIRSEQ_SILENT + " (--clip-norm 0: no clipping)"),
        "label_smoothing": Setting(0.1, "sec. 5.1: label smoothing 0.1"),
        "dropout": Setting(0.1, "paper silent; fairseq Transformer-Base dropout 0.1"),
        "attention_dropout": Setting(
            0.1,
            "sec. 5.1: the baseline is Wang et al. (2019)'s deep pre-norm Transformer; wangqiangneu/dlcl "
            "simple_dlcl_transformer.py, dlcl_transformer_prenorm_wmt_en_de: attention_dropout 0.1",
        ),
        "activation_dropout": Setting(
            0.1,
            "sec. 5.1: the baseline is Wang et al. (2019)'s deep pre-norm Transformer; wangqiangneu/dlcl "
            "simple_dlcl_transformer.py, dlcl_transformer_prenorm_wmt_en_de: relu_dropout 0.1",
        ),
        "num_beams": Setting(4, "sec. 5.1: beam size 4"),
        "length_penalty": Setting(0.6, "sec. 5.1: length penalty α 0.6"),
        "length_penalty_form": Setting("fairseq", "fairseq's --lenpen (len^α)"),
        "average_last_checkpoints": Setting(
            5,
            "sec. 5.1 averages checkpoints (count not given); our choice: the last 5 epochs, as prenorm-dlcl",
        ),
        "precision": Setting(
            "fp16",
            "paper silent (sec. 5.1: fairseq on 8 P100 GPUs); our choice: fp16 as its baseline's script ("
            + DLCL_SCRIPT
            + ": '# set fp16=1 if possible')",
        ),
        **_shared_embeddings("sec. 5.1: a 32k joint source/target BPE vocabulary"),
    },
    "deep_decoder": {
        "variant": Setting("deep_decoder", "deep-decoder-cad-crt"),
        "optimizer": Setting("adam", "sec. 5: other settings as Vaswani et al. (2017): Adam"),
        "adam_beta1": Setting(0.9, "sec. 5 → Vaswani et al.: β1 0.9"),
        "adam_beta2": Setting(0.98, "sec. 5 → Vaswani et al.: β2 0.98"),
        "adam_epsilon": Setting(1e-9, "sec. 5 → Vaswani et al.: ε 1e-9"),
        "weight_decay": Setting(0.0, "sec. 5 → Vaswani et al.: none"),
        "learning_rate": Setting(
            7e-4, "sec. 5 → Vaswani et al.'s schedule: peak 512^-0.5 · 4000^-0.5 ≈ 7e-4"
        ),
        "warmup_steps": Setting(4000, "sec. 5 → Vaswani et al.: warmup 4000"),
        "max_tokens": Setting(4096, "sec. 5: batch size 4096 tokens per GPU"),
        "gradient_accumulation_steps": Setting(
            1, "sec. 5: 4096 tokens per GPU on 8 GPUs, no accumulation stated"
        ),
        "save_strategy": Setting(
            "steps", "sec. 5 trains by steps (200K) → Vaswani et al.: a checkpoint every 10 min"
        ),
        "max_grad_norm": Setting(0.0, "sec. 5 → Vaswani et al.: no clipping"),
        "label_smoothing": Setting(0.1, "sec. 5 → Vaswani et al.: label smoothing 0.1"),
        "dropout": Setting(0.1, "sec. 5 → Vaswani et al.: P_drop 0.1"),
        "attention_dropout": Setting(0.0, "sec. 5 → Vaswani et al.: residual dropout only"),
        "activation_dropout": Setting(0.0, "sec. 5 → Vaswani et al.: residual dropout only"),
        "num_beams": Setting(4, "sec. 5 → Vaswani et al.: beam 4"),
        "length_penalty": Setting(0.6, "sec. 5 → Vaswani et al.: α 0.6"),
        "length_penalty_form": Setting(
            "fairseq",
            "no public code (github.com/bcmi220/ddnmt announced); fairseq's len^α as the other papers here: the GNMT "
            "form was an inference and decodes short (bench/results/depth_multi30k_12epochs.md: length ratio 0.90)",
        ),
        "average_last_checkpoints": Setting(5, "sec. 5 → Vaswani et al.: base models average the last 5"),
        "precision": Setting(
            "fp16",
            "paper silent (sec. 5: eight V100 GPUs; no public code); our choice: fp16, the V100's tensor-core "
            "precision, as the other fairseq-era recipes here",
        ),
        **_shared_embeddings("sec. 5 → Vaswani et al.: shared source-target BPE and embeddings"),
    },
    "marian": {
        "variant": Setting(
            "deep_nmt", "deep_nmt_hf before issue #14: the post-LN core, as stock MarianMTModel"
        ),
        "optimizer": Setting("adam", "deep_nmt_hf's default (Adam, no weight decay)"),
        "adam_beta1": Setting(0.9, "deep_nmt_hf's default"),
        "adam_beta2": Setting(0.98, "deep_nmt_hf's default"),
        "adam_epsilon": Setting(1e-8, "deep_nmt_hf's default (PyTorch's)"),
        "weight_decay": Setting(0.0, "deep_nmt_hf's default"),
        "learning_rate": Setting(5e-4, "deep_nmt_hf's default"),
        "warmup_steps": Setting(4000, "deep_nmt_hf's default"),
        "max_tokens": Setting(None, "deep_nmt_hf's default: sentence batches (--batch-size)"),
        "max_grad_norm": Setting(1.0, "deep_nmt_hf's default (Transformers' Trainer default)"),
        "label_smoothing": Setting(0.1, "deep_nmt_hf's default"),
        "dropout": Setting(0.1, "MarianConfig's default"),
        "attention_dropout": Setting(0.0, "MarianConfig's default"),
        "activation_dropout": Setting(0.0, "MarianConfig's default"),
        "num_beams": Setting(4, "deep_nmt_hf's default"),
        "length_penalty": Setting(1.0, "Transformers' GenerationConfig default"),
        "length_penalty_form": Setting("fairseq", "Transformers' len^α"),
        "average_last_checkpoints": Setting(None, "deep_nmt_hf's default: no averaging"),
        "gradient_accumulation_steps": Setting(1, "deep_nmt_hf's default: no accumulation"),
        "save_strategy": Setting("steps", "deep_nmt_hf's default: a checkpoint every save_steps"),
        "precision": Setting("fp32", "deep_nmt_hf's default (every run trained in fp32 before issue #48)"),
        **_shared_embeddings("MarianConfig's default: one shared embedding, tied output"),
    },
}


def get_recipe(name: str) -> dict[str, Setting]:
    """The recipe called `name`; ValueError listing the valid names otherwise."""
    if name not in RECIPES:
        raise ValueError(f"recipe={name!r} is unknown; valid recipes: {', '.join(RECIPES)}")
    return RECIPES[name]


def recipe_options(name: str) -> dict[str, Any]:
    """The recipe's `TrainingOptions` fields (variant included), less `RUNTIME_FIELDS` (`train` resolves those)."""
    recipe = get_recipe(name)
    return {k: s.value for k, s in recipe.items() if k in OPTION_FIELDS and k not in RUNTIME_FIELDS}


def recipe_precision(name: str) -> str:
    """The precision the recipe's paper trained in (fp32 where the recipe does not say)."""
    setting = get_recipe(name).get("precision")
    return setting.value if setting is not None else "fp32"


def recipe_config(name: str) -> dict[str, Any]:
    """The recipe's config fields (dropouts, embedding sharing)."""
    return {k: s.value for k, s in get_recipe(name).items() if k not in OPTION_FIELDS}


def recipe_record(name: str, used: dict[str, Any] | None = None) -> dict[str, Any]:
    """{"name", "settings": {field: {"value", "source", "used"}}} for metrics.json and the model card; `used`
    holds the values the run actually used (an explicit option that overrode the recipe shows there)."""
    used = used or {}
    settings = {}
    for field, setting in get_recipe(name).items():
        entry = {"value": setting.value, "source": setting.source}
        if field in used:
            entry["used"] = used[field]
        settings[field] = entry
    return {"name": name, "settings": settings}


def describe(name: str, used: dict[str, Any] | None = None) -> str:
    """The recipe as printed at the start of training: one line per value, its source, and overrides."""
    record = recipe_record(name, used)
    lines = [f"recipe {name!r} (explicit options win):"]
    for field, entry in record["settings"].items():
        override = ""
        if "used" in entry and entry["used"] != entry["value"]:
            override = f"  -> overridden: {entry['used']!r}"
        lines.append(f"  {field} = {entry['value']!r}  [{entry['source']}]{override}")
    return "\n".join(lines)
