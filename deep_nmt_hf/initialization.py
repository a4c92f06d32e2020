"""Weight initialisation of the deep_nmt_hf core.

`init_method="xavier"` is the fairseq / tensor2tensor Transformer recipe (Vaswani et al., 2017):
every linear map is drawn from Glorot's U(-γ, γ) with γ = sqrt(6 / (fan_in + fan_out)), biases are zero,
word embeddings are N(0, d_model^-1/2) with the padding row zero, LayerNorms are (1, 0).

The functions use `transformers.initialization`, which leaves tensors alone that were loaded from a checkpoint
(`from_pretrained` marks them), so re-running initialisation never overwrites trained weights.
"""

from __future__ import annotations

from torch import nn
from transformers import initialization as init

from .configuration_deep_nmt import DeepNMTConfig


def init_linear(module: nn.Linear, config: DeepNMTConfig) -> None:
    """Glorot-uniform weight, zero bias (the `"xavier"` method)."""
    init.xavier_uniform_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


def init_embedding(module: nn.Embedding, config: DeepNMTConfig) -> None:
    """N(0, d_model^-1/2) word embeddings with a zero padding row (fairseq's Transformer recipe)."""
    init.normal_(module.weight, mean=0.0, std=config.d_model**-0.5)
    if module.padding_idx is not None and not getattr(module.weight, "_is_hf_initialized", False):
        init.zeros_(module.weight[module.padding_idx])


def init_layer_norm(module: nn.LayerNorm) -> None:
    """Unit gain, zero bias."""
    init.ones_(module.weight)
    init.zeros_(module.bias)
