"""Each variant's facts in one spec, and the names of the model family, as plain data.

A `VariantSpec` holds everything that makes a variant: its `model_type` and class names, the config fields its
paper fixes (`defaults`: the config class is these overrides of `DeepNMTConfig`'s field defaults and nothing
else), its named shapes, its paper and card, and the stock classes it may be folded into. Everything else reads
these tables instead of keeping its own copy (as Transformers derives its Auto mappings from the torch-free
`CONFIG_MAPPING_NAMES`):

* `configuration_deep_nmt.py` builds each variant's config class from its spec (`variant_config`), and takes the
  values a choice field accepts from `CHOICES`; it imports this file relatively, so it ships in every checkpoint;
* `modeling_deep_nmt.py` builds the thin `<Stem>Model` / `<Stem>ForConditionalGeneration` classes the same way;
* `deep_nmt_hf/__init__.py` exports `public_classes()` and builds `VARIANTS` / `MODEL_TYPES` from the specs;
* `publish/folding.py` folds only what `FOLDABLE` and a spec's `folds_into` allow; `publish/hub.py` takes a card's
  title and paper from the spec;
* `cli/names.py` re-exports the names for `deep-nmt --help`, which answers without importing torch.

This file imports nothing but the standard library: it ships with checkpoints (remote code) and is loaded by the
light `deep-nmt` launcher before torch or transformers. The guide to adding a variant: docs/adding_a_variant.md.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

# the stock Transformers classes a fold can produce, by `layer_norm_position` (publish/folding.py); a post-LN model
# with fairseq's positions (`position_embedding="fairseq_sinusoidal"`, converted from fairseq) folds into FSMT
MARIAN, PEGASUS, FSMT = "MarianMTModel", "PegasusForConditionalGeneration", "FSMTForConditionalGeneration"
FOLD_TARGETS: dict[str, str] = {"post": MARIAN, "pre": PEGASUS}
# the length-penalty forms of `generate` (length_penalty.py: Transformers' len^α, GNMT's ((5+len)/6)^α)
LENGTH_PENALTY_FORMS = ("fairseq", "gnmt")


def is_number(value: Any) -> bool:
    """An int or a float, not a bool."""
    return not isinstance(value, bool) and isinstance(value, (int, float))


def is_integer(value: Any) -> bool:
    """An int, not a bool."""
    return not isinstance(value, bool) and isinstance(value, int)


# (test of a value, what the error says after "field=value"): the named single-field rules, attached to the config's
# fields by `configuration_deep_nmt.ruled`; plain data here so that the light launcher checks `--set` values and
# flags against them before torch is imported (cli/names.py's CONFIG_FIELD_RULES)
Rule = tuple[Callable[[Any], bool], str]
POSITIVE_INTEGER: Rule = (lambda v: is_integer(v) and v > 0, "is not allowed: it must be a positive integer")
PROBABILITY: Rule = (
    lambda v: is_number(v) and 0 <= v < 1,
    "is not allowed: a probability that must lie in [0, 1)",
)
POSITIVE_NUMBER: Rule = (lambda v: is_number(v) and v > 0, "must be a positive number")
FLAG: Rule = (lambda v: isinstance(v, bool), "must be true or false")
LOSS_WEIGHT: Rule = (lambda v: is_number(v) and v >= 0, "must be a number ≥ 0 (0 turns the loss off)")


def check_rule(field: str, value: Any, rule: Rule) -> None:
    """Raise ValueError naming `field`, `value` and what is allowed unless `value` passes `rule`."""
    valid, requirement = rule
    if not valid(value):
        raise ValueError(f"{field}={value!r} {requirement}")


def check_choice(field: str, value: Any, allowed: tuple[str, ...]) -> None:
    """Raise ValueError unless `value` is one of the `allowed` values of the choice field `field`."""
    if value not in allowed:
        valid = ", ".join(repr(v) for v in allowed)
        raise ValueError(f"{field}={value!r} is not a valid choice; allowed: {valid}")


class VariantSpec(NamedTuple):
    """One registered model type: everything that distinguishes it from the core `DeepNMTConfig`."""

    model_type: str
    stem: str  # classes: {stem}Config, {stem}Model, {stem}ForConditionalGeneration
    shapes: dict[str, dict[str, Any]]  # `deep-nmt train --preset NAME` -> config fields (the class's PRESETS)
    defaults: dict[str, Any] = {}  # config fields the paper fixes: the config class's field defaults
    summary: str = ""  # one line: the idea and its equation (the classes' docstrings)
    paper: str = "vaswani2017"  # the key of its paper in model_cards/papers.yaml (cited first by the card)
    title: str = ""  # the model card's title
    folds_into: tuple[str, ...] = ()  # the stock classes a fold may produce (FOLD_TARGETS values); () = never

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
# Transformer-base width (Vaswani et al. 2017, Table 3), the width of every paper's main setting
BASE_WIDTH: dict[str, Any] = {"d_model": 512, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048}
BASE_WIDTH |= {"encoder_attention_heads": 8, "decoder_attention_heads": 8}


def _layers(encoder: int, decoder: int, **fields: Any) -> dict[str, Any]:
    return {"encoder_layers": encoder, "decoder_layers": decoder, **fields}


# short name (`deep-nmt train --variant NAME`) -> variant, in registration order (`deep_nmt_hf.MODEL_TYPES`)
VARIANT_SPECS: dict[str, VariantSpec] = {
    "base": VariantSpec(
        "deep_nmt",
        "DeepNMT",
        {"6L-6L": _layers(6, 6), "tiny": _layers(6, 2, **TINY_WIDTH)},
        summary="The Transformer of Vaswani et al. (2017), post-LN `LN(x + f(x))` or pre-LN `x + f(LN(x))`.",
        title="Deep Transformer (base)",
        folds_into=(MARIAN, PEGASUS, FSMT),
    ),
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
        defaults={
            "layer_norm_position": "post",
            "residual_scaling": "admin",
            **_layers(60, 12),
            **BASE_WIDTH,
        },
        summary="ADMIN: post-LN, x_i = LN(ω_i ⊙ x_{i-1} + f_i(x_{i-1})) with ω profiled (Liu et al. 2020, eq. 2).",
        paper="admin",
        title="ADMIN (adaptive model initialization)",
        folds_into=(MARIAN, FSMT),
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
        defaults={"layer_norm_position": "post", "residual_scaling": "deepnorm", "init_method": "deepnorm"}
        | {**_layers(60, 12), **BASE_WIDTH},
        summary="DeepNorm (DeepNet): post-LN, x_i = LN(α x_{i-1} + f_i(x_{i-1})) with β-scaled init.",
        paper="deepnet",
        title="DeepNorm",
        folds_into=(MARIAN, FSMT),
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
        defaults={"layer_norm_position": "post", "init_method": "ds_init", "ds_init_alpha": 1.0}
        | {"decoder_attention": "merged", **_layers(12, 12), **BASE_WIDTH},
        summary="DS-Init + merged attention: post-LN, depth-scaled init, MAtt decoder (Zhang et al. 2019, eq. 16-17).",
        paper="dsinit",
        title="DS-Init + merged attention (MAtt)",
        folds_into=(
            MARIAN,
            FSMT,
        ),  # with decoder_attention="self" only: MAtt has no stock equivalent (FOLDABLE)
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
        defaults={"layer_norm_position": "pre", "encoder_layer_aggregation": "dlcl"}
        | {"decoder_layer_aggregation": "dlcl", **_layers(30, 6), **BASE_WIDTH},
        summary="Pre-norm + DLCL: each layer reads a learned combination of all earlier layer outputs "
        "(Wang et al. 2019, eqs. 8-9).",
        paper="dlcl",
        title="Pre-norm + dynamic linear combination of layers (DLCL)",
        folds_into=(),  # DLCL has no stock equivalent
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
        # the paper's setup (sec. 5.1.2): 8 / 4 unique layers looped 5 / 2 times, the input re-injected (eq. 7)
        defaults={"layer_norm_position": "pre", **_layers(8, 4), "encoder_layer_repeats": 5}
        | {
            "decoder_layer_repeats": 2,
            "encoder_reinject_input": True,
            "decoder_reinject_input": True,
            **BASE_WIDTH,
        },
        summary="Recurrent shared layers: few unique pre-LN layers looped in depth, the embedded input re-injected "
        "at every loop (Li and Li 2021, eq. 7).",
        paper="shared_layers",
        title="Recurrent shared layers",
        folds_into=(PEGASUS,),  # without input re-injection, unrolled (layer_sharing.unroll)
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
        # cross_attention_drop_layers None: round(21/27 × decoder depth), the paper's best share (sec. 4.3)
        defaults={
            "layer_norm_position": "pre",
            **_layers(15, 15),
            **BASE_WIDTH,
            "cross_attention_drop_layers": None,
        }
        | {"cross_attention_drop_rate": 1.0, "ddr_loss_weight": 1.0, "ald_loss_weight": 1.0}
        | {"ald_max_ratio": 0.3, "ald_temperature": 0.1},
        summary="Deep decoders that do not collapse: cross-attention drop on the lowest decoder layers plus the DDR "
        "and ALD training losses (deep-decoder-cad-crt).",
        paper="deep_decoder",
        title="Deep decoder with cross-attention drop (CAD) and collapse-reducing training",
        folds_into=(PEGASUS,),  # dropped cross-attentions become zero ones; the losses are training-only
    ),
}

# model_type of every registered config class, in registration order
MODEL_TYPE_NAMES: tuple[str, ...] = tuple(spec.model_type for spec in VARIANT_SPECS.values())

# config field -> the values `DeepNMTConfig.validate` accepts (the first is not necessarily the default)
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
    "decoder_start_embedding": ("token", "zero"),
}

# choice field -> the values a fold into a stock class keeps exactly (publish/folding.py): an allow-list, so a new
# value (a new residual form, say) is refused until it is added here with the fold that expresses it
FOLDABLE: dict[str, tuple[str, ...]] = {
    "layer_norm_position": ("post", "pre"),  # FOLD_TARGETS
    "residual_scaling": ("none", "admin", "deepnorm"),  # ω / α folded into the LayerNorms and linear maps
    "init_method": CHOICES["init_method"],  # how weights started does not matter once trained
    "admin_omega": CHOICES["admin_omega"],
    "admin_init": CHOICES["admin_init"],
    "decoder_attention": ("self",),  # merged attention has no stock equivalent
    "encoder_layer_aggregation": ("residual",),  # DLCL has no stock equivalent
    "decoder_layer_aggregation": ("residual",),
    "dlcl_init": CHOICES["dlcl_init"],  # unused without DLCL
    # fairseq's table folds into FSMT (post-LN only: folding._converted_model_problems); a learned one into none
    "position_embedding": ("sinusoidal", "fairseq_sinusoidal"),
    "decoder_start_embedding": ("token",),  # zero's zero-vector start (convert_zero.py): no stock equivalent
    "encoder_layer_order": CHOICES["encoder_layer_order"],  # shared layers are unrolled first
    "decoder_layer_order": CHOICES["decoder_layer_order"],
}


def public_classes() -> dict[str, str]:
    """Every variant's public class name -> the module of `model/` that defines it, in registry order (config,
    base model, seq2seq LM): what `deep_nmt_hf` exports (its `__all__`, lazily imported from these modules)."""
    names: dict[str, str] = {}
    for spec in VARIANT_SPECS.values():
        names[spec.config_name] = "configuration_deep_nmt"
        names[spec.model_name] = "modeling_deep_nmt"
        names[spec.lm_name] = "modeling_deep_nmt"
    return names


__all__ = [
    "BASE_WIDTH",
    "FLAG",
    "LENGTH_PENALTY_FORMS",
    "LOSS_WEIGHT",
    "POSITIVE_INTEGER",
    "POSITIVE_NUMBER",
    "PROBABILITY",
    "Rule",
    "check_choice",
    "check_rule",
    "is_integer",
    "is_number",
    "CHOICES",
    "FOLDABLE",
    "FOLD_TARGETS",
    "MODEL_TYPE_NAMES",
    "TINY_WIDTH",
    "VARIANT_SPECS",
    "VariantSpec",
    "public_classes",
]
