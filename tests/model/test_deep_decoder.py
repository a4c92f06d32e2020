"""Cross-attention drop (CAD) and collapse-reducing training (DDR + ALD)."""

from __future__ import annotations

import math

import pytest
import torch
from factories import EOS, PAD, VOCAB, padded_batch, tiny_model, variant_model
from fresh_process import generate_with_remote_code

from deep_nmt_hf import DeepDecoderConfig, DeepDecoderForConditionalGeneration
from deep_nmt_hf.model.caches import NoCrossAttentionLayer
from deep_nmt_hf.model.collapse_losses import (
    ald_contrastive_loss,
    collapse_reducing_loss,
    mask_source_tokens,
    sentence_representation,
    symmetric_kl,
    token_cross_entropy,
)
from deep_nmt_hf.model.modeling_deep_nmt import DeepNMTDecoderLayer
from deep_nmt_hf.model.transformers_compat import cache_of, with_cache
from deep_nmt_hf.publish.folding import fold_to_stock

UNK = 1


def count_cross_attention_calls(model) -> list[int]:
    """Per decoder layer, how many forward passes its cross-attention sublayer contributed to the output: the
    sublayer's output differs from the dropped form (post-LN: LN(s(x)); pre-LN: x). The drop-net gate is a tensor
    (no graph break), so the attention runs either way and only its contribution tells."""
    counts = [0] * len(model.model.decoder.layers)
    for index, layer in enumerate(model.model.decoder.layers):
        if layer.encoder_attn is not None and layer.encoder_attn.fn is not None:

            def hook(module, args, output, index=index):
                x = args[0]
                dropped = x if module.pre_norm else module.layer_norm(module._scaled_residual(x))
                if not torch.allclose(output[0], dropped, atol=1e-6):
                    counts[index] += 1

            layer.encoder_attn.register_forward_hook(hook)
    return counts


def batch(seed: int = 0) -> dict[str, torch.Tensor]:
    ids, mask = padded_batch([7, 5, 4], seed=seed)
    labels = torch.randint(2, VOCAB - 1, (3, 6), generator=torch.Generator().manual_seed(seed))
    labels[:, -1] = EOS
    labels[2, 4:] = -100
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def test_drop_net_frequency_and_layers_above_always_attend() -> None:
    torch.manual_seed(0)
    model = tiny_model(decoder_layers=4, cross_attention_drop_layers=2, cross_attention_drop_rate=0.3).train()
    counts = count_cross_attention_calls(model)
    passes = 400
    with torch.no_grad():
        for _ in range(passes):
            model(**batch())
    for index in (0, 1):  # dropped with probability 0.3, once per forward pass
        assert counts[index] / passes == pytest.approx(0.7, abs=0.06)
    assert counts[2] == counts[3] == passes  # above L_dr: always


def test_inference_runs_every_cross_attention_and_is_deterministic() -> None:
    model = tiny_model(decoder_layers=3, cross_attention_drop_layers=3, cross_attention_drop_rate=0.9).eval()
    counts = count_cross_attention_calls(model)
    first = model(**batch()).logits
    assert torch.equal(first, model(**batch()).logits)
    assert counts == [2, 2, 2]


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_rate_one_layers_hold_no_cross_attention_and_never_run_one(norm: str) -> None:
    model = tiny_model(
        decoder_layers=3,
        cross_attention_drop_layers=2,
        cross_attention_drop_rate=1.0,
        layer_norm_position=norm,
    )
    names = [n for n, _ in model.named_parameters() if "encoder_attn.fn" in n]
    assert names and all(n.startswith("model.decoder.layers.2.") for n in names)
    counts = count_cross_attention_calls(model)
    model.generate(input_ids=batch()["input_ids"], attention_mask=batch()["attention_mask"], max_new_tokens=4)
    assert counts[:2] == [0, 0] and counts[2] > 0


def assert_expanded_zeros(slot, shape: tuple[int, ...]) -> None:
    """An absent cross-attention slot: the usual shape, zeros, stride 0, one element of storage."""
    assert isinstance(slot, NoCrossAttentionLayer)
    for tensor in (slot.keys, slot.values):
        assert tensor.shape == shape and tensor.stride() == (0, 0, 0, 0)
        assert tensor.untyped_storage().nbytes() == tensor.element_size() and not tensor.any()


