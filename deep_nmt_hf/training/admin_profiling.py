"""ADMIN profiling: one forward pass sets the residual scale ω of every post-LN sublayer.

Paper: admin-very-deep-transformers-nmt, sec. 3 (Profiling and Training phases). The model is in training mode;
one forward pass visits the sublayers in order (the encoder's, then the decoder's on the encoder output). Separately
for the encoder and the decoder, with a running value r (r = 1 before the first sublayer), at sublayer i

    ω_i = r                                            (set *before* this sublayer's residual add)
    r  ← sqrt( Var(ω_i · x_{i-1}) + Var(f_i(x_{i-1})) )  (variances over every position, padding included)

so every later statistic — and the encoder output that the decoder's cross-attention reads — already sees the
earlier ω's. This is the progressive profiling of the authors' code (Transformer-Clinic, `adaptive-profiling`:
each layer fills its ω from the running ratio, then updates the ratio from the variances of its scaled skip input
and its branch output). It yields ω_{i+1} = sqrt(ω_i² Var(x_{i-1}) + Var(f_i)) — `omega_recursion` — but with the
statistics of the progressively scaled model, not of the ω = 1 model.

Readings: the paper's text writes ω_i = sqrt(Σ_{j<i} Var[f(x_{j-1})]) from one pass with every ω = 1; the released
code differs in two ways and we follow the code, which is what their 60L-12L results were trained with: (a) the
recursion also counts the (unit) variance of the LayerNorm-ed skip input and keeps ω_1 = 1 for the sublayer that
reads the embeddings (which keeps the model foldable); (b) the profiling is progressive, as above. ω is a scalar per
sublayer; with `admin_omega="trainable"` it initialises a per-dimension vector that training then adjusts. A
sublayer that runs at several depths (layer sharing) takes its ω at its first use; its later uses are profiled
with that ω (no paper defines ADMIN with shared layers).

The statistics (`positions`): the authors' code takes `np.var` of the whole flattened tensor, padding included
(Transformer-Clinic `transformer_layer.py`, adaptive-profiling), and so do we by default (`"all"`). `"non_pad"`
takes them over the real tokens only (the target side: labels != -100): the ω of the same sentences then does not
depend on how much padding their batch carries. Measured (bench/results/admin_profile_padding.md, ADMIN 18-6 at
d 64): the readings differ by at most 2% (last decoder ω 2.73 vs 2.79 at 72% padding), and only "all" moves when
the same sentences are padded wider (2.76 → 2.73); not enough to depart from the authors by default. The
profiling batch is "one batch of 8k tokens" (footnote 5): the first batch of a token budget (`max_tokens`, 8192
in `train`; fairseq's first training batch in the authors' runs), length-sorted so that it holds little padding;
without a budget the first `batch_size` pairs.

Deliberate departure: the authors' ω of the very first sublayer (it reads the embeddings) is a trainable vector
initialised at 1; ours is fixed at 1, because a trained first ω would scale the sinusoidal positions too and break
the exact fold into the stock classes (../shared/DESIGN.md, "Folding ADMIN exactly").

Usable alone (`admin_profile(model, batch)`) and as a `TrainerCallback` (`AdminProfilingCallback`).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import TrainerCallback

from ..model.residual import AdminOmega, current_omegas, residual_sublayers
from ..science.plots import plot_omegas
from .distributed import process_group_is_up
from .options import PROFILE_POSITIONS
from .sharding import broadcast_object, gathered_parameters, is_sharded

logger = logging.getLogger(__name__)


def _masked_variance(tensor: torch.Tensor, mask: torch.Tensor | None) -> float:
    values = tensor.float()
    if mask is not None and mask.shape == values.shape[:2]:
        values = values[mask.bool()]
    return values.var(unbiased=False).item()


def omega_recursion(input_variances: list[float], output_variances: list[float]) -> list[float]:
    """ω_1 = 1, ω_{i+1} = sqrt(ω_i² Var(x_{i-1}) + Var(f_i(x_{i-1}))) for the sublayers of one side."""
    omegas = [1.0]
    for var_in, var_out in zip(input_variances[:-1], output_variances[:-1], strict=True):
        omegas.append((omegas[-1] ** 2 * var_in + var_out) ** 0.5)
    return omegas


@torch.no_grad()
def admin_profile(
    model: nn.Module, batch: dict[str, torch.Tensor], seed: int = 0, positions: str = "all"
) -> dict[str, list[float]]:
    """Profile ADMIN ω progressively on one batch (input_ids, attention_mask, labels or decoder_input_ids), write
    them into the model, mark `config.admin_profiled`, and return {"encoder": [ω...], "decoder": [ω...]}.

    `positions`: "all" (the authors': variances over every position, padding included) or "non_pad" (real
    tokens only). Deterministic for a given seed (the dropout masks of the profiling pass come from it)."""
    config = model.config
    if config.residual_scaling != "admin":
        raise ValueError(f"admin_profile needs residual_scaling='admin', got {config.residual_scaling!r}")
    if positions not in PROFILE_POSITIONS:
        raise ValueError(f"positions={positions!r}; valid: {', '.join(PROFILE_POSITIONS)}")
    sides = residual_sublayers(model)
    for sublayers in sides.values():
        for sublayer in sublayers:
            if isinstance(sublayer.residual_scale, AdminOmega):
                sublayer.residual_scale.set_(1.0)
    device = next(model.parameters()).device
    batch = {k: v.to(device) for k, v in batch.items() if isinstance(v, torch.Tensor)}
    masks = {"encoder": None, "decoder": None}  # "all": every position counts
    if positions == "non_pad":
        masks["encoder"] = batch.get("attention_mask")
        if "labels" in batch:
            masks["decoder"] = batch["labels"].ne(-100)
        elif "decoder_attention_mask" in batch:
            masks["decoder"] = batch["decoder_attention_mask"]
    running = {"encoder": 1.0, "decoder": 1.0}
    profiled: dict[str, dict[int, float]] = {"encoder": {}, "decoder": {}}

    def record(sublayer: nn.Module, inputs: torch.Tensor, output: torch.Tensor) -> None:
        """Called by the sublayer before its residual add: set its ω from the running value, then update it."""
        side, mask = sublayer.side, masks[sublayer.side]
        if sublayer.index not in profiled[side]:  # first use (a shared sublayer keeps its first ω)
            if isinstance(sublayer.residual_scale, AdminOmega):
                sublayer.residual_scale.set_(running[side])
            profiled[side][sublayer.index] = _omega_of(sublayer)
        omega = _omega_of(sublayer)
        running[side] = (omega**2 * _masked_variance(inputs, mask) + _masked_variance(output, mask)) ** 0.5

    was_training = model.training
    model.train()
    try:
        for sublayers in sides.values():
            for sublayer in sublayers:
                sublayer.recorder = record
        with (
            torch.random.fork_rng(devices=[device] if device.type == "cuda" else []),
            _in_fp32(model, device),
        ):
            torch.manual_seed(seed)
            model(**{k: v for k, v in batch.items() if k != "labels"} | _decoder_inputs(model, batch))
    finally:
        for sublayers in sides.values():
            for sublayer in sublayers:
                sublayer.recorder = None
        model.train(was_training)
    config.admin_profiled = True
    omegas = {
        side: [profiled[side].get(s.index, _omega_of(s)) for s in sublayers]
        for side, sublayers in sides.items()
    }
    warn_if_omega_below_one(omegas, config)
    return omegas


@contextlib.contextmanager
def _in_fp32(model: nn.Module, device: torch.device) -> Iterator[None]:
    """Run the profiling pass in fp32, also inside bf16 / fp16 training: ω comes from variances, which autocast
    would compute from low-precision activations (measured: bf16 moves ω by ~0.2%). accelerate's `prepare_model`
    replaces `model.forward` with one wrapped in `torch.autocast` (the plain one kept as `_original_forward`),
    which turns autocast back on inside any `autocast(enabled=False)` around the call: the plain forward is put
    back for the pass, and autocast is disabled around it (against an enclosing one)."""
    wrapped, plain = model.__dict__.get("forward"), getattr(model, "_original_forward", None)
    swap = wrapped is not None and plain is not None
    if swap:
        model.forward = plain
    try:
        with torch.autocast(device.type, enabled=False):
            yield
    finally:
        if swap:
            model.forward = wrapped


def warn_if_omega_below_one(omegas: dict[str, list[float]], config: Any) -> bool:
    """Warn (and return True) when profiling gave some ω < 1: the embeddings and branches start with a small
    variance, so every later ω stays below 1 and flat instead of growing with depth (admin sec. 3 assumes
    Glorot-scale branches). Measured: `init_method="normal"` gives ω ≈ 0.62 everywhere, and an ADMIN 18-6 trained
    with it learned to ignore the source (bench/results/depth_multi30k_12epochs.md, admin-18-6-normal)."""
    low = {side: min(values) for side, values in omegas.items() if values and min(values) < 1.0}
    if low:
        logger.warning(
            "ADMIN profiled ω below 1 (smallest: %s) with init_method=%r: the embeddings and residual branches start "
            "with too small a variance for ADMIN, whose ω should grow with depth from 1. An ADMIN 18-6 trained like "
            "this ignored the source (bench/results/depth_multi30k_12epochs.md); use init_method='xavier' (fairseq's).",
            ", ".join(f"{side} {value:.3f}" for side, value in low.items()),
            getattr(config, "init_method", None),
        )
    return bool(low)


def _omega_of(sublayer: nn.Module) -> float:
    """The scalar ω of one sublayer (1.0 where the skip branch is not scaled)."""
    scale = sublayer.residual_scale
    return scale.value().float().mean().item() if isinstance(scale, AdminOmega) else 1.0


def _decoder_inputs(model: nn.Module, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    if "decoder_input_ids" in batch:
        return {}
    if "labels" not in batch:
        raise ValueError("admin_profile needs labels or decoder_input_ids in the batch")
    return {"decoder_input_ids": model.prepare_decoder_input_ids_from_labels(batch["labels"])}


def broadcast_omegas(model: nn.Module) -> None:
    """Make every rank hold rank 0's ω (no-op outside torch.distributed)."""
    if not process_group_is_up():
        return
    for sublayers in residual_sublayers(model).values():
        for sublayer in sublayers:
            if isinstance(sublayer.residual_scale, AdminOmega):
                torch.distributed.broadcast(sublayer.residual_scale.omega.data, src=0)


