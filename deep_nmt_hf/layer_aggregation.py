"""DLCL: dynamic linear combination of layers (prenorm-dlcl, sec. 3.2, eqs. 8-9).

With y_0 the embedding output and y_1..y_L the outputs of the L layers of a stack, the input of layer l+1 is a
learned combination of y_0..y_l (whole layers, one scalar weight each), read from row l of a lower-triangular
(L+1)×(L+1) matrix W; row L gives the stack's output.

    pre-norm  (eq. 8):  x_{l+1} = Σ_k W[l, k] · LN_k(y_k)      one LayerNorm per stored output, y_0 not normalised
                        (as in the authors' released code); the stack output is row L followed by the final LN.
    post-norm (eq. 9):  x_{l+1} = LN_l(Σ_k W[l, k] · y_k)      one LayerNorm per row; row 0 (the embeddings
                        alone) is not normalised, so that at W = identity the stack is the plain post-LN one.

Init `"avg"` (row l = 1/(l+1): at initialisation each layer reads the mean of the history) or `"one"` (every
entry of the lower triangle 1: the plain sum of the history). `window` = w keeps only the last w outputs of the
history (entries further back are fixed at 0); -1 keeps all. Every operation is per position, so incremental
decoding gives exactly the full pass.
"""

from __future__ import annotations

import torch
from torch import nn


def window_mask(size: int, window: int) -> torch.Tensor:
    """1 where row l may read output k: k ≤ l, and k > l - window when a window is set."""
    rows = torch.arange(size).unsqueeze(1)
    cols = torch.arange(size).unsqueeze(0)
    allowed = cols <= rows
    if window > 0:
        allowed &= cols > rows - window
    return allowed.float()


class LayerAggregation(nn.Module):
    """The DLCL weights W and LayerNorms of one stack of `num_layers` layers."""

    def __init__(
        self,
        num_layers: int,
        d_model: int,
        pre_norm: bool,
        init: str = "avg",
        window: int = -1,
        eps: float = 1e-5,
    ) -> None:
        super().__init__()
        self.num_layers = num_layers
        self.pre_norm = pre_norm
        self.init = init
        size = num_layers + 1
        self.weight = nn.Parameter(torch.zeros(size, size))
        self.window = window
        self.register_buffer("mask", window_mask(size, window), persistent=False)  # rebuilt on load
        self.starts = [max(0, row - window + 1) if window > 0 else 0 for row in range(size)]
        # pre-norm: LN_k for the stored outputs k = 1..L; post-norm: LN_l for the rows l = 1..L
        self.layer_norms = nn.ModuleList(nn.LayerNorm(d_model, eps=eps) for _ in range(num_layers))

    @torch.no_grad()
    def reset_mask(self) -> None:
        """Recompute the (unsaved) mask buffer, e.g. after `from_pretrained` materialised it empty."""
        self.mask.copy_(window_mask(self.num_layers + 1, self.window))

    def initial_weight(self) -> torch.Tensor:
        """W at initialisation: "avg" (row l = 1/(number of entries kept)) or "one" (ones), masked by the window."""
        mask = self.mask
        if self.init == "avg":
            return mask / mask.sum(dim=1, keepdim=True)
        return mask.clone()

    def weights(self) -> torch.Tensor:
        """W with the entries outside the lower triangle / window held at zero."""
        return self.weight * self.mask

    def store(self, output: torch.Tensor, k: int) -> torch.Tensor:
        """What the history keeps of y_k: LN_k(y_k) for pre-norm (k ≥ 1), y_k itself otherwise."""
        if self.pre_norm and k > 0:
            return self.layer_norms[k - 1](output)
        return output

    def combine(self, history: list[torch.Tensor]) -> torch.Tensor:
        """Row l = len(history) - 1 of W applied to the stored history."""
        row = len(history) - 1
        start = self.starts[row]
        # entries start..row are exactly the ones the mask keeps: one weighted sum over the stacked history
        # (a single matrix-vector product forward and backward instead of 2·(row − start) elementwise ops)
        kept = history[start:]
        weights = self.weight[row, start : row + 1].to(kept[0].dtype)
        combined = torch.tensordot(weights, torch.stack(kept), dims=1)
        if not self.pre_norm and row > 0:
            combined = self.layer_norms[row - 1](combined)
        return combined
