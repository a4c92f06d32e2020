"""The names of the model family, as plain data: variants, config choices, shape presets and paper presets.

Everything else reads these tables instead of keeping its own copy (as Transformers derives its Auto mappings from
the torch-free `CONFIG_MAPPING_NAMES`):

* `deep_nmt_hf/__init__.py` builds `VARIANTS` / `MODEL_TYPES` by looking up `VARIANT_SPECS[name].config_name`
  (etc.) in the config and modeling modules;
* `configuration_deep_nmt.py` takes each class's `model_type` and `PRESETS`, and the values `check` accepts, from
  here; it imports this file relatively, so it is copied into every saved checkpoint beside it;
* `cli/names.py` re-exports the names for `deep-nmt --help`, which answers without importing torch;
* `science/paper_presets.py` builds `PRESETS` in the order of `PAPER_PRESET_NAMES`.

This file imports nothing but the standard library: it ships with checkpoints (remote code) and is loaded by the
light `deep-nmt` launcher before torch or transformers.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class VariantSpec(NamedTuple):
    """One registered model type: its `model_type`, the stem of its class names and its named shapes."""

    model_type: str
    stem: str  # classes: {stem}Config, {stem}Model, {stem}ForConditionalGeneration
    shapes: dict[str, dict[str, Any]]  # `deep-nmt train --preset NAME` -> config fields (the class's PRESETS)

    @property
    def config_name(self) -> str:
        return f"{self.stem}Config"

    @property
    def model_name(self) -> str:
        return f"{self.stem}Model"

    @property
    def lm_name(self) -> str:
        return f"{self.stem}ForConditionalGeneration"


TINY_WIDTH: dict[str, Any] = {"d_model": 64, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}
TINY_WIDTH |= {"encoder_attention_heads": 4, "decoder_attention_heads": 4}


def _layers(encoder: int, decoder: int, **fields: Any) -> dict[str, Any]:
    return {"encoder_layers": encoder, "decoder_layers": decoder, **fields}


# short name (`deep-nmt train --variant NAME`) -> variant, in registration order (`deep_nmt_hf.MODEL_TYPES`)
VARIANT_SPECS: dict[str, VariantSpec] = {
    "base": VariantSpec("deep_nmt", "DeepNMT", {"6L-6L": _layers(6, 6), "tiny": _layers(6, 2, **TINY_WIDTH)}),
    "admin": VariantSpec(
        "deep_nmt_admin",
        "Admin",
        {
            "60L-12L": _layers(60, 12),
            "36L-12L": _layers(36, 12),
            "18L-18L": _layers(18, 18),
            "6L-6L": _layers(6, 6),
            "tiny": _layers(12, 2, **TINY_WIDTH),
        },
    ),
    "deepnorm": VariantSpec(
        "deep_nmt_deepnorm",
        "DeepNorm",
        {
            "60L-12L": _layers(60, 12),
            "100L-100L": _layers(100, 100),
            "6L-6L": _layers(6, 6),
            "tiny": _layers(12, 2, **TINY_WIDTH),
        },
    ),
    "dsinit_matt": VariantSpec(
        "deep_nmt_dsinit_matt",
        "DSInitMAtt",
        {
            "12L-12L": _layers(12, 12),
            "20L-20L": _layers(20, 20),
            "6L-6L": _layers(6, 6),
            "tiny": _layers(8, 4, **TINY_WIDTH),
        },
    ),
    "dlcl": VariantSpec(
        "deep_nmt_dlcl",
        "DLCL",
        {
            "30L-6L": _layers(30, 6),
            "25L-6L": _layers(25, 6),
            "6L-6L": _layers(6, 6),
            "tiny": _layers(12, 2, **TINY_WIDTH),
        },
    ),
    # recurrent-shared-layers Table 1 rows (their decoder loops are not stated; the setup's 2 is kept)
    "shared_layers": VariantSpec(
        "deep_nmt_shared_layers",
        "SharedLayers",
        {
            "setup": {},
            "stack-T4-enc8-dec4": {"encoder_layer_repeats": 4},
            "stack-T4-enc20-dec4": {"encoder_layer_repeats": 4, "encoder_layers": 20},
            "chain-T5-enc8-dec4": {"encoder_layer_order": "zigzag", "decoder_layer_order": "zigzag"},
            "tiny": _layers(3, 2, encoder_layer_repeats=3, **TINY_WIDTH),
        },
    ),
    "deep_decoder": VariantSpec(
        "deep_nmt_deep_decoder",
        "DeepDecoder",
        {
            "15L-15L": _layers(15, 15),
            "27L-27L": _layers(27, 27),
            "6L-6L": _layers(6, 6),
            "tiny": _layers(6, 6, **TINY_WIDTH),
        },
    ),
}

# model_type of every registered config class, in registration order
MODEL_TYPE_NAMES: tuple[str, ...] = tuple(spec.model_type for spec in VARIANT_SPECS.values())

# config field -> the values `DeepNMTConfig.check` accepts (the first is not necessarily the default)
CHOICES: dict[str, tuple[str, ...]] = {
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
    "position_embedding": ("sinusoidal", "fairseq_sinusoidal", "learned"),
}

# each paper's headline setting (`deep_nmt_hf.science.paper_presets.PRESETS`, same order): `train --preset NAME`
PAPER_PRESET_NAMES: tuple[str, ...] = (
    "admin-60-12-wmt14-en-fr",
    "admin-60-12-wmt14-en-de",
    "dsinit-matt-12-12-wmt14-en-de",
    "dsinit-matt-20-20-wmt14-en-de",
    "dlcl-30-6-wmt16-en-de",
    "shared-layers-t4-enc20-dec4-wmt16-en-de",
    "deep-decoder-27-27-wmt14-en-de",
)

__all__ = ["CHOICES", "MODEL_TYPE_NAMES", "PAPER_PRESET_NAMES", "TINY_WIDTH", "VARIANT_SPECS", "VariantSpec"]