def set_omegas(model: nn.Module, omegas: dict[str, list[float]]) -> None:
    """Write {"encoder": [ω...], "decoder": [ω...]} into the model (works on FSDP2 shards: a fill)."""
    for side, sublayers in residual_sublayers(model).items():
        for sublayer, omega in zip(sublayers, omegas[side], strict=True):
            if isinstance(sublayer.residual_scale, AdminOmega):
                sublayer.residual_scale.set_(omega)


class AdminProfilingCallback(TrainerCallback):
    """Profiles ADMIN ω before the first optimizer step, unless the model is already profiled.

    The profiling batch is the first batch of a token budget of `max_tokens` (`batching.TokenBudgetBatchSampler`
    with `seed`: the authors' "one batch of 8k tokens"), or without a budget the first `batch_size` examples of the
    training set, passed through the Trainer's collator (taken by index, so the Trainer's own data order and RNG
    are untouched). `positions` is `admin_profile`'s. In several processes rank 0
    profiles and broadcasts, so ω is identical on every rank. An FSDP2-sharded model (sharding.py) profiles on
    every rank (its forward all-gathers the parameters, a collective) and every rank then sets rank 0's ω.
    Logs the values and writes `admin_omega.json` and `admin_omega.png` into the output directory (main
    process only).
    """

    def __init__(
        self,
        batch_size: int | None = None,
        seed: int = 0,
        max_tokens: int | None = None,
        positions: str = "all",
    ) -> None:
        self.batch_size = batch_size
        self.seed = seed
        self.max_tokens = max_tokens
        self.positions = positions
        self.omegas: dict[str, list[float]] | None = None

    def on_train_begin(
        self, args: Any, state: Any, control: Any, model: nn.Module = None, **kwargs: Any
    ) -> None:
        if model is None or model.config.residual_scaling != "admin" or model.config.admin_profiled:
            return
        if model.config.admin_init == "analytic":
            return
        dataloader = kwargs.get("train_dataloader")
        if dataloader is None:
            raise ValueError("AdminProfilingCallback needs the Trainer's train_dataloader")
        dataset = dataloader.dataset
        if self.max_tokens is not None:
            batch = dataloader.collate_fn([dataset[i] for i in self.budget_batch(dataset)])
        else:
            size = min(len(dataset), self.batch_size or args.per_device_train_batch_size)
            batch = dataloader.collate_fn([dataset[i] for i in range(size)])
        is_main = not process_group_is_up() or (torch.distributed.get_rank() == 0)
        sharded = is_sharded(model)
        if is_main or sharded:
            omegas = admin_profile(model, batch, seed=self.seed, positions=self.positions)
        model.config.admin_profiled = True
        if sharded:
            set_omegas(model, broadcast_object(omegas))
        else:
            broadcast_omegas(model)
        with gathered_parameters(model):  # the full ω vectors on every rank
            self.omegas = current_omegas(model)
        logger.info("ADMIN ω profiled: %s", json.dumps(self.omegas))
        if state.is_world_process_zero:
            out = Path(args.output_dir)
            out.mkdir(parents=True, exist_ok=True)
            (out / "admin_omega.json").write_text(json.dumps(self.omegas, indent=2) + "\n")
            plot_omegas(self.omegas, out / "admin_omega.png")

    def budget_batch(self, dataset: Any) -> list[int]:
        """The indices of the first batch of `max_tokens` (every rank the same: one replica, the run's seed)."""
        from ..data.batching import TokenBudgetBatchSampler, dataset_lengths

        sampler = TokenBudgetBatchSampler(
            *dataset_lengths(dataset), max_tokens=self.max_tokens, seed=self.seed
        )
        return next(iter(sampler))
