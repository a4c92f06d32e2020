"""Collapse-reducing training for deep decoders (deep-decoder-cad-crt, sec. 4): DDR and ALD.

A deep decoder can learn to ignore the source and act as a language model. Two extra losses push back:

DDR (decoder dropout regularisation): the decoder runs twice on the same encoder output, with different dropout
and drop-net samples, giving token distributions P1 and P2; the loss adds
    ddr_loss_weight × ½ (KL(P1‖P2) + KL(P2‖P1))        averaged over non-pad target tokens,
and the cross-entropy is the mean over both passes.

ALD (adversarial-like source degradation, contrastive): per sentence γ ~ U[0, p_ALD), p_ALD = `ald_max_ratio` < 0.5.
X⁺ replaces a γ fraction of the real source tokens with <unk>, X⁻ a (1 − γ) fraction (special tokens and padding
are never touched). With G(X, Y) the mean of the top decoder hidden states over non-pad target tokens:
    ald_loss_weight × −log( e^{cos(G, G⁺)/τ} / (e^{cos(G, G⁺)/τ} + e^{cos(G, G⁻)/τ}) ),   τ = `ald_temperature`,
so the decoder state must stay close to the lightly degraded source and move away from the heavily degraded one:
it cannot ignore the source. Defaults: τ = 0.1 (the paper's best), p_ALD = 0.3.

Precision: every loss here is computed in fp32 whatever the dtype of its inputs (the logits and hidden states are
bf16 / fp16 under mixed-precision training): the cross-entropy and the KL upcast the logits, G(X, Y) sums in fp32.

Reading: the paper samples the number of replaced tokens as round(γ · n) for n real tokens; we do the same, with at
least one token replaced in X⁻ so that it differs from X.

Where: `collapse_reducing_loss` runs the extra passes and adds the terms (fairseq keeps such losses in a criterion);
the model's forward calls it in training mode with labels, so Seq2SeqTrainer trains them unchanged and label
smoothing lives in the model's loss too. This module sees the model only through its `model` (the encoder-decoder),
`lm_head` and `config`, and imports nothing of modeling_deep_nmt.py.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqModelOutput


def token_cross_entropy(
    logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0
) -> torch.Tensor:
    """Mean cross-entropy over the labelled tokens (-100 ignored), label smoothing as configured."""
    return nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]),
        labels.to(logits.device).reshape(-1),
        ignore_index=-100,
        label_smoothing=label_smoothing,
    )


def symmetric_kl(logits_a: torch.Tensor, logits_b: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """½ (KL(P_a‖P_b) + KL(P_b‖P_a)) per token, averaged over the tokens where `token_mask` is true."""
    log_a = nn.functional.log_softmax(logits_a.float(), dim=-1)
    log_b = nn.functional.log_softmax(logits_b.float(), dim=-1)
    kl_ab = (log_a.exp() * (log_a - log_b)).sum(-1)
    kl_ba = (log_b.exp() * (log_b - log_a)).sum(-1)
    per_token = 0.5 * (kl_ab + kl_ba)
    mask = token_mask.to(per_token.dtype)
    return (per_token * mask).sum() / mask.sum().clamp(min=1.0)


def mask_source_tokens(
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    ratios: torch.Tensor,
    unk_token_id: int,
    special_ids: list[int],
    generator: torch.Generator | None = None,
    at_least_one: bool = False,
) -> torch.Tensor:
    """Replace round(ratio · n) randomly chosen real tokens of each row with <unk> (n = real non-special tokens)."""
    masked = input_ids.clone()
    maskable = attention_mask.bool() & ~torch.isin(
        input_ids, torch.tensor(special_ids, device=input_ids.device)
    )
    scores = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    scores = scores.masked_fill(~maskable, 2.0)  # never chosen
    counts = maskable.sum(dim=1)
    take = torch.round(ratios.to(scores.device) * counts).long()
    if at_least_one:
        take = torch.maximum(take, (counts > 0).long())
    order = scores.argsort(dim=1)
    ranks = order.argsort(dim=1)
    chosen = (ranks < take.unsqueeze(1)) & maskable
    return masked.masked_fill(chosen, unk_token_id)


def sentence_representation(hidden_states: torch.Tensor, token_mask: torch.Tensor) -> torch.Tensor:
    """G(X, Y): the mean of the top decoder hidden states over the non-pad target tokens, summed in fp32 (under
    bf16 / fp16 autocast the states are low precision; a long sum of them in that precision loses digits)."""
    states = hidden_states.float()
    mask = token_mask.to(device=states.device, dtype=states.dtype).unsqueeze(-1)
    return (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)


def ald_contrastive_loss(
    anchor: torch.Tensor, positive: torch.Tensor, negative: torch.Tensor, temperature: float
) -> torch.Tensor:
    """Mean over sentences of −log(e^{cos(G,G⁺)/τ} / (e^{cos(G,G⁺)/τ} + e^{cos(G,G⁻)/τ}))."""
    pos = nn.functional.cosine_similarity(anchor.float(), positive.float(), dim=-1) / temperature
    neg = nn.functional.cosine_similarity(anchor.float(), negative.float(), dim=-1) / temperature
    return -(pos - torch.logsumexp(torch.stack([pos, neg], dim=-1), dim=-1)).mean()


def collapse_reducing_loss(
    model: Any,
    nll: torch.Tensor,
    logits: torch.Tensor,
    outputs: Seq2SeqModelOutput,
    labels: torch.Tensor,
    input_ids: torch.Tensor | None,
    attention_mask: torch.Tensor | None,
    decoder_input_ids: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """CE (mean of the passes) + w_DDR · DDR + w_ALD · ALD for one training batch of `model` (a
    ForConditionalGeneration model: its `model`, `lm_head` and `config`), whose forward gave `logits`, `outputs`
    (Seq2SeqModelOutput) and the cross-entropy `nll`. Up to three extra passes: a second decoder pass over the same
    encoder output (DDR), two over degraded sources (ALD). Returns (loss, {"nll_loss", "ddr_loss", "ald_loss"}: the
    components computed, nll_loss detached)."""
    config = model.config
    encoder_outputs = BaseModelOutput(last_hidden_state=outputs.encoder_last_hidden_state)
    target_tokens = labels.ne(-100)
    components: dict[str, torch.Tensor] = {}
    extra = logits.new_zeros((), dtype=torch.float32)
    if config.ddr_loss_weight > 0:  # a second decoder pass: other dropout and drop-net samples
        second = model.model(
            attention_mask=attention_mask,
            decoder_input_ids=decoder_input_ids,
            encoder_outputs=encoder_outputs,
            use_cache=False,
        )
        logits2 = model.lm_head(second.last_hidden_state)
        nll = 0.5 * (nll + token_cross_entropy(logits2, labels, config.label_smoothing))
        components["ddr_loss"] = symmetric_kl(logits, logits2, target_tokens)
        extra = extra + config.ddr_loss_weight * components["ddr_loss"]
    if config.ald_loss_weight > 0:
        if input_ids is None:
            raise ValueError("ald_loss_weight > 0 needs input_ids (ALD masks source tokens with <unk>)")
        mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
        special = [
            i for i in (config.eos_token_id, config.pad_token_id, config.bos_token_id) if i is not None
        ]
        special += [config.unk_token_id, config.decoder_start_token_id]
        ratios = torch.rand(input_ids.shape[0], device=input_ids.device) * config.ald_max_ratio
        degraded = []
        for fraction, at_least_one in ((ratios, False), (1.0 - ratios, True)):
            masked = mask_source_tokens(
                input_ids, mask, fraction, config.unk_token_id, special, None, at_least_one
            )
            states = model.model(
                masked, attention_mask=mask, decoder_input_ids=decoder_input_ids, use_cache=False
            ).last_hidden_state
            degraded.append(sentence_representation(states, target_tokens))
        anchor = sentence_representation(outputs.last_hidden_state, target_tokens)
        components["ald_loss"] = ald_contrastive_loss(
            anchor, degraded[0], degraded[1], config.ald_temperature
        )
        extra = extra + config.ald_loss_weight * components["ald_loss"]
    components["nll_loss"] = nll.detach()
    return nll + extra, components
