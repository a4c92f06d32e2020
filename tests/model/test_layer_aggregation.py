"""DLCL: initial weights, a hand-computed 2-layer stack, gradients, windows, caches, save/load, remote code; the
combination against the written-out eqs. 8/9 and its activation memory linear in depth (issue #25)."""

from __future__ import annotations

import pytest
import torch
from factories import PAD, VOCAB, padded_batch, tiny_model
from fresh_process import run_without_package
from transformers import AutoModelForSeq2SeqLM

from deep_nmt_hf import DLCLConfig, DLCLForConditionalGeneration
from deep_nmt_hf.model.layer_aggregation import History, LayerAggregation, weighted_sum
from deep_nmt_hf.publish.folding import NotFoldableError, fold_to_stock
from deep_nmt_hf.training.activation_memory import saved_activation_bytes


def test_avg_init_makes_each_layer_read_the_mean_of_the_history() -> None:
    agg = LayerAggregation(3, 4, pre_norm=False)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight())
    history = [torch.randn(2, 5, 4) for _ in range(3)]
    with torch.no_grad():
        combined = agg.combine(history)  # row 2, post-norm: LN_2(mean of y_0..y_2)
    torch.testing.assert_close(combined, agg.layer_norms[1](torch.stack(history).mean(0)))
    expected = torch.tensor([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3, 1 / 3, 1 / 3, 0], [1 / 4] * 4])
    torch.testing.assert_close(agg.initial_weight(), expected)
    one = LayerAggregation(3, 4, pre_norm=True, init="one")
    assert torch.equal(one.initial_weight(), torch.tril(torch.ones(4, 4)))


def test_window_keeps_only_the_last_w_outputs() -> None:
    agg = LayerAggregation(4, 2, pre_norm=True, window=2)
    weights = agg.initial_weight()
    assert weights[4].tolist() == [0, 0, 0, 0.5, 0.5] and weights[1].tolist() == [0.5, 0.5, 0, 0, 0]
    with torch.no_grad():
        agg.weight.fill_(3.0)  # entries outside the window stay 0 whatever the parameter holds
    assert agg.weights()[4, :3].abs().sum() == 0


def test_hand_computed_two_layer_pre_norm_encoder() -> None:
    model = tiny_model(seed=2, layer_norm_position="pre", encoder_layer_aggregation="dlcl")
    encoder = model.model.encoder
    with torch.no_grad():
        encoder.aggregation.weight.copy_(torch.tensor([[1.0, 0, 0], [0.3, 0.7, 0], [0.2, -0.5, 1.3]]))
    ids, mask = padded_batch([5, 3])
    additive = torch.zeros(2, 1, 1, 5).masked_fill(
        mask[:, None, None, :] == 0, torch.finfo(torch.float32).min
    )
    y0 = encoder.embed(ids, None)
    y1 = encoder.layers[0](1.0 * y0, additive)[0]  # eq. 8, row 0: x_1 = W00 y_0 (y_0 not normalised)
    n1 = encoder.aggregation.layer_norms[0](y1)
    y2 = encoder.layers[1](0.3 * y0 + 0.7 * n1, additive)[0]
    n2 = encoder.aggregation.layer_norms[1](y2)
    expected = encoder.layer_norm(0.2 * y0 - 0.5 * n1 + 1.3 * n2)
    torch.testing.assert_close(encoder(input_ids=ids, attention_mask=mask).last_hidden_state, expected)


def test_hand_computed_two_layer_post_norm_encoder() -> None:
    model = tiny_model(seed=2, encoder_layer_aggregation="dlcl")
    encoder = model.model.encoder
    with torch.no_grad():
        encoder.aggregation.weight.copy_(torch.tensor([[1.0, 0, 0], [0.3, 0.7, 0], [0.2, -0.5, 1.3]]))
    ids, _ = padded_batch([4])
    y0 = encoder.embed(ids, None)
    y1 = encoder.layers[0](y0, None)[0]
    y2 = encoder.layers[1](encoder.aggregation.layer_norms[0](0.3 * y0 + 0.7 * y1), None)[0]  # eq. 9
    expected = encoder.aggregation.layer_norms[1](0.2 * y0 - 0.5 * y1 + 1.3 * y2)
    torch.testing.assert_close(encoder(input_ids=ids).last_hidden_state, expected)


