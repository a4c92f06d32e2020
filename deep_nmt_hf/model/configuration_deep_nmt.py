"""DeepNMTConfig: every architectural choice of the deep_nmt_hf model family in one validated config.

The core is the Vaswani et al. (2017) encoder-decoder Transformer; each paper in the family changes one
orthogonal choice (see ../shared/DESIGN.md). Field names follow Transformers (`d_model`, `encoder_layers`,
`encoder_ffn_dim`, ...) so that stock tooling (`run_translation.py`, `generate`, pipelines) reads them.

This file ships with saved checkpoints (`trust_remote_code`): it imports nothing but transformers and the flat
sibling pipeline_shipping.py (which ships too).
"""

from __future__ import annotations

from typing import Any, ClassVar

from transformers import PretrainedConfig
from transformers.activations import ACT2FN

from .pipeline_shipping import served_by_the_registered_task

# field -> (values implemented now, values that exist in the design but are not implemented yet)
CHOICES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "layer_norm_position": (("post", "pre"), ()),
    "residual_scaling": (("none", "admin", "deepnorm"), ()),
    "init_method": (("xavier", "ds_init", "deepnorm", "normal"), ()),
    "admin_omega": (("trainable", "fixed"), ()),
    "admin_init": (("profile", "analytic"), ()),
    "decoder_attention": (("self", "merged"), ()),
    "encoder_layer_aggregation": (("residual", "dlcl"), ()),
    "decoder_layer_aggregation": (("residual", "dlcl"), ()),
    "dlcl_init": (("avg", "one"), ()),
    "encoder_layer_order": (("cycle", "zigzag"), ()),
    "decoder_layer_order": (("cycle", "zigzag"), ()),
}


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

    Special tokens follow the Marian layout (eos 0, unk 1, pad last, the decoder starts from pad), so that
    `pad_token_id` and `decoder_start_token_id` default to `vocab_size - 1`.

    Generation settings (beams, lengths) live in `generation_config.json`, never here.

    Every invalid value raises `ValueError` naming the field, the value and what is allowed.
    """

    model_type = "deep_nmt"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]  # the cache's name from 5.24 on, and before
    attribute_map = {
        "num_attention_heads": "encoder_attention_heads",
        "hidden_size": "d_model",
        # the decoder's layer *applications* (one cache slot each; = decoder_layers unless layers are shared),
        # the count Transformers reads to size DynamicCache(config=...) / StaticCache and output tuples
        "num_hidden_layers": "decoder_depth",
    }
    # named shapes for `deep-nmt train --preset` (each variant below names its own)
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "6L-6L": {"encoder_layers": 6, "decoder_layers": 6},
        "tiny": {"encoder_layers": 6, "decoder_layers": 2, "d_model": 64, "encoder_ffn_dim": 128}
        | {"decoder_ffn_dim": 128, "encoder_attention_heads": 4, "decoder_attention_heads": 4},
    }

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
    def _check_deep_decoder(self) -> None:
        """Cross-attention drop and the collapse-reducing losses (deep-decoder-cad-crt)."""
        layers, rate = self.cross_attention_drop_layers, self.cross_attention_drop_rate
        if isinstance(layers, bool) or not isinstance(layers, int) or not 0 <= layers <= self.decoder_depth:
            raise ValueError(
                f"cross_attention_drop_layers={layers!r} must be an integer in [0, {self.decoder_depth}] "
                "(the number of lowest decoder layers whose cross-attention may be dropped)"
            )
        if not _number(rate) or not 0.0 <= rate <= 1.0:
            raise ValueError(f"cross_attention_drop_rate={rate!r} must lie in [0, 1]")
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
        for name in ("ddr_loss_weight", "ald_loss_weight"):
            if not _number(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} must be a number ≥ 0 (0 turns the loss off)"
                )
        if not _number(self.ald_max_ratio) or not 0.0 < self.ald_max_ratio < 0.5:
            raise ValueError(
                f"ald_max_ratio={self.ald_max_ratio!r} must lie in (0, 0.5): X⁺ must keep most tokens"
            )
        if not _number(self.ald_temperature) or not self.ald_temperature > 0:
            raise ValueError(f"ald_temperature={self.ald_temperature!r} must be a positive number")
        if self.ald_loss_weight > 0 and self.unk_token_id is None:
            raise ValueError("ald_loss_weight > 0 needs unk_token_id: ALD masks source tokens with <unk>")

    def check(self) -> None:
        """Validate every field; raise ValueError naming the field, the value and what is allowed."""
        for name in (
            "vocab_size",
            "d_model",
            "encoder_layers",
            "decoder_layers",
            "encoder_attention_heads",
            "decoder_attention_heads",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "max_position_embeddings",
        ):
            _require_positive_int(name, getattr(self, name))
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
        for name in ("dropout", "attention_dropout", "activation_dropout", "label_smoothing"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ValueError(f"{name}={value!r} is not allowed: a probability that must lie in [0, 1)")
        if not isinstance(self.layer_norm_eps, (int, float)) or not self.layer_norm_eps > 0:
            raise ValueError(f"layer_norm_eps={self.layer_norm_eps!r} must be a positive number")
        if not _number(self.init_std) or not self.init_std > 0:
            raise ValueError(
                f"init_std={self.init_std!r} must be a positive number (the std of init_method='normal')"
            )
        if self.activation_function not in ACT2FN:
            allowed = ", ".join(sorted(k for k in ACT2FN if isinstance(k, str))[:12])
            raise ValueError(
                f"activation_function={self.activation_function!r} is unknown; use one of transformers' "
                f"ACT2FN names, e.g. {allowed}, ..."
            )
        for field, (implemented, planned) in CHOICES.items():
            check_choice(field, getattr(self, field), implemented, planned)
        if self.residual_scaling != "none" and self.layer_norm_position != "post":
            raise ValueError(
                f"residual_scaling={self.residual_scaling!r} needs layer_norm_position='post' (got "
                f"{self.layer_norm_position!r}): ADMIN and DeepNorm rescale the skip branch of post-LN sublayers; "
                "pre-LN models are stable without it"
            )
        if self.init_method == "deepnorm" and self.residual_scaling != "deepnorm":
            raise ValueError(
                f"init_method='deepnorm' goes with residual_scaling='deepnorm' (got {self.residual_scaling!r}): "
                "the β-scaled initialisation is derived for the α-scaled residual"
            )
        alpha = self.ds_init_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 < alpha <= 1.0:
            raise ValueError(f"ds_init_alpha={alpha!r} is not allowed: it must lie in (0, 1]")
        window = self.dlcl_window
        if isinstance(window, bool) or not isinstance(window, int) or not (window == -1 or window >= 1):
            raise ValueError(
                f"dlcl_window={window!r} is not allowed: use -1 (all earlier layers) or a width ≥ 1"
            )
        for side in ("encoder", "decoder"):
            repeats = getattr(self, f"{side}_layer_repeats")
            _require_positive_int(f"{side}_layer_repeats", repeats)
            for flag in (f"{side}_reinject_input", f"{side}_share_layers"):
                if not isinstance(getattr(self, flag), bool):
                    raise ValueError(f"{flag}={getattr(self, flag)!r} must be true or false")
            if getattr(self, f"{side}_layer_order") == "zigzag" and getattr(self, f"{side}_layers") < 2:
                raise ValueError(
                    f"{side}_layer_order='zigzag' needs {side}_layers ≥ 2 (a chain to walk up and down); "
                    "use 'cycle' for a single shared layer"
                )
            shared = repeats > 1 and getattr(self, f"{side}_share_layers")
            if shared and self.residual_scaling == "admin":
                raise ValueError(
                    f"residual_scaling='admin' with shared {side} layers ({side}_layer_repeats={repeats}) would share "
                    "one ω between all applications of a layer; unroll the model first (layer_sharing.unroll) "
                    "or use pre-LN / DeepNorm"
                )
        self._check_deep_decoder()
        if not isinstance(self.admin_profiled, bool):
            raise ValueError(f"admin_profiled={self.admin_profiled!r} must be true or false")
        for name in (
            "pad_token_id",
            "eos_token_id",
            "bos_token_id",
            "unk_token_id",
            "decoder_start_token_id",
        ):
            value = getattr(self, name, None)
            required = name in ("pad_token_id", "eos_token_id", "decoder_start_token_id")
            if value is None and not required:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < self.vocab_size:
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
TINY = {"d_model": 64, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128}
TINY |= {"encoder_attention_heads": 4, "decoder_attention_heads": 4}


class AdminConfig(VariantConfig):
    """ADMIN (admin-very-deep-transformers-nmt): post-LN, x_i = LN(ω_i ⊙ x_{i-1} + f_i(x_{i-1})), ω profiled.

    Defaults: the paper's 60L-12L at Transformer-base width (512/2048/8 heads)."""

    model_type = "deep_nmt_admin"
    DEFAULTS = {"layer_norm_position": "post", "residual_scaling": "admin", "encoder_layers": 60}
    DEFAULTS |= {"decoder_layers": 12, **BASE_WIDTH}
    PRESETS = {
        "60L-12L": {"encoder_layers": 60, "decoder_layers": 12},
        "36L-12L": {"encoder_layers": 36, "decoder_layers": 12},
        "18L-18L": {"encoder_layers": 18, "decoder_layers": 18},
        "6L-6L": {"encoder_layers": 6, "decoder_layers": 6},
        "tiny": {"encoder_layers": 12, "decoder_layers": 2, **TINY},
    }

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


