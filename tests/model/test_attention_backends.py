"""Every attention backend Marian takes (eager, SDPA, flex; flash on CUDA) gives the same model: masks come from
`transformers.masking_utils`, so SDPA gets `is_causal=True` and no mask for an unpadded batch, flex a BlockMask.
Also: cross-attention drop and `generate`'s static-cache decoding compile as one graph (`_can_compile_fullgraph`)."""

from __future__ import annotations

import pytest
import torch
from factories import VARIANT_FIELDS, padded_batch, variant_model
from transformers import CompileConfig

import deep_nmt_hf

VARIANTS = list(deep_nmt_hf.VARIANTS)
NO_EOS = dict(eos_token_id=None, forced_eos_token_id=None)


def padded_inputs(source_seed: int, target_seed: int) -> dict[str, torch.Tensor]:
    """A padded source (lengths 7, 5) and decoder inputs (2, 6) whose second row is padded after 4 tokens."""
    ids, mask = padded_batch([7, 5], seed=source_seed)
    generator = torch.Generator().manual_seed(target_seed)
    decoder_ids = torch.randint(2, 40, (2, 6), generator=generator)
    decoder_mask = torch.ones_like(decoder_ids)
    decoder_mask[1, 4:] = 0
    return dict(
        input_ids=ids, attention_mask=mask, decoder_input_ids=decoder_ids, decoder_attention_mask=decoder_mask
    )


def logits_with(model, implementation: str, **batch) -> torch.Tensor:
    model.set_attn_implementation(implementation)
    with torch.no_grad():
        return model(**batch).logits


def test_eager_sdpa_and_flex_give_the_same_logits_for_every_variant() -> None:
    """Padded source and target, every variant: SDPA and flex logits equal eager's within 1e-5 on the real target
    positions (the padded ones are never scored). Flex compiles once on CPU (tens of seconds), then every variant
    reuses it."""
    batch = padded_inputs(1, 0)
    real = batch["decoder_attention_mask"].bool()
    for variant in VARIANTS:
        model = variant_model(variant, seed=3)
        eager = logits_with(model, "eager", **batch)
        for implementation in ("sdpa", "flex_attention"):
            other = logits_with(model, implementation, **batch)
            gap = (other - eager)[real].abs().max().item()
            assert gap < 1e-5, (variant, implementation, gap)


def flash_contract_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """What flash_attention_2 gets, checked, then computed with SDPA on the CPU: never a 4-D mask, only a (batch,
    keys) padding mask or None; causality only from `module.is_causal`, aligned bottom-right as flash aligns it."""
    assert attention_mask is None or attention_mask.dim() == 2, "flash takes no 4-D mask"
    blocked = None
    if attention_mask is not None:
        blocked = ~attention_mask.bool()[:, None, None, :]
    queries, keys = query.shape[2], key.shape[2]
    if module.is_causal and queries > 1:
        future = torch.ones(queries, keys, dtype=torch.bool).triu(keys - queries + 1)
        blocked = future if blocked is None else blocked | future
    mask = None if blocked is None else ~blocked
    output = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scaling
    )
    return output.transpose(1, 2).contiguous(), None


