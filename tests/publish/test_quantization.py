"""int8 inference (publish/quantization.py, publish/int8_onednn.py): torchao's quantize_ and Transformers'
`from_pretrained(..., quantization_config=...)` with the oneDNN int8 linear, for every variant."""

from __future__ import annotations

import copy
import importlib.util

import pytest
import torch
from factories import PAD, counting_batch, counting_task_model

import deep_nmt_hf

pytest.importorskip("torchao")

from deep_nmt_hf.publish.int8_onednn import OneDNNInt8Config, OneDNNInt8Weight, int8_linear  # noqa: E402
from deep_nmt_hf.publish.quantization import (  # noqa: E402
    Int8Unavailable,
    check_int8,
    int8_quantization_config,
    quantize_int8,
)

SEARCH = dict(num_beams=4, max_new_tokens=10, output_scores=True, return_dict_in_generate=True)
# Tolerances. int8 rounds each weight to 1/63 of its row's largest and each activation to 1/255 of its matrix's range,
# so every logit moves by about 1% of its scale: a beam whose two best continuations are that close may swap, which is
# why whole sentences are compared as an agreement rate, and the scores as the log-probability int8 gives fp32's own
# outputs (teacher-forced, so a swapped beam does not count twice). Measured on these tiny counting models: 7 or 8 of 8
# sentences equal, at most 0.025 nats per token apart; the bounds leave room for other CPUs' kernels.
MIN_AGREEMENT = 0.75
MAX_NATS_PER_TOKEN = 0.05


def _padded(rows: torch.Tensor) -> list[list[int]]:
    return [[t for t in row.tolist() if t != PAD] for row in rows]


def _mean_log_prob(model, ids, mask, sequences) -> torch.Tensor:
    """Per sentence, the mean log-probability `model` gives the tokens of `sequences` (teacher-forced)."""
    labels = sequences[:, 1:].clone()
    labels[labels == PAD] = -100
    with torch.inference_mode():
        logits = model(input_ids=ids, attention_mask=mask, decoder_input_ids=sequences[:, :-1]).logits
    log_probs = logits.log_softmax(-1).gather(-1, labels.clamp(min=0)[..., None])[..., 0]
    keep = labels != -100
    return (log_probs * keep).sum(1) / keep.sum(1)


def _compare(reference, quantized, ids, mask) -> tuple[float, float]:
    a = reference.generate(input_ids=ids, attention_mask=mask, **SEARCH).sequences
    b = quantized.generate(input_ids=ids, attention_mask=mask, **SEARCH).sequences
    agreement = sum(x == y for x, y in zip(_padded(a), _padded(b), strict=True)) / len(ids)
    gap = (_mean_log_prob(reference, ids, mask, a) - _mean_log_prob(quantized, ids, mask, a)).abs().max()
    return agreement, float(gap)


@pytest.fixture(scope="module")
def trained() -> dict[str, torch.nn.Module]:
    return {variant: counting_task_model(variant, steps=60) for variant in deep_nmt_hf.VARIANTS}


@pytest.mark.parametrize("variant", list(deep_nmt_hf.VARIANTS))
def test_int8_translates_as_fp32_every_variant(variant: str, trained, tmp_path) -> None:
    """quantize_int8 on a loaded model and from_pretrained(quantization_config=...) both quantize every linear
    layer and translate as fp32 does, within the stated agreement and score tolerance."""
    reference = trained[variant]
    ids, mask, _ = counting_batch([6, 8, 5, 7, 8, 4, 6, 7], seed=3)
    quantized = quantize_int8(copy.deepcopy(reference))
    linears = [m for m in quantized.modules() if isinstance(m, torch.nn.Linear)]
    assert linears and all(isinstance(m.weight, OneDNNInt8Weight) for m in linears)
    assert isinstance(quantized.get_output_embeddings().weight, OneDNNInt8Weight)
    assert quantized.get_input_embeddings().weight.dtype == torch.float32  # the embedding stays float32
    agreement, gap = _compare(reference, quantized, ids, mask)
    assert agreement >= MIN_AGREEMENT and gap <= MAX_NATS_PER_TOKEN, (agreement, gap)

    reference.save_pretrained(tmp_path)
    loaded = type(reference).from_pretrained(tmp_path, quantization_config=int8_quantization_config()).eval()
    layers = [m for n, m in loaded.named_modules() if isinstance(m, torch.nn.Linear) and "lm_head" not in n]
    assert layers and all(isinstance(m.weight, OneDNNInt8Weight) for m in layers)
    agreement, gap = _compare(reference, loaded, ids, mask)
    assert agreement >= MIN_AGREEMENT and gap <= MAX_NATS_PER_TOKEN, (agreement, gap)