class DeepNormConfig(VariantConfig):
    """DeepNorm (DeepNet, Wang et al. 2022): post-LN, x_i = LN(α x_{i-1} + f_i(x_{i-1})) with β-scaled init."""

    model_type = "deep_nmt_deepnorm"
    DEFAULTS = {"layer_norm_position": "post", "residual_scaling": "deepnorm", "init_method": "deepnorm"}
    DEFAULTS |= {"encoder_layers": 60, "decoder_layers": 12, **BASE_WIDTH}
    PRESETS = {
        "60L-12L": {"encoder_layers": 60, "decoder_layers": 12},
        "100L-100L": {"encoder_layers": 100, "decoder_layers": 100},
        "6L-6L": {"encoder_layers": 6, "decoder_layers": 6},
        "tiny": {"encoder_layers": 12, "decoder_layers": 2, **TINY},
    }

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


class DSInitMAttConfig(VariantConfig):
    """DS-Init + merged attention (dsinit-merged-attention): post-LN, depth-scaled init (α = 1), MAtt decoder.

    Defaults: the paper's 12-layer encoder and decoder at Transformer-base width."""

    model_type = "deep_nmt_dsinit_matt"
    DEFAULTS = {"layer_norm_position": "post", "init_method": "ds_init", "ds_init_alpha": 1.0}
    DEFAULTS |= {"decoder_attention": "merged", "encoder_layers": 12, "decoder_layers": 12, **BASE_WIDTH}
    PRESETS = {
        "12L-12L": {"encoder_layers": 12, "decoder_layers": 12},
        "20L-20L": {"encoder_layers": 20, "decoder_layers": 20},
        "6L-6L": {"encoder_layers": 6, "decoder_layers": 6},
        "tiny": {"encoder_layers": 8, "decoder_layers": 4, **TINY},
    }

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


