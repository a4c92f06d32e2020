"""Recording a recipe's length penalty on the generation config a trained model saves.

The forms and their beam search live in `deep_nmt_hf/model/length_penalty.py`, which ships inside every
checkpoint: the model's own `generate` applies ``generation_config.length_penalty_form`` (GNMT's
``((5 + len) / 6)^α`` or Transformers' ``len^α``), so nothing here is needed to decode.
"""

from __future__ import annotations

from transformers import GenerationConfig

from ..model.length_penalty import LENGTH_PENALTY_FORMS


def set_length_penalty(generation_config: GenerationConfig, alpha: float, form: str = "fairseq") -> None:
    """Record α and its form on a generation config (saved in generation_config.json)."""
    if form not in LENGTH_PENALTY_FORMS:
        raise ValueError(f"length_penalty_form={form!r}; valid: {', '.join(LENGTH_PENALTY_FORMS)}")
    generation_config.length_penalty = float(alpha)
    generation_config.length_penalty_form = form


__all__ = ["LENGTH_PENALTY_FORMS", "set_length_penalty"]
