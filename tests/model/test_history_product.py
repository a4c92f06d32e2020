"""DLCL's fused history product (issue #55 item 4, model/layer_aggregation.py `HistoryProduct`): the rows'
weighted sums and weight gradients as one compiled multiply-and-reduce instead of one-row matrix products, checked
against the written-out equations (eqs. 8 / 9) and the plain matrix-product form, with memory still linear in depth.
Compiled with ``aot_eager`` here (inductor's C++ code generation takes minutes on a shared 2-core CPU; the GPU
timing is bench/dlcl_throughput.py's ``dlcl_fused`` side)."""

from __future__ import annotations

import pytest
import torch
from factories import VOCAB, padded_batch, tiny_model
from test_layer_aggregation import reference_combine, saved_bytes
from torch._dynamo.utils import counters

from deep_nmt_hf.model import layer_aggregation
from deep_nmt_hf.model.layer_aggregation import LayerAggregation, use_history_product


@pytest.fixture
def fused():
    previous = use_history_product("fused", backend="aot_eager")
    yield
    layer_aggregation._PRODUCT = previous


def loss_and_grads(model, patch=None) -> tuple[torch.Tensor, dict]:
    ids, mask = padded_batch([6, 4])
    labels = torch.randint(2, VOCAB - 1, (2, 5), generator=torch.Generator().manual_seed(1))
    model.zero_grad(set_to_none=True)
    loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_fused_product_gives_the_written_out_equations_and_the_plain_form(norm, fused, monkeypatch) -> None:
    model = tiny_model(
        seed=3, layer_norm_position=norm, encoder_layer_aggregation="dlcl", decoder_layer_aggregation="dlcl",
        encoder_layers=4, decoder_layers=3, dlcl_window=3,
    ).train()  # fmt: skip
    with torch.no_grad():
        for stack in (model.model.encoder, model.model.decoder):
            stack.aggregation.weight.add_(0.3 * torch.randn_like(stack.aggregation.weight))
    assert layer_aggregation._PRODUCT.name == "fused"
    torch._dynamo.reset()
    counters.clear()
    loss, grads = loss_and_grads(model)
    assert counters["stats"]["unique_graphs"] >= 2  # the rows' sums and the weight gradients ran compiled
    with torch.no_grad():  # inference takes the buffer's no-grad product
        logits = model(**dict(zip(("input_ids", "attention_mask"), padded_batch([6, 4]), strict=True)),
                       decoder_input_ids=torch.full((2, 3), 5)).logits  # fmt: skip
    previous = use_history_product("mm")
    plain_loss, plain_grads = loss_and_grads(model)
    with torch.no_grad():
        plain_logits = model(**dict(zip(("input_ids", "attention_mask"), padded_batch([6, 4]), strict=True)),
                             decoder_input_ids=torch.full((2, 3), 5)).logits  # fmt: skip
    layer_aggregation._PRODUCT = previous
    monkeypatch.setattr(LayerAggregation, "combine", reference_combine)
    expected_loss, expected_grads = loss_and_grads(model)
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(loss, plain_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logits, plain_logits, rtol=1e-5, atol=1e-5)
    assert grads.keys() == expected_grads.keys() == plain_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], rtol=1e-4, atol=1e-6, msg=name)
        torch.testing.assert_close(grad, plain_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_fused_product_keeps_memory_linear_in_depth(fused) -> None:
    sizes = {layers: saved_bytes(layers, "pre", "dlcl") for layers in (12, 24)}
    assert 1.8 <= sizes[24] / sizes[12] <= 2.1, sizes


def test_an_unknown_product_is_named() -> None:
    with pytest.raises(ValueError, match="history product 'gemv'"):
        use_history_product("gemv")