def test_gradient_reaches_the_combination_weights() -> None:
    model = tiny_model(
        layer_norm_position="pre", encoder_layer_aggregation="dlcl", decoder_layer_aggregation="dlcl"
    )
    ids, mask = padded_batch([6, 4])
    model.train()
    model(input_ids=ids, attention_mask=mask, labels=torch.randint(2, VOCAB - 1, (2, 5))).loss.backward()
    for stack in (model.model.encoder, model.model.decoder):
        grad = stack.aggregation.weight.grad
        assert grad is not None and grad.tril().abs().sum() > 0
        assert grad.triu(1).abs().sum() == 0  # entries above the diagonal never matter


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("beams", [1, 4])
def test_cached_generation_equals_uncached(norm: str, beams: int) -> None:
    model = tiny_model(
        seed=5,
        layer_norm_position=norm,
        encoder_layer_aggregation="dlcl",
        decoder_layer_aggregation="dlcl",
        decoder_layers=3,
        dlcl_window=2,
    )
    with torch.no_grad():  # move W away from its init so the test sees a real combination
        for stack in (model.model.encoder, model.model.decoder):
            stack.aggregation.weight.add_(0.3 * torch.randn_like(stack.aggregation.weight))
    ids, mask = padded_batch([7, 4, 2], seed=6)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=beams, max_new_tokens=12)
    assert torch.equal(model.generate(**kwargs, use_cache=True), model.generate(**kwargs, use_cache=False))


@pytest.mark.slow
def test_save_load_keeps_the_weights_and_remote_code_loads(tmp_path) -> None:
    config = DLCLConfig.from_preset("tiny", vocab_size=VOCAB, max_position_embeddings=64, dlcl_window=3)
    model = DLCLForConditionalGeneration(config).eval()
    with torch.no_grad():
        model.model.encoder.aggregation.weight.add_(torch.randn_like(model.model.encoder.aggregation.weight))
    model.save_pretrained(tmp_path / "model")
    loaded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "model")
    assert type(loaded) is DLCLForConditionalGeneration and loaded.config.dlcl_window == 3
    assert torch.equal(loaded.model.encoder.aggregation.weight, model.model.encoder.aggregation.weight)
    ids, mask = padded_batch([5, 3])
    torch.save({"input_ids": ids, "attention_mask": mask}, tmp_path / "batch.pt")
    result = run_without_package(
        """
import json, torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
batch = torch.load("batch.pt")
with torch.no_grad():
    logits = model(**batch, decoder_input_ids=torch.full((2, 3), model.config.pad_token_id)).logits
print(json.dumps({"class": type(model).__name__, "logits": logits.tolist()}))
""",
        tmp_path,
    )
    assert result["class"] == "DLCLForConditionalGeneration"
    with torch.no_grad():
        expected = model(input_ids=ids, attention_mask=mask, decoder_input_ids=torch.full((2, 3), PAD)).logits
    torch.testing.assert_close(torch.tensor(result["logits"]), expected, atol=1e-5, rtol=1e-5)


def test_dlcl_does_not_fold_but_plain_pre_norm_does() -> None:
    with pytest.raises(NotFoldableError, match="encoder_layer_aggregation='dlcl'"):
        fold_to_stock(tiny_model(layer_norm_position="pre", encoder_layer_aggregation="dlcl"))
    assert fold_to_stock(tiny_model(layer_norm_position="pre", encoder_layers=4))[1].beam_outputs_identical


def test_bad_dlcl_fields_are_rejected() -> None:
    with pytest.raises(ValueError, match="dlcl_window=0"):
        DLCLConfig(dlcl_window=0)
    with pytest.raises(ValueError, match="dlcl_init='zeros' is not a valid choice"):
        DLCLConfig(dlcl_init="zeros")


