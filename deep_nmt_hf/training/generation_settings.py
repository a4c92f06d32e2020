"""Generation settings of a *trained* translation model, saved as its `generation_config.json`.

A freshly built model generates as every Transformers model does (greedy, Transformers' length defaults; see
`modeling_deep_nmt.default_generation_config`). A model that training produces is a translation model and saves
the search it was evaluated with, as opus-mt checkpoints do: beam search, a length penalty, a length limit, a
forced end-of-sentence at that limit and a ban on emitting the pad token (which is also the decoder start token).
Training and the benches call `translation_generation_config`; a recipe passes its own beam / length-penalty values.

Saved checkpoints do not need this module (their generation_config.json holds the values); it imports only
transformers, so the Hub-shipped modelling code could use it too.
"""

from __future__ import annotations

from typing import Any

from transformers import GenerationConfig, PretrainedConfig


def translation_generation_config(
    model_config: PretrainedConfig,
    *,
    num_beams: int = 4,
    max_length: int | None = None,
    length_penalty: float = 1.0,
    early_stopping: bool | str = False,
    **overrides: Any,
) -> GenerationConfig:
    """The beam-search settings a trained model saves: beam `num_beams`, `length_penalty` (Wu et al. 2016 form,
    as Transformers applies it), `max_length` (counting the decoder start token; None gives
    min(256, max_position_embeddings)), stop at eos, force eos at the length limit, never emit pad.

    `overrides` are further `GenerationConfig` fields (e.g. `no_repeat_ngram_size=3`). Invalid values raise the
    `ValueError` that `GenerationConfig.validate` raises, naming the field.

    As with opus-mt checkpoints, a saved `max_length` makes Transformers warn when a caller also passes
    `max_new_tokens` (the call's value wins); pass `max_length=` in the call to bound the output silently.
    """
    if isinstance(num_beams, bool) or not isinstance(num_beams, int) or num_beams < 1:
        raise ValueError(f"num_beams={num_beams!r} must be a positive integer")
    positions = getattr(model_config, "max_position_embeddings", None) or 256
    if max_length is None:
        max_length = min(256, positions)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or not 2 <= max_length <= positions:
        raise ValueError(
            f"max_length={max_length!r} must be an integer in [2, max_position_embeddings={positions}] "
            "(it counts the decoder start token)"
        )
    pad, eos = model_config.pad_token_id, model_config.eos_token_id
    generation = GenerationConfig(
        num_beams=num_beams,
        max_length=max_length,
        length_penalty=float(length_penalty),
        early_stopping=early_stopping,
        decoder_start_token_id=getattr(model_config, "decoder_start_token_id", pad),
        pad_token_id=pad,
        eos_token_id=eos,
        bos_token_id=getattr(model_config, "bos_token_id", None),
        forced_eos_token_id=eos,
        bad_words_ids=[[pad]] if pad is not None else None,  # never emit pad, as Marian checkpoints do
        **overrides,
    )
    generation.validate(strict=True)
    return generation


__all__ = ["translation_generation_config"]