@pytest.mark.parametrize("beams", [1, 3])
def test_cross_slots_without_attention_have_the_source_shape_and_take_no_memory(beams: int) -> None:
    """After generate, every cross-attention slot is (batch · beams, heads, source_length, head_dim) — generic code
    may read the source length or position 0 there —; the slots of layers owning no cross-attention (CAD, rate 1)
    are expanded zeros, and stay so through beam reordering (run by generate), batch repetition and selection.
    The cache then continues decoding like a fresh run."""
    model = variant_model("deep_decoder", seed=2, decoder_layers=3, cross_attention_drop_layers=2)
    ids, mask = padded_batch([7, 5, 4], seed=2)
    kwargs = dict(input_ids=ids, attention_mask=mask, num_beams=beams, do_sample=False, suppress_tokens=[EOS])
    out = model.generate(**kwargs, max_new_tokens=4, return_dict_in_generate=True)
    cache = cache_of(out)
    heads, head_dim = (
        model.config.decoder_attention_heads,
        model.config.d_model // model.config.decoder_attention_heads,
    )
    shape = (3 * beams, heads, ids.shape[1], head_dim)
    slots = cache.cross_attention_cache.layers
    assert [slot.keys.shape for slot in slots] == [shape] * 3
    assert not slots[0].keys[:, :, 0].any()  # position 0 can be indexed
    for slot in slots[:2]:
        assert_expanded_zeros(slot, shape)
    assert slots[2].keys.stride()[0] > 0  # an attending layer's keys are real
    if beams == 1:  # greedy: the returned cache continues decoding (the new tokens are the one-run ones)
        whole = model.generate(**kwargs, max_new_tokens=7)
        rest = model.generate(
            **kwargs,
            decoder_input_ids=out.sequences,
            decoder_attention_mask=torch.ones_like(out.sequences),
            **with_cache(cache),
            max_new_tokens=3,
        )
        assert torch.equal(rest, whole)
    cache.batch_repeat_interleave(2)
    cache.batch_select_indices(torch.tensor([0, 3, 5]))
    cache.reorder_cache(torch.tensor([2, 2, 0]))
    for slot in cache.cross_attention_cache.layers[:2]:
        assert_expanded_zeros(slot, (3, *shape[1:]))
    assert cache.cross_attention_cache.layers[2].keys.shape == (3, *shape[1:])


def test_a_dropped_cross_attention_returns_zero_weights_with_a_zero_gradient() -> None:
    """A cross-attention dropped in this pass (CAD rate < 1, training) returns zero weights that are in the graph:
    backward gives them an all-zero gradient; the layer's output is the same as with gradients off."""
    model = tiny_model(decoder_layers=2, cross_attention_drop_layers=1, cross_attention_drop_rate=0.5)
    layer = model.model.decoder.layers[0]
    states, memory = torch.randn(2, 3, 32, requires_grad=True), torch.randn(2, 5, 32)
    run = dict(drop_cross_attention=True, self_attention_mask=None, encoder_attention_mask=None)
    output, _, cross = layer(states, encoder_hidden_states=memory, output_attentions=True, **run)
    assert cross.shape == (2, 4, 3, 5) and not cross.any()
    cross.retain_grad()
    output.sum().backward()
    assert cross.grad is not None and not cross.grad.any() and states.grad.abs().sum() > 0
    with torch.no_grad():  # without gradients nothing is added: the same output
        again = layer(states, encoder_hidden_states=memory, output_attentions=True, **run)[0]
    assert torch.equal(output, again)


def test_post_ln_drop_outputs_ln_of_the_input_and_pre_ln_passes_it_through() -> None:
    x = torch.randn(2, 3, 32)
    post = tiny_model(decoder_layers=1, cross_attention_drop_layers=1, cross_attention_drop_rate=0.5)
    sublayer = post.model.decoder.layers[0].encoder_attn
    torch.testing.assert_close(
        sublayer(x, skip=True)[0], sublayer.layer_norm(x)
    )  # LN(Ĥ), the paper's formula
    pre = tiny_model(
        decoder_layers=1,
        layer_norm_position="pre",
        cross_attention_drop_layers=1,
        cross_attention_drop_rate=0.5,
    )
    assert torch.equal(pre.model.decoder.layers[0].encoder_attn(x, skip=True)[0], x)


def test_symmetric_kl_by_hand_and_zero_for_equal_distributions() -> None:
    a = torch.tensor([[[0.0, math.log(3.0)]]])  # P = (1/4, 3/4)
    b = torch.tensor([[[0.0, 0.0]]])  # Q = (1/2, 1/2)
    p, q = torch.tensor([0.25, 0.75]), torch.tensor([0.5, 0.5])
    expected = 0.5 * ((p * (p / q).log()).sum() + (q * (q / p).log()).sum())
    torch.testing.assert_close(symmetric_kl(a, b, torch.ones(1, 1, dtype=torch.bool)), expected)
    assert symmetric_kl(a, a, torch.ones(1, 1, dtype=torch.bool)) == 0
    mask = torch.tensor([[True, False]])
    two = torch.cat([a, b], dim=1)
    torch.testing.assert_close(
        symmetric_kl(two, torch.cat([b, b], dim=1), mask), expected
    )  # masked token ignored


