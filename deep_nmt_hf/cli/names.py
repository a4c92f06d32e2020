"""The names the parser lists, importable without torch / transformers: read from `model/registry.py` (variants,
choices), `science/preset_names.py` (paper presets) and `training/precision.py` (precisions).

`deep-nmt --help` and argument errors must answer without importing the model code. The registry is plain data
(standard library only), `deep_nmt_hf/model/__init__.py` imports nothing, and the package's public names are lazy
(PEP 562), so importing this module stays light. A new variant or choice value goes into the registry only, a paper
preset's name into science/preset_names.py.
"""

from __future__ import annotations

from typing import Any

from ..model.registry import (
    CHOICES,
    FLAG,
    LOSS_WEIGHT,
    MODEL_TYPE_NAMES,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    PROBABILITY,
    VARIANT_SPECS,
    Rule,
    check_choice,
    check_rule,
)
from ..science.preset_names import PAPER_PRESET_NAMES
from ..training.precision import PRECISIONS  # `train --precision`

# short name for `--variant` -> model_type (`deep_nmt_hf.VARIANTS` maps the same names to config classes)
VARIANT_MODEL_TYPES: dict[str, str] = {name: spec.model_type for name, spec in VARIANT_SPECS.items()}

# config field -> the values `DeepNMTConfig.check` accepts (the registry's table itself)
CHOICE_VALUES: dict[str, tuple[str, ...]] = CHOICES


# config field -> its named single-field rule (`DeepNMTConfig.FIELD_RULES` holds the same objects for these fields:
# tests/cli/test_cli_launcher.py), so that `train --set FIELD=VALUE` and the shape flags are checked before torch
CONFIG_FIELD_RULES: dict[str, Rule] = {
    **dict.fromkeys(("vocab_size", "d_model", "encoder_layers", "decoder_layers"), POSITIVE_INTEGER),
    **dict.fromkeys(("encoder_attention_heads", "decoder_attention_heads"), POSITIVE_INTEGER),
    **dict.fromkeys(("encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings"), POSITIVE_INTEGER),
    **dict.fromkeys(("encoder_layer_repeats", "decoder_layer_repeats"), POSITIVE_INTEGER),
    **dict.fromkeys(("dropout", "attention_dropout", "activation_dropout", "label_smoothing"), PROBABILITY),
    **dict.fromkeys(("layer_norm_eps", "ald_temperature"), POSITIVE_NUMBER),
    **dict.fromkeys(("ddr_loss_weight", "ald_loss_weight"), LOSS_WEIGHT),
    **dict.fromkeys(("admin_profiled", "encoder_reinject_input", "decoder_reinject_input"), FLAG),
    **dict.fromkeys(("encoder_share_layers", "decoder_share_layers", "layernorm_embedding"), FLAG),
    **dict.fromkeys(("admin_first_omega", "embedding_bias"), FLAG),
}


def check_config_values(fields: dict[str, Any]) -> None:
    """The config fields named here (`CONFIG_FIELD_RULES`, `CHOICE_VALUES`) against their own rules, with the
    config's own checks (registry's `check_rule` / `check_choice`: ValueError naming field, value and what is
    allowed); other fields and the rules between fields are the config class's, checked once torch is imported."""
    for name, value in fields.items():
        if name in CONFIG_FIELD_RULES:
            check_rule(name, value, CONFIG_FIELD_RULES[name])
        elif name in CHOICE_VALUES:
            check_choice(name, value, CHOICE_VALUES[name])


def variant_names() -> list[str]:
    """Every value `--variant` accepts: model types, then short names."""
    return list(MODEL_TYPE_NAMES) + sorted(VARIANT_MODEL_TYPES)


__all__ = [
    "CHOICE_VALUES",
    "CONFIG_FIELD_RULES",
    "MODEL_TYPE_NAMES",
    "PAPER_PRESET_NAMES",
    "PRECISIONS",
    "VARIANT_MODEL_TYPES",
    "check_config_values",
    "variant_names",
]
