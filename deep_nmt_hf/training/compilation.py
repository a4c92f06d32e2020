"""Regional compilation (issue #55): `deep-nmt train --torch-compile` compiles the repeated layer, not the model.

A very deep model is the same layer class applied L times. `torch.compile` of the whole model traces every one of
those layers into one graph, so its compile time grows with depth (ADMIN 18-6's whole-model compile took more than
2 minutes on an H200 and did not finish). PyTorch's regional-compilation recipe (and accelerate's
`compile_regions` / `TorchDynamoPlugin(use_regional_compilation=True)`) compiles each repeated block instead: since
dynamo treats a module's parameters as graph inputs (`inline_inbuilt_nn_modules`, on by default since torch 2.5),
the code compiled for the first layer of a class serves every later layer of that class — compile time is that of
ONE encoder layer and ONE decoder layer, whatever the depth.

`compile_regions(model)` does that in place (`nn.Module.compile` per layer: the state dict keys, the checkpoints and
`save_pretrained` stay those of the eager model, unlike accelerate's copy with ``_orig_mod.`` wrappers):

- **Regions**: every encoder and decoder layer (`DeepNMTEncoderLayer`, `DeepNMTDecoderLayer` /
  `MergedAttentionDecoderLayer`), whatever the variant: ADMIN's ω and DeepNorm's α are inside the layer, MAtt's
  average attention too; shared layers apply the same compiled module several times; DLCL's aggregation, the deep
  decoder's drop-net draw and its DDR / ALD losses stay in the stack and the model (eager), between regions.
  Each region is compiled with ``fullgraph=True``: a graph break inside a layer is an error, not a silent slowdown.
- **Shapes**: the batch and length dimensions of a region's inputs are marked dynamic
  (`torch._dynamo.maybe_mark_dynamic`), so token-budget batches of ever-changing (batch, length) do not recompile
  per batch: a region compiles once for its shapes (twice where a mask appears or disappears: a batch without
  padding has none). On a GPU the lengths also come in a few fixed buckets (`data.batching.length_buckets`).
- **When the regions run compiled**: in training mode only. Evaluation and `generate` during and after training run
  the eager layers (compiled decoding has its own path: `compiled_decoding`); ADMIN's profiling pass (a recorder on
  the sublayers) runs eager too.

When it pays (`--help` says so): on a GPU, for long runs — the eager step of a deep model is bound by the host
launching kernels (issue #55: the eager step's time equals the process's CPU time), and compiled regions fuse the
layer's elementwise work (dropout, residual, LayerNorm) into few kernels. On a CPU, or for runs of a few hundred
steps, the compile time (seconds per layer class, minutes with inductor on a small CPU) is rarely won back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

REGION_ATTRIBUTE = "_deep_nmt_region"
RECOMPILE_LIMIT = 32


def layer_regions(model: nn.Module) -> list[nn.Module]:
    """The repeated layers of `model`'s encoder and decoder stacks (each stack's ``layers``), in order."""
    regions: list[nn.Module] = []
    seen: set[int] = set()
    for name, module in model.named_modules():
        if name.split(".")[-1] != "layers" or not isinstance(module, nn.ModuleList):
            continue
        for layer in module:
            if id(layer) not in seen:
                seen.add(id(layer))
                regions.append(layer)
    return regions


def _mark_dynamic(value: Any) -> None:
    """The batch and length dimensions of a region's tensor input dynamic: every dimension but a hidden state's
    last (d_model) — a mask's (batch, 1, target, source) too, so that broadcasting it against the hidden states
    does not specialise the batch size."""
    if not isinstance(value, torch.Tensor):
        return
    if value.dim() == 3 and value.is_floating_point():
        dims: tuple[int, ...] = (0, 1)
    else:
        dims = tuple(dim for dim in range(value.dim()) if value.shape[dim] != 1)
    for dim in dims:
        torch._dynamo.maybe_mark_dynamic(value, dim)


def _eager_only(layer: nn.Module) -> bool:
    """The layer must run eager: not training (evaluation, generation) or a recorder is set (ADMIN profiling)."""
    if not layer.training:
        return True
    return any(getattr(sublayer, "recorder", None) is not None for sublayer in layer.children())


def _region_call(layer: nn.Module, compiled: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if _eager_only(layer) or torch.compiler.is_compiling():
            return layer._call_impl(*args, **kwargs)
        if kwargs.get("cache") is None:
            # without a cache the slot index is read by nothing: dropped, so that the decoder's applications
            # (0, 1, 2, ...) do not each guard a graph of their own
            kwargs.pop("cache_index", None)
        for value in args:
            _mark_dynamic(value)
        for value in kwargs.values():
            _mark_dynamic(value)
        return compiled(*args, **kwargs)

    return call


def compile_regions(
    model: nn.Module,
    *,
    backend: str | None = None,
    mode: str | None = None,
    fullgraph: bool = True,
    dynamic: bool | None = None,
) -> list[nn.Module]:
    """Compile every repeated layer of `model` in place (regional compilation); returns the compiled layers.

    `backend` is `torch.compile`'s (None: inductor; ``aot_eager`` traces forward and backward without generating
    code), `mode` inductor's mode, `dynamic` `torch.compile`'s (None: the batch and length dimensions are marked
    dynamic per call, everything else is specialised). Calling it twice leaves the first compilation."""
    options: dict[str, Any] = {"backend": backend or "inductor", "fullgraph": fullgraph, "dynamic": dynamic}
    if mode is not None:
        options["mode"] = mode
    regions = layer_regions(model)
    # every layer class shares one code object (Transformers' `GradientCheckpointingLayer` forward wrapper), whose
    # graphs are one per class and input form (mask or none; CAD's layers without cross-attention): allow them
    limit = torch._dynamo.config.recompile_limit
    torch._dynamo.config.recompile_limit = max(limit, RECOMPILE_LIMIT)
    for layer in regions:
        if getattr(layer, REGION_ATTRIBUTE, False):
            continue
        # what nn.Module.compile does, keeping the eager call for evaluation and profiling (`_eager_only`)
        compiled = torch.compile(layer._call_impl, **options)
        layer._compiled_call_impl = _region_call(layer, compiled)
        setattr(layer, REGION_ATTRIBUTE, True)
    return regions


def compiled_regions(model: nn.Module) -> list[nn.Module]:
    """The layers of `model` that `compile_regions` compiled."""
    return [layer for layer in layer_regions(model) if getattr(layer, REGION_ATTRIBUTE, False)]


def _decoding_step(kwargs: dict[str, Any]) -> bool:
    """A decoding step after the prefill over a static (compile-ready) cache: one new target position."""
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    ids = kwargs.get("decoder_input_ids")
    return (
        ids is not None
        and ids.shape[-1] == 1
        and cache is not None
        and bool(getattr(getattr(cache, "self_attention_cache", cache), "is_compileable", False))
    )


def compiled_decoding(
    model: nn.Module, *, backend: str | None = None, mode: str | None = None, fullgraph: bool = True
) -> nn.Module:
    """Make `model.generate` decode with a static cache through `torch.compile` (`deep-nmt translate --compile`),
    for every variant and for a folded model (MarianMTModel / Pegasus) alike, greedy and beam search.

    Greedy / sampling take Transformers' own path: the generation config's ``cache_implementation="static"`` and a
    `CompileConfig` (here also on a CPU: Transformers compiles by default on CUDA only; its private
    `CompileConfig._compile_all_devices` asks for it everywhere). Beam search has no compiled path in Transformers
    (5.24 compiles `_sample` only), so the model's own call is compiled in place for the decoding steps (one new
    position over a static cache; `nn.Module.compile`'s ``_compiled_call_impl``); the prefill runs eager.
    ``fullgraph=True`` by default: a graph break in a decoding step raises. One graph per (batch × beams, cache
    length), reused across batches of that shape. Pays for long outputs and many batches on a GPU, where beam search
    is host-bound (issue #55: ADMIN 60L-12L decodes at 36-6's speed); compiling takes seconds to a minute first.
    Returns `model`."""
    from transformers import CompileConfig

    options: dict[str, Any] = {"fullgraph": fullgraph, "backend": backend or "inductor", "mode": mode}
    on_cuda = any(p.is_cuda for p in model.parameters())
    if mode is None and backend in (None, "inductor") and on_cuda:
        options["mode"] = "reduce-overhead"  # CUDA graphs: the launches of a step replayed at once
    config = CompileConfig(**options)
    config._compile_all_devices = True
    model.generation_config.cache_implementation = "static"
    model.generation_config.compile_config = config
    compiled = torch.compile(model._call_impl, **options)

    def call(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling() or model.training or args or not _decoding_step(kwargs):
            return model._call_impl(*args, **kwargs)
        return compiled(**kwargs)

    model._compiled_call_impl = call
    return model


__all__ = ["compile_regions", "compiled_decoding", "compiled_regions", "layer_regions"]