def test_ddr_is_zero_when_both_passes_agree_and_positive_otherwise() -> None:
    agree = tiny_model(dropout=0.0, ddr_loss_weight=1.0).train()
    out = agree(**batch())
    assert out.ddr_loss.item() == pytest.approx(0.0, abs=1e-10)
    torch.testing.assert_close(out.loss, out.nll_loss)
    torch.manual_seed(0)
    differ = tiny_model(
        dropout=0.3,
        ddr_loss_weight=2.0,
        decoder_layers=3,
        cross_attention_drop_layers=2,
        cross_attention_drop_rate=0.5,
    ).train()
    out = differ(**batch())
    assert out.ddr_loss > 0
    torch.testing.assert_close(out.loss, out.nll_loss + 2.0 * out.ddr_loss)


def test_ald_contrastive_loss_by_hand() -> None:
    anchor = torch.tensor([[1.0, 0.0]])
    positive = torch.tensor([[1.0, 1.0]])  # cos = 1/√2
    negative = torch.tensor([[0.0, 1.0]])  # cos = 0
    tau = 0.1
    pos, neg = (1 / math.sqrt(2)) / tau, 0.0
    expected = -math.log(math.exp(pos) / (math.exp(pos) + math.exp(neg)))
    assert ald_contrastive_loss(anchor, positive, negative, tau).item() == pytest.approx(expected, rel=1e-3)
    states = torch.tensor([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])
    torch.testing.assert_close(
        sentence_representation(states, torch.tensor([[1, 1, 0]])), torch.tensor([[2.0, 3.0]])
    )


def test_unk_masking_never_touches_special_tokens_or_padding() -> None:
    ids, mask = padded_batch([12, 9, 4, 2], seed=3)
    special = [EOS, PAD, UNK]
    for ratio in (0.0, 0.3, 0.7, 1.0):
        masked = mask_source_tokens(
            ids, mask, torch.full((4,), ratio), UNK, special, torch.Generator().manual_seed(1)
        )
        changed = masked != ids
        assert not changed[(ids == EOS) | (ids == PAD) | (mask == 0)].any()
        assert (masked[changed] == UNK).all()
        real = (mask.bool() & (ids != EOS)).sum(1)
        assert changed.sum(1).tolist() == torch.round(ratio * real.float()).long().tolist()
    one = mask_source_tokens(ids, mask, torch.zeros(4), UNK, special, at_least_one=True)
    assert ((one != ids).sum(1) == 1).all()  # X⁻ always differs from X


def test_ald_loss_term_is_added_in_training_mode_only() -> None:
    model = tiny_model(ald_loss_weight=0.5, dropout=0.0).train()
    out = model(**batch())
    assert out.ald_loss > 0 and out.ddr_loss is None
    torch.testing.assert_close(out.loss, out.nll_loss + 0.5 * out.ald_loss)
    model.eval()
    assert model(**batch()).ald_loss is None


def test_extra_losses_reach_the_gradient_under_seq2seq_trainer_with_label_smoothing(tmp_path) -> None:
    from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        report_to="none",
        use_cpu=True,
        per_device_train_batch_size=3,
        label_smoothing_factor=0.0,
    )
    grads = {}
    for name, weights in (("plain", {}), ("crt", {"ddr_loss_weight": 1.0, "ald_loss_weight": 1.0})):
        model = tiny_model(seed=1, label_smoothing=0.1, dropout=0.1, **weights).train()
        trainer = Seq2SeqTrainer(model=model, args=args)
        torch.manual_seed(5)
        loss, outputs = trainer.compute_loss(model, batch(), return_outputs=True)
        if name == "crt":
            torch.testing.assert_close(loss, outputs.nll_loss + outputs.ddr_loss + outputs.ald_loss)
            assert outputs.ddr_loss > 0 and outputs.ald_loss > 0
        loss.backward()
        grads[name] = model.model.encoder.layers[0].ffn.fn.fc1.weight.grad.clone()
    assert not torch.allclose(grads["plain"], grads["crt"], atol=1e-6)


def test_a_cad_model_folds_exactly() -> None:
    for norm in ("post", "pre"):
        model = tiny_model(
            seed=2,
            decoder_layers=3,
            layer_norm_position=norm,
            cross_attention_drop_layers=1,
            cross_attention_drop_rate=1.0,
            ddr_loss_weight=1.0,
        )
        stock, report = fold_to_stock(model)
        assert report.max_abs_logit_diff <= 1e-5 and report.beam_outputs_identical
        zero = stock.model.decoder.layers[0].encoder_attn.out_proj
        assert zero.weight.abs().sum() == 0 and zero.bias.abs().sum() == 0


