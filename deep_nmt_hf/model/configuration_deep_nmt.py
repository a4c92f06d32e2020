"""DeepNMTConfig: every architectural choice of the deep_nmt_hf model family in one validated config.

The core is the Vaswani et al. (2017) encoder-decoder Transformer; each paper in the family changes one
orthogonal choice (see ../shared/DESIGN.md). Field names follow Transformers (`d_model`, `encoder_layers`,
`encoder_ffn_dim`, ...) so that stock tooling (`run_translation.py`, `generate`, pipelines) reads them.

This file ships with saved checkpoints (`trust_remote_code`): it imports nothing but transformers and its flat
siblings pipeline_shipping.py and registry.py (which ship too). The names (model types, choice values, shape
presets) come from registry.py; the checks of single fields are the table `FIELD_RULES`, the rules between fields
are spelled out in `DeepNMTConfig.check`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from .pipeline_shipping import served_by_the_registered_task
from .registry import CHOICES, VARIANT_SPECS


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _integer(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int)


# (test of a value, what the error says after "field=value") shared by several fields
POSITIVE_INTEGER = (lambda v: _integer(v) and v > 0, "is not allowed: it must be a positive integer")
PROBABILITY = (lambda v: _number(v) and 0 <= v < 1, "is not allowed: a probability that must lie in [0, 1)")
POSITIVE_NUMBER = (lambda v: _number(v) and v > 0, "must be a positive number")
FLAG = (lambda v: isinstance(v, bool), "must be true or false")

# field -> (test of its value alone, what the error says after "field=value"); `check` runs these first, then the
# choices (`CHOICES`), then the rules between fields
FIELD_RULES: dict[str, tuple[Callable[[Any], bool], str]] = {
    **dict.fromkeys(
        ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads")
        + ("decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim", "max_position_embeddings")
        + ("encoder_layer_repeats", "decoder_layer_repeats"),
        POSITIVE_INTEGER,
    ),
    **dict.fromkeys(("dropout", "attention_dropout", "activation_dropout", "label_smoothing"), PROBABILITY),
    "layer_norm_eps": POSITIVE_NUMBER,
    "init_std": (POSITIVE_NUMBER[0], "must be a positive number (the std of init_method='normal')"),
    "ds_init_alpha": (lambda v: _number(v) and 0 < v <= 1, "is not allowed: it must lie in (0, 1]"),
    "dlcl_window": (
        lambda v: _integer(v) and (v == -1 or v >= 1),
        "is not allowed: use -1 (all earlier layers) or a width ≥ 1",
    ),
    **dict.fromkeys(("encoder_reinject_input", "decoder_reinject_input", "admin_profiled"), FLAG),
    **dict.fromkeys(("encoder_share_layers", "decoder_share_layers"), FLAG),
    **dict.fromkeys(("layernorm_embedding", "admin_first_omega"), FLAG),
    "position_offset": (lambda v: _integer(v) and v >= 0, "is not allowed: it must be an integer ≥ 0"),
    "cross_attention_drop_rate": (lambda v: _number(v) and 0 <= v <= 1, "must lie in [0, 1]"),
    **dict.fromkeys(
        ("ddr_loss_weight", "ald_loss_weight"),
        (lambda v: _number(v) and v >= 0, "must be a number ≥ 0 (0 turns the loss off)"),
    ),
    "ald_max_ratio": (lambda v: _number(v) and 0 < v < 0.5, "must lie in (0, 0.5): X⁺ must keep most tokens"),
    "ald_temperature": POSITIVE_NUMBER,
}
SPECIAL_TOKEN_IDS = ("pad_token_id", "eos_token_id", "bos_token_id", "unk_token_id", "decoder_start_token_id")


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

    Special tokens follow the Marian layout (eos 0, unk 1, pad last, the decoder starts from pad), so that
    `pad_token_id` and `decoder_start_token_id` default to `vocab_size - 1`.

    Generation settings (beams, lengths) live in `generation_config.json`, never here.

    Every invalid value raises `ValueError` naming the field, the value and what is allowed.
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
    # named shapes for `deep-nmt train --preset` (registry.py; each variant below names its own)
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = VARIANT_SPECS["base"].shapes

    def __init__(
        self,
        vocab_size: int = 8000,
        d_model: int = 512,
        encoder_layers: int = 6,
        decoder_layers: int = 6,
        encoder_attention_heads: int = 8,
        decoder_attention_heads: int = 8,
        encoder_ffn_dim: int = 2048,
        decoder_ffn_dim: int = 2048,
        max_position_embeddings: int = 1024,
        dropout: float = 0.1,
        attention_dropout: float = 0.0,
        activation_dropout: float = 0.0,
        activation_function: str = "relu",
        scale_embedding: bool = True,
        layer_norm_eps: float = 1e-5,
        label_smoothing: float = 0.0,
        layer_norm_position: str = "post",
        residual_scaling: str = "none",
        init_method: str = "xavier",
        admin_omega: str = "trainable",
        admin_init: str = "profile",
        admin_profiled: bool = False,
        ds_init_alpha: float = 1.0,
        init_std: float = 0.02,
        decoder_attention: str = "self",
        encoder_layer_aggregation: str = "residual",
        decoder_layer_aggregation: str = "residual",
        dlcl_init: str = "avg",
        dlcl_window: int = -1,
        encoder_layer_repeats: int = 1,
        decoder_layer_repeats: int = 1,
        encoder_layer_order: str = "cycle",
        decoder_layer_order: str = "cycle",
        encoder_reinject_input: bool = False,
        decoder_reinject_input: bool = False,
        encoder_share_layers: bool = True,
        decoder_share_layers: bool = True,
        cross_attention_drop_layers: int = 0,
        cross_attention_drop_rate: float = 0.0,
        ddr_loss_weight: float = 0.0,
        ald_loss_weight: float = 0.0,
        ald_max_ratio: float = 0.3,
        ald_temperature: float = 0.1,
        position_embedding: str = "sinusoidal",
        position_offset: int = 0,
        layernorm_embedding: bool = False,
        admin_first_omega: bool = False,
        pad_token_id: int | None = None,
        eos_token_id: int | None = 0,
        bos_token_id: int | None = None,
        unk_token_id: int | None = 1,
        decoder_start_token_id: int | None = None,
        tie_word_embeddings: bool = True,
        share_encoder_decoder_embeddings: bool = True,
        use_cache: bool = True,
        is_encoder_decoder: bool = True,
        **kwargs: Any,
    ) -> None:
        # the base class is a dataclass whose __init__ resets its own fields: call it first
        super().__init__(is_encoder_decoder=is_encoder_decoder, **kwargs)
        # a saved directory's pipeline entry, when the package's registered task serves it (pipeline_shipping.py)
        if getattr(self, "custom_pipelines", None):
            self.custom_pipelines = served_by_the_registered_task(self.custom_pipelines)
            if not self.custom_pipelines:
                del self.custom_pipelines
        self.vocab_size = vocab_size
        self.d_model = d_model
        self.encoder_layers = encoder_layers
        self.decoder_layers = decoder_layers
        self.encoder_attention_heads = encoder_attention_heads
        self.decoder_attention_heads = decoder_attention_heads
        self.encoder_ffn_dim = encoder_ffn_dim
        self.decoder_ffn_dim = decoder_ffn_dim
        self.max_position_embeddings = max_position_embeddings
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.activation_dropout = activation_dropout
        self.activation_function = activation_function
        self.scale_embedding = scale_embedding
        self.layer_norm_eps = layer_norm_eps
        self.label_smoothing = label_smoothing
        self.layer_norm_position = layer_norm_position
        self.residual_scaling = residual_scaling
        self.init_method = init_method
        self.admin_omega = admin_omega
        self.admin_init = admin_init
        self.admin_profiled = admin_profiled
        self.ds_init_alpha = ds_init_alpha
        self.init_std = init_std
        self.decoder_attention = decoder_attention
        self.encoder_layer_aggregation = encoder_layer_aggregation
        self.decoder_layer_aggregation = decoder_layer_aggregation
        self.dlcl_init = dlcl_init
        self.dlcl_window = dlcl_window
        self.encoder_layer_repeats = encoder_layer_repeats
        self.decoder_layer_repeats = decoder_layer_repeats
        self.encoder_layer_order = encoder_layer_order
        self.decoder_layer_order = decoder_layer_order
        self.encoder_reinject_input = encoder_reinject_input
        self.decoder_reinject_input = decoder_reinject_input
        self.encoder_share_layers = encoder_share_layers
        self.decoder_share_layers = decoder_share_layers
        self.cross_attention_drop_layers = cross_attention_drop_layers
        self.cross_attention_drop_rate = cross_attention_drop_rate
        self.ddr_loss_weight = ddr_loss_weight
        self.ald_loss_weight = ald_loss_weight
        self.ald_max_ratio = ald_max_ratio
        self.ald_temperature = ald_temperature
        self.position_embedding = position_embedding
        self.position_offset = position_offset
        self.layernorm_embedding = layernorm_embedding
        self.admin_first_omega = admin_first_omega
        if isinstance(vocab_size, int) and pad_token_id is None:
            pad_token_id = vocab_size - 1
        self.pad_token_id = pad_token_id
        self.eos_token_id = eos_token_id
        self.bos_token_id = bos_token_id
        self.unk_token_id = unk_token_id
        self.decoder_start_token_id = (
            pad_token_id if decoder_start_token_id is None else decoder_start_token_id
        )
        self.tie_word_embeddings = tie_word_embeddings
        self.share_encoder_decoder_embeddings = share_encoder_decoder_embeddings
        self.use_cache = use_cache
        self.check()

    @property
    def encoder_depth(self) -> int:
        """Encoder layer applications (= encoder_layers unless layers are shared and repeated)."""
        return _depth(self.encoder_layers, self.encoder_layer_repeats, self.encoder_layer_order)

    @property
    def decoder_depth(self) -> int:
        """Decoder layer applications; one cache entry each during generation."""
        return _depth(self.decoder_layers, self.decoder_layer_repeats, self.decoder_layer_order)

    def get_text_config(self, decoder: bool | None = None, encoder: bool | None = None) -> DeepNMTConfig:
        """This config itself for either side: Transformers' renaming of a flat encoder-decoder config's
        `decoder_*` fields would turn `decoder_layers` (unique layers) into `num_hidden_layers`, whereas the cache
        needs one slot per layer application (`num_hidden_layers` = `decoder_depth`, see `attribute_map`)."""
        return self

    @decoder_depth.setter
    def decoder_depth(self, value: int) -> None:
        raise AttributeError(
            f"decoder_depth / num_hidden_layers (= {value!r}) is derived; set decoder_layers (and "
            "decoder_layer_repeats / decoder_layer_order for shared layers) instead"
        )

    # ------------------------------------------------------------------------------------------------ validation
    def check(self) -> None:
        """Validate every field; raise ValueError naming the field, the value and what is allowed."""
        for name, (valid, requirement) in FIELD_RULES.items():
            value = getattr(self, name)
            if not valid(value):
                raise ValueError(f"{name}={value!r} {requirement}")
        for name, allowed in CHOICES.items():
            check_choice(name, getattr(self, name), allowed)
        if self.activation_function not in ACT2FN:
            allowed = ", ".join(sorted(k for k in ACT2FN if isinstance(k, str))[:12])
            raise ValueError(
                f"activation_function={self.activation_function!r} is unknown; use one of transformers' "
                f"ACT2FN names, e.g. {allowed}, ..."
            )
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
        self._check_shared_layers()
        self._check_deep_decoder()
        self._check_token_ids()

    def _check_shared_layers(self) -> None:
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

    def _check_deep_decoder(self) -> None:
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

    def _check_token_ids(self) -> None:
        """Special token ids lie in the vocabulary (bos and unk may be None)."""
        for name in SPECIAL_TOKEN_IDS:
            value = getattr(self, name, None)
            if value is None and name in ("bos_token_id", "unk_token_id"):
                continue
            if not _integer(value) or not 0 <= value < self.vocab_size:
                raise ValueError(
                    f"{name}={value!r} is outside the vocabulary: it must be an integer in "
                    f"[0, {self.vocab_size - 1}] (vocab_size={self.vocab_size})"
                )


class VariantConfig(DeepNMTConfig):
    """Base of the per-paper presets: `DEFAULTS` fixes the paper's choices and shape, `PRESETS` names shapes.

    `from_preset(name, **overrides)` builds a config from a named preset (e.g. the paper's depth, or `"tiny"` for
    CPU tests and demos); explicit keyword arguments always win over presets and defaults.

    Every subclass must define its own `__init__` (even a plain pass-through): transformers 5.x turns config
    classes into dataclasses and gives a class without one a generated `__init__` that skips ours."""

    DEFAULTS: ClassVar[dict[str, Any]] = {}
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**{**self.DEFAULTS, **kwargs})

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> VariantConfig:
        if name not in cls.PRESETS:
            raise ValueError(
                f"unknown preset {name!r} for {cls.__name__}; choose one of: {', '.join(cls.PRESETS)}"
            )
        return cls(**{**cls.PRESETS[name], **overrides})


BASE_WIDTH = {"d_model": 512, "encoder_ffn_dim": 2048, "decoder_ffn_dim": 2048}
BASE_WIDTH |= {"encoder_attention_heads": 8, "decoder_attention_heads": 8}


class AdminConfig(VariantConfig):
    """ADMIN (admin-very-deep-transformers-nmt): post-LN, x_i = LN(ω_i ⊙ x_{i-1} + f_i(x_{i-1})), ω profiled.

    Defaults: the paper's 60L-12L at Transformer-base width (512/2048/8 heads)."""

    model_type = VARIANT_SPECS["admin"].model_type
    DEFAULTS = {"layer_norm_position": "post", "residual_scaling": "admin", "encoder_layers": 60}
    DEFAULTS |= {"decoder_layers": 12, **BASE_WIDTH}
    PRESETS = VARIANT_SPECS["admin"].shapes

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


