"""DeepNMTConfig: every architectural choice of the deep_nmt_hf model family in one validated dataclass config.

The core is the Vaswani et al. (2017) encoder-decoder Transformer; each paper in the family changes one
orthogonal choice (see ../shared/DESIGN.md). Field names follow Transformers (`d_model`, `encoder_layers`,
`encoder_ffn_dim`, ...) so that stock tooling (`run_translation.py`, `generate`, pipelines) reads them.

Written the Transformers 5 way (as `MarianConfig`): Transformers makes every config class a keyword-only
dataclass, so each field is declared once, typed, with its default (and, for a single-field rule, its rule:
`ruled(default, RULE)`), derived defaults are filled in `__post_init__`, and the rules are `validate_*` methods.
They raise `ValueError` with our messages themselves rather than through huggingface_hub's `@strict` decorator,
whose errors are no `ValueError` and whose type checks would answer before our messages name what is allowed.
A variant's config class is its registry spec's `defaults` as field-default overrides (`variant_config`): no
`__init__`, no copy of a field.

This file ships with saved checkpoints (`trust_remote_code`): it imports nothing but transformers and its flat
siblings pipeline_shipping.py and registry.py (which ship too). The names (model types, choice values, shape
presets, each variant's defaults) come from registry.py.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from .pipeline_shipping import served_by_the_registered_task
from .registry import (  # the single-field rules: plain data, read by the launcher's early checks too
    CHOICES,
    FLAG,
    LOSS_WEIGHT,
    POSITIVE_INTEGER,
    POSITIVE_NUMBER,
    PROBABILITY,
    VARIANT_SPECS,
    Rule,
    VariantSpec,
    check_choice,
    check_rule,
)
from .registry import is_integer as _integer
from .registry import is_number as _number


def ruled(default: Any, rule: Rule) -> Any:
    """A field with its default and its single-field rule (`validate_fields` applies it; `FIELD_RULES` lists it)."""
    return dataclasses.field(default=default, metadata={"rule": rule})


SPECIAL_TOKEN_IDS = ("pad_token_id", "eos_token_id", "bos_token_id", "unk_token_id", "decoder_start_token_id")
# deep-decoder-cad-crt sec. 4.3 (Figure 2): for a 27-layer decoder BLEU peaked at drop depth 21; small drop depths
# collapsed. `cross_attention_drop_layers=None` keeps that share of the decoder's depth.
CAD_DROP_SHARE = 21 / 27


class DeepNMTConfig(PretrainedConfig):
    r"""Configuration of a deep encoder-decoder Transformer for translation.

    Shape fields (Transformers names): `vocab_size`, `d_model`, `encoder_layers`, `decoder_layers`,
    `encoder_attention_heads`, `decoder_attention_heads`, `encoder_ffn_dim`, `decoder_ffn_dim`,
    `max_position_embeddings`, `dropout`, `attention_dropout`, `activation_dropout`, `activation_function`,
    `scale_embedding`, `layer_norm_eps`, special token ids, `tie_word_embeddings`,
    `share_encoder_decoder_embeddings` (MarianConfig's name: False gives the decoder its own target embedding,
    as in dsinit-merged-attention sec. 5 with separate vocabularies; `tie_word_embeddings` then ties the output
    projection to the target embedding).

    `label_smoothing` is applied by the model's own loss (not by the Trainer), so that extra training losses
    computed in `forward` are kept when label smoothing is on.

    Design choices (one per paper):
        layer_norm_position: `"post"` (Vaswani: `LN(x + f(x))`) or `"pre"` (`x + f(LN(x))` plus a final
            LayerNorm on encoder and decoder; prenorm-dlcl eq. 2).
        residual_scaling: `"none"`, `"admin"` (`LN(ω ⊙ x + f(x))`, ADMIN eq. 2; post-LN only) or `"deepnorm"`
            (`LN(α·x + f(x))`, DeepNet eq. of sec. 3; post-LN only).
        admin_omega: `"trainable"` (a per-dimension ω vector initialised from the profiled scalar and trained, as
            the authors' released recipe does) or `"fixed"` (a constant scalar, as the paper's text says).
        admin_init: `"profile"` (one forward pass sets ω; see admin.py) or `"analytic"` (admin-torch's
            profiling-free ω = sqrt((N+1)/ln(N+1) - 1) for N residual sublayers of the side).
        admin_profiled: set by profiling, so that saved ω are kept and not profiled again.
        init_method: `"xavier"` (fairseq), `"ds_init"` (depth-scaled, `ds_init_alpha`), `"deepnorm"` (β-scaled
            xavier) or `"normal"` (every linear and embedding weight N(0, `init_std`), as Transformers' Marian/BART
            initialise; at small width a post-LN model trains markedly faster early on with it, see
            bench/results/init_gap.md).
        decoder_attention: `"self"` (3 sublayers per decoder layer) or `"merged"` (MAtt: simplified average
            attention merged with the cross-attention, 2 sublayers; dsinit-merged-attention eq. 16-17).
        encoder_layer_aggregation / decoder_layer_aggregation: `"residual"` or `"dlcl"` (each layer reads a
            learned combination of all earlier layer outputs; prenorm-dlcl eqs. 8-9), with `dlcl_init`
            (`"avg"` | `"one"`) and `dlcl_window` (-1 = all earlier layers, w = the last w).
        encoder_/decoder_layer_repeats, _layer_order, _reinject_input, _share_layers: recurrent shared layers
            (recurrent-shared-layers): the side owns `{side}_layers` unique layers and walks them T times in the
            order `"cycle"` or `"zigzag"` (closed parameter chain), re-injecting the embedded input at every repeat
            when asked (eq. 7). `encoder_depth` / `decoder_depth` give the derived number of applications.
        cross_attention_drop_layers (L_dr), cross_attention_drop_rate (p_net): during training each of the lowest
            L_dr decoder layers skips its cross-attention with probability p_net, once per forward pass; with
            p_net = 1 those layers own no cross-attention at all (deep-decoder-cad-crt, sec. 3).
        ddr_loss_weight, ald_loss_weight, ald_max_ratio (p_ALD), ald_temperature (τ): the collapse-reducing
            training losses (collapse_losses.py); 0 turns a loss off.

    Fields that hold models converted from fairseq exactly (positions.py, publish/convert/; defaults keep the
    model as above):
        position_embedding: `"sinusoidal"` (Marian's table, recomputed on load), `"fairseq_sinusoidal"`
            (fairseq's table: frequencies 10000^(-i/(d/2-1)), recomputed on load) or `"learned"` (a saved table).
        position_offset: the table row of the first position (fairseq: padding_idx + 1).
        layernorm_embedding: a LayerNorm over embeddings + positions on each side, before the dropout (fairseq's
            `layernorm_embedding`).
        admin_first_omega: ADMIN's first sublayer of each side also gets its ω vector (Transformer-Clinic trains
            it; ours keeps it at 1 by default, see training/admin_profiling.py).

    Fields that hold the DS-Init authors' TensorFlow models (bzhangGo/zero, publish/convert_zero.py) exactly:
        embedding_bias: a learned vector added to the scaled word embeddings of each side, before the positions
            (zero's `bias` variable; each stack holds its own copy, `encoder.embed_bias` / `decoder.embed_bias`).
        decoder_start_embedding: `"token"` (the decoder's first input is the embedding of
            `decoder_start_token_id`) or `"zero"` (a zero vector, plus the position: zero shifts the target right
            by padding the embeddings with zeros — no start token, no bias).
        decoder_vocab_size: the target vocabulary's size when it differs from the source's (MarianConfig's name;
            None = `vocab_size`): the decoder's own embedding and the output projection have that many rows;
            needs `share_encoder_decoder_embeddings=False`.
        decoder_max_position_embeddings: the decoder's number of positions when it differs from the encoder's
            (fairseq's `max_target_positions` beside `max_source_positions`; None = `max_position_embeddings`): a
            learned table of that many rows on the decoder side (positions.py `max_positions`).

    Special tokens follow the Marian layout (eos 0, unk 1, pad last, the decoder starts from pad), so that
    `pad_token_id` and `decoder_start_token_id` default to `vocab_size - 1`. `bos_token_id` defaults to eos's 0, as
    in Marian's opus-mt configs: the encoder input `generate()` starts from when it is given none (the empty
    sentence). `bos_token_id`, `eos_token_id` and `unk_token_id` may be None (no such token: without eos,
    generation runs to its length limit); whatever a config accepts, it saves and loads.

    Generation settings (beams, lengths) live in `generation_config.json`, never here.

    Every invalid value raises `ValueError` naming the field, the value and what is allowed: the `validate_*`
    methods (Transformers' `@strict` convention: `validate()` runs them all, at construction and before
    `save_pretrained` writes), single fields first (`validate_fields`, `validate_choices`), then the rules between
    fields in name order.
    """

    model_type = VARIANT_SPECS["base"].model_type
    keys_to_ignore_at_inference = ["cache", "past_key_values"]  # the cache's name from 5.24 on, and before
    attribute_map = {
        "num_attention_heads": "encoder_attention_heads",
        "hidden_size": "d_model",
        # the decoder's layer *applications* (one cache slot each; = decoder_layers unless layers are shared),
        # the count Transformers reads to size DynamicCache(config=...) / StaticCache and output tuples
        "num_hidden_layers": "decoder_depth",
    }
    # named shapes for `deep-nmt train --preset` (registry.py; each variant names its own)
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = VARIANT_SPECS["base"].shapes

    # the shape (Transformers' names)
    vocab_size: int = ruled(8000, POSITIVE_INTEGER)
    d_model: int = ruled(512, POSITIVE_INTEGER)
    encoder_layers: int = ruled(6, POSITIVE_INTEGER)
    decoder_layers: int = ruled(6, POSITIVE_INTEGER)
    encoder_attention_heads: int = ruled(8, POSITIVE_INTEGER)
    decoder_attention_heads: int = ruled(8, POSITIVE_INTEGER)
    encoder_ffn_dim: int = ruled(2048, POSITIVE_INTEGER)
    decoder_ffn_dim: int = ruled(2048, POSITIVE_INTEGER)
    max_position_embeddings: int = ruled(1024, POSITIVE_INTEGER)
    dropout: float = ruled(0.1, PROBABILITY)
    attention_dropout: float = ruled(0.0, PROBABILITY)
    activation_dropout: float = ruled(0.0, PROBABILITY)
    activation_function: str = "relu"  # one of transformers' ACT2FN names
    scale_embedding: bool = True
    layer_norm_eps: float = ruled(1e-5, POSITIVE_NUMBER)
    label_smoothing: float = ruled(0.0, PROBABILITY)
    # one choice per paper (values: registry.CHOICES)
    layer_norm_position: str = "post"
    residual_scaling: str = "none"
    init_method: str = "xavier"
    admin_omega: str = "trainable"
    admin_init: str = "profile"
    admin_profiled: bool = ruled(False, FLAG)
    ds_init_alpha: float = ruled(
        1.0, (lambda v: _number(v) and 0 < v <= 1, "is not allowed: it must lie in (0, 1]")
    )
    init_std: float = ruled(
        0.02, (POSITIVE_NUMBER[0], "must be a positive number (the std of init_method='normal')")
    )
    decoder_attention: str = "self"
    encoder_layer_aggregation: str = "residual"
    decoder_layer_aggregation: str = "residual"
    dlcl_init: str = "avg"
    dlcl_window: int = ruled(
        -1,
        (
            lambda v: _integer(v) and (v == -1 or v >= 1),
            "is not allowed: use -1 (all earlier layers) or a width ≥ 1",
        ),
    )
    encoder_layer_repeats: int = ruled(1, POSITIVE_INTEGER)
    decoder_layer_repeats: int = ruled(1, POSITIVE_INTEGER)
    encoder_layer_order: str = "cycle"
    decoder_layer_order: str = "cycle"
    encoder_reinject_input: bool = ruled(False, FLAG)
    decoder_reinject_input: bool = ruled(False, FLAG)
    encoder_share_layers: bool = ruled(True, FLAG)
    decoder_share_layers: bool = ruled(True, FLAG)
    cross_attention_drop_layers: int | None = 0  # None: round(CAD_DROP_SHARE × decoder_depth)
    cross_attention_drop_rate: float = ruled(
        0.0, (lambda v: _number(v) and 0 <= v <= 1, "must lie in [0, 1]")
    )
    ddr_loss_weight: float = ruled(0.0, LOSS_WEIGHT)
    ald_loss_weight: float = ruled(0.0, LOSS_WEIGHT)
    ald_max_ratio: float = ruled(
        0.3, (lambda v: _number(v) and 0 < v < 0.5, "must lie in (0, 0.5): X⁺ must keep most tokens")
    )
    ald_temperature: float = ruled(0.1, POSITIVE_NUMBER)
    # models converted from fairseq (positions.py, publish/convert_fairseq.py; the defaults keep the model above)
    position_embedding: str = "sinusoidal"
    position_offset: int = ruled(
        0, (lambda v: _integer(v) and v >= 0, "is not allowed: it must be an integer ≥ 0")
    )
    layernorm_embedding: bool = ruled(False, FLAG)
    admin_first_omega: bool = ruled(False, FLAG)
    # models converted from the DS-Init authors' TensorFlow code (publish/convert_zero.py; defaults: as above)
    embedding_bias: bool = ruled(False, FLAG)
    decoder_start_embedding: str = "token"
    decoder_vocab_size: int | None = None  # None: vocab_size
    decoder_max_position_embeddings: int | None = None  # None: max_position_embeddings
    # special tokens (the Marian layout) and embeddings
    pad_token_id: int | None = None  # None: vocab_size - 1
    eos_token_id: int | None = 0
    bos_token_id: int | None = 0
    unk_token_id: int | None = 1
    decoder_start_token_id: int | None = None  # None: pad_token_id
    tie_word_embeddings: bool = True
    share_encoder_decoder_embeddings: bool = True
    use_cache: bool = True
    is_encoder_decoder: bool = True

    def __post_init__(self, **kwargs: Any) -> None:
        """Fill the derived defaults, let Transformers take the rest of `kwargs`, then validate."""
        if _integer(self.vocab_size) and self.pad_token_id is None:
            self.pad_token_id = self.vocab_size - 1
        if self.decoder_start_token_id is None:
            self.decoder_start_token_id = self.pad_token_id
        super().__post_init__(**kwargs)
        # a saved directory's pipeline entry, when the package's registered task serves it (pipeline_shipping.py)
        if getattr(self, "custom_pipelines", None):
            self.custom_pipelines = served_by_the_registered_task(self.custom_pipelines)
            if not self.custom_pipelines:
                del self.custom_pipelines
        self.validate_fields()
        self.validate_choices()
        if (
            self.cross_attention_drop_layers is None
        ):  # scaled with the decoder's depth (registry: deep_decoder)
            self.cross_attention_drop_layers = round(CAD_DROP_SHARE * self.decoder_depth)
        self.validate()

    @property
    def encoder_depth(self) -> int:
        """Encoder layer applications (= encoder_layers unless layers are shared and repeated)."""
        return _depth(self.encoder_layers, self.encoder_layer_repeats, self.encoder_layer_order)

    @property
    def decoder_depth(self) -> int:
        """Decoder layer applications; one cache entry each during generation."""
        return _depth(self.decoder_layers, self.decoder_layer_repeats, self.decoder_layer_order)

    @decoder_depth.setter
    def decoder_depth(self, value: int) -> None:
        raise AttributeError(
            f"decoder_depth / num_hidden_layers (= {value!r}) is derived; set decoder_layers (and "
            "decoder_layer_repeats / decoder_layer_order for shared layers) instead"
        )

    def get_text_config(self, decoder: bool | None = None, encoder: bool | None = None) -> DeepNMTConfig:
        """This config itself for either side: Transformers' renaming of a flat encoder-decoder config's
        `decoder_*` fields would turn `decoder_layers` (unique layers) into `num_hidden_layers`, whereas the cache
        needs one slot per layer application (`num_hidden_layers` = `decoder_depth`, see `attribute_map`)."""
        return self

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> DeepNMTConfig:
        """A config from a named shape of `PRESETS` (the paper's depths, or `"tiny"` for CPU tests and demos);
        explicit keyword arguments win over the preset, the preset over the class's defaults."""
        if name not in cls.PRESETS:
            raise ValueError(
                f"unknown preset {name!r} for {cls.__name__}; choose one of: {', '.join(cls.PRESETS)}"
            )
        return cls(**{**cls.PRESETS[name], **overrides})

    # ------------------------------------------------------------------------------------------------ validation
    def validate(self) -> None:
        """Run every `validate_*` rule (ours and Transformers'): the single-field rules first, then the rest in name
        order. Raises ValueError naming the field, the value and what is allowed."""
        self.validate_fields()
        self.validate_choices()
        for name in sorted(dir(type(self))):
            if name.startswith("validate_") and name not in ("validate_fields", "validate_choices"):
                getattr(self, name)()

    def check(self) -> None:
        """`validate()` under its name of before the dataclass configs."""
        self.validate()

    def validate_fields(self) -> None:
        """Each field with a rule (`FIELD_RULES`) against it."""
        for name, rule in FIELD_RULES.items():
            check_rule(name, getattr(self, name), rule)

    def validate_choices(self) -> None:
        """Each choice field among the registry's values, the activation among Transformers'."""
        for name, allowed in CHOICES.items():
            check_choice(name, getattr(self, name), allowed)
        if self.activation_function not in ACT2FN:
            allowed = ", ".join(sorted(k for k in ACT2FN if isinstance(k, str))[:12])
            raise ValueError(
                f"activation_function={self.activation_function!r} is unknown; use one of transformers' "
                f"ACT2FN names, e.g. {allowed}, ..."
            )

    def validate_heads(self) -> None:
        """The sinusoidal table's halves and the heads split d_model."""
        if self.d_model % 2:
            raise ValueError(
                f"d_model={self.d_model} must be even (the sinusoidal position table has sin/cos halves)"
            )
        for heads in ("encoder_attention_heads", "decoder_attention_heads"):
            if self.d_model % getattr(self, heads):
                raise ValueError(
                    f"d_model={self.d_model} is not divisible by {heads}={getattr(self, heads)}: "
                    "each head needs d_model / heads dimensions"
                )

    def validate_residual(self) -> None:
        """ADMIN and DeepNorm scale the skip branch of post-LN sublayers; DeepNorm's init goes with its residual."""
        if self.residual_scaling != "none" and self.layer_norm_position != "post":
            raise ValueError(
                f"residual_scaling={self.residual_scaling!r} needs layer_norm_position='post' (got "
                f"{self.layer_norm_position!r}): ADMIN and DeepNorm rescale the skip branch of post-LN sublayers; "
                "pre-LN models are stable without it"
            )
        if self.position_offset and self.position_embedding == "sinusoidal":
            raise ValueError(
                f"position_offset={self.position_offset} needs position_embedding='fairseq_sinusoidal' or 'learned' "
                "(Marian's sinusoidal table starts at row 0)"
            )
        if self.admin_first_omega and self.residual_scaling != "admin":
            raise ValueError(
                f"admin_first_omega=True needs residual_scaling='admin' (got {self.residual_scaling!r}): it gives "
                "the first ADMIN sublayer its ω"
            )
        if self.init_method == "deepnorm" and self.residual_scaling != "deepnorm":
            raise ValueError(
                f"init_method='deepnorm' goes with residual_scaling='deepnorm' (got {self.residual_scaling!r}): "
                "the β-scaled initialisation is derived for the α-scaled residual"
            )

    def validate_shared_layers(self) -> None:
        """Recurrent shared layers (recurrent-shared-layers), side by side."""
        for side in ("encoder", "decoder"):
            if getattr(self, f"{side}_layer_order") == "zigzag" and getattr(self, f"{side}_layers") < 2:
                raise ValueError(
                    f"{side}_layer_order='zigzag' needs {side}_layers ≥ 2 (a chain to walk up and down); "
                    "use 'cycle' for a single shared layer"
                )
            repeats = getattr(self, f"{side}_layer_repeats")
            if repeats > 1 and getattr(self, f"{side}_share_layers") and self.residual_scaling == "admin":
                raise ValueError(
                    f"residual_scaling='admin' with shared {side} layers ({side}_layer_repeats={repeats}) would share "
                    "one ω between all applications of a layer; unroll the model first (layer_sharing.unroll) "
                    "or use pre-LN / DeepNorm"
                )

    def validate_deep_decoder(self) -> None:
        """Cross-attention drop and the collapse-reducing losses (deep-decoder-cad-crt)."""
        layers, rate = self.cross_attention_drop_layers, self.cross_attention_drop_rate
        if not _integer(layers) or not 0 <= layers <= self.decoder_depth:
            raise ValueError(
                f"cross_attention_drop_layers={layers!r} must be an integer in [0, {self.decoder_depth}] "
                "(the number of lowest decoder layers whose cross-attention may be dropped)"
            )
        if layers and self.decoder_attention == "merged":
            raise ValueError(
                "cross_attention_drop_layers > 0 cannot be combined with decoder_attention='merged': MAtt fuses the "
                "cross-attention with the average attention, so there is no cross-attention sublayer to drop"
            )
        if layers and rate == 1.0 and self.decoder_layer_repeats > 1 and self.decoder_share_layers:
            raise ValueError(
                "cross_attention_drop_rate=1.0 removes the cross-attention of the lowest decoder layers, which shared "
                "decoder layers cannot do for some applications only; use a rate below 1 or unshared layers"
            )
        if self.ald_loss_weight > 0 and self.unk_token_id is None:
            raise ValueError("ald_loss_weight > 0 needs unk_token_id: ALD masks source tokens with <unk>")

    def validate_token_ids(self) -> None:
        """Special token ids lie in the vocabulary (in both, with a `decoder_vocab_size` of its own); bos, eos and
        unk may be None (pad and the decoder's start may not: padding and decoding need them)."""
        size = self.vocab_size
        if self.decoder_vocab_size is not None:
            size = min(size, self.decoder_vocab_size)
        for name in SPECIAL_TOKEN_IDS:
            value = getattr(self, name, None)
            if value is None and name in ("bos_token_id", "eos_token_id", "unk_token_id"):
                continue
            if not _integer(value) or not 0 <= value < size:
                raise ValueError(
                    f"{name}={value!r} is outside the vocabulary: it must be an integer in "
                    f"[0, {size - 1}] (vocab_size={self.vocab_size}, decoder_vocab_size={self.decoder_vocab_size})"
                )

    def validate_decoder_positions(self) -> None:
        """The decoder's own number of positions, where given, is a positive integer."""
        size = self.decoder_max_position_embeddings
        if size is not None and (not _integer(size) or size < 1):
            raise ValueError(
                f"decoder_max_position_embeddings={size!r} must be a positive integer or None "
                "(= max_position_embeddings)"
            )

    def validate_target_vocabulary(self) -> None:
        """A target vocabulary of its own size needs the decoder's own embedding (Marian's rule)."""
        size = self.decoder_vocab_size
        if size is None:
            return
        if not _integer(size) or size < 1:
            raise ValueError(f"decoder_vocab_size={size!r} must be a positive integer or None (= vocab_size)")
        if size != self.vocab_size and self.share_encoder_decoder_embeddings:
            raise ValueError(
                f"decoder_vocab_size={size} differs from vocab_size={self.vocab_size}: it needs "
                "share_encoder_decoder_embeddings=False (one embedding cannot hold two vocabularies)"
            )


# field -> (test of its value alone, what the error says after "field=value"): read from the fields' `ruled` rules
FIELD_RULES: dict[str, Rule] = {
    field.name: field.metadata["rule"]
    for field in dataclasses.fields(DeepNMTConfig)
    if "rule" in field.metadata
}


class VariantConfig(DeepNMTConfig):
    """Base of the variant configs: each is its registry spec's `defaults` as field-default overrides
    (`variant_config`); `DEFAULTS` is that spec's table, `PRESETS` its named shapes (`from_preset`)."""

    DEFAULTS: ClassVar[dict[str, Any]] = {}
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}


def variant_config(spec: VariantSpec, module: str = __name__) -> type[VariantConfig]:
    """The config class of a variant: `VariantConfig` with the spec's `model_type`, shapes and `defaults` as the
    defaults of `DeepNMTConfig`'s fields (each keeps its type and rule). `module`: where the class is importable
    from (its `auto_map` entry names it). Raises ValueError for a default that is no config field."""
    base = {field.name: field for field in dataclasses.fields(DeepNMTConfig)}
    unknown = sorted(set(spec.defaults) - set(base))
    if unknown:
        raise ValueError(f"{spec.config_name}: defaults {unknown} are not DeepNMTConfig fields")
    namespace: dict[str, Any] = {
        "__module__": module,
        "__qualname__": spec.config_name,
        "__doc__": f"{spec.summary}\n\nDefaults (registry spec): {spec.defaults}",
        "__annotations__": {name: base[name].type for name in spec.defaults},
        "model_type": spec.model_type,
        "DEFAULTS": spec.defaults,
        "PRESETS": spec.shapes,
    }
    for name, value in spec.defaults.items():
        namespace[name] = dataclasses.field(default=value, metadata=base[name].metadata)
    return type(spec.config_name, (VariantConfig,), namespace)


# short name -> config class, in registry order: the core for "base", else the spec's field-default overrides. Each
# class is also a module attribute under its own name (AdminConfig, DLCLConfig, ...), where `auto_map` finds it.
VARIANT_CONFIGS: dict[str, type[DeepNMTConfig]] = {
    name: DeepNMTConfig if spec.config_name == DeepNMTConfig.__name__ else variant_config(spec)
    for name, spec in VARIANT_SPECS.items()
}
globals().update({config_class.__name__: config_class for config_class in VARIANT_CONFIGS.values()})


def _depth(layers: int, repeats: int, order: str) -> int:
    if order == "zigzag":
        return layers + (repeats - 1) * (layers - 1)
    return layers * repeats


__all__ = [
    "CHOICES",
    "FIELD_RULES",
    "VARIANT_CONFIGS",
    "DeepNMTConfig",
    "VariantConfig",
    "check_choice",
    "variant_config",
    *(
        config_class.__name__
        for config_class in VARIANT_CONFIGS.values()
        if config_class is not DeepNMTConfig
    ),
]