def test_dlcl_heatmap_is_drawn_and_needs_dlcl(tmp_path) -> None:
    from deep_nmt_hf.science.plots import dlcl_weights, plot_dlcl_weights

    model = tiny_model(
        layer_norm_position="pre", encoder_layer_aggregation="dlcl", decoder_layer_aggregation="dlcl"
    )
    weights = dlcl_weights(model)
    assert set(weights) == {"encoder", "decoder"} and weights["encoder"].shape == (3, 3)
    path = plot_dlcl_weights(model, tmp_path / "dlcl.png")
    assert path.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(ValueError, match="no DLCL layer aggregation"):
        dlcl_weights(tiny_model())


# ----------------------------------------------------------------------------------- issue #25: linear memory
def reference_combine(agg: LayerAggregation, history: list[torch.Tensor]) -> torch.Tensor:
    """Eqs. 8 / 9 written out: row l of the masked W, one scalar multiply-add per history entry."""
    row = len(history) - 1
    weights = agg.weights()[row]
    combined = sum(weights[k] * history[k] for k in range(row + 1))
    if not agg.pre_norm and row > 0:
        combined = agg.layer_norms[row - 1](combined)  # eq. 9: LN of the sum
    return combined


def run_chain(agg: LayerAggregation, layers: list, x: torch.Tensor, combine) -> torch.Tensor:
    """A stack driven as `_Stack.begin_layers` / `next_input` drive it (store, then combine, per layer)."""
    history = [agg.store(x, 0)]
    hidden = combine(agg, history)
    for layer in layers:
        history.append(agg.store(layer(hidden), len(history)))
        hidden = combine(agg, history)
    return hidden


