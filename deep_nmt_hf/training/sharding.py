"""Sharded data-parallel training with FSDP2 (`torch.distributed.fsdp.fully_shard`).

`shard_model` makes every rank hold only its slice (dim 0, `Shard(0)`) of every parameter: one FSDP unit per
encoder / decoder layer (the model's `_no_split_modules`) and a root unit with the rest (embeddings, final
LayerNorms, DLCL weights). A unit's full weights exist only while it runs (all-gather before its forward and
backward, freed after); gradients are reduce-scattered (averaged over ranks, like DDP), and the optimizer
updates only the local shard. With the same global batch the updates are those of one process (tested:
tests/training/test_sharding.py).

Why our own wiring and not accelerate's FSDP2 support (re-read in accelerate 1.15, issue #57): its plugin engages
only where `AcceleratorState` sets ``DistributedType.FSDP``, in the branch for accelerator devices (MULTI_GPU /
NPU / XPU ...); on a CPU-only machine the type stays MULTI_CPU and the plugin is ignored, whereas `fully_shard`
works on CPU with gloo (our CI's FSDP tests). Where it does engage, `fsdp2_prepare_model` wraps the same units
(the model's `_no_split_modules`), its full state dict (`Accelerator.get_state_dict`) is the same
`torch.distributed.checkpoint.state_dict` call as `full_state_dict` here, and its checkpoints (`save_fsdp_model`)
are DCP shards or a ``pytorch_model_fsdp.bin`` rather than a `save_pretrained` directory — so it could replace
nothing here without a second path for GPUs. The Trainer is told that the model owns its placement and gradient
reduction (the same switch it uses for models that transformers shards at load time), so it neither moves it nor
wraps it in DDP (`sharded_saves.ShardedSaves`).

Saving gathers the full state dict (collective: every rank takes part) and rank 0 writes an ordinary
`save_pretrained` directory that loads in one process (`full_state_dict`); checkpoints add the full optimizer
state (`full_optimizer_state_dict`, the layout one process writes), and resuming loads both back into the shards
(`load_full_checkpoint`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from .distributed import process_group_is_up

STRATEGY = "fsdp2"


def is_sharded(model: nn.Module) -> bool:
    """True when `fully_shard` has been applied to `model` (its root)."""
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The modules that become their own FSDP unit: instances of the classes in `model._no_split_modules`."""
    names = set(getattr(model, "_no_split_modules", None) or ())
    return [module for module in model.modules() if type(module).__name__ in names and module is not model]


def shard_model(model: nn.Module, *, reshard_after_forward: bool = True) -> nn.Module:
    """Apply FSDP2 to `model` in place (one unit per encoder / decoder layer, then the root) and return it.

    Needs an initialised default process group (every rank calls this with an identically initialised
    model: each keeps its own `Shard(0)` slice). `generate` is registered as a forward method so that the
    root's parameters are gathered for generation too. A layer applied several times per forward (shared
    layers) is gathered at each application."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard, register_fsdp_forward_method

    if not process_group_is_up():
        raise RuntimeError(
            "shard_model needs torch.distributed initialised (launch with torchrun / accelerate launch)"
        )
    device_type = "cuda" if torch.cuda.is_available() else "cpu"
    mesh = init_device_mesh(device_type, (torch.distributed.get_world_size(),))
    for unit in shard_units(model):
        fully_shard(unit, mesh=mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard_after_forward)
    if hasattr(model, "generate"):
        register_fsdp_forward_method(model, "generate")
    # transformers' marker for a module FSDP2 manages: Seq2SeqTrainer then generates with synced_gpus (ranks
    # keep stepping together until every rank's beams finish, so the all-gathers stay matched)
    model._is_fsdp_managed_module = True
    return model


def _local(tensor: torch.Tensor) -> torch.Tensor:
    from torch.distributed.tensor import DTensor

    return tensor.to_local() if isinstance(tensor, DTensor) else tensor


def _fsdp_modules(model: nn.Module) -> list[nn.Module]:
    from torch.distributed.fsdp import FSDPModule

    return [module for module in model.modules() if isinstance(module, FSDPModule)]


def unsharded_class(model: nn.Module) -> type:
    """The model's own class (`fully_shard` swaps in a generated subclass ``FSDP<Name>`` defined in torch)."""
    from torch.distributed.fsdp import FSDPModule

    return next(cls for cls in type(model).__mro__ if not issubclass(cls, FSDPModule))


@contextlib.contextmanager
def own_class(model: nn.Module) -> Iterator[nn.Module]:
    """Within, `type(model)` is the model's own class again: `save_pretrained` then records it in
    ``architectures`` and copies the model's code files for `auto_map`, not torch's FSDP modules."""
    sharded_class = type(model)
    model.__class__ = unsharded_class(model)
    try:
        yield model
    finally:
        model.__class__ = sharded_class


