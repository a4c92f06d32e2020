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

Memory: row l is one weighted sum over the kept history (`weighted_sum`, a custom autograd function). It saves the
history tensors themselves for backward, not a stacked copy of them, so the activations DLCL keeps are the L+1
history entries (plus the LayerNorms' inputs) — linear in depth. `torch.stack(history)` under autograd, as before
issue #25, saved a new (l+1)-entry tensor for every row: quadratic (at 48+48 tiny layers 3.0× what the plain pre-LN stack saves; now 1.16×).
The forward is the same stack + tensordot as before and the backward the same two matrix products tensordot's
backward computes, so results and gradients are bit for bit unchanged; the stacked copy is only a temporary now.
torch.compile traces the function whole (fullgraph); gradient checkpointing of the layers leaves the history
outside the checkpoints, which is what keeps it O(L) there too.
"""

from __future__ import annotations

import torch
from torch import nn


class WeightedSum(torch.autograd.Function):
    """Σ_k w_k · h_k for a weight vector w (n,) and n tensors h_k of one shape, saving only w and the h_k
    themselves for backward (the history entries, which every later row reads too) — never the (n, ...) stack.

    The stack is built in forward and again in backward as a temporary, so each pass is one matrix product
    (as `torch.tensordot(w, torch.stack(h), dims=1)` and its backward), bit for bit the same numbers."""

    @staticmethod
    def forward(weights: torch.Tensor, *history: torch.Tensor) -> torch.Tensor:
        return torch.tensordot(weights, torch.stack(history), dims=1)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(*inputs)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        weights, *history = ctx.saved_tensors
        # under autocast the forward's product ran in the autocast dtype, and so does its backward (autograd
        # casts each gradient back to its input's dtype)
        weights = weights.to(grad.dtype)
        flat = grad.reshape(1, -1)
        grad_weights = None
        if ctx.needs_input_grad[0]:  # (1, N) @ (N, n): tensordot's backward for its first operand
            stacked = torch.stack(history).reshape(len(history), -1).to(grad.dtype)
            grad_weights = torch.mm(flat, stacked.t()).reshape(weights.shape)
        grad_history = [None] * len(history)
        if any(ctx.needs_input_grad[1:]):  # (n, 1) @ (1, N): one row per history entry
            rows = torch.mm(weights.reshape(-1, 1), flat).reshape(len(history), *grad.shape)
            grad_history = [
                row if need else None for row, need in zip(rows, ctx.needs_input_grad[1:], strict=True)
            ]
        return grad_weights, *grad_history


def weighted_sum(weights: torch.Tensor, history: list[torch.Tensor]) -> torch.Tensor:
    """Σ_k weights[k] · history[k] (`WeightedSum`: autograd keeps the history entries, not their stack). Without
    autograd nothing is kept, so inference runs the plain product (which `torch.compile`d decoding traces: dynamo
    mis-binds the variadic Function's arguments in inference mode)."""
    if not torch.is_grad_enabled():
        return torch.tensordot(weights, torch.stack(history), dims=1)
    return WeightedSum.apply(weights, *history)


def window_mask(size: int, window: int) -> torch.Tensor:
    """1 where row l may read output k: k ≤ l, and k > l - window when a window is set."""
    rows = torch.arange(size).unsqueeze(1)
    cols = torch.arange(size).unsqueeze(0)
    allowed = cols <= rows
    if window > 0:
        allowed &= cols > rows - window
    return allowed.to(torch.get_default_dtype())  # the model's dtype: a bf16 load builds it in bf16


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
        # entries start..row are exactly the ones the mask keeps: one weighted sum over them (one matrix-vector
        # product forward and backward instead of 2·(row − start) elementwise ops), saving the entries, not a stack
        kept = history[start:]
        weights = self.weight[row, start : row + 1].to(kept[0].dtype)
        combined = weighted_sum(weights, kept)
        if not self.pre_norm and row > 0:
            combined = self.layer_norms[row - 1](combined)
        return combined
