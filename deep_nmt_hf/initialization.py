"""Weight initialisation of the deep_nmt_hf core.

`init_method="xavier"` is the fairseq / tensor2tensor Transformer recipe (Vaswani et al., 2017):
every linear map is drawn from Glorot's U(-γ, γ) with γ = sqrt(6 / (fan_in + fan_out)), biases are zero,
word embeddings are N(0, d_model^-1/2) with the padding row zero, LayerNorms are (1, 0).
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


def init_linear(module: nn.Linear, config: DeepNMTConfig) -> None:
    """Glorot-uniform weight (N(0, init_std) for `"normal"`), zero bias."""
    if config.init_method == "normal":
        init.normal_(module.weight, mean=0.0, std=config.init_std)
    else:
        init.xavier_uniform_(module.weight)
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

    xavier:   U(-γ, γ), γ = sqrt(6 / (fan_in + fan_out)).
    normal:   N(0, init_std).
    ds_init:  U(-γ·α/√l, γ·α/√l) with l the layer number counted from 1 separately in encoder and decoder
              (dsinit-merged-attention, eq. 6). The authors' TensorFlow release applies the scale inside a
              variance-scaling initializer, which shrinks the bound by l^(-1/4) instead; we follow the paper.
    deepnorm: xavier-normal with gain β on v/out projections and the FFN (β from `residual.deepnorm_constants`),
              plain xavier elsewhere (DeepNet, sec. 3).
    Biases are zero in every method. Linear maps outside the layers (the output projection) stay xavier.
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
