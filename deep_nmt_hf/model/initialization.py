"""Weight initialisation of the deep_nmt_hf core.

`init_method="xavier"` is fairseq's Transformer recipe as the ADMIN, DLCL and shared-layers papers trained with it
(fairseq v0.6-v0.9, `MultiheadAttention.reset_parameters` and the `Linear` / `Embedding` helpers of
`models/transformer.py`):
- attention q, k and v (self- and cross-attention): Glorot U(-γ, γ) with gain 1/√2, γ = sqrt(1/2)·sqrt(6/(2d)) —
  the same distribution as plain Glorot on the fused 3d×d `in_proj_weight` of fairseq ≤ v0.8;
- attention output projection, FFN fc1 and fc2: plain Glorot, γ = sqrt(6 / (fan_in + fan_out));
- every bias zero. fairseq v0.8's fused `in_proj_bias` is zeroed with out_proj's; v0.9 splits q/k/v into
  `nn.Linear`s whose biases keep PyTorch's default init and zeroes only out_proj's bias (deepnmt trained on v0.9,
  Transformer-Clinic's fork on v0.8/0.9). We pick v0.8's all-zero biases: the state the papers' 2019 runs (DLCL,
  shared layers on v0.6-v0.8) started from, and a k bias that stays exactly zero (softmax ignores it anyway);
- word embeddings N(0, d_model^-1/2) with the padding row zero; an untied output projection the same
  (fairseq's `output_projection`); LayerNorms (1, 0).
fairseq ≥ v0.10 builds the FFN and the separate q/k/v biases with PyTorch's default `nn.Linear` init instead; we
follow the papers' code, not that later change.
`init_method="normal"` draws every linear and embedding weight from N(0, `init_std`) instead (Transformers'
Marian/BART `_init_weights`), biases and the padding row zero.

The functions use `transformers.initialization`, which leaves tensors alone that were loaded from a checkpoint
(`from_pretrained` marks them), so re-running initialisation never overwrites trained weights.
"""

from __future__ import annotations

import math

from torch import nn
from transformers import initialization as init

from .configuration_deep_nmt import DeepNMTConfig
from .residual import AdminOmega, deepnorm_constants, initial_omega

# fairseq scales q/k/v by 1/√2 ("empirically observed the convergence to be much better", reset_parameters).
QKV_PROJECTIONS = ("q_proj", "k_proj", "v_proj")
QKV_GAIN = 1.0 / math.sqrt(2.0)
OUTPUT_PROJECTION = "output_projection"


def xavier_gain(module: nn.Linear) -> float:
    """fairseq's Glorot gain of one linear map: 1/√2 for attention q/k/v, 1 elsewhere."""
    return QKV_GAIN if getattr(module, "init_name", None) in QKV_PROJECTIONS else 1.0


def init_linear(module: nn.Linear, config: DeepNMTConfig) -> None:
    """fairseq's Glorot-uniform weight (gain 1/√2 on q/k/v; N(0, init_std) for `"normal"`), zero bias.

    An untied output projection (tagged `init_name="output_projection"`) is N(0, d_model^-1/2) as in fairseq."""
    if config.init_method == "normal":
        init.normal_(module.weight, mean=0.0, std=config.init_std)
    elif getattr(module, "init_name", None) == OUTPUT_PROJECTION:
        init.normal_(module.weight, mean=0.0, std=config.d_model**-0.5)
    else:
        init.xavier_uniform_(module.weight, gain=xavier_gain(module))
    if module.bias is not None:
        init.zeros_(module.bias)


def init_embedding(module: nn.Embedding, config: DeepNMTConfig) -> None:
    """N(0, d_model^-1/2) word embeddings (fairseq's Transformer recipe; N(0, init_std) for `"normal"`) with a
    zero padding row."""
    std = config.init_std if config.init_method == "normal" else config.d_model**-0.5
    init.normal_(module.weight, mean=0.0, std=std)
    if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
        init.zeros_(module.weight[module.padding_idx])


def init_layer_norm(module: nn.LayerNorm) -> None:
    """Unit gain, zero bias."""
    init.ones_(module.weight)
    init.zeros_(module.bias)


# DeepNorm scales only the value/output projections and the FFN (DeepNet, sec. 3); q/k keep plain xavier.
DEEPNORM_SCALED = ("v_proj", "out_proj", "fc1", "fc2")


def tag_layer_linears(layer: nn.Module, side: str, layer_number: int) -> None:
    """Record on every linear map of one layer where it sits: side, layer number l (from 1), its name."""
    for name, module in layer.named_modules():
        if isinstance(module, nn.Linear):
            module.init_side = side
            module.init_layer_number = layer_number
            module.init_name = name.rsplit(".", 1)[-1]


def init_depth_aware_linear(module: nn.Linear, config: DeepNMTConfig) -> None:
    """Initialise one linear map by `config.init_method`.

    xavier:   fairseq's recipe (module docstring): U(-g·γ, g·γ), γ = sqrt(6 / (fan_in + fan_out)), g = 1/√2 on
              attention q/k/v and 1 elsewhere.
    normal:   N(0, init_std).
    ds_init:  U(-γ·α/√l, γ·α/√l) with l the layer number counted from 1 separately in encoder and decoder
              (dsinit-merged-attention, eq. 15). The base bound γ is eq. 9's Glorot bound of each matrix's own
              d_i × d_o, for q/k/v too: *no* 1/√2 factor. The paper defines γ per matrix (eq. 9) and trains
              with its own TensorFlow code, not fairseq, so fairseq's q/k/v gain is not part of its recipe; at
              l = 1, α = 1 DS-Init therefore equals plain Glorot, not our "xavier". The authors' release applies
              the scale inside a variance-scaling initializer, which shrinks the bound by l^(-1/4) instead; we
              follow the paper.
    deepnorm: xavier-normal with gain β on v/out projections and the FFN (β from `residual.deepnorm_constants`),
              plain xavier elsewhere (DeepNet, sec. 3).
    Biases are zero in every method. Linear maps outside the layers (an untied output projection) follow
    `init_linear`.
    """
    layer_number = getattr(module, "init_layer_number", None)
    if layer_number is None or config.init_method in ("xavier", "normal"):
        init_linear(module, config)
        return
    if config.init_method == "ds_init":
        fan_out, fan_in = module.weight.shape
        bound = math.sqrt(6.0 / (fan_in + fan_out)) * config.ds_init_alpha / math.sqrt(layer_number)
        init.uniform_(module.weight, -bound, bound)
    elif config.init_method == "deepnorm" and module.init_name in DEEPNORM_SCALED:
        init.xavier_normal_(module.weight, gain=deepnorm_constants(config, module.init_side)[1])
    else:
        init.xavier_uniform_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


def init_admin_omega(module: AdminOmega, config: DeepNMTConfig) -> None:
    """ω starts at the analytic value (`admin_init="analytic"`) or at 1 until profiling sets it."""
    init.constant_(module.omega, initial_omega(config, module.side))