def shard_summary(model: nn.Module) -> dict[str, Any]:
    """What every rank holds (collective: call on every rank): world size, number of FSDP units, the model's
    parameter count and, per rank, how many elements it holds, the local shape of every parameter and the sum
    of its local values (float64; with the full weights this shows which slice each rank held)."""
    local_shapes = {name: list(_local(p).shape) for name, p in model.named_parameters()}
    local_numel = sum(_local(p).numel() for p in model.parameters())
    checksum = sum(float(_local(p).detach().double().sum()) for p in model.parameters())
    world = torch.distributed.get_world_size()
    gathered: list[Any] = [None] * world
    torch.distributed.all_gather_object(gathered, (local_numel, local_shapes, checksum))
    return {
        "strategy": STRATEGY,
        "world_size": world,
        "units": len(_fsdp_modules(model)),
        "parameters": sum(p.numel() for p in model.parameters()),  # a DTensor's numel is the global one
        "local_parameters": [numel for numel, _, _ in gathered],
        "local_shapes": {name: [shapes[name] for _, shapes, _ in gathered] for name in local_shapes},
        "checksums": [value for _, _, value in gathered],
    }


def _tied(model: nn.Module) -> dict[str, str]:
    """{alias: source} of the model's tied weights (the stacks' `embed_tokens`, a tied output projection)."""
    return dict(getattr(model, "all_tied_weights_keys", None) or {})


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The full (unsharded) state dict on CPU on rank 0, ``{}`` on the other ranks (collective). Gathering
    copies each name of a tied weight apart: its aliases get the source's tensor back, so that `save_pretrained`
    stores it once."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    for alias, source in _tied(model).items():
        if alias in state and source in state:
            state[alias] = state[source]
    return state


def _torch_optimizer(optimizer: Any) -> torch.optim.Optimizer:
    return getattr(optimizer, "optimizer", optimizer)  # accelerate's AcceleratedOptimizer wraps the torch one


def full_optimizer_state_dict(model: nn.Module, optimizer: Any) -> dict[str, Any]:
    """The optimizer state of every parameter, unsharded (the same layout as one process's), on CPU on rank 0;
    ``{}`` on the other ranks (collective)."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_optimizer_state_dict(model, _torch_optimizer(optimizer), options=options)


def load_full_checkpoint(
    model: nn.Module,
    directory: str | os.PathLike[str],
    optimizer: Any = None,
    optimizer_file: str | None = None,
) -> None:
    """Load a full `save_pretrained` checkpoint (``*.safetensors``; and, with `optimizer`, the full optimizer
    state in `optimizer_file`) into the sharded `model`: every rank reads the files and keeps its shards
    (collective). Keys missing from the files must be tied weights (the stacks' embeddings, a tied output
    projection)."""
    from safetensors.torch import load_file
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    directory = Path(directory)
    options = StateDictOptions(full_state_dict=True, strict=False)
    if optimizer is None:
        files = sorted(directory.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"{directory} holds no *.safetensors weights to resume from")
        state_dict: dict[str, torch.Tensor] = {}
        for file in files:
            state_dict.update(load_file(file))
        tied = set(_tied(model))
        # aliases load through their source (a file written by an earlier full_state_dict may hold copies)
        state_dict = {key: value for key, value in state_dict.items() if key not in tied}
        missing, unexpected = set_model_state_dict(model, state_dict, options=options)
        if unexpected or set(missing) - tied:
            raise ValueError(
                f"{directory}: weights do not match the model (missing {sorted(set(missing) - tied)}, "
                f"unexpected {sorted(unexpected)})"
            )
        return
    state = torch.load(directory / (optimizer_file or "optimizer.pt"), map_location="cpu", weights_only=True)
    set_optimizer_state_dict(model, _torch_optimizer(optimizer), state, options=options)


@contextlib.contextmanager
def gathered_parameters(model: nn.Module) -> Iterator[None]:
    """Hold every unit's full parameters for the duration (e.g. to read them); resharded on exit. Collective.
    A no-op for an unsharded model."""
    if not is_sharded(model):
        yield
        return
    units = _fsdp_modules(model)
    for unit in units:
        unit.unshard()
    try:
        yield
    finally:
        for unit in units:
            unit.reshard()


def broadcast_object(value: Any, src: int = 0) -> Any:
    """`value` of rank `src` on every rank (no-op outside torch.distributed)."""
    if not process_group_is_up():
        return value
    holder = [value]
    torch.distributed.broadcast_object_list(holder, src=src)
    return holder[0]