class DeepNormConfig(VariantConfig):
    """DeepNorm (DeepNet, Wang et al. 2022): post-LN, x_i = LN(α x_{i-1} + f_i(x_{i-1})) with β-scaled init."""

    model_type = VARIANT_SPECS["deepnorm"].model_type
    DEFAULTS = {"layer_norm_position": "post", "residual_scaling": "deepnorm", "init_method": "deepnorm"}
    DEFAULTS |= {"encoder_layers": 60, "decoder_layers": 12, **BASE_WIDTH}
    PRESETS = VARIANT_SPECS["deepnorm"].shapes

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


class DSInitMAttConfig(VariantConfig):
    """DS-Init + merged attention (dsinit-merged-attention): post-LN, depth-scaled init (α = 1), MAtt decoder.

    Defaults: the paper's 12-layer encoder and decoder at Transformer-base width."""

    model_type = VARIANT_SPECS["dsinit_matt"].model_type
    DEFAULTS = {"layer_norm_position": "post", "init_method": "ds_init", "ds_init_alpha": 1.0}
    DEFAULTS |= {"decoder_attention": "merged", "encoder_layers": 12, "decoder_layers": 12, **BASE_WIDTH}
    PRESETS = VARIANT_SPECS["dsinit_matt"].shapes

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


