"""Every variant on a CUDA GPU (issue #48): train steps in fp32 / bf16 / fp16, generation with and without the
cache, ADMIN profiling, folding, CTranslate2 export, the attention backends and the per-sentence length limit.

Deselected by default (pyproject.toml: `-m "not cuda"`); on a GPU node run

    python -m pytest -m cuda tests/training/test_cuda.py

(a few minutes). The bodies are the device-generic functions of tests/training/test_device_placement.py, which also runs
them on the CPU (fp32, bf16 autocast) so that their logic is checked on every machine. Tolerances: fp32 cache /
no-cache scores within 1e-4 (TF32 is off, PyTorch's default for matmuls; different kernels for different shapes
still round differently), ADMIN ω within 1e-4 relative of the CPU's, fold stock weights within 1e-5 of the CPU
fold, eager vs SDPA logits within 1e-4.
"""

from __future__ import annotations

import copy

import pytest
import torch

# deselected by default (addopts), so CI neither runs nor skips them; selected on a machine without CUDA they skip
pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")]

from factories import counting_task_model  # noqa: E402
from test_device_placement import (  # noqa: E402
    FOLDABLE,
    NO_DROPOUT,
    PRECISIONS,
    VARIANTS,
    admin_profile_check,
    attention_backends_check,
    converted_fields_check,
    converted_pipeline_check,
    export_check,
    fold_check,
    foldable_model,
    generate_cache_check,
    length_limit_check,
    train_step_check,
)

from deep_nmt_hf.publish.folding import probe_batch  # noqa: E402

CUDA = torch.device("cuda")


@pytest.fixture(scope="module")
def trained():
    """Tiny variants trained for a few steps on the counting task (non-degenerate translations), on the CPU."""
    cache: dict[str, torch.nn.Module] = {}

    def get(variant: str) -> torch.nn.Module:
        if variant not in cache:
            cache[variant] = counting_task_model(variant, steps=40, **NO_DROPOUT)
        return cache[variant]

    return get


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_train_step_gives_finite_loss_and_gradients(variant, precision) -> None:
    if precision == "bf16" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    train_step_check(variant, CUDA, precision)


@pytest.mark.parametrize("variant", VARIANTS)
def test_generate_with_and_without_cache_agree(variant, trained) -> None:
    """Greedy and beam-4 (and GNMT's beam search): the same sequences and scores with and without the cache; the
    CUDA sequences equal the CPU's."""
    model = copy.deepcopy(trained(variant))
    on_cpu = {beams: generate_cache_check(model, "cpu", beams) for beams in (1, 4)}
    model = model.to(CUDA)
    for beams in (1, 4):
        sequences = generate_cache_check(model, CUDA, beams, atol=1e-4)
        assert torch.equal(sequences.cpu(), on_cpu[beams]), (variant, beams)
    generate_cache_check(model, CUDA, 4, gnmt=True, atol=1e-4)


def test_admin_profiling_on_cuda_gives_the_cpus_omegas() -> None:
    on_cpu, on_cuda = admin_profile_check("cpu"), admin_profile_check(CUDA)
    for side in ("encoder", "decoder"):
        assert on_cuda[side] == pytest.approx(on_cpu[side], rel=1e-4), side


@pytest.mark.parametrize("name", list(FOLDABLE))
def test_fold_of_a_cuda_model_passes_its_check_and_equals_the_cpu_fold(name) -> None:
    model = foldable_model(name)
    stock_cpu = fold_check(model, "cpu")
    stock_cuda = fold_check(model, CUDA)
    cpu_state = stock_cpu.state_dict()
    for key, value in stock_cuda.state_dict().items():
        torch.testing.assert_close(value.cpu(), cpu_state[key], atol=1e-5, rtol=1e-5, msg=key)
    batch = probe_batch(model.config, device=CUDA)
    with torch.no_grad():
        logits_cuda = stock_cuda(**batch, decoder_input_ids=batch["input_ids"]).logits.cpu()
        logits_cpu = stock_cpu(**probe_batch(model.config), decoder_input_ids=batch["input_ids"].cpu()).logits
    torch.testing.assert_close(logits_cuda, logits_cpu, atol=1e-4, rtol=0)


def test_fold_of_a_bf16_cuda_model_keeps_it_bf16() -> None:
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    fold_check(foldable_model("admin_trainable"), CUDA, torch.bfloat16)


def test_ctranslate2_export_of_a_cuda_model(tmp_path) -> None:
    pytest.importorskip("ctranslate2", reason="the ctranslate2 extra is not installed")
    export_check("post_ln", CUDA, tmp_path)


@pytest.mark.parametrize("variant", VARIANTS)
def test_sdpa_and_eager_logits_agree_on_cuda(variant) -> None:
    attention_backends_check(variant, CUDA, atol=1e-4)


@pytest.mark.parametrize("variant", VARIANTS)
def test_per_sentence_length_limit_on_cuda_alone_as_in_a_batch(variant) -> None:
    """model/length_limit.py's processor and the limits on the GPU: each sentence stops at its own limit and
    decodes alone as in the batch (beam 4)."""
    length_limit_check(variant, CUDA)


@pytest.mark.parametrize("precision", list(PRECISIONS))
def test_converted_fields_on_cuda(precision) -> None:
    """zero's fields on the GPU (embedding bias, zero-vector decoder start, a target vocabulary of its own): cached
    and uncached generate agree, fp32 logits equal the CPU's within 1e-4; autocast within a half-precision ulp."""
    converted_fields_check(CUDA, precision=precision, atol=1e-4 if precision == "fp32" else 5e-2)


def test_converted_tokenizers_translate_on_cuda_as_on_the_cpu(tmp_path) -> None:
    """zero's two vocabularies and fairseq's Moses tokenizer around a model on the GPU: the pipeline's
    translations equal the CPU's."""
    converted_pipeline_check(CUDA, tmp_path)
