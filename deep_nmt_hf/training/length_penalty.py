"""Length penalties for beam search: Transformers' / fairseq's ``len^α`` and GNMT's ``((5 + len) / 6)^α``.

A finished hypothesis of `len` generated tokens (EOS included, the decoder start token not) with summed log-prob
`s` is ranked by

    "fairseq" (Transformers' `length_penalty`, fairseq's ``--lenpen``, Marian's ``--normalize``):  s / len^α
    "gnmt"    (Wu et al. 2016, eq. 14; tensor2tensor and the DS-Init authors' toolkit):         s / ((5 + len) / 6)^α

The two are different functions of len, so no value of Transformers' `length_penalty` reproduces GNMT's ranking
for every pair of lengths; "α = 0.6" in a fairseq paper (prenorm-dlcl, recurrent-shared-layers) *is* Transformers'
`length_penalty=0.6` (same length count), whereas in a tensor2tensor-style paper (dsinit-merged-attention; Vaswani
et al. as deep-decoder-cad-crt follows them) it is GNMT's.

GNMT is implemented with the hook Transformers offers for replacing the decoding loop, ``generate(...,
custom_generate=gnmt_beam_search)`` (a callable: `generate` prepares the inputs, then calls it in place of its
beam search). `gnmt_beam_search` runs Transformers' own beam search and changes only the two places that divide
by ``len^α`` (finishing a hypothesis and the early-stop bound): it hands them scores already divided by GNMT's
penalty with α = 0 there, so everything else (caches, logits processors, stopping, outputs) is untouched.
``generation_config.length_penalty`` is α; ``generation_config.length_penalty_form = "gnmt"`` (saved in
generation_config.json) makes `generation_kwargs` / `deep_nmt_hf.training.translate` pass the hook.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import GenerationConfig, GenerationMixin

LENGTH_PENALTY_FORMS = ("fairseq", "gnmt")


def gnmt_penalty(length: int | float, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α (Wu et al. 2016, eq. 14)."""
    return ((5.0 + length) / 6.0) ** alpha


def gnmt_beam_search(
    model: Any,
    input_ids: torch.LongTensor,
    logits_processor: Any,
    stopping_criteria: Any,
    generation_config: GenerationConfig,
    synced_gpus: bool = False,
    **model_kwargs: Any,
) -> Any:
    """Transformers' beam search with GNMT's length penalty (α = `generation_config.length_penalty`).

    Pass as ``model.generate(..., num_beams=k, length_penalty=α, custom_generate=gnmt_beam_search)``."""
    alpha = float(generation_config.length_penalty)
    update_original = model._update_finished_beams  # bound (or static) originals, looked up before patching
    early_stop_original = model._check_early_stop_heuristic

    def update_finished_beams(**kwargs: Any) -> Any:
        generated = kwargs["cur_len"] + 1 - kwargs["decoder_prompt_len"]
        kwargs["topk_log_probs"] = kwargs["topk_log_probs"] / gnmt_penalty(generated, alpha)
        kwargs["length_penalty"] = 0.0
        return update_original(**kwargs)

    def check_early_stop_heuristic(**kwargs: Any) -> Any:
        if kwargs["early_stopping"] == "never" and alpha > 0.0:
            best_length = kwargs["max_length"] - kwargs["decoder_prompt_len"]
        else:
            best_length = kwargs["cur_len"] - kwargs["decoder_prompt_len"]
        kwargs["running_beam_scores"] = kwargs["running_beam_scores"] / gnmt_penalty(best_length, alpha)
        kwargs["length_penalty"] = 0.0
        return early_stop_original(**kwargs)

    # instance attributes shadow the class's methods for this call only
    model.__dict__["_update_finished_beams"] = update_finished_beams
    model.__dict__["_check_early_stop_heuristic"] = check_early_stop_heuristic
    try:
        return GenerationMixin._beam_search(
            model,
            input_ids,
            logits_processor,
            stopping_criteria,
            generation_config,
            synced_gpus,
            **model_kwargs,
        )
    finally:
        model.__dict__.pop("_update_finished_beams", None)
        model.__dict__.pop("_check_early_stop_heuristic", None)


def set_length_penalty(generation_config: GenerationConfig, alpha: float, form: str = "fairseq") -> None:
    """Record α and its form on a generation config (saved in generation_config.json)."""
    if form not in LENGTH_PENALTY_FORMS:
        raise ValueError(f"length_penalty_form={form!r}; valid: {', '.join(LENGTH_PENALTY_FORMS)}")
    generation_config.length_penalty = float(alpha)
    generation_config.length_penalty_form = form


def generation_kwargs(generation_config: GenerationConfig) -> dict[str, Any]:
    """Extra `generate` kwargs a saved generation config asks for: the GNMT hook when ``length_penalty_form ==
    "gnmt"``, nothing otherwise. Pass them for beam search only (num_beams > 1): the hook is a beam search."""
    form = getattr(generation_config, "length_penalty_form", "fairseq") or "fairseq"
    if form not in LENGTH_PENALTY_FORMS:
        raise ValueError(
            f"generation_config.length_penalty_form={form!r}; valid: {', '.join(LENGTH_PENALTY_FORMS)}"
        )
    if form == "gnmt":
        return {"custom_generate": gnmt_beam_search}
    return {}