@pytest.mark.parametrize("pre_norm", [True, False])
@pytest.mark.parametrize("window", [-1, 2])
@pytest.mark.parametrize("init", ["avg", "one"])
def test_combination_equals_the_written_out_equations_forward_and_gradients(pre_norm, window, init) -> None:
    torch.manual_seed(0)
    agg = LayerAggregation(5, 8, pre_norm=pre_norm, init=init, window=window)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight() + 0.3 * torch.randn(6, 6))  # a trained-looking W (mask applies)
        for norm in agg.layer_norms:
            norm.weight.add_(0.1 * torch.randn(8))
            norm.bias.add_(0.1 * torch.randn(8))
    layers = [torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()) for _ in range(5)]
    x = torch.randn(2, 3, 8)
    results = []
    for combine in (LayerAggregation.combine, reference_combine):
        inputs = x.clone().requires_grad_()
        out = run_chain(agg, layers, inputs, combine)
        (out * torch.linspace(-1, 1, 8)).sum().backward()
        grads = [p.grad.clone() for p in agg.parameters()] + [inputs.grad]
        grads += [p.grad.clone() for layer in layers for p in layer.parameters()]
        results.append((out.detach(), grads))
        agg.zero_grad(set_to_none=True)
        for layer in layers:
            layer.zero_grad(set_to_none=True)
    (out, grads), (expected, expected_grads) = results
    # the library sums in one matrix product, the reference one entry at a time: float32 rounding only
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)
    for grad, expected_grad in zip(grads, expected_grads, strict=True):
        torch.testing.assert_close(grad, expected_grad, rtol=1e-5, atol=1e-6)
    assert grads[0].triu(1).abs().sum() == 0 and (grads[0] * (1 - agg.mask)).abs().sum() == 0


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_dlcl_model_loss_and_every_gradient_equal_the_written_out_equations(norm, monkeypatch) -> None:
    model = tiny_model(
        seed=3,
        layer_norm_position=norm,
        encoder_layer_aggregation="dlcl",
        decoder_layer_aggregation="dlcl",
        encoder_layers=4,
        decoder_layers=3,
        dlcl_window=3,
    ).train()
    with torch.no_grad():
        for stack in (model.model.encoder, model.model.decoder):
            stack.aggregation.weight.add_(0.3 * torch.randn_like(stack.aggregation.weight))
    ids, mask = padded_batch([6, 4])
    labels = torch.randint(2, VOCAB - 1, (2, 5), generator=torch.Generator().manual_seed(1))
    runs = []
    for patched in (False, True):
        if patched:
            monkeypatch.setattr(LayerAggregation, "combine", reference_combine)
        model.zero_grad(set_to_none=True)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        runs.append(
            (loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
        )
    (loss, grads), (expected_loss, expected_grads) = runs
    torch.testing.assert_close(loss, expected_loss, rtol=1e-5, atol=1e-6)
    assert grads.keys() == expected_grads.keys()
    for name, grad in grads.items():
        torch.testing.assert_close(grad, expected_grads[name], rtol=1e-4, atol=1e-6, msg=name)


def saved_bytes(layers: int, norm: str, aggregation: str, checkpointing: bool = False) -> int:
    """Bytes of the activations one training forward pass of a tiny L-L model saves for backward."""
    model = tiny_model(
        layer_norm_position=norm,
        encoder_layers=layers,
        decoder_layers=layers,
        encoder_layer_aggregation=aggregation,
        decoder_layer_aggregation=aggregation,
    ).train()
    if checkpointing:
        model.gradient_checkpointing_enable()
    ids, mask = padded_batch([9, 7, 5], seed=1)
    labels = torch.randint(2, VOCAB - 1, (3, 8), generator=torch.Generator().manual_seed(2))
    size, loss = saved_activation_bytes(
        lambda: model(input_ids=ids, attention_mask=mask, labels=labels).loss, model
    )
    loss.backward()  # the graph was complete and usable
    return size


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_dlcl_activation_memory_is_linear_in_depth(norm) -> None:
    dlcl = {layers: saved_bytes(layers, norm, "dlcl") for layers in (12, 24, 48)}
    plain = {layers: saved_bytes(layers, norm, "residual") for layers in (12, 24, 48)}
    # linear: doubling the depth doubles the saved bytes (a constant part — embeddings, logits — keeps the ratio
    # a little under 2); the stacked history saved before issue #25 gave 2.85 at 48/24 and 2.5 at 24/12
    for deep, shallow in ((48, 24), (24, 12)):
        assert 1.8 <= dlcl[deep] / dlcl[shallow] <= 2.1, (norm, dlcl)
        assert 1.8 <= plain[deep] / plain[shallow] <= 2.1, (norm, plain)
    # and DLCL adds a few tensors per layer, not a factor (3.0x the plain stack at 48 layers before)
    assert dlcl[48] <= 1.3 * plain[48], (dlcl, plain)


def test_dlcl_with_gradient_checkpointing_gives_the_same_gradients_and_stays_linear() -> None:
    def gradients(checkpointing: bool) -> dict[str, torch.Tensor]:
        model = tiny_model(
            seed=4, layer_norm_position="pre", encoder_layer_aggregation="dlcl", encoder_layers=4
        ).train()
        if checkpointing:
            model.gradient_checkpointing_enable()
        ids, mask = padded_batch([6, 4])
        labels = torch.randint(2, VOCAB - 1, (2, 5), generator=torch.Generator().manual_seed(1))
        model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
        return {n: p.grad for n, p in model.named_parameters() if p.grad is not None}

    plain, checkpointed = gradients(False), gradients(True)
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, rtol=1e-5, atol=1e-6, msg=name)
    sizes = {layers: saved_bytes(layers, "pre", "dlcl", checkpointing=True) for layers in (24, 48)}
    assert 1.8 <= sizes[48] / sizes[24] <= 2.1, sizes
    assert sizes[48] < saved_bytes(48, "pre", "dlcl")