def test_the_flash_contract_holds_for_every_variant() -> None:
    """flash_attention_2 needs CUDA; its contract is checked here: an attention function registered under a new
    name (without "flash" in it: Transformers sends such names to its flash kernels) with masking_utils' flash mask (`flash_attention_mask`) receives only 2-D padding masks or None and the
    modules' `is_causal`, and gives eager's logits on the real positions for every variant (MAtt included: its
    average attention is plain arithmetic outside the attention interface, only its cross-attention goes through
    the backend)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, flash_attention_mask

    AttentionInterface.register("varlen_contract", flash_contract_attention)
    AttentionMaskInterface.register("varlen_contract", flash_attention_mask)
    batch = padded_inputs(3, 3)
    real = batch["decoder_attention_mask"].bool()
    for variant in VARIANTS:
        model = variant_model(variant, seed=7)
        eager = logits_with(model, "eager", **batch)
        flash = logits_with(model, "varlen_contract", **batch)
        gap = (flash - eager)[real].abs().max().item()
        assert gap < 1e-5, (variant, gap)


def test_sdpa_gets_is_causal_and_no_mask_for_an_unpadded_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """No padding anywhere: every SDPA call gets no materialised mask; the decoder's self-attention calls get
    `is_causal=True` (so torch may pick its flash kernel), the encoder's and the cross-attention's `False`."""
    calls = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spy(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, **kwargs):
        calls.append((query.shape[2], key.shape[2], attn_mask, is_causal))
        return original(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kwargs
        )

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", spy)
    model = variant_model("base", seed=0, attn_implementation="sdpa")
    source = torch.randint(2, 40, (2, 5))
    target = torch.randint(2, 40, (2, 7))
    with torch.no_grad():
        model(input_ids=source, decoder_input_ids=target)
    layers = model.config.encoder_layers
    assert len(calls) == layers + 2 * model.config.decoder_layers
    assert all(mask is None for _, _, mask, _ in calls)
    encoder, decoder = calls[:layers], calls[layers:]
    assert [causal for _, _, _, causal in encoder] == [False] * layers
    # decoder: self-attention (7 queries over 7 keys, causal), then cross-attention (7 over 5, not causal)
    assert [(q, k, causal) for q, k, _, causal in decoder] == [(7, 7, True), (7, 5, False)] * layers


def test_attention_weights_under_sdpa_equal_eager() -> None:
    """`output_attentions=True` under SDPA computes that call eagerly, with masks built for eager: the weights
    equal an eager model's (causal, padding-aware)."""
    batch = dict(padded_inputs(2, 2), output_attentions=True)
    model = variant_model("base", seed=4)
    model.set_attn_implementation("eager")
    with torch.no_grad():
        eager = model(**batch)
    model.set_attn_implementation("sdpa")
    with torch.no_grad():
        sdpa = model(**batch)
    for name in ("encoder_attentions", "decoder_attentions", "cross_attentions"):
        for a, b in zip(getattr(eager, name), getattr(sdpa, name), strict=True):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=0)
    # causal: no decoder query attends to a later position
    assert torch.triu(sdpa.decoder_attentions[0][0, 0], diagonal=1).abs().max() == 0


def test_cross_attention_drop_compiles_as_one_graph() -> None:
    """Training a deep decoder with drop-net rate 0.5 (the draw is a tensor, not a Python branch): fullgraph
    `torch.compile` traces it, and with the same random state it gives eager's loss and gradients."""
    fields = dict(VARIANT_FIELDS.get("deep_decoder", {}), cross_attention_drop_rate=0.5)
    fields.update(cross_attention_drop_layers=2, ddr_loss_weight=0.0, ald_loss_weight=0.0)
    model = variant_model("deep_decoder", seed=5, **fields).train()
    ids, mask = padded_batch([6, 4], seed=5)
    labels = torch.randint(2, 40, (2, 5))

    def loss_and_grads(step):
        model.zero_grad()
        torch.manual_seed(11)
        loss = step(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    eager_loss, eager_grads = loss_and_grads(model)
    torch._dynamo.reset()
    compiled_loss, compiled_grads = loss_and_grads(torch.compile(model, fullgraph=True, backend="eager"))
    torch.testing.assert_close(compiled_loss, eager_loss, atol=1e-6, rtol=0)
    for a, b in zip(compiled_grads, eager_grads, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


@pytest.mark.parametrize("variant", ["dlcl", "shared_layers", "admin"])
def test_static_cache_decoding_compiles_fullgraph(variant: str) -> None:
    """`_can_compile_fullgraph` holds: `generate` with a static cache compiles the decoding steps with
    `fullgraph=True` (a graph break would raise) for the variants with their own stack code (DLCL's aggregation,
    shared layers' loops, ADMIN's ω; the deep decoder is in test_generation_contracts), and the tokens and scores
    equal eager decoding's. MAtt's static slot is checked in tests/model/test_static_merged_attention.py."""
    model = variant_model(variant, seed=6)
    assert model._can_compile_fullgraph
    ids, mask = padded_batch([6, 4], seed=6)
    kwargs = dict(input_ids=ids, attention_mask=mask, max_new_tokens=5, **NO_EOS)
    kwargs.update(output_scores=True, return_dict_in_generate=True)
    eager = model.generate(**kwargs)
    compile_config = CompileConfig(fullgraph=True, backend="eager", mode=None)
    compile_config._compile_all_devices = True  # Transformers compiles on CPU only when asked
    torch._dynamo.reset()
    compiled = model.generate(**kwargs, cache_implementation="static", compile_config=compile_config)
    assert hasattr(model, "_compiled_call")
    assert torch.equal(compiled.sequences, eager.sequences)
    for a, b in zip(compiled.scores, eager.scores, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)
