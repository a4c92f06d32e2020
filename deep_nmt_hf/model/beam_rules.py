"""Two toolkits' beam-search rules where Transformers' differ: fairseq's (sequence_generator.py) and zero's
(bzhangGo/zero search.py, tensor2tensor's).

All three keep `beam` live hypotheses chosen from the best 2 · beam candidates of a step, and score a finished one
by the length penalty of model/length_penalty.py. They differ in two places:

* which finished hypotheses are kept: Transformers keeps the best `beam` of all that ended among the best `beam`
  candidates of a step; fairseq keeps the FIRST `beam` that ended (`finalize_hypos` adds one only while fewer than
  `beam` are final, in the candidates' order), so a short early hypothesis stays in the n-best list although longer
  ones found later score better; zero lets every ``<eos>`` among the 2 · beam candidates end (`curr_fin_flags`);
* when a sentence is done: fairseq once `beam` hypotheses are final (`is_finished`; Transformers'
  ``early_stopping=True``); zero once the worst of its finished hypotheses (however few: `_not_finished`,
  ``reduce_min(finish_scores * finish_flags)``) beats the best live one at its best possible score, its log-prob
  over the penalty at the sentence's length limit (``max_length_penality``), and, at that limit, a hypothesis cut
  without ``<eos>`` counts only where none has ended (search.py decoding a sentence alone); Transformers'
  ``early_stopping="never"`` waits for `beam` finished hypotheses first.

``beam_search_rule`` in the generation config ("transformers" when absent, "fairseq" or "zero"; saved in
generation_config.json) picks the rules; the model's own `generate` (`BeamRulesMixin`) applies them, so every door
(``model.generate``, ``pipeline("translation")``, ``deep-nmt translate``, a ``trust_remote_code`` load) decodes
alike. The length limit is the per-sentence one of model/length_limit.py (zero's cuts without ``<eos>``). Transformers
offers no public hook for either rule, so the mixin overrides, as a subclass, two beam-search methods (named by
tests/model/test_transformers_surfaces.py): `_update_finished_beams` gets the candidates each rule lets end, and
`_check_early_stop_heuristic` is zero's bound.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import torch
from transformers import GenerationConfig

from .length_limit import sentence_max_lengths
from .length_penalty import generation_choice, gnmt_penalty, length_penalty_form

BEAM_SEARCH_RULES = ("transformers", "fairseq", "zero")

# the rule, length-penalty form, α and </s> ids of the beam search running in this thread / task (None: Transformers')
_RULE: ContextVar[tuple[str, str, float, torch.Tensor] | None] = ContextVar(
    "deep_nmt_beam_rule", default=None
)


def beam_search_rule(generation_config: GenerationConfig) -> str:
    """The rule a generation config asks for ("transformers" when it has none); an unknown one raises."""
    return generation_choice(generation_config, "beam_search_rule", BEAM_SEARCH_RULES)


class BeamRulesMixin:
    """Beam search by fairseq's or zero's rules where the call's generation config names them
    (``beam_search_rule``); put it before `GNMTLengthPenaltyMixin` and `GenerationMixin` among the model's bases."""

    def _beam_search(
        self,
        input_ids: torch.LongTensor,
        logits_processor: Any,
        stopping_criteria: Any,
        generation_config: GenerationConfig,
        synced_gpus: bool = False,
        **model_kwargs: Any,
    ) -> Any:
        rule = beam_search_rule(generation_config)
        eos = generation_config.eos_token_id
        eos = torch.tensor([eos] if isinstance(eos, int) else list(eos or []), dtype=torch.long)
        state = (rule, length_penalty_form(generation_config), float(generation_config.length_penalty), eos)
        token = _RULE.set(state if rule != "transformers" else None)
        try:
            return super()._beam_search(
                input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus, **model_kwargs
            )
        finally:
            _RULE.reset(token)

    def _update_finished_beams(self, **kwargs: Any) -> Any:
        rule = _RULE.get()
        if rule is not None and rule[0] == "fairseq":  # the first candidates to end fill the free places only
            hits = kwargs["next_token_hits_stopping_criteria"]
            ending = hits & kwargs["top_num_beam_mask"].to(hits.device)[None, :]
            free = kwargs["num_beams"] - kwargs["is_sent_finished"].sum(-1, keepdim=True)
            kwargs["next_token_hits_stopping_criteria"] = hits & ~(ending & (ending.long().cumsum(-1) > free))
        elif rule is not None:  # zero: every <eos> among the 2 · beam candidates may end
            kwargs["top_num_beam_mask"] = torch.ones_like(kwargs["top_num_beam_mask"])
            lengths = sentence_max_lengths()
            if lengths is not None:  # at the limit, the cut hypotheses count only where none has ended
                hits = kwargs["next_token_hits_stopping_criteria"]
                generated = kwargs["cur_len"] + 1 - kwargs["decoder_prompt_len"]
                at_limit = generated >= lengths.to(hits.device)[:, None]
                tokens = kwargs["topk_running_sequences"][:, :, kwargs["cur_len"]]
                is_eos = torch.isin(tokens, rule[3].to(tokens.device))
                ended = kwargs["is_sent_finished"].any(-1, keepdim=True) | (hits & is_eos).any(
                    -1, keepdim=True
                )
                kwargs["next_token_hits_stopping_criteria"] = hits & (is_eos | ~(at_limit & ended))
        return super()._update_finished_beams(**kwargs)

    def _check_early_stop_heuristic(self, **kwargs: Any) -> Any:
        rule = _RULE.get()
        if rule is None or rule[0] != "zero":
            return super()._check_early_stop_heuristic(**kwargs)
        _, form, alpha, _ = rule
        running = kwargs["running_beam_scores"][:, :1]
        limit = torch.full_like(running, kwargs["max_length"] - kwargs["decoder_prompt_len"])
        lengths = sentence_max_lengths()
        if lengths is not None:
            limit = torch.minimum(limit, lengths.to(running.device, running.dtype)[:, None])
        penalty = gnmt_penalty(limit, alpha) if form == "gnmt" else limit**alpha
        best_alive = running / penalty
        finished = kwargs["is_sent_finished"]
        scores = kwargs["beam_scores"]
        worst_finished = torch.where(finished, scores, torch.full_like(scores, float("inf"))).min(
            -1, keepdim=True
        )[0]
        bound_is_met = finished.any(-1, keepdim=True) & (worst_finished > best_alive)
        limit_is_met = kwargs["cur_len"] - kwargs["decoder_prompt_len"] >= limit
        return kwargs["is_early_stop_heuristic_unsatisfied"] & ~bound_is_met & ~limit_is_met


__all__ = ["BEAM_SEARCH_RULES", "BeamRulesMixin", "beam_search_rule"]