def test_bad_deep_decoder_fields_are_rejected() -> None:
    with pytest.raises(ValueError, match="ald_max_ratio=0.5 must lie in"):
        DeepDecoderConfig(ald_max_ratio=0.5)
    with pytest.raises(ValueError, match="cross_attention_drop_layers=99"):
        DeepDecoderConfig(cross_attention_drop_layers=99)
    with pytest.raises(ValueError, match="cross_attention_drop_rate=1.5"):
        DeepDecoderConfig(cross_attention_drop_rate=1.5)
    with pytest.raises(ValueError, match="cannot be combined with decoder_attention='merged'"):
        DeepDecoderConfig(decoder_attention="merged")
    with pytest.raises(ValueError, match="ald_temperature=0"):
        DeepDecoderConfig(ald_temperature=0)


@pytest.mark.slow
def test_trust_remote_code_load(tmp_path) -> None:
    config = DeepDecoderConfig.from_preset("tiny", vocab_size=VOCAB, max_position_embeddings=64)
    model = DeepDecoderForConditionalGeneration(config).eval()
    ids, mask = padded_batch([5, 3])
    generate = dict(num_beams=3, max_new_tokens=8)
    name, out = generate_with_remote_code(
        model, {"input_ids": ids, "attention_mask": mask}, tmp_path, **generate
    )
    assert name == "DeepDecoderForConditionalGeneration"
    assert out == model.generate(input_ids=ids, attention_mask=mask, **generate).tolist()


@pytest.mark.parametrize("loss", ["ddr_loss_weight", "ald_loss_weight"])
def test_each_collapse_loss_weight_changes_the_gradient(loss: str) -> None:
    """One loss at a time, the other off: the gradient at weight 1 differs from the gradient at weight 0.5 (the
    cross-entropy part, and the random draws, are the same in both), so a loss added without its gradient (e.g.
    `ddr_loss.detach()`) fails here. Tolerance: 1e-6 absolute on the first encoder FFN's weight gradient."""
    grads = []
    for weight in (0.5, 1.0):
        model = tiny_model(seed=1, dropout=0.1, **{loss: weight}).train()
        torch.manual_seed(5)
        out = model(**batch())
        out.loss.backward()
        grads.append(model.model.encoder.layers[0].ffn.fn.fc1.weight.grad.clone())
        component = out.ddr_loss if loss == "ddr_loss_weight" else out.ald_loss
        torch.testing.assert_close(out.loss, out.nll_loss + weight * component)
    assert (grads[1] - grads[0]).abs().max() > 1e-6


def test_gradient_checkpointing_trains_with_the_collapse_losses() -> None:
    """The deep-decoder defaults (CAD on the lowest layers, DDR and ALD weights 1) with dropout: the extra DDR / ALD
    passes run without a cache, so checkpointed layers can run again in backward; the gradients equal those of the
    same step without checkpointing (1e-5; checkpointing replays the dropout draws)."""
    grads = []
    for checkpointing in (False, True):
        model = variant_model("deep_decoder", seed=2, dropout=0.1, cross_attention_drop_layers=2).train()
        if checkpointing:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        caches = []
        model.model.decoder.register_forward_hook(
            lambda module, args, out, seen=caches: seen.append(cache_of(out))
        )
        torch.manual_seed(3)
        model(**batch()).loss.backward()
        assert len(caches) == 4 and all(cache is None for cache in caches)  # CE, DDR and two ALD passes
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None]))
    torch.testing.assert_close(grads[1], grads[0], atol=1e-5, rtol=1e-5)


def test_the_forward_adds_the_collapse_losses_through_their_one_entry_point() -> None:
    """The model's training loss is `collapse_losses.collapse_reducing_loss` on the cross-entropy of its pass: the
    same bits when called by hand after the same first pass (same random draws: dropout, drop-net, ALD masks)."""
    fields = dict(cross_attention_drop_layers=1, cross_attention_drop_rate=0.5, dropout=0.1)
    model = tiny_model(seed=2, ddr_loss_weight=1.0, ald_loss_weight=0.5, **fields).train()
    inputs = batch(seed=1)
    ids, mask, labels = inputs["input_ids"], inputs["attention_mask"], inputs["labels"]
    torch.manual_seed(4)
    out = model(**inputs)
    torch.manual_seed(4)
    target = model.prepare_decoder_input_ids_from_labels(labels)
    outputs = model.model(ids, attention_mask=mask, decoder_input_ids=target, use_cache=False)
    logits = model.lm_head(outputs.last_hidden_state)
    nll = token_cross_entropy(logits, labels, model.config.label_smoothing)
    loss, components = collapse_reducing_loss(model, nll, logits, outputs, labels, ids, mask, target)
    assert torch.equal(loss, out.loss) and sorted(components) == ["ald_loss", "ddr_loss", "nll_loss"]
    assert all(torch.equal(value, getattr(out, name)) for name, value in components.items())
    assert all(type(layer) is DeepNMTDecoderLayer for layer in model.model.decoder.layers)