class DLCLConfig(VariantConfig):
    """Pre-norm + DLCL (prenorm-dlcl): each layer reads a learned combination of all earlier layer outputs.

    Defaults: the paper's 30-layer encoder and 6-layer decoder at Transformer-base width, DLCL on both sides."""

    model_type = VARIANT_SPECS["dlcl"].model_type
    DEFAULTS = {"layer_norm_position": "pre", "encoder_layer_aggregation": "dlcl"}
    DEFAULTS |= {"decoder_layer_aggregation": "dlcl", "encoder_layers": 30, "decoder_layers": 6, **BASE_WIDTH}
    PRESETS = VARIANT_SPECS["dlcl"].shapes

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


# deep-decoder-cad-crt sec. 4.3 (Figure 2): for a 27-layer decoder BLEU peaked at drop depth 21; small drop depths
# collapsed. The default drop depth keeps that share of the decoder's depth.
CAD_DROP_SHARE = 21 / 27


class DeepDecoderConfig(VariantConfig):
    """Deep decoders that do not collapse (deep-decoder-cad-crt): cross-attention drop on the lowest decoder layers
    plus the DDR and ALD training losses. Defaults: equal encoder/decoder depth (15-15), p_net = 1, τ = 0.1,
    Transformer-base width; 27-27 and a tiny CPU preset. Unless given, `cross_attention_drop_layers` scales with
    the decoder: round(21/27 × decoder depth), the paper's best drop depth for 27 layers (sec. 4.3; 12 of 15)."""

    model_type = VARIANT_SPECS["deep_decoder"].model_type
    DEFAULTS = {"layer_norm_position": "pre", "encoder_layers": 15, "decoder_layers": 15, **BASE_WIDTH}
    DEFAULTS |= {"cross_attention_drop_rate": 1.0}
    DEFAULTS |= {"ddr_loss_weight": 1.0, "ald_loss_weight": 1.0, "ald_max_ratio": 0.3, "ald_temperature": 0.1}
    PRESETS = VARIANT_SPECS["deep_decoder"].shapes

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)
        if "cross_attention_drop_layers" not in kwargs:  # scaled with depth; a saved config passes its value
            self.cross_attention_drop_layers = round(CAD_DROP_SHARE * self.decoder_depth)
            self.check()


