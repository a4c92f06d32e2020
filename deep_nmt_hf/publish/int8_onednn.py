"""torchao's extension point for oneDNN's int8 linear kernel: dynamic int8 activations, int8 weights, on the CPU.

torchao's own CPU int8 configs run slowly on a CPU without AVX512-VNNI / AMX (measured in bench/serving_speed.py):
`Int8WeightOnlyConfig` converts the int8 weight back to float32 on every call and `Int8DynamicActivationInt8WeightConfig`
calls `torch._int_mm`, which has no fast AVX2 kernel. The fast int8 GEMM PyTorch ships for x86 is oneDNN's
`onednn::qlinear_pointwise` (the kernel Inductor lowers torchao's PT2E x86 quantization to; fbgemm's
`quantized::linear_dynamic` behind the deprecated `torch.ao.quantization.quantize_dynamic` is the other). This module
plugs it into torchao the documented way — an `AOBaseConfig` with a module handler that swaps `Linear.weight` for a
tensor subclass (`TorchAOBaseTensor`) whose `F.linear` runs the kernel — so `quantize_(model, config)` and
Transformers' `from_pretrained(..., quantization_config=TorchAoConfig(config))` both apply it.

Per call (dynamic quantization, as CTranslate2's and fbgemm's int8): the activations are quantized to uint8 with one
asymmetric scale per matrix; the weights are int8, one symmetric scale per output row, prepacked once. Without
VNNI, AVX2's u8 x s8 multiply-add (vpmaddubsw) sums two products in int16 and saturates for |w| near 127, so the
weights use 7 bits (|q| <= 63; fbgemm's `reduce_range` does the same to the activations) unless the CPU has VNNI.
"""

from __future__ import annotations

import types
from dataclasses import dataclass

import torch
from torchao.core.config import AOBaseConfig
from torchao.quantization.transform_module import register_quantize_module_handler
from torchao.utils import TorchAOBaseTensor

aten = torch.ops.aten


def full_range_weights() -> bool:
    """Whether this CPU's int8 dot product cannot saturate (AVX512-VNNI or AMX): 8-bit weights then."""
    # torch.cpu's private checks, the ones Inductor's x86 quantization reads; a missing one counts as "no" (7 bits)
    names = ("_is_vnni_supported", "_is_amx_tile_supported")
    return any(getattr(torch.cpu, name, lambda: False)() for name in names)


@dataclass
class OneDNNInt8Config(AOBaseConfig):
    """Dynamic uint8 activations x int8 weights through oneDNN on the CPU (see the module docstring).

    weight_bits: 8, or 7 for CPUs whose int8 dot product saturates (None: chosen by `full_range_weights`)."""

    weight_bits: int | None = None

    def __post_init__(self) -> None:
        if self.weight_bits not in (None, 7, 8):
            raise ValueError(f"weight_bits={self.weight_bits!r}: use 7, 8 or None (chosen for this CPU)")


class OneDNNInt8Weight(TorchAOBaseTensor):
    """A Linear weight held as oneDNN-prepacked int8 with per-row scales; `F.linear` runs the int8 kernel."""

    tensor_data_names = ["packed", "scale", "zero_point", "qdata"]
    tensor_attribute_names = ["dtype"]

    def __new__(cls, packed, scale, zero_point, qdata, dtype):
        return torch.Tensor._make_wrapper_subclass(
            cls, qdata.shape, dtype=dtype, device=qdata.device, requires_grad=False
        )

    def __init__(self, packed, scale, zero_point, qdata, dtype):
        super().__init__()
        self.packed, self.scale, self.zero_point, self.qdata = packed, scale, zero_point, qdata

    @classmethod
    def from_float(cls, weight: torch.Tensor, weight_bits: int) -> OneDNNInt8Weight:
        """Quantize a float (out, in) weight symmetrically per output row to `weight_bits` and prepack it."""
        limit = 2 ** (weight_bits - 1) - 1
        w = weight.detach().float()
        scale = (w.abs().amax(dim=1) / limit).clamp(min=torch.finfo(torch.float32).tiny)
        qdata = torch.round(w / scale[:, None]).clamp(-limit, limit).to(torch.int8)
        packed = torch.ops.onednn.qlinear_prepack(qdata, None)
        zero_point = torch.zeros(w.shape[0], dtype=torch.int32)
        return cls(packed, scale, zero_point, qdata, weight.dtype)

    def dequantize(self) -> torch.Tensor:
        """The float weight the int8 one stands for (for checks and `state_dict` readers)."""
        return (self.qdata.float() * self.scale[:, None]).to(self.dtype)

    def __repr__(self) -> str:
        return f"OneDNNInt8Weight(shape={tuple(self.shape)}, dtype={self.dtype})"


def int8_linear(x: torch.Tensor, weight: OneDNNInt8Weight, bias: torch.Tensor | None) -> torch.Tensor:
    """x @ weight.T + bias with x quantized on the fly to uint8 (one asymmetric scale, the matrix's range)."""
    rows = x.reshape(-1, x.shape[-1]).float()
    low, high = torch.aminmax(rows)
    low, high = low.clamp(max=0.0), high.clamp(min=0.0)
    scale = ((high - low) / 255.0).clamp(min=torch.finfo(torch.float32).tiny)
    zero_point = torch.round(-low / scale).to(torch.int32)
    qx = torch.clamp(torch.round(rows / scale) + zero_point, 0, 255).to(torch.uint8)
    out = torch.ops.onednn.qlinear_pointwise.tensor(
        qx, scale, zero_point, weight.packed, weight.scale, weight.zero_point,
        None if bias is None else bias.float(), 1.0, 0, torch.float32, "none", [], "",
    )  # fmt: skip
    return out.reshape(*x.shape[:-1], out.shape[-1]).to(x.dtype)


implements = OneDNNInt8Weight.implements
implements_torch_function = OneDNNInt8Weight.implements_torch_function


@implements(aten.linear.default)
@implements_torch_function(torch.nn.functional.linear)
def _linear(func, types_, args, kwargs):
    x, weight = args[0], args[1]
    bias = args[2] if len(args) > 2 else kwargs.get("bias")
    return int8_linear(x, weight, bias)


@register_quantize_module_handler(OneDNNInt8Config)
def _quantize_linear(module: torch.nn.Module, config: OneDNNInt8Config) -> torch.nn.Module:
    """torchao's handler: replace a Linear's weight by its prepacked int8 form (CPU only)."""
    if module.weight.device.type != "cpu":
        raise ValueError(f"int8 (oneDNN) serves the CPU only; this weight is on {module.weight.device}")
    bits = config.weight_bits or (8 if full_range_weights() else 7)
    weight = OneDNNInt8Weight.from_float(module.weight, bits)
    module.weight = torch.nn.Parameter(weight, requires_grad=False)
    module.extra_repr = types.MethodType(
        lambda self: (
            f"in_features={self.in_features}, out_features={self.out_features}, weight=int8 (oneDNN)"
        ),
        module,
    )
    return module
