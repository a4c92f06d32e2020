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

Memory and speed (issues #25 and #48): a stack's forward pass keeps its history in ONE preallocated
(L+1, *shape) buffer (`History`, created by `new_history`), in the dtype the combination computes in (the
autocast dtype under autocast: each entry is cast once, when it is written). Each stored output is written into its
row of the buffer once, and row l's weighted sum is one matrix-vector product over a view of rows start..l of the
buffer: no stacked copy, no per-row cast. Backward (`_Row`, one custom autograd Function per row, chained so that
rows are differentiated from the top row down) writes each row's incoming gradient g_l into a second (L+1, *shape)
buffer G and computes
    ∂W[l, start..l] = g_l · H[start..l]ᵀ        the same matrix product as the plain form's backward: bit for bit
    ∂h_l = W[l..e, l]ᵀ · G[l..e]                 one matrix-vector product over the rows e ≥ l that read h_l
so every history entry receives ONE gradient, not one full-size add per later row. Memory stays linear in depth:
the buffer (saved for backward, counted by `activation_memory`) holds L+1 entries, G (during the stack's backward
only) L+1 more. At 18-6, d 512, 25k tokens under bf16 autocast this cut DLCL's bytes moved per training step from
1.81x to 1.17x plain pre-LN's (bench/dlcl_throughput.py: the per-row form stacked and cast the history at every
row, twice, and added each entry's gradient once per later row).

Exactness against the plain form `torch.tensordot(W[l], torch.stack(history), dims=1)` under autograd: the
forward is the same matrix product over the same contiguous (n, N) layout and ∂W the same product as tensordot's
backward — both bit for bit, in float32 and under autocast. The history gradient cannot be: autograd sums the
plain form's per-row contributions one full-size add at a time, in its order (row L first), each product rounded
on its own; one matrix product sums the same terms in the BLAS kernel's order (fused multiply-adds, blocked
sums), so the two agree to float32 rounding (tested at rtol = atol = 1e-6 — and exactly where an entry has
one reader, window 1). Getting autograd's order back would need the per-row adds this design removes.
Under autocast the plain form accumulates float32 sums of bfloat16 products, this form a bfloat16 result of a
float32-accumulated product: both within one bfloat16 rounding of the exact sum.

`torch.compile` traces the plain per-row form (`weighted_sum`, the function issue #25 introduced: it saves the
history entries, not a stack per row, and compiles fullgraph); lists passed to `combine` take that path too.
Gradient checkpointing of the layers leaves the history outside the checkpoints, which keeps it O(L) there too.
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


def compute_dtype(entry: torch.Tensor) -> torch.dtype:
    """The dtype the combination's matrix product runs in: the autocast dtype where autocast would cast the
    product's float operands (as it casts the plain form's stack), else the entry's own."""
    device = entry.device.type
    if entry.is_floating_point() and entry.dtype != torch.float64 and torch.is_autocast_enabled(device):
        return torch.get_autocast_dtype(device)
    return entry.dtype