class SharedLayersConfig(VariantConfig):
    """Recurrent shared layers (recurrent-shared-layers): few unique pre-LN layers looped in depth, the embedded
    input re-injected at every loop (eq. 7). Defaults from the paper's setup (sec. 5.1.2): 8 encoder / 4 decoder
    unique layers, 5 encoder / 2 decoder loops, Transformer-base width. Table 1 rows are presets (their decoder
    loops are not stated; we keep the setup's 2)."""

    model_type = VARIANT_SPECS["shared_layers"].model_type
    DEFAULTS = {"layer_norm_position": "pre", "encoder_layers": 8, "decoder_layers": 4}
    DEFAULTS |= {"encoder_layer_repeats": 5, "decoder_layer_repeats": 2, **BASE_WIDTH}
    DEFAULTS |= {"encoder_reinject_input": True, "decoder_reinject_input": True}
    PRESETS = VARIANT_SPECS["shared_layers"].shapes

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


def _depth(layers: int, repeats: int, order: str) -> int:
    if order == "zigzag":
        return layers + (repeats - 1) * (layers - 1)
    return layers * repeats


def check_choice(field: str, value: Any, allowed: tuple[str, ...]) -> None:
    """Raise ValueError unless `value` is one of the `allowed` values of the choice field `field`."""
    if value not in allowed:
        valid = ", ".join(repr(v) for v in allowed)
        raise ValueError(f"{field}={value!r} is not a valid choice; allowed: {valid}")


__all__ = [
    "CHOICES",
    "FIELD_RULES",
    "AdminConfig",
    "DeepDecoderConfig",
    "DeepNMTConfig",
    "DeepNormConfig",
    "DLCLConfig",
    "DSInitMAttConfig",
    "SharedLayersConfig",
    "VariantConfig",
    "check_choice",
]
