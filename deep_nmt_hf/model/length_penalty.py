"""Length penalties for beam search: Transformers' / fairseq's ``len^α`` and GNMT's ``((5 + len) / 6)^α``.

A finished hypothesis of `len` generated tokens (EOS included, the decoder start token not) with summed log-prob
`s` is ranked by

    "fairseq" (Transformers' `length_penalty`, fairseq's ``--lenpen``, Marian's ``--normalize``):  s / len^α
    "gnmt"    (Wu et al. 2016, eq. 14; tensor2tensor and the DS-Init authors' toolkit):         s / ((5 + len) / 6)^α

The two are different functions of len, so no value of Transformers' `length_penalty` reproduces GNMT's ranking
for every pair of lengths; "α = 0.6" in a fairseq paper (prenorm-dlcl, recurrent-shared-layers) *is* Transformers'
`length_penalty=0.6` (same length count), whereas in a tensor2tensor-style paper (dsinit-merged-attention; Vaswani
et al. as deep-decoder-cad-crt follows them) it is GNMT's.

The form is a field of the generation config, ``length_penalty_form`` ("fairseq" when absent; saved in
generation_config.json), and α is its ``length_penalty``. This module ships inside every checkpoint, and the
model's own `generate` applies the form (`GNMTLengthPenaltyMixin`): ``model.generate``,
``pipeline("translation")``, ``deep-nmt translate`` and a ``trust_remote_code`` load without the package all
decode alike. Transformers offers no public hook for the length normalisation of beam search, so the mixin
overrides, as a subclass, the three beam-search methods that carry it (named by
tests/model/test_transformers_surfaces.py): `_beam_search` notes the call's form, and `_update_finished_beams` (finishing a
hypothesis) and `_check_early_stop_heuristic` (the early-stop bound) get scores already divided by GNMT's penalty
with Transformers' α = 0, so everything else (caches, logits processors, stopping, outputs) is Transformers' own.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Any

import torch
from transformers import GenerationConfig

from .length_limit import sentence_max_lengths
from .registry import LENGTH_PENALTY_FORMS

# α of GNMT's penalty for the beam search running in this thread / task; None: Transformers' len^α
_GNMT_ALPHA: ContextVar[float | None] = ContextVar("deep_nmt_gnmt_alpha", default=None)


def gnmt_penalty(length: int | float, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def generation_choice(generation_config: GenerationConfig, name: str, valid: tuple[str, ...]) -> str:
    """A choice field of ours in a generation config (`valid[0]` when it has none); an unknown value raises
    `ValueError` naming the field and the valid values."""
    value = getattr(generation_config, name, None) or valid[0]
    if value not in valid:
        raise ValueError(f"generation_config.{name}={value!r}; valid: {', '.join(valid)}")
    return value


def length_penalty_form(generation_config: GenerationConfig) -> str:
    """The form a generation config asks for ("fairseq" when it has none); an unknown one raises `ValueError`."""
    return generation_choice(generation_config, "length_penalty_form", LENGTH_PENALTY_FORMS)


class GNMTLengthPenaltyMixin:
    """Beam search ranks finished hypotheses by GNMT's penalty where the call's generation config says
    ``length_penalty_form="gnmt"``; put it before `GenerationMixin` among the model's bases."""

    def _beam_search(
        self,
        input_ids: torch.LongTensor,
        logits_processor: Any,
        stopping_criteria: Any,
        generation_config: GenerationConfig,
        synced_gpus: bool = False,
        **model_kwargs: Any,
    ) -> Any:
        gnmt = length_penalty_form(generation_config) == "gnmt"
        token = _GNMT_ALPHA.set(float(generation_config.length_penalty) if gnmt else None)
        try:
            return super()._beam_search(
                input_ids, logits_processor, stopping_criteria, generation_config, synced_gpus, **model_kwargs
            )
        finally:
            _GNMT_ALPHA.reset(token)

    def _update_finished_beams(self, **kwargs: Any) -> Any:
        alpha = _GNMT_ALPHA.get()
        if alpha is not None:  # a hypothesis finishing now holds cur_len + 1 - prompt tokens
            generated = kwargs["cur_len"] + 1 - kwargs["decoder_prompt_len"]
            kwargs["topk_log_probs"] = kwargs["topk_log_probs"] / gnmt_penalty(generated, alpha)
            kwargs["length_penalty"] = 0.0
        return super()._update_finished_beams(**kwargs)

    def _check_early_stop_heuristic(self, **kwargs: Any) -> Any:
        alpha = _GNMT_ALPHA.get()
        lengths = sentence_max_lengths()  # model/length_limit.py: each sentence's own limit, </s> included
        never = kwargs["early_stopping"] == "never"
        exponent = alpha if alpha is not None else float(kwargs["length_penalty"])
        if never and exponent > 0.0 and lengths is not None:  # the longest a sentence's live beam may grow
            best = lengths.to(kwargs["running_beam_scores"].device)[:, None].clamp(
                max=kwargs["max_length"] - kwargs["decoder_prompt_len"]
            )
            penalty = gnmt_penalty(best.double(), alpha) if alpha is not None else best.double() ** exponent
            kwargs["running_beam_scores"] = kwargs["running_beam_scores"] / penalty.to(torch.float32)
            kwargs["length_penalty"] = 0.0
        elif alpha is not None:  # the best length a running beam may still reach, as Transformers bounds it
            if never and alpha > 0.0:
                best_length = kwargs["max_length"] - kwargs["decoder_prompt_len"]
            else:
                best_length = kwargs["cur_len"] - kwargs["decoder_prompt_len"]
            kwargs["running_beam_scores"] = kwargs["running_beam_scores"] / gnmt_penalty(best_length, alpha)
            kwargs["length_penalty"] = 0.0
        return super()._check_early_stop_heuristic(**kwargs)


__all__ = ["LENGTH_PENALTY_FORMS", "GNMTLengthPenaltyMixin", "gnmt_penalty", "length_penalty_form"]