def test_the_int8_kernel_equals_its_dequantized_product() -> None:
    """oneDNN's product equals the float product of the dequantized operands (so nothing saturates: AVX2's
    u8 x s8 pair sums overflow int16 with 8-bit weights, which the 7-bit default avoids), within float32
    rounding of a 256-term sum (1e-4 of the output's scale)."""
    torch.manual_seed(0)
    linear = torch.nn.Linear(256, 64).requires_grad_(False)
    x = 4 * torch.randn(32, 256)
    weight = OneDNNInt8Weight.from_float(linear.weight, 7)
    assert int(weight.qdata.abs().max()) <= 63
    low, high = float(x.min()), float(x.max())
    scale = (high - low) / 255
    zero = round(-low / scale)
    dequantized_x = (torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero) * scale
    expected = dequantized_x @ weight.dequantize().T + linear.bias
    got = int8_linear(x, weight, linear.bias)
    assert torch.allclose(got, expected, atol=1e-4 * float(expected.abs().max()), rtol=0)
    with pytest.raises(ValueError, match="weight_bits=6"):
        OneDNNInt8Config(weight_bits=6)


def test_int8_refuses_what_it_cannot_serve(monkeypatch) -> None:
    """One line naming what is wrong and what is valid: a device other than the CPU, an unknown method, torchao
    missing."""
    with pytest.raises(Int8Unavailable, match="CPU only, not device 'cuda:0'"):
        check_int8("cuda:0")
    with pytest.raises(Int8Unavailable, match="'int4' is not one of: onednn"):
        check_int8("cpu", "int4")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a)
    )
    with pytest.raises(Int8Unavailable, match=r"needs torchao.*pip install 'deep_nmt_hf\[int8\]'"):
        check_int8()


@pytest.mark.parametrize("method", ["torchao-dynamic", "torchao-weight-only"])
def test_torchaos_own_int8_methods_translate_as_fp32(method: str, trained) -> None:
    """torchao's built-in configs (the GPU check's int8 on CUDA is "torchao-dynamic") through the same call."""
    reference = trained["base"]
    ids, mask, _ = counting_batch([6, 8, 5, 7, 8, 4, 6, 7], seed=3)
    quantized = quantize_int8(copy.deepcopy(reference), method=method)
    assert type(quantized.get_output_embeddings().weight).__name__ == "Int8Tensor"
    agreement, gap = _compare(reference, quantized, ids, mask)
    assert agreement >= MIN_AGREEMENT and gap <= MAX_NATS_PER_TOKEN, (agreement, gap)


def test_private_torch_surfaces_of_int8_onednn() -> None:
    """The private / internal torch names int8_onednn.py reads: the CPU feature checks behind `full_range_weights`
    (a missing one would silently mean 7-bit weights) and oneDNN's int8 linear ops."""
    from deep_nmt_hf.publish.int8_onednn import full_range_weights

    for name in ("_is_vnni_supported", "_is_amx_tile_supported"):
        assert callable(getattr(torch.cpu, name, None)), name
    assert isinstance(full_range_weights(), bool)
    assert "tensor" in torch.ops.onednn.qlinear_pointwise.overloads()
    assert callable(torch.ops.onednn.qlinear_prepack)