class DLCLConfig(VariantConfig):
    """Pre-norm + DLCL (prenorm-dlcl): each layer reads a learned combination of all earlier layer outputs.

    Defaults: the paper's 30-layer encoder and 6-layer decoder at Transformer-base width, DLCL on both sides."""

    model_type = "deep_nmt_dlcl"
    DEFAULTS = {"layer_norm_position": "pre", "encoder_layer_aggregation": "dlcl"}
    DEFAULTS |= {"decoder_layer_aggregation": "dlcl", "encoder_layers": 30, "decoder_layers": 6, **BASE_WIDTH}
    PRESETS = {
        "30L-6L": {"encoder_layers": 30, "decoder_layers": 6},
        "25L-6L": {"encoder_layers": 25, "decoder_layers": 6},
        "6L-6L": {"encoder_layers": 6, "decoder_layers": 6},
        "tiny": {"encoder_layers": 12, "decoder_layers": 2, **TINY},
    }

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

    model_type = "deep_nmt_deep_decoder"
    DEFAULTS = {"layer_norm_position": "pre", "encoder_layers": 15, "decoder_layers": 15, **BASE_WIDTH}
    DEFAULTS |= {"cross_attention_drop_rate": 1.0}
    DEFAULTS |= {"ddr_loss_weight": 1.0, "ald_loss_weight": 1.0, "ald_max_ratio": 0.3, "ald_temperature": 0.1}
    PRESETS = {
        "15L-15L": {"encoder_layers": 15, "decoder_layers": 15},
        "27L-27L": {"encoder_layers": 27, "decoder_layers": 27},
        "6L-6L": {"encoder_layers": 6, "decoder_layers": 6},
        "tiny": {"encoder_layers": 6, "decoder_layers": 6, **TINY},
    }

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

    model_type = "deep_nmt_shared_layers"
    DEFAULTS = {"layer_norm_position": "pre", "encoder_layers": 8, "decoder_layers": 4}
    DEFAULTS |= {"encoder_layer_repeats": 5, "decoder_layer_repeats": 2, **BASE_WIDTH}
    DEFAULTS |= {"encoder_reinject_input": True, "decoder_reinject_input": True}
    PRESETS = {
        "setup": {},
        "stack-T4-enc8-dec4": {"encoder_layer_repeats": 4},
        "stack-T4-enc20-dec4": {"encoder_layer_repeats": 4, "encoder_layers": 20},
        "chain-T5-enc8-dec4": {"encoder_layer_order": "zigzag", "decoder_layer_order": "zigzag"},
        "tiny": {"encoder_layers": 3, "decoder_layers": 2, "encoder_layer_repeats": 3, **TINY},
    }

    def __init__(self, **kwargs: Any) -> None:  # each config class needs its own __init__ (see VariantConfig)
        super().__init__(**kwargs)


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _depth(layers: int, repeats: int, order: str) -> int:
    if order == "zigzag":
        return layers + (repeats - 1) * (layers - 1)
    return layers * repeats


def _require_positive_int(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name}={value!r} is not allowed: it must be a positive integer")


def check_choice(field: str, value: Any, implemented: tuple[str, ...], planned: tuple[str, ...] = ()) -> None:
    """Raise ValueError unless `value` is one of the implemented values of a choice field."""
    if value in implemented:
        return
    allowed = ", ".join(repr(v) for v in implemented)
    if value in planned:
        raise ValueError(
            f"{field}={value!r} is part of the design but not implemented yet; allowed now: {allowed}"
        )
    raise ValueError(f"{field}={value!r} is not a valid choice; allowed: {allowed}")


__all__ = [
    "CHOICES",
    "AdminConfig",
    "DSInitMAttConfig",
    "DeepNMTConfig",
    "DeepNormConfig",
    "VariantConfig",
    "check_choice",
]
