"""int8 inference for every variant through torchao and Transformers' `quantization_config`.

    from transformers import AutoModelForSeq2SeqLM
    from deep_nmt_hf import int8_quantization_config

    model = AutoModelForSeq2SeqLM.from_pretrained(path, quantization_config=int8_quantization_config())

The default is the fastest int8 form measured on a CPU (bench/results/serving_speed.md): dynamic uint8 activations x
int8 weights through oneDNN (`int8_onednn.OneDNNInt8Config`, a torchao config); `method="torchao-dynamic"` and
`"torchao-weight-only"` name torchao's own `Int8DynamicActivationInt8WeightConfig` / `Int8WeightOnlyConfig`.
Transformers quantizes while loading, every `nn.Linear` (the output projection included: `quantize_int8` on a
loaded model; `from_pretrained` leaves the projection tied to the embedding in float32). The quantization is applied at
load time, as Transformers does for torchao: save the float32 model and quantize where it is served.
"""

from __future__ import annotations

import importlib.util
import logging
from typing import Any

METHODS = ("onednn", "torchao-dynamic", "torchao-weight-only")
DEFAULT_METHOD = "onednn"


class Int8Unavailable(ValueError):
    """int8 cannot serve here: torchao missing, a device it does not serve, or an unknown method."""


def check_int8(device: str = "cpu", method: str = DEFAULT_METHOD) -> None:
    """Raise `Int8Unavailable` (one line: what is wrong, what is valid) unless `method` serves on `device`."""
    if method not in METHODS:
        raise Int8Unavailable(f"int8 method {method!r} is not one of: {', '.join(METHODS)}")
    if importlib.util.find_spec("torchao") is None:
        raise Int8Unavailable(
            "int8 needs torchao, which is not installed: pip install 'deep_nmt_hf[int8]' (or torchao)"
        )
    if method == "onednn" and str(device).split(":")[0] != "cpu":
        raise Int8Unavailable(
            f"int8 (oneDNN) serves the CPU only, not device {device!r}: use --device cpu, or bf16/fp16 on a GPU"
        )


def _import_torchao() -> None:
    """Import torchao once without its import-time notices (the CUDA-only libraries its CPU wheel cannot load,
    torch's note on its enums): a user of `--int8` sees translations, not warnings about kernels never used."""
    previous = logging.root.manager.disable  # torchao sets its own logger's level while importing
    logging.disable(logging.WARNING)
    try:
        import torchao.quantization  # noqa: F401
    finally:
        logging.disable(previous)


def torchao_int8_config(method: str = DEFAULT_METHOD) -> Any:
    """The torchao `AOBaseConfig` of `method` (for `torchao.quantization.quantize_` or `TorchAoConfig`)."""
    check_int8("cpu" if method == "onednn" else "any", method)
    _import_torchao()
    if method == "onednn":
        from .int8_onednn import OneDNNInt8Config

        return OneDNNInt8Config()
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, Int8WeightOnlyConfig

    return Int8DynamicActivationInt8WeightConfig() if method == "torchao-dynamic" else Int8WeightOnlyConfig()


def int8_quantization_config(method: str = DEFAULT_METHOD) -> Any:
    """Transformers' `TorchAoConfig` for `from_pretrained(..., quantization_config=...)` with `method`'s config."""
    from transformers import TorchAoConfig

    return TorchAoConfig(quant_type=torchao_int8_config(method))


def quantize_int8(model: Any, method: str = DEFAULT_METHOD) -> Any:
    """Quantize a loaded model in place, every `nn.Linear` (the output projection too), and return it.

    A tied output projection gets its own int8 weight; the embedding it was tied to stays float32."""
    import torch

    check_int8(str(next(model.parameters()).device), method)
    _import_torchao()
    from torchao.quantization import quantize_

    quantize_(model, torchao_int8_config(method), filter_fn=lambda m, _: isinstance(m, torch.nn.Linear))
    return model.eval()