class HistoryProduct:
    """The two products of the history buffer's rows (n, N) that the aggregation runs: `combine` w (n,) → Σ_k w_k ·
    rows[k] (N,) — a row's forward and an entry's gradient — and `dots` g (N,) → rows · g (n,) — a row's weight
    gradient. ``"mm"`` (default): one `torch.mm` each, a (1, n) × (n, N) matrix product (a GEMV with one output
    row). ``"fused"`` (issue #55 item 4): the same sums as one elementwise-multiply-and-reduce `torch.compile`d
    (dynamic n: one compilation for every row), accumulated in float32 and rounded once like the matrix product
    — a single kernel that reads the n rows once, at the memory bandwidth where the one-row GEMV does not (the H200
    run measured the history product at a third of it). Neither keeps anything: memory stays linear in depth."""

    def __init__(self, name: str = "mm", backend: str | None = None) -> None:
        if name not in HISTORY_PRODUCTS:
            raise ValueError(f"history product {name!r}: choose one of {HISTORY_PRODUCTS}")
        self.name, self.backend = name, backend
        self._combine = self._dots = None
        if name == "fused":
            self._combine = torch.compile(
                _fused_combine, dynamic=True, fullgraph=True, backend=backend or "inductor"
            )
            self._dots = torch.compile(
                _fused_dots, dynamic=True, fullgraph=True, backend=backend or "inductor"
            )

    def combine(self, weights: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if self._combine is None:
            return torch.mm(weights.view(1, -1), rows).view(-1)
        return self._combine(weights, rows)

    def dots(self, grad: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if self._dots is None:
            return torch.mm(grad.view(1, -1), rows.t()).view(-1)
        return self._dots(grad, rows)


def _fused_combine(weights: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return (weights.float().view(-1, 1) * rows.float()).sum(0).to(rows.dtype)


def _fused_dots(grad: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return (rows.float() * grad.float().view(1, -1)).sum(1).to(grad.dtype)


HISTORY_PRODUCTS = ("mm", "fused")
_PRODUCT = HistoryProduct("mm")


def use_history_product(name: str, backend: str | None = None) -> HistoryProduct:
    """Choose the history buffer's products for every DLCL stack of the process (`HistoryProduct`; "mm" or
    "fused", the latter compiled with `backend`, default inductor); returns the previous choice."""
    global _PRODUCT
    previous, _PRODUCT = _PRODUCT, HistoryProduct(name, backend)
    return previous


class _Shared:
    """What the rows of one `History` share with their backward: the buffer H of stored entries, the row
    gradients G (allocated by the first row differentiated, freed after row 0), W's values and, per entry k, the
    last row that reads it. Holds no tensor with a graph, so keeping it on the rows' contexts makes no cycle."""

    def __init__(self, weight: torch.Tensor | None, ends: list[int], buffer: torch.Tensor) -> None:
        self.weight, self.ends, self.buffer = weight, ends, buffer
        self.grads: torch.Tensor | None = None
        self.expected = -1  # the row the running backward pass differentiates next

    def row_gradient(self, row: int, grad: torch.Tensor | None) -> torch.Tensor:
        """Record g_row in G and return G. Within a pass the rows run top down, one after the other (the token
        chain), so G[row..first] hold this pass's gradients; the rows above a pass's first row are not
        differentiated in it and read as 0. A row out of that order starts a new pass (e.g. over a retained graph)."""
        if self.grads is None or row != self.expected:
            if self.grads is None:
                self.grads = torch.empty_like(self.buffer)
            # nothing to zero when the pass starts at the top row, as a stack's backward does
            self.grads[row + 1 :].zero_()
        if grad is None:
            self.grads[row].zero_()
        else:
            self.grads[row].copy_(grad)
        self.expected = row - 1
        return self.grads


class _Row(torch.autograd.Function):
    """Row `row` of a stack's aggregation over the `History` buffer: writes `entry` (h_row) into the buffer and
    returns (Σ_{k=start..row} w_k · H[k], a token). The token (an empty tensor) is the next row's input, so that
    autograd differentiates the rows from the top down whatever else the graph holds: row l's backward needs the
    gradients of every later row that reads h_l."""

    @staticmethod
    def forward(ctx, weights, entry, token, shared: _Shared, row: int, start: int):
        buffer = shared.buffer
        buffer[row].copy_(entry)  # the one write of h_row (and, under autocast, its one cast)
        count = row + 1 - start
        kept = buffer[start : row + 1].view(count, -1)  # contiguous: the layout torch.stack would build
        out = _PRODUCT.combine(weights.to(buffer.dtype), kept).view(entry.shape)
        ctx.shared, ctx.row, ctx.start = shared, row, start
        ctx.set_materialize_grads(False)
        if row == len(shared.ends) - 1:
            # the last row: the buffer is complete and written no more, so it can be saved as a tensor (the
            # earlier rows reach it through `shared`): saved-tensor hooks and `activation_memory` see it
            ctx.save_for_backward(buffer)
        return out, entry.new_empty(0)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad, _token_grad):
        shared, row, start = ctx.shared, ctx.row, ctx.start
        buffer = shared.buffer
        # a backward called under autocast computes in the forward's dtypes all the same
        with torch.autocast(buffer.device.type, enabled=False):
            grads = shared.row_gradient(row, grad)
            grad_weights = grad_entry = None
            if ctx.needs_input_grad[0]:  # (1, N) @ (N, n): tensordot's backward for its first operand
                count = row + 1 - start
                kept = buffer[start : row + 1].view(count, -1)
                flat = grads[row].view(1, -1)
                grad_weights = _PRODUCT.dots(flat.view(-1), kept).view(count)
            if ctx.needs_input_grad[1]:  # ∂h_row = Σ_{l=row..end} W[l, row] · g_l: one product
                end = shared.ends[row]
                column = shared.weight[row : end + 1, row].to(grads.dtype).view(1, -1)
                grad_entry = _PRODUCT.combine(column.view(-1), grads[row : end + 1].view(end + 1 - row, -1))
                grad_entry = grad_entry.view(buffer.shape[1:])
        if row == 0:
            shared.grads = None  # the stack is done: free G now, not when the graph goes
        return grad_weights, grad_entry, None, None, None, None


class History:
    """The kept outputs of one stack in one forward pass, list-like for the stack (`append`, `len`): ONE
    (L+1, *shape) buffer written once per entry, read by every row's product as a view. `combine` applies the
    next row (`_Row` under autograd, the plain product on the buffer without)."""

    def __init__(self, aggregation: LayerAggregation, first: torch.Tensor) -> None:
        self.aggregation = aggregation
        size = aggregation.num_layers + 1
        buffer = first.new_empty((size, *first.shape), dtype=compute_dtype(first))
        # W's values as this forward read them, for backward ((L+1)² numbers: a copy, safe from resharding and
        # in-place updates); inference needs none
        weight = aggregation.weight.detach().clone() if torch.is_grad_enabled() else None
        self.shared = _Shared(weight, aggregation.ends, buffer)
        self.pending: torch.Tensor | None = first
        self.rows = 0
        self.token: torch.Tensor | None = None

    def __len__(self) -> int:
        return self.rows + (self.pending is not None)

    def append(self, entry: torch.Tensor) -> None:
        if self.pending is not None:
            raise RuntimeError("History.append: the previous entry was not combined yet")
        self.pending = entry

    def next_row(self) -> torch.Tensor:
        """Σ_k W[row, k] · h_k for the row of the entry appended last."""
        entry, self.pending = self.pending, None
        if entry is None:
            raise RuntimeError("History.combine: append an entry first")
        row, self.rows = self.rows, self.rows + 1
        start = self.aggregation.starts[row]
        weights = self.aggregation.weight[row, start : row + 1].to(entry.dtype)
        if torch.is_grad_enabled():
            out, token = _Row.apply(weights, entry, self.token, self.shared, row, start)
            self.token = token if self.rows < len(self.shared.ends) else None
            return out
        buffer = self.shared.buffer
        buffer[row].copy_(entry)
        kept = buffer[start : row + 1].view(row + 1 - start, -1)
        return _PRODUCT.combine(weights.to(buffer.dtype), kept).view(entry.shape)


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
        # the last row that reads entry k (rows k..ends[k] do)
        self.ends = [min(size - 1, k + window - 1) if window > 0 else size - 1 for k in range(size)]
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

    def new_history(self, embedded: torch.Tensor) -> History | list[torch.Tensor]:
        """The history of one forward pass of the stack, holding y_0 (not yet combined): a `History` buffer,
        or under `torch.compile` / `torch.export` and `torch.jit.trace` (the legacy ONNX export) a list (the per-row
        `weighted_sum`, which they trace whole)."""
        first = self.store(embedded, 0)
        # compiled or traced, or `combine` replaced (tests and benches compare other forms so): a list
        traced = torch.compiler.is_compiling() or torch.jit.is_tracing()
        if traced or getattr(self.combine, "__func__", None) is not _COMBINE:
            return [first]
        return History(self, first)

    def combine(self, history: History | list[torch.Tensor]) -> torch.Tensor:
        """Row l = len(history) - 1 of W applied to the stored history."""
        row = len(history) - 1
        if isinstance(history, History):
            combined = history.next_row()
        else:
            start = self.starts[row]
            # entries start..row are exactly the ones the mask keeps: one weighted sum over them, saving the
            # entries, not a stack
            kept = history[start:]
            weights = self.weight[row, start : row + 1].to(kept[0].dtype)
            combined = weighted_sum(weights, kept)
        if not self.pre_norm and row > 0:
            combined = self.layer_norms[row - 1](combined)
        return combined


_COMBINE = LayerAggregation.combine  # the library's own (see `new_history`)
