"""The deep_nmt_hf core: one encoder-decoder Transformer whose variants differ only by config choices.

Building blocks, each written once and used everywhere:
    SinusoidalPositions  Marian's sinusoidal table (sin half, cos half, positions from 0), so models fold exactly
    DeepNMTAttention     multi-head attention through Transformers' attention interface (eager / sdpa)
    FeedForward          fc1 → activation → dropout → fc2
    Sublayer             norm, residual and dropout around one function f: post-LN `LN(x + f(x))` or pre-LN
                         `x + f(LN(x))` (Vaswani et al. 2017, eq. of sec. 3.1; prenorm-dlcl eq. 1-2)
    DeepNMTEncoderLayer  [self-attention, FFN] sublayers
    DeepNMTDecoderLayer  [causal self-attention, cross-attention, FFN] sublayers (`decoder_attention="self"`)
    MergedAttentionDecoderLayer  [MAtt, FFN] (`"merged"`); both share DecoderLayerBase (FFN, forward)
    DeepNMTEncoder / DeepNMTDecoder  the stacks (plus a final LayerNorm for pre-LN)

This file ships with saved checkpoints (`trust_remote_code`): it imports only transformers, torch and flat
sibling modules that do the same, never training or CLI code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import GenerationConfig, GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.activations import ACT2FN
from transformers.cache_utils import Cache, EncoderDecoderCache
from transformers.masking_utils import create_bidirectional_mask, create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import (
    BaseModelOutput,
    BaseModelOutputWithPastAndCrossAttentions,
    Seq2SeqLMOutput,
    Seq2SeqModelOutput,
)
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .beam_rules import BeamRulesMixin
from .caches import decoder_cache, is_static, mark_cross_slot_without_attention, self_attention_half
from .collapse_losses import collapse_reducing_loss, token_cross_entropy
from .configuration_deep_nmt import VARIANT_CONFIGS, DeepNMTConfig
from .initialization import (
    OUTPUT_PROJECTION,
    init_admin_omega,
    init_depth_aware_linear,
    init_embedding,
    init_layer_norm,
    tag_layer_linears,
)
from .layer_aggregation import LayerAggregation
from .layer_sharing import stack_plan
from .length_limit import SourceLengthLimitMixin
from .length_penalty import GNMTLengthPenaltyMixin
from .merged_attention import MergedAttention, target_padding_of
from .pipeline_shipping import carrying_translation_pipeline
from .positions import OffsetPositions
from .registry import VARIANT_SPECS, VariantSpec
from .residual import AdminOmega, build_residual_scale, sublayers_per_layer
from .transformers_compat import cache_of, takes_cache, with_cache


def shift_tokens_right(labels: torch.Tensor, pad_token_id: int, decoder_start_token_id: int) -> torch.Tensor:
    """Decoder inputs from labels: prepend the start token, drop the last label, turn -100 into pad."""
    shifted = labels.new_zeros(labels.shape)
    shifted[:, 1:] = labels[:, :-1].clone()
    shifted[:, 0] = decoder_start_token_id
    return shifted.masked_fill_(shifted == -100, pad_token_id)


def sinusoidal_table(num_positions: int, dim: int) -> torch.Tensor:
    """Marian's sinusoidal table: row p = [sin(p·ω_0) .. sin(p·ω_{d/2-1}), cos(p·ω_0) .. cos(p·ω_{d/2-1})],
    ω_i = 10000^(-2i/d) (Vaswani et al. 2017, sec. 3.5, with the sin and cos features not interleaved)."""
    positions = torch.arange(num_positions, dtype=torch.float64).unsqueeze(1)
    exponents = 2 * torch.arange(dim // 2, dtype=torch.float64) / dim
    angles = positions / torch.pow(torch.tensor(10000.0, dtype=torch.float64), exponents)
    return torch.cat([torch.sin(angles), torch.cos(angles)], dim=1).float()


class SinusoidalPositions(nn.Module):
    """Fixed sinusoidal position embeddings (not saved: recomputed on load)."""

    def __init__(self, num_positions: int, dim: int) -> None:
        super().__init__()
        self.num_positions = num_positions
        # the model's dtype (a bf16 load builds in bf16), computed in float64 and rounded once
        table = sinusoidal_table(num_positions, dim).to(torch.get_default_dtype())
        self.register_buffer("weight", table, persistent=False)

    def forward(self, seq_len: int, offset: int | torch.Tensor = 0) -> torch.Tensor:
        """Rows offset .. offset + seq_len - 1; `offset` may be a 0-d tensor (a static cache's fill level), then
        the rows are gathered without a data-dependent slice so that compiled decoding keeps one graph."""
        if isinstance(offset, torch.Tensor):
            return self.weight[torch.arange(seq_len, device=self.weight.device) + offset]
        if offset + seq_len > self.num_positions:
            raise ValueError(
                f"sequence of {offset + seq_len} positions is longer than max_position_embeddings="
                f"{self.num_positions}; truncate the input or raise max_position_embeddings in the config"
            )
        return self.weight[offset : offset + seq_len]


def eager_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q kᵀ · scaling + mask) v, returned as (batch, time, heads, head_dim) plus the weights. The mask is
    masking_utils' eager form (additive) or, as `generate` prepares it for another backend, boolean (True = attend)."""
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        weights = weights.masked_fill(~attention_mask, torch.finfo(weights.dtype).min)
    elif attention_mask is not None:
        weights = weights + attention_mask
    weights = nn.functional.softmax(weights, dim=-1)
    weights = nn.functional.dropout(weights, p=dropout, training=module.training)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


class DeepNMTAttention(nn.Module):
    """Multi-head attention (Vaswani et al. 2017, eq. 1) with q/k/v/out projections.

    The cache slot is passed at call time (`cache_index`), not fixed at construction, so one module can run at
    several depths (shared layers) with one cache entry per application.
    """

    def __init__(
        self, config: DeepNMTConfig, num_heads: int, is_causal: bool, is_cross_attention: bool
    ) -> None:
        super().__init__()
        self.config = config
        self.embed_dim = config.d_model
        self.num_heads = num_heads
        self.head_dim = config.d_model // num_heads
        self.scaling = self.head_dim**-0.5
        self.dropout = config.attention_dropout
        self.is_causal = is_causal
        self.is_cross_attention = is_cross_attention
        self.q_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.k_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.v_proj = nn.Linear(self.embed_dim, self.embed_dim)
        self.out_proj = nn.Linear(self.embed_dim, self.embed_dim)

    def _heads(self, states: torch.Tensor) -> torch.Tensor:
        return states.view(*states.shape[:-1], -1, self.head_dim).transpose(1, 2)

    def forward(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        cache_index: int = 0,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        context, weights = self.attend(
            hidden_states, key_value_states, attention_mask, cache, cache_index, output_attentions
        )
        return self.out_proj(context), weights

    def attend(
        self,
        hidden_states: torch.Tensor,
        key_value_states: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        cache_index: int = 0,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The attention context before the output projection, (batch, time, d_model), and the weights."""
        query = self._heads(self.q_proj(hidden_states))
        source = key_value_states if self.is_cross_attention else hidden_states
        half = cache
        if isinstance(cache, EncoderDecoderCache):
            half = cache.cross_attention_cache if self.is_cross_attention else cache.self_attention_cache
        if self.is_cross_attention and half is not None and cache.is_updated.get(cache_index):
            key, value = half.layers[cache_index].keys, half.layers[cache_index].values
        else:
            key, value = self._heads(self.k_proj(source)), self._heads(self.v_proj(source))
            if half is not None:
                key, value = half.update(key, value, cache_index)
                if self.is_cross_attention:
                    cache.is_updated[cache_index] = True
        implementation = self.config._attn_implementation or "eager"
        if output_attentions:
            implementation = "eager"  # only eager returns the weights
        attention = ALL_ATTENTION_FUNCTIONS.get_interface(implementation, eager_attention)
        output, weights = attention(
            self,
            query,
            key,
            value,
            attention_mask,
            dropout=self.dropout if self.training else 0.0,
            scaling=self.scaling,
        )
        return output.reshape(*hidden_states.shape[:-1], -1).contiguous(), weights


class FeedForward(nn.Module):
    """Position-wise FFN(x) = fc2(dropout(act(fc1(x)))) (Vaswani et al. 2017, eq. 2)."""

    def __init__(self, config: DeepNMTConfig, ffn_dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(config.d_model, ffn_dim)
        self.fc2 = nn.Linear(ffn_dim, config.d_model)
        self.activation = ACT2FN[config.activation_function]
        self.activation_dropout = config.activation_dropout

    def forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor, None]:
        hidden_states = self.activation(self.fc1(hidden_states))
        hidden_states = nn.functional.dropout(
            hidden_states, p=self.activation_dropout, training=self.training
        )
        return self.fc2(hidden_states), None


class Sublayer(nn.Module):
    """Norm, residual and dropout around one function f — the unit every variant changes.

    post-LN: `y = LN(s(x) + dropout(f(x)))` with s the residual scale (identity, ADMIN ω, DeepNorm α);
    pre-LN:  `y = x + dropout(f(LN(x)))`.
    `f` returns `(output, extra)`; the sublayer returns `(y, extra)`. `side` and `index` (0-based over the
    stack) say where it sits; a `recorder` (set by ADMIN profiling) sees each call's input and branch output.
    """

    def __init__(self, config: DeepNMTConfig, fn: nn.Module | None, side: str, index: int) -> None:
        super().__init__()
        self.side = side
        self.index = index
        self.recorder: Any = None
        self.fn = fn
        self.layer_norm = nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
        self.pre_norm = config.layer_norm_position == "pre"
        self.dropout = config.dropout
        self.residual_scale = build_residual_scale(config, side, index)

    def forward(
        self, hidden_states: torch.Tensor, *args: Any, skip: bool | torch.Tensor = False, **kwargs: Any
    ) -> tuple[torch.Tensor, Any]:
        """`skip=True` drops f for this call (cross-attention drop): post-LN gives LN(s(x)), pre-LN gives x.
        A sublayer built without f (`fn=None`: cross-attention dropped with rate 1) always skips. `skip` may be a
        0-d bool tensor (drop-net drawn on the device): f then runs and its output is multiplied by 0 or 1, the
        same result without a data-dependent branch, so `torch.compile` keeps one graph."""
        if self.fn is None or (skip is True):
            if self.pre_norm:
                return hidden_states, None
            if self.recorder is not None:
                self.recorder(self, hidden_states, torch.zeros_like(hidden_states))
            return self.layer_norm(self._scaled_residual(hidden_states)), None
        output, extra = self.fn(
            self.layer_norm(hidden_states) if self.pre_norm else hidden_states, *args, **kwargs
        )
        output = nn.functional.dropout(output, p=self.dropout, training=self.training)
        if isinstance(skip, torch.Tensor):
            keep = (~skip).to(output.dtype)
            output = output * keep
            extra = extra * keep if isinstance(extra, torch.Tensor) else extra
        if self.pre_norm:
            return hidden_states + output, extra
        if self.recorder is not None:
            self.recorder(self, hidden_states, output)
        return self.layer_norm(self._scaled_residual(hidden_states) + output), extra

    def _scaled_residual(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states if self.residual_scale is None else self.residual_scale(hidden_states)


class DeepNMTEncoderLayer(GradientCheckpointingLayer):
    """Encoder layer l: self-attention sublayer, then FFN sublayer."""

    def __init__(self, config: DeepNMTConfig, layer_index: int) -> None:
        super().__init__()
        self.layer_index = layer_index
        attention = DeepNMTAttention(
            config, config.encoder_attention_heads, is_causal=False, is_cross_attention=False
        )
        self.self_attn = Sublayer(config, attention, "encoder", 2 * layer_index)
        self.ffn = Sublayer(
            config, FeedForward(config, config.encoder_ffn_dim), "encoder", 2 * layer_index + 1
        )
        tag_layer_linears(self, "encoder", layer_index + 1)

    def sublayers(self) -> list[Sublayer]:
        return [self.self_attn, self.ffn]

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None,
        output_attentions: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        hidden_states, weights = self.self_attn(
            hidden_states, attention_mask=attention_mask, output_attentions=output_attentions
        )
        hidden_states, _ = self.ffn(hidden_states)
        return hidden_states, weights


class DecoderLayerBase(GradientCheckpointingLayer):
    """What every decoder layer l shares: attention sublayers first (`build_attention` of the subclass for
    `config.decoder_attention`, `DECODER_LAYERS`, numbered from `first` over the stack), then the FFN sublayer that
    ends every forward (`feed_forward`). All kinds take the same arguments, each reading what it needs, and return
    (output, self-attention weights, cross-attention weights), weights None unless `output_attentions`; a kind's
    static `target_masks` gives what its layers read of the target in one pass: (self-attention mask, padding)."""

    def __init__(self, config: DeepNMTConfig, layer_index: int) -> None:
        super().__init__()
        self.layer_index = layer_index
        per_layer = sublayers_per_layer(config, "decoder")
        first = per_layer * layer_index
        self.build_attention(config, first)
        ffn = FeedForward(config, config.decoder_ffn_dim)
        self.ffn = Sublayer(config, ffn, "decoder", first + per_layer - 1)
        tag_layer_linears(self, "decoder", layer_index + 1)

    def feed_forward(self, hidden_states: torch.Tensor, *weights: torch.Tensor | None) -> tuple[Any, ...]:
        """The FFN sublayer that ends the layer: (its output, *the attention weights passed through)."""
        hidden_states, _ = self.ffn(hidden_states)
        return hidden_states, *weights


class DeepNMTDecoderLayer(DecoderLayerBase):
    """Decoder layer l with `decoder_attention="self"`: causal self-attention, cross-attention over the encoder
    output, FFN. With cross-attention drop (deep decoder) the cross-attention of the lowest layers is dropped per
    pass (`drop_cross_attention`) or, at rate 1, absent. Reads the causal mask, not `target_padding`."""

    def build_attention(self, config: DeepNMTConfig, first: int) -> None:
        heads = config.decoder_attention_heads
        # built before the self-attention, and also where CAD leaves it out: the construction order fixes the
        # random draws, so a seeded model gets the weights it always got
        cross_attention = DeepNMTAttention(config, heads, is_causal=False, is_cross_attention=True)
        self_attention = DeepNMTAttention(config, heads, is_causal=True, is_cross_attention=False)
        self.self_attn = Sublayer(config, self_attention, "decoder", first)
        self.encoder_attn = None
        # drop-net rate 1: the lowest `cross_attention_drop_layers` layers own no cross-attention; post-LN keeps
        # the sublayer's LayerNorm, which then always outputs LN(x), the paper's drop formula
        absent = (
            config.cross_attention_drop_rate == 1.0 and self.layer_index < config.cross_attention_drop_layers
        )
        if not absent:
            self.encoder_attn = Sublayer(config, cross_attention, "decoder", first + 1)
        elif config.layer_norm_position == "post":
            self.encoder_attn = Sublayer(config, None, "decoder", first + 1)

    def sublayers(self) -> list[Sublayer]:
        return [s for s in (self.self_attn, self.encoder_attn, self.ffn) if s is not None]

    @staticmethod
    def target_masks(
        config: Any, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, cache: Cache | None
    ) -> tuple[torch.Tensor | None, None]:
        """The causal self-attention mask, built for `config` (`mask_config`); it carries the target padding."""
        # positional: the cache argument is `cache` from 5.24 on, `past_key_values` before
        self_half = self_attention_half(cache) if cache is not None else None
        return create_causal_mask(config, hidden_states, attention_mask, self_half), None

    def forward(
        self,
        hidden_states: torch.Tensor,
        self_attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None,
        cache: Cache | None = None,
        cache_index: int = 0,
        output_attentions: bool = False,
        target_padding: torch.Tensor | None = None,
        drop_cross_attention: bool | torch.Tensor = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        slot = {"cache": cache, "cache_index": cache_index}
        hidden_states, self_weights = self.self_attn(
            hidden_states, attention_mask=self_attention_mask, output_attentions=output_attentions, **slot
        )
        cross_weights = None
        attends = self.encoder_attn is not None and self.encoder_attn.fn is not None
        if self.encoder_attn is not None:
            hidden_states, cross_weights = self.encoder_attn(
                hidden_states,
                key_value_states=encoder_hidden_states,
                attention_mask=encoder_attention_mask,
                output_attentions=output_attentions,
                skip=drop_cross_attention,
                **slot,
            )
        if not attends:
            mark_cross_slot_without_attention(
                cache, cache_index, encoder_hidden_states, self.self_attn.fn.num_heads
            )
        if output_attentions and cross_weights is None:
            hidden_states, cross_weights = self.absent_cross_attention(hidden_states, encoder_hidden_states)
        return self.feed_forward(hidden_states, self_weights, cross_weights)

    def absent_cross_attention(
        self, hidden_states: torch.Tensor, memory: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The cross-attention weights of a layer whose cross-attention is absent (CAD, drop rate 1) or dropped
        for this pass: zeros of the usual shape (batch, heads, target, source) — no source position is attended —,
        returned after `hidden_states`. With gradients on, they enter the autograd graph with their true gradient,
        zero: `hidden_states + zeros[..., :0].sum()` adds the sum of none of their entries (exactly 0: the output
        is unchanged), and backward writes an exact zero into every entry (a slice's backward fills zeros; no
        product with the incoming gradient). So `retain_grad()` / `.grad` work as on attended weights, and `.grad`
        is all zeros, since the output does not depend on them. Without gradients nothing is added."""
        heads = self.self_attn.fn.num_heads
        shape = (hidden_states.shape[0], heads, hidden_states.shape[1], memory.shape[1])
        zeros = hidden_states.new_zeros(shape)
        if not (torch.is_grad_enabled() and hidden_states.requires_grad):
            return hidden_states, zeros
        zeros.requires_grad_()
        return hidden_states + zeros[..., :0].sum(), zeros


class MergedAttentionDecoderLayer(DecoderLayerBase):
    """Decoder layer l with `decoder_attention="merged"` (DS-Init + MAtt, Zhang et al. 2019): one MAtt sublayer,
    the average attention over the target prefix merged with the cross-attention whose projections it shares
    (merged_attention.py), then the FFN. Its cache slot holds prefix sums (caches.RunningAverageLayer), not keys
    and values. Reads `target_padding`, no self-attention mask; no cross-attention drop (the config rejects it)."""

    def build_attention(self, config: DeepNMTConfig, first: int) -> None:
        heads = config.decoder_attention_heads
        cross_attention = DeepNMTAttention(config, heads, is_causal=False, is_cross_attention=True)
        self.merged_attn = Sublayer(config, MergedAttention(cross_attention), "decoder", first)

    def sublayers(self) -> list[Sublayer]:
        return [self.merged_attn, self.ffn]

    @staticmethod
    def target_masks(
        config: Any, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None, cache: Cache | None
    ) -> tuple[None, torch.Tensor | None]:
        """No self-attention mask; the target padding (batch, length) that the average skips."""
        return None, target_padding_of(attention_mask, is_static(cache))

    def forward(
        self,
        hidden_states: torch.Tensor,
        self_attention_mask: torch.Tensor | None,
        encoder_hidden_states: torch.Tensor,
        encoder_attention_mask: torch.Tensor | None,
        cache: Cache | None = None,
        cache_index: int = 0,
        output_attentions: bool = False,
        target_padding: torch.Tensor | None = None,
        drop_cross_attention: bool | torch.Tensor = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        hidden_states, (self_weights, cross_weights) = self.merged_attn(
            hidden_states,
            key_value_states=encoder_hidden_states,
            attention_mask=encoder_attention_mask,
            target_padding=target_padding,
            output_attentions=output_attentions,
            cache=cache,
            cache_index=cache_index,
        )
        return self.feed_forward(hidden_states, self_weights, cross_weights)


# the decoder layer class of each `config.decoder_attention`, picked once when the decoder builds its layers
DECODER_LAYERS = {"self": DeepNMTDecoderLayer, "merged": MergedAttentionDecoderLayer}


class _AttentionView:
    """The config as `transformers.masking_utils` reads it, with another attention implementation: the masks of an
    `output_attentions` call are built for the eager attention that returns the weights."""

    def __init__(self, config: DeepNMTConfig, implementation: str) -> None:
        self._config = config
        self._attn_implementation = implementation

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)


def mask_config(config: DeepNMTConfig, output_attentions: bool | None) -> Any:
    """The config the masks are built for: `config` itself, or an eager view of it when attention weights are
    asked for (only eager attention returns them; `DeepNMTAttention.attend` switches to it for that call)."""
    if output_attentions and config._attn_implementation != "eager":
        return _AttentionView(config, "eager")
    return config


class DeepNMTPreTrainedModel(PreTrainedModel):
    config_class = DeepNMTConfig
    base_model_prefix = "model"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    _supports_flash_attn = True
    _supports_flex_attn = True
    _can_compile_fullgraph = True  # generate compiles static-cache decoding (MAtt too: StaticRunningAverage)
    _no_split_modules = ["DeepNMTEncoderLayer", "DeepNMTDecoderLayer", "MergedAttentionDecoderLayer"]

    def __init__(self, config: DeepNMTConfig, *inputs: Any, **kwargs: Any) -> None:
        super().__init__(config, *inputs, **kwargs)
        # the layer classes this model builds (FSDP units, device_map): accelerate rejects a name it cannot find
        self._no_split_modules = ["DeepNMTEncoderLayer", DECODER_LAYERS[config.decoder_attention].__name__]

    def save_pretrained(self, save_directory: Any, *args: Any, **kwargs: Any) -> Any:
        """Transformers' save; the directory also carries `pipeline("translation")` (pipeline_shipping.py):
        config.json's `custom_pipelines` entry, and translation_pipeline.py copied with this file's imports."""
        with carrying_translation_pipeline(self):
            return super().save_pretrained(save_directory, *args, **kwargs)

    def mark_tied_weights_as_initialized(self, loading_info: Any) -> None:
        """Transformers' marking, except that a weight absent from the checkpoint under every one of its names
        stays missing (moved off `meta` and initialised, as Marian's). The stacks hold `shared` itself, so the tie
        targets `encoder.embed_tokens.weight` / `decoder.embed_tokens.weight` are the very Parameter
        `shared.weight` is: flagging the targets flags the source, and Transformers then drops it from the missing
        keys (its rule for module-tying custom code) — a checkpoint without it loaded silently, left on `meta`."""
        missing = set(loading_info.missing_keys)
        names: dict[int, list[str]] = {}
        for name, tensor in self.state_dict(keep_vars=True).items():
            names.setdefault(id(tensor), []).append(name)
        absent = [group for group in names.values() if set(group) <= missing]
        super().mark_tied_weights_as_initialized(loading_info)
        for group in absent:
            tensor = self.get_parameter_or_buffer(group[0])
            if getattr(tensor, "_is_hf_initialized", False):
                del tensor._is_hf_initialized
            loading_info.missing_keys = set(loading_info.missing_keys) | set(group)

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            init_depth_aware_linear(module, self.config)
        elif isinstance(module, nn.Embedding):
            init_embedding(module, self.config)
        elif isinstance(module, nn.LayerNorm):
            init_layer_norm(module)
        elif isinstance(module, OffsetPositions):
            module.reset()
        elif isinstance(module, EmbeddingBias):
            init.zeros_(module.bias)
        elif isinstance(module, SinusoidalPositions):
            module.weight.copy_(sinusoidal_table(module.num_positions, self.config.d_model))
        elif isinstance(module, AdminOmega):
            init_admin_omega(module, self.config)
        elif isinstance(module, LayerAggregation):
            module.reset_mask()
            init.copy_(module.weight, module.initial_weight())

    @property
    def dummy_inputs(self) -> dict[str, torch.Tensor]:
        pad, eos = self.config.pad_token_id, self.config.eos_token_id
        input_ids = (
            torch.tensor([[5, 6, 7, eos], [8, 9, eos, pad]], device=self.device)
            % min(self.config.vocab_size, target_vocab_size(self.config))  # ids both vocabularies hold
        )
        return {"input_ids": input_ids, "attention_mask": input_ids.ne(pad), "decoder_input_ids": input_ids}


def target_vocab_size(config: DeepNMTConfig) -> int:
    """The decoder's vocabulary size: `decoder_vocab_size`, or `vocab_size` when None (Marian's rule)."""
    size = getattr(config, "decoder_vocab_size", None)
    return config.vocab_size if size is None else size


class EmbeddingBias(nn.Module):
    """A learned vector added to the scaled word embeddings (`config.embedding_bias`: zero's `bias` variable,
    bzhangGo/zero models/transformer_fuse.py lines 27-30 and 101-104)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(dim))


class _Stack(DeepNMTPreTrainedModel):
    """Shared parts of the encoder and decoder stacks: embeddings and the optional final LayerNorm. A stack is a
    PreTrainedModel (as Marian's) so that Transformers' output recording (`capture_outputs`, `_can_record_outputs`)
    collects its per-layer outputs; the enclosing model initialises its weights."""

    def __init__(self, config: DeepNMTConfig, embed_tokens: nn.Embedding, side: str) -> None:
        super().__init__(config)
        self.side = side
        self.embed_tokens = embed_tokens  # DeepNMTModel's `shared` (or `decoder_embed_tokens`) module itself
        self.embed_scale = math.sqrt(config.d_model) if config.scale_embedding else 1.0
        self.embed_positions = (
            SinusoidalPositions(config.max_position_embeddings, config.d_model)
            if getattr(config, "position_embedding", "sinusoidal") == "sinusoidal"
            else OffsetPositions(config, side)  # fairseq's table or a learned one (positions.py)
        )
        # zero's embedding bias and zero-vector decoder start (publish/convert_zero.py)
        self.embed_bias = EmbeddingBias(config.d_model) if getattr(config, "embedding_bias", False) else None
        self.zero_start = side == "decoder" and getattr(config, "decoder_start_embedding", "token") == "zero"
        self.layernorm_embedding = (  # fairseq's `layernorm_embedding`: LN(embeddings + positions), then dropout
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
            if getattr(config, "layernorm_embedding", False)
            else None
        )
        self.dropout = config.dropout
        self.layer_norm = (
            nn.LayerNorm(config.d_model, eps=config.layer_norm_eps)
            if config.layer_norm_position == "pre"
            else None
        )
        self.gradient_checkpointing = False
        self.num_owned, self.schedule, self.reinject_at = stack_plan(config, side)
        self.aggregation = None
        if getattr(config, f"{side}_layer_aggregation") == "dlcl":
            self.aggregation = LayerAggregation(
                len(self.schedule),
                config.d_model,
                pre_norm=config.layer_norm_position == "pre",
                init=config.dlcl_init,
                window=config.dlcl_window,
                eps=config.layer_norm_eps,
            )

    def begin_layers(self, embedded: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor] | None]:
        """The input of the first layer and the DLCL history (None for plain residual stacks)."""
        if self.aggregation is None:
            return embedded, None
        history = self.aggregation.new_history(embedded)  # list-like: one buffer (layer_aggregation.History)
        return self.aggregation.combine(history), history

    def next_input(self, output: torch.Tensor, history: list[torch.Tensor] | None) -> torch.Tensor:
        """The input of the next layer (or, after the last, the stack output before the final LayerNorm)."""
        if history is None:
            return output
        history.append(self.aggregation.store(output, len(history)))
        return self.aggregation.combine(history)

    def embed(
        self, input_ids: torch.Tensor | None, inputs_embeds: torch.Tensor | None, offset: int = 0
    ) -> torch.Tensor:
        """Scaled word embeddings plus positions, then dropout."""
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("give exactly one of input_ids and inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        hidden_states = inputs_embeds * self.embed_scale
        if self.embed_bias is not None:
            hidden_states = hidden_states + self.embed_bias.bias
        if (
            self.zero_start
        ):  # position 0 reads a zero vector, not its token (zero's shift: models/transformer*.py)
            first = (torch.arange(hidden_states.shape[1], device=hidden_states.device) + offset) == 0
            hidden_states = hidden_states.masked_fill(first[None, :, None], 0.0)
        positions = self.embed_positions(hidden_states.shape[1], offset).to(hidden_states.dtype)
        hidden_states = hidden_states + positions
        if self.layernorm_embedding is not None:
            hidden_states = self.layernorm_embedding(hidden_states)
        return nn.functional.dropout(hidden_states, p=self.dropout, training=self.training)

    def finish(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return hidden_states if self.layer_norm is None else self.layer_norm(hidden_states)

    def sublayers(self) -> list[Sublayer]:
        """Every residual sublayer of the stack in the order the input passes through them."""
        return [sublayer for layer in self.layers for sublayer in layer.sublayers()]


class DeepNMTEncoder(_Stack):
    """The encoder stack. With `output_hidden_states` / `output_attentions`, Transformers' output recording returns
    one entry per layer application: the first layer's input, then each layer's output (the last one after the
    final LayerNorm), and each self-attention's weights."""

    _can_record_outputs = {
        "hidden_states": OutputRecorder(DeepNMTEncoderLayer, index=0),
        "attentions": OutputRecorder(DeepNMTEncoderLayer, index=1),
    }

    def __init__(self, config: DeepNMTConfig, shared: nn.Embedding) -> None:
        super().__init__(config, shared, "encoder")
        self.layers = nn.ModuleList(DeepNMTEncoderLayer(config, i) for i in range(self.num_owned))

    @capture_outputs
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        inputs_embeds: torch.Tensor | None = None,
        output_attentions: bool | None = None,
        **kwargs: Any,
    ) -> BaseModelOutput:
        hidden_states = self.embed(input_ids, inputs_embeds)
        mask = create_bidirectional_mask(
            config=mask_config(self.config, output_attentions),
            inputs_embeds=hidden_states,
            attention_mask=attention_mask,
        )
        embedded = hidden_states
        hidden_states, history = self.begin_layers(hidden_states)
        for application, owned in enumerate(self.schedule):
            if application in self.reinject_at:
                hidden_states = hidden_states + embedded  # eq. 7: B_t = B_{t-1}^out + x
            output, _ = self.layers[owned](hidden_states, mask, output_attentions=bool(output_attentions))
            hidden_states = self.next_input(output, history)
        return BaseModelOutput(last_hidden_state=self.finish(hidden_states))


class DeepNMTDecoder(_Stack):
    """The decoder stack; with a cache it runs incrementally (one cache entry per layer application).

    A given `cache` is used unless `use_cache=False` (unset `use_cache` follows `config.use_cache`, as in
    Marian). The cache layout per variant is documented in caches.py; a static cache works for every variant (MAtt
    keeps its prefix sums in the static slot and reads its target padding from the 4D mask `generate` builds).
    With `output_attentions` / `output_hidden_states` it returns one tensor per layer application (`config.decoder_depth` = `config.num_hidden_layers`, plus the embeddings for the
    hidden states): self-attention (batch, heads, queries, keys) — for MAtt the average-attention weights, 1/t over
    the real positions ≤ t —, cross-attention (batch, heads, queries, source), zeros for a layer whose
    cross-attention is absent or dropped in this pass. Transformers' output recording collects them from the layers
    (`_can_record_outputs`), as for Marian; hidden states start with the first layer's input."""

    _can_record_outputs = {
        "hidden_states": OutputRecorder(DecoderLayerBase, index=0),
        "attentions": OutputRecorder(DecoderLayerBase, index=1),
        "cross_attentions": OutputRecorder(DecoderLayerBase, index=2),
    }

    def __init__(self, config: DeepNMTConfig, shared: nn.Embedding) -> None:
        super().__init__(config, shared, "decoder")
        self.layer_class = DECODER_LAYERS[config.decoder_attention]
        self.layers = nn.ModuleList(self.layer_class(config, i) for i in range(self.num_owned))

    @capture_outputs
    @takes_cache
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        encoder_hidden_states: torch.Tensor | None = None,
        encoder_attention_mask: torch.Tensor | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        **kwargs: Any,
    ) -> BaseModelOutputWithPastAndCrossAttentions:
        if encoder_hidden_states is None:
            raise ValueError("the decoder needs encoder_hidden_states (run the encoder first)")
        if self.gradient_checkpointing and self.training and torch.is_grad_enabled():
            use_cache = False  # a checkpointed layer runs twice: a cache would be written twice
        cache = decoder_cache(cache, use_cache, self.config, len(self.schedule))
        past_length = cache.get_seq_length() if cache is not None else 0
        hidden_states = self.embed(input_ids, inputs_embeds, offset=past_length)
        masks_for = mask_config(self.config, output_attentions)
        self_mask, target_padding = self.layer_class.target_masks(
            masks_for, hidden_states, attention_mask, cache
        )
        cross_mask = create_bidirectional_mask(
            config=masks_for,
            inputs_embeds=hidden_states,
            attention_mask=encoder_attention_mask,
            encoder_hidden_states=encoder_hidden_states,
        )
        drop_layers, drop_rate = (
            self.config.cross_attention_drop_layers,
            self.config.cross_attention_drop_rate,
        )
        embedded = hidden_states
        hidden_states, history = self.begin_layers(hidden_states)
        for application, owned in enumerate(self.schedule):
            if application in self.reinject_at:
                hidden_states = hidden_states + embedded  # eq. 7: B_t = B_{t-1}^out + x
            drop = False
            if self.training and application < drop_layers and 0.0 < drop_rate < 1.0:
                # drop-net (deep-decoder-cad-crt sec. 4.1), drawn as a tensor: no graph break under torch.compile;
                # rate 1 needs no draw (the lowest layers own no cross-attention), rate 0 never drops
                drop = torch.rand((), device=hidden_states.device) < drop_rate
            output, _, _ = self.layers[owned](
                hidden_states,
                self_mask,
                encoder_hidden_states,
                cross_mask,
                cache=cache,
                cache_index=application,
                output_attentions=bool(output_attentions),
                target_padding=target_padding,
                drop_cross_attention=drop,
            )
            hidden_states = self.next_input(output, history)
        return BaseModelOutputWithPastAndCrossAttentions(
            last_hidden_state=self.finish(hidden_states), **with_cache(cache)
        )


class DeepNMTModel(DeepNMTPreTrainedModel):
    """Encoder and decoder over one shared source/target embedding, without the output projection."""

    def __init__(self, config: DeepNMTConfig) -> None:
        super().__init__(config)
        self.shared = nn.Embedding(config.vocab_size, config.d_model, config.pad_token_id)
        # share_encoder_decoder_embeddings=False: the decoder reads its own target embedding
        self.decoder_embed_tokens = None
        target = "shared"
        if not getattr(config, "share_encoder_decoder_embeddings", True):
            self.decoder_embed_tokens = nn.Embedding(
                target_vocab_size(config), config.d_model, config.pad_token_id
            )
            target = "decoder_embed_tokens"
        # the stacks hold these very modules; the mapping makes checkpoints store each once (as before) and lets
        # from_pretrained and accelerate see the ties
        self._tied_weights_keys = {
            "encoder.embed_tokens.weight": "shared.weight",
            "decoder.embed_tokens.weight": f"{target}.weight",
        }
        self.encoder = DeepNMTEncoder(config, self.shared)
        self.decoder = DeepNMTDecoder(config, getattr(self, target))
        self.post_init()

    def __setattr__(self, name: str, value: Any) -> None:
        """Replacing `shared` (or `decoder_embed_tokens`) replaces the stacks' `embed_tokens` with it, so that
        set_input_embeddings, resizing and PEFT's wrappers of `shared` (LoRA, modules_to_save) reach the forward."""
        super().__setattr__(name, value)
        if name in ("shared", "decoder_embed_tokens") and "decoder" in self._modules:
            self.encoder.embed_tokens = self.shared
            target = self.decoder_embed_tokens
            self.decoder.embed_tokens = self.shared if target is None else target

    def get_expanded_tied_weights_keys(self, all_submodels: bool = False) -> dict[str, str]:
        """The stacks' embedding ties hold whatever `tie_word_embeddings` says: it unties only the output
        projection (Transformers drops every tie of a model without it)."""
        if all_submodels:
            return super().get_expanded_tied_weights_keys(all_submodels=True)
        return dict(self._tied_weights_keys)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.shared

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.shared = value

    def get_encoder(self) -> DeepNMTEncoder:
        return self.encoder

    def get_decoder(self) -> DeepNMTDecoder:
        return self.decoder

    @takes_cache
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> Seq2SeqModelOutput | tuple:
        output_attentions = (
            output_attentions if output_attentions is not None else self.config.output_attentions
        )
        output_hidden_states = (
            output_hidden_states if output_hidden_states is not None else self.config.output_hidden_states
        )
        use_cache = use_cache if use_cache is not None else self.config.use_cache
        if encoder_outputs is None:
            encoder_outputs = self.encoder(
                input_ids=input_ids,
                attention_mask=attention_mask,
                inputs_embeds=inputs_embeds,
                output_attentions=output_attentions,
                output_hidden_states=output_hidden_states,
            )
        elif not isinstance(encoder_outputs, BaseModelOutput):
            encoder_outputs = BaseModelOutput(
                last_hidden_state=encoder_outputs[0],
                hidden_states=encoder_outputs[1] if len(encoder_outputs) > 1 else None,
                attentions=encoder_outputs[2] if len(encoder_outputs) > 2 else None,
            )
        if decoder_input_ids is None and decoder_inputs_embeds is None:
            raise ValueError("give decoder_input_ids (or labels to the ForConditionalGeneration model)")
        decoder = self.decoder(
            input_ids=decoder_input_ids,
            attention_mask=decoder_attention_mask,
            encoder_hidden_states=encoder_outputs.last_hidden_state,
            encoder_attention_mask=attention_mask,
            cache=cache,
            inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        out = Seq2SeqModelOutput(
            last_hidden_state=decoder.last_hidden_state,
            decoder_hidden_states=decoder.hidden_states,
            decoder_attentions=decoder.attentions,
            cross_attentions=decoder.cross_attentions,
            **with_cache(cache_of(decoder)),
            encoder_last_hidden_state=encoder_outputs.last_hidden_state,
            encoder_hidden_states=encoder_outputs.hidden_states,
            encoder_attentions=encoder_outputs.attentions,
        )
        return out if return_dict is not False else out.to_tuple()


@dataclass
class DeepNMTSeq2SeqLMOutput(Seq2SeqLMOutput):
    """Seq2SeqLMOutput plus the loss components of collapse-reducing training (present only when computed):
    `nll_loss` (cross-entropy, mean of the passes), `ddr_loss`, `ald_loss` (unweighted)."""

    nll_loss: torch.FloatTensor | None = None
    ddr_loss: torch.FloatTensor | None = None
    ald_loss: torch.FloatTensor | None = None


def default_generation_config(config: DeepNMTConfig) -> GenerationConfig:
    """The generation config of a freshly built model: only the special tokens (start from pad, stop at eos), so
    that it generates as every Transformers model does — greedy, Transformers' length defaults. A trained model
    saves its beam search instead: `generation_settings.translation_generation_config`."""
    return GenerationConfig(
        decoder_start_token_id=config.decoder_start_token_id,
        pad_token_id=config.pad_token_id,
        eos_token_id=config.eos_token_id,
        bos_token_id=config.bos_token_id,
    )


class DeepNMTForConditionalGeneration(
    SourceLengthLimitMixin, BeamRulesMixin, GNMTLengthPenaltyMixin, DeepNMTPreTrainedModel, GenerationMixin
):
    """DeepNMTModel plus the output projection (tied to the target embedding when `tie_word_embeddings`: the
    shared one, or the decoder's own with `share_encoder_decoder_embeddings=False`). Its `generate` applies the
    generation config's length-penalty form (GNMT's where it says so: length_penalty.py) and per-sentence length
    limit (``max_len_a`` / ``max_len_b``: length_limit.py) and fairseq's or zero's beam-search rules where it asks
    for them (beam_rules.py)."""

    _tied_weights_keys = {"lm_head.weight": "model.shared.weight"}

    def __init__(self, config: DeepNMTConfig) -> None:
        super().__init__(config)
        self.model = DeepNMTModel(config)
        if self.model.decoder_embed_tokens is not None:  # the output projection ties to the target embedding
            self._tied_weights_keys = {"lm_head.weight": "model.decoder_embed_tokens.weight"}
        self.lm_head = nn.Linear(config.d_model, target_vocab_size(config), bias=False)
        self.lm_head.init_name = OUTPUT_PROJECTION  # untied: N(0, d^-1/2) like fairseq (initialization.py)
        self.post_init()
        self.generation_config = default_generation_config(config)

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.shared

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.set_input_embeddings(value)

    def get_output_embeddings(self) -> nn.Linear:
        return self.lm_head

    def set_output_embeddings(self, value: nn.Linear) -> None:
        self.lm_head = value

    def get_encoder(self) -> DeepNMTEncoder:
        return self.model.encoder

    def get_decoder(self) -> DeepNMTDecoder:
        return self.model.decoder

    def _resize_token_embeddings(
        self, new_num_tokens: int | None, pad_to_multiple_of: int | None = None, mean_resizing: bool = True
    ) -> nn.Embedding:
        """Transformers' resize (the shared embedding and the output projection), plus the decoder's own target
        embedding when `share_encoder_decoder_embeddings=False`; `resize_token_embeddings` then re-ties."""
        if target_vocab_size(self.config) != self.config.vocab_size:
            raise ValueError(
                f"resize_token_embeddings cannot resize a model with decoder_vocab_size="
                f"{self.config.decoder_vocab_size} != vocab_size={self.config.vocab_size} (two vocabularies)"
            )
        embeddings = super()._resize_token_embeddings(new_num_tokens, pad_to_multiple_of, mean_resizing)
        target = self.model.decoder_embed_tokens
        if target is not None and target.num_embeddings != embeddings.num_embeddings:
            resized = self._get_resized_embeddings(
                target, embeddings.num_embeddings, mean_resizing=mean_resizing
            )
            resized.requires_grad_(target.weight.requires_grad)
            self.model.decoder_embed_tokens = resized
        return embeddings

    def prepare_decoder_input_ids_from_labels(self, labels: torch.Tensor) -> torch.Tensor:
        return shift_tokens_right(labels, self.config.pad_token_id, self.config.decoder_start_token_id)

    @takes_cache
    def forward(
        self,
        input_ids: torch.Tensor | None = None,
        attention_mask: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        encoder_outputs: BaseModelOutput | tuple | None = None,
        cache: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        decoder_inputs_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        use_cache: bool | None = None,
        output_attentions: bool | None = None,
        output_hidden_states: bool | None = None,
        return_dict: bool | None = None,
        **kwargs: Any,
    ) -> Seq2SeqLMOutput | tuple:
        if labels is not None:
            use_cache = False
            if decoder_input_ids is None and decoder_inputs_embeds is None:
                decoder_input_ids = self.prepare_decoder_input_ids_from_labels(labels)
        outputs = self.model(
            input_ids,
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            encoder_outputs=encoder_outputs,
            cache=cache,
            inputs_embeds=inputs_embeds,
            decoder_inputs_embeds=decoder_inputs_embeds,
            use_cache=use_cache,
            output_attentions=output_attentions,
            output_hidden_states=output_hidden_states,
        )
        logits = self.lm_head(outputs.last_hidden_state)
        loss = components = None
        if labels is not None:
            loss = token_cross_entropy(logits, labels, self.config.label_smoothing)
            if self.training and (self.config.ddr_loss_weight > 0 or self.config.ald_loss_weight > 0):
                loss, components = collapse_reducing_loss(
                    self, loss, logits, outputs, labels, input_ids, attention_mask, decoder_input_ids
                )
        out = DeepNMTSeq2SeqLMOutput(
            loss=loss,
            logits=logits,
            **with_cache(cache_of(outputs)),
            decoder_hidden_states=outputs.decoder_hidden_states,
            decoder_attentions=outputs.decoder_attentions,
            cross_attentions=outputs.cross_attentions,
            encoder_last_hidden_state=outputs.encoder_last_hidden_state,
            encoder_hidden_states=outputs.encoder_hidden_states,
            encoder_attentions=outputs.encoder_attentions,
            **(components or {}),
        )
        return out if return_dict is not False else out.to_tuple()


def variant_models(
    spec: VariantSpec, config_class: type[DeepNMTConfig], module: str = __name__
) -> tuple[type[DeepNMTModel], type[DeepNMTForConditionalGeneration]]:
    """The thin `<Stem>Model` and `<Stem>ForConditionalGeneration` classes of a variant: the core classes with the
    variant's `config_class` (its registry spec's defaults), named after the spec. `module`: where the classes are
    importable from (their `auto_map` entries name them)."""
    common = {
        "__module__": module,
        "__doc__": f"{spec.summary} The core with `{config_class.__name__}` defaults.",
    }
    model = type(
        spec.model_name,
        (DeepNMTModel,),
        {**common, "__qualname__": spec.model_name, "config_class": config_class},
    )
    # Transformers wants GenerationMixin among an LM's own bases
    bases = (DeepNMTForConditionalGeneration, GenerationMixin)
    lm = type(spec.lm_name, bases, {**common, "__qualname__": spec.lm_name, "config_class": config_class})
    return model, lm


# Each variant's `<Stem>Model` / `<Stem>ForConditionalGeneration` (AdminModel, DLCLForConditionalGeneration, ...) as
# module attributes, where `auto_map` finds them; the core's own classes above serve "base". (DSInitMAtt: MAtt's
# decoder state is the prefix sums of the average attention, caches.RunningAverageLayer, not keys and values; a static
# cache / torch.compile'd generation keeps them in its pre-allocated slots, caches.StaticRunningAverage.)
VARIANT_MODELS: dict[str, tuple[type[DeepNMTModel], type[DeepNMTForConditionalGeneration]]] = {
    name: (DeepNMTModel, DeepNMTForConditionalGeneration)
    if config_class is DeepNMTConfig
    else variant_models(VARIANT_SPECS[name], config_class)
    for name, config_class in VARIANT_CONFIGS.items()
}
globals().update({cls.__name__: cls for classes in VARIANT_MODELS.values() for cls in classes})


__all__ = [
    "DeepNMTSeq2SeqLMOutput",
    "DecoderLayerBase",
    "DeepNMTAttention",
    "DeepNMTDecoder",
    "DeepNMTDecoderLayer",
    "DeepNMTEncoder",
    "DeepNMTEncoderLayer",
    "DeepNMTForConditionalGeneration",
    "DeepNMTModel",
    "DeepNMTPreTrainedModel",
    "FeedForward",
    "MergedAttentionDecoderLayer",
    "SinusoidalPositions",
    "Sublayer",
    "default_generation_config",
    "shift_tokens_right",
    "sinusoidal_table",
    "variant_models",
    "VARIANT_MODELS",
    *(
        cls.__name__
        for classes in VARIANT_MODELS.values()
        for cls in classes
        if cls not in (DeepNMTModel, DeepNMTForConditionalGeneration)
    ),
]
