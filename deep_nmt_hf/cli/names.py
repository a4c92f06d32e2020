"""Static tables for the parser: variant names and config choices, importable without torch / transformers.

`deep-nmt --help` and argument errors must answer without importing the model code, so the names the help text
lists live here as plain data. tests/test_cli.py checks that they equal what `deep_nmt_hf` registers
(`MODEL_TYPES`, `VARIANTS`) and `configuration_deep_nmt.CHOICES`: a new variant or choice must be added here too.
"""

from __future__ import annotations

# model_type of every registered config class, in `deep_nmt_hf.MODEL_TYPES` order
MODEL_TYPE_NAMES: tuple[str, ...] = (
    "deep_nmt",
    "deep_nmt_admin",
    "deep_nmt_deepnorm",
    "deep_nmt_dsinit_matt",
    "deep_nmt_dlcl",
    "deep_nmt_shared_layers",
    "deep_nmt_deep_decoder",
)

# short name for `--variant` -> model_type (`deep_nmt_hf.VARIANTS` maps the same names to config classes)
VARIANT_MODEL_TYPES: dict[str, str] = {
    "base": "deep_nmt",
    "admin": "deep_nmt_admin",
    "deepnorm": "deep_nmt_deepnorm",
    "dsinit_matt": "deep_nmt_dsinit_matt",
    "dlcl": "deep_nmt_dlcl",
    "shared_layers": "deep_nmt_shared_layers",
    "deep_decoder": "deep_nmt_deep_decoder",
}

# config field -> implemented values (`configuration_deep_nmt.CHOICES[field][0]`)
CHOICE_VALUES: dict[str, tuple[str, ...]] = {
    "layer_norm_position": ("post", "pre"),
    "residual_scaling": ("none", "admin", "deepnorm"),
    "init_method": ("xavier", "ds_init", "deepnorm", "normal"),
    "admin_omega": ("trainable", "fixed"),
    "admin_init": ("profile", "analytic"),
    "decoder_attention": ("self", "merged"),
    "encoder_layer_aggregation": ("residual", "dlcl"),
    "decoder_layer_aggregation": ("residual", "dlcl"),
    "dlcl_init": ("avg", "one"),
    "encoder_layer_order": ("cycle", "zigzag"),
    "decoder_layer_order": ("cycle", "zigzag"),
}


# `TrainingOptions.precision` values (`deep_nmt_hf.training.precision.PRECISIONS`): `train --precision`
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")


def variant_names() -> list[str]:
    """Every value `--variant` accepts: model types, then short names."""
    return list(MODEL_TYPE_NAMES) + sorted(VARIANT_MODEL_TYPES)


# `deep_nmt_hf.science.paper_presets.PRESETS`: each paper's headline setting, `deep-nmt train --preset NAME`
PAPER_PRESET_NAMES: tuple[str, ...] = (
    "admin-60-12-wmt14-en-fr",
    "admin-60-12-wmt14-en-de",
    "dsinit-matt-12-12-wmt14-en-de",
    "dsinit-matt-20-20-wmt14-en-de",
    "dlcl-30-6-wmt16-en-de",
    "shared-layers-t4-enc20-dec4-wmt16-en-de",
    "deep-decoder-27-27-wmt14-en-de",
)