def test_weighted_sum_under_autocast_gives_the_gradients_of_the_plain_product() -> None:
    torch.manual_seed(0)
    weights = torch.randn(3, requires_grad=True)
    history = [torch.randn(2, 4, requires_grad=True) for _ in range(3)]
    grads = []
    for combine in (weighted_sum, lambda w, h: torch.tensordot(w, torch.stack(h), dims=1)):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = combine(weights, history)
        assert out.dtype == torch.bfloat16
        grads.append(torch.autograd.grad(out.float().pow(2).sum(), [weights, *history]))
    for grad, expected in zip(*grads, strict=True):
        assert grad.dtype == torch.float32 and torch.equal(grad, expected)


def test_combination_compiles_as_one_graph_with_the_same_gradients() -> None:
    torch.manual_seed(0)
    agg = LayerAggregation(3, 8, pre_norm=True, window=2)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight() + 0.1 * torch.randn(4, 4))
    layers = [torch.nn.Linear(8, 8) for _ in range(3)]
    x = torch.randn(2, 3, 8)

    def loss() -> torch.Tensor:
        return run_chain(agg, layers, x, LayerAggregation.combine).pow(2).sum()

    expected = torch.autograd.grad(loss(), list(agg.parameters()))
    compiled = torch.compile(
        loss, fullgraph=True, backend="aot_eager"
    )  # no graph break at the custom function
    for grad, want in zip(torch.autograd.grad(compiled(), list(agg.parameters())), expected, strict=True):
        torch.testing.assert_close(grad, want, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------- issue #48: one history buffer, one gradient per entry
def plain_rows(agg: LayerAggregation, entries: list[torch.Tensor]) -> list[torch.Tensor]:
    """The plain form: row l = tensordot(W[l, start..l], torch.stack(h_start..h_l)) under autograd."""
    outs = []
    for row in range(len(entries)):
        start = agg.starts[row]
        weights = agg.weight[row, start : row + 1].to(entries[0].dtype)
        outs.append(torch.tensordot(weights, torch.stack(entries[start : row + 1]), dims=1))
    return outs


def buffer_rows(agg: LayerAggregation, entries: list[torch.Tensor]) -> list[torch.Tensor]:
    """The same rows through the library's `History` (entries as given: `store` is left out on purpose)."""
    history = History(agg, entries[0])
    outs = [history.next_row()]
    for entry in entries[1:]:
        history.append(entry)
        outs.append(history.next_row())
    return outs


def row_gradients(rows, agg, entries, autocast: bool = False):
    """Forward the rows of `entries` (leaves) and differentiate Σ_l <c_l, row_l>: (rows, ∂W, ∂entries)."""
    agg.zero_grad(set_to_none=True)
    leaves = [e.clone().requires_grad_() for e in entries]
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        outs = rows(agg, leaves)
    generator = torch.Generator().manual_seed(7)
    loss = sum((out.float() * torch.randn(out.shape, generator=generator)).sum() for out in outs)
    loss.backward()
    return [o.detach() for o in outs], agg.weight.grad.clone(), [leaf.grad for leaf in leaves]


@pytest.mark.parametrize("window", [-1, 3, 1])
def test_history_buffer_is_bit_for_bit_the_plain_form_forward_and_in_w(window) -> None:
    torch.manual_seed(0)
    agg = LayerAggregation(8, 16, pre_norm=True, window=window)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight() + 0.3 * torch.randn(9, 9))
    entries = [torch.randn(3, 5, 16) for _ in range(9)]
    outs, grad_w, grad_h = row_gradients(buffer_rows, agg, entries)
    plain_outs, plain_w, plain_h = row_gradients(plain_rows, agg, entries)
    for out, plain in zip(outs, plain_outs, strict=True):
        assert torch.equal(out, plain)  # the same matrix product over the same (n, N) layout
    assert torch.equal(grad_w, plain_w)  # the same product as tensordot's backward
    # the history gradients: one product over the rows that read an entry, against autograd's one add per row
    # (row L first); equal where an entry has one reader, else to float32 rounding
    for grad, plain in zip(grad_h, plain_h, strict=True):
        if window == 1:
            assert torch.equal(grad, plain)
        torch.testing.assert_close(grad, plain, rtol=1e-6, atol=1e-6)


