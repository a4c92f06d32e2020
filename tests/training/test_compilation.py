"""Regional compilation (training/compilation.py, issue #55 item 2): every variant's layers compile whole
(``fullgraph=True``: a graph break in a layer raises), the compiled training step equals the eager one, batches of
changing shapes do not recompile per batch, and what is compiled does not grow with depth.

Backend: ``aot_eager`` for MAtt's training step (the variant with the most layer code of its own: dynamo captures each
layer, AOTAutograd traces its forward and backward: the capture inductor starts from, without inductor's C++ code
generation, which takes minutes on a shared 2-core CPU — and aot_eager itself 10-40 s a variant there, so the
other variants use ``eager``, dynamo's capture alone, where graph breaks show); the recompilation and depth
counts use ``eager`` too (dynamo's capture: what they count). Inductor's timings are in bench/results/. Private
surface: ``torch._dynamo.utils.counters`` (``stats.unique_graphs``: graphs dynamo compiled; ``stats.calls_captured``:
operations it traced), read as torch's own tests read it.
"""

from __future__ import annotations

import pytest
import torch
from factories import variant_model
from torch._dynamo.utils import counters

import deep_nmt_hf
from deep_nmt_hf.data.batching import bucket_length, length_buckets
from deep_nmt_hf.training.compilation import compile_regions, compiled_regions, layer_regions

VARIANTS = list(deep_nmt_hf.VARIANTS)
AOT_EAGER = (
    "admin",
    "dsinit_matt",
    "deep_decoder",
)  # layer code of their own: ω, MAtt, absent cross-attention


def batch(size: int, source: int, target: int, seed: int) -> dict[str, torch.Tensor]:
    """Random ids with the first row's source padded (2 positions) and the second row's last label ignored."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, 40, (size, source), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, source - 2 :] = 0
    labels = torch.randint(2, 40, (size, target), generator=generator)
    labels[min(1, size - 1), target - 1 :] = -100
    return dict(input_ids=ids, attention_mask=mask, labels=labels)


def loss_and_grads(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # the deep decoder's ALD draws its degradation ratios (outside the layers)
    loss = model(**inputs).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_compiles_its_layers_whole_and_trains_like_eager(variant: str) -> None:
    """Every variant (ADMIN's ω, DeepNorm's α, MAtt's average attention, DLCL between its layers, shared layers
    applied twice, the deep decoder's absent cross-attention with DDR / ALD): the regions compile with
    fullgraph=True and the training step's loss and every gradient equal eager's (rtol 1e-5, atol 1e-6: float32
    rounding of the same operations). MAtt (`AOT_EAGER`) goes through AOTAutograd's traced backward too; the others
    are captured by dynamo (``eager``), which is where a graph break would show."""
    inputs = batch(3, 7, 6, seed=1)
    model = variant_model(variant, seed=2).train()
    eager_loss, eager_grads = loss_and_grads(model, inputs)
    regions = compile_regions(model, backend="aot_eager" if variant in AOT_EAGER else "eager")
    assert regions and compiled_regions(model) == layer_regions(model)
    compiled_loss, compiled_grads = loss_and_grads(model, inputs)
    assert counters["stats"]["unique_graphs"] >= 2  # an encoder and a decoder layer ran through dynamo
    assert not counters["graph_break"]  # fullgraph regions: a break in a layer would have raised
    torch.testing.assert_close(compiled_loss, eager_loss, rtol=1e-5, atol=1e-6)
    assert compiled_grads.keys() == eager_grads.keys()
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_fifty_batches_of_changing_shapes_compile_at_most_once_per_bucket() -> None:
    """50 token-budget-like batches (batch size 2-6, source and target lengths 3-40 padded to their length bucket):
    the regions compile no more graphs than there are buckets (dynamic batch and length dimensions: in fact one per
    layer class and mask form), and the state dict keys stay the eager model's."""
    model = variant_model("base", seed=0).train()
    keys = list(model.state_dict())
    compile_regions(model, backend="eager")
    buckets = length_buckets(40)
    generator = torch.Generator().manual_seed(5)
    shapes = set()
    for step in range(50):
        size, source, target = (int(v) for v in torch.randint(2, 41, (3,), generator=generator))
        size = 2 + size % 5
        source, target = bucket_length(max(source, 3), buckets), bucket_length(max(target, 3), buckets)
        shapes.add((size, source, target))
        model(**batch(size, source, target, seed=step)).loss.backward()
    assert len(shapes) > 2 * len(buckets)  # the batches really changed shape
    assert counters["stats"]["unique_graphs"] <= len(buckets)
    assert list(model.state_dict()) == keys  # in place: checkpoints keep their names


def test_what_is_compiled_does_not_grow_with_depth() -> None:
    """A 24-layer encoder compiles the same graphs, tracing the same number of operations, as a 6-layer one: the
    first layer's code serves every later layer (the proxy for compile time the suite can assert; the seconds are
    in bench/results/compile_regions_cpu.md)."""
    inputs = batch(2, 6, 5, seed=3)
    captured = []
    for depth in (6, 24):
        torch._dynamo.reset()
        counters.clear()
        # ADMIN: its first sublayer has no ω, so layer 0 compiles a graph of its own, and the rest share one
        model = variant_model("admin", seed=1, encoder_layers=depth, decoder_layers=1).train()
        compile_regions(model, backend="eager")
        model(**inputs).loss.backward()
        captured.append((counters["stats"]["unique_graphs"], counters["stats"]["calls_captured"]))
    assert captured[0] == captured[1]
    assert captured[0][0] >= 2  # an encoder and a decoder layer graph


def test_regions_run_eager_outside_training() -> None:
    """Evaluation (and generation) run the eager layers: nothing is compiled for them."""
    model = variant_model("base", seed=0).eval()
    compile_regions(model, backend="eager")
    with torch.no_grad():
        model(**batch(2, 5, 4, seed=0))
    assert counters["stats"]["unique_graphs"] == 0