def test_history_buffer_under_bf16_autocast_matches_the_plain_form() -> None:
    torch.manual_seed(0)
    agg = LayerAggregation(6, 16, pre_norm=True)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight() + 0.3 * torch.randn(7, 7))
    entries = [torch.randn(2, 4, 16) for _ in range(7)]  # float32, as LayerNorm's output under autocast
    outs, grad_w, grad_h = row_gradients(buffer_rows, agg, entries, autocast=True)
    plain_outs, plain_w, plain_h = row_gradients(plain_rows, agg, entries, autocast=True)
    for out, plain in zip(outs, plain_outs, strict=True):
        assert out.dtype == plain.dtype == torch.bfloat16 and torch.equal(out, plain)
    assert grad_w.dtype == torch.float32 and torch.equal(grad_w, plain_w)
    for grad, plain in zip(grad_h, plain_h, strict=True):
        # plain: float32 sums of bfloat16 products; here: one bfloat16 rounding of the summed products
        assert grad.dtype == torch.float32
        torch.testing.assert_close(grad, plain, rtol=2**-7, atol=1e-2)


def test_history_buffer_retained_graph_and_an_unused_top_row() -> None:
    torch.manual_seed(0)
    agg = LayerAggregation(4, 8, pre_norm=True)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight() + 0.3 * torch.randn(5, 5))
    leaves = [torch.randn(2, 8, requires_grad=True) for _ in range(5)]
    for rows in (buffer_rows, plain_rows):
        outs = rows(agg, leaves)
        loss = outs[2].pow(2).sum() + outs[1].sum()  # rows 3 and 4 unused: their gradient is 0
        first = torch.autograd.grad(loss, leaves[:3], retain_graph=True)
        second = torch.autograd.grad(loss, leaves[:3])  # a second pass over the retained graph
        for a, b in zip(first, second, strict=True):
            assert torch.equal(a, b)
        if rows is buffer_rows:
            expected = first
        else:
            for a, b in zip(expected, first, strict=True):
                torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


def aggregation_bytes_written(layers: int, history_kind: str) -> int:
    """Bytes every operator of a DLCL chain of tanh layers writes in forward + backward (`run_chain`)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    written = [0]

    class Counting(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            if not func.is_view:
                for t in out if isinstance(out, (tuple, list)) else [out]:
                    if isinstance(t, torch.Tensor):
                        written[0] += t.numel() * t.element_size()
            return out

    agg = LayerAggregation(layers, 64, pre_norm=True)
    with torch.no_grad():
        agg.weight.copy_(agg.initial_weight())
    x = torch.randn(4, 16, 64, requires_grad=True)

    def combine(agg, history):
        return LayerAggregation.combine(agg, history)

    with Counting():
        if history_kind == "buffer":
            history = agg.new_history(x)
        else:
            history = [agg.store(x, 0)]
        hidden = combine(agg, history)
        for _ in range(layers):
            history.append(agg.store(torch.tanh(hidden), len(history)))
            hidden = combine(agg, history)
        hidden.sum().backward()
    return written[0]


def test_history_buffer_moves_bytes_linear_in_depth() -> None:
    """Issue #48: each row of the per-row form stacked its whole history (and again in backward) and each entry
    took one full-size gradient add per later row: bytes quadratic in depth. The buffer writes each entry, row
    output and row gradient once: linear (the matrix products still READ the history, as any dense DLCL must)."""
    buffer = {layers: aggregation_bytes_written(layers, "buffer") for layers in (8, 16)}
    rows = {layers: aggregation_bytes_written(layers, "list") for layers in (8, 16)}
    assert buffer[16] / buffer[8] < 2.2, buffer
    assert rows[16] / rows[8] > 2.8, rows  # the per-row form, for contrast
    assert buffer[16] < rows[16] / 3
