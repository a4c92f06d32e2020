"""A per-sentence length limit: ``max_len_a · source length + max_len_b`` tokens.

fairseq-generate's ``--max-len-a`` / ``--max-len-b`` (fairseq/sequence_generator.py, `_generate`): a hypothesis
may hold ``int(a · n + b)`` tokens, and at that step every token but ``</s>`` is banned, so it ends there with
``</s>`` (its log-prob kept). `n` counts the source's tokens with its ``</s>`` and without padding; fairseq takes
the padded width of the batch, so its limit is per batch, whereas here it is each sentence's own: a sentence
translates the same alone and in any batch. zero's search.py (``beam_search_rule="zero"``, model/beam_rules.py)
instead cuts a hypothesis at source length + `decode_length` tokens, ``<eos>`` included and without forcing one:
a converted zero model says ``max_len_a=1, max_len_b=decode_length``.

The limit is two fields of the generation config, ``max_len_a`` and ``max_len_b`` (absent: no limit; saved in
generation_config.json). This module ships inside every checkpoint, and the model's own `generate`
(`SourceLengthLimitMixin`) adds the `SourceLengthLimitLogitsProcessor` (or, for zero's rule, the
`SourceLengthStoppingCriteria`: Transformers' public machinery) and, unless the call or its generation config bounds
the length itself (`max_length` / `max_new_tokens`, then a cap over every limit), raises `max_length` to the
longest sentence's limit. So ``model.generate``, ``pipeline("translation")``, ``deep-nmt translate`` / ``evaluate``
and a ``trust_remote_code`` load all apply it, and so does a folded stock copy loaded with ``trust_remote_code=True``
(custom_generate.py); for any other model, pass the processor yourself, as ``deep-nmt translate`` does. With ``early_stopping="never"`` beam search bounds what a live beam can
still reach by each sentence's own limit (model/length_penalty.py reads `sentence_max_lengths`), not by the
batch's `max_length`.
"""

from __future__ import annotations

import copy
from contextvars import ContextVar
from typing import Any

import torch
from transformers import (
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    StoppingCriteria,
    StoppingCriteriaList,
)

from .positions import max_positions

# the generated length (</s> included) each sentence of the beam search running in this thread / task may reach
_SENTENCE_MAX_LENGTHS: ContextVar[torch.Tensor | None] = ContextVar(
    "deep_nmt_sentence_max_lengths", default=None
)


def sentence_max_lengths() -> torch.Tensor | None:
    """(batch,) the most tokens (``</s>`` included) each sentence of the running `generate` may generate; None
    where the call has no per-sentence limit."""
    return _SENTENCE_MAX_LENGTHS.get()


def length_limit_of(generation_config: GenerationConfig) -> tuple[float, int] | None:
    """``(max_len_a, max_len_b)`` of a generation config, None where it sets neither (a missing one is 0)."""
    a = getattr(generation_config, "max_len_a", None)
    b = getattr(generation_config, "max_len_b", None)
    if a is None and b is None:
        return None
    a, b = float(a or 0.0), int(b or 0)
    if a < 0 or b < 0:
        raise ValueError(f"generation_config.max_len_a={a}, max_len_b={b}; valid: both >= 0")
    return a, b


def source_length_limits(
    source_lengths: torch.Tensor, max_len_a: float, max_len_b: int, cap: int | None = None
) -> torch.Tensor:
    """Tokens each sentence may generate before its forced ``</s>``: ``int(a · n + b)`` as fairseq computes it,
    at most `cap` (the model's positions)."""
    limits = (max_len_a * source_lengths.double() + max_len_b).floor().long()
    return limits.clamp(max=cap) if cap is not None else limits


class SourceLengthLimitLogitsProcessor(LogitsProcessor):
    """Bans every token but ``</s>`` in a sentence's hypotheses once they hold `limits[i]` generated tokens
    (fairseq's forced end: ``</s>`` keeps its log-prob). Rows are the batch's sentences, each repeated for its
    beams / returned sequences, as Transformers lays them out."""

    def __init__(self, limits: torch.Tensor, eos_token_id: int | list[int]) -> None:
        self.limits = limits.long()
        eos = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
        self.eos = torch.tensor(eos, dtype=torch.long)
        self.prompt_length: int | None = None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if self.prompt_length is None:  # the decoder prompt (the start token) is not generated
            self.prompt_length = input_ids.shape[-1]
        generated = input_ids.shape[-1] - self.prompt_length
        limits = self.limits.to(scores.device)
        if scores.shape[0] % limits.shape[0]:
            raise ValueError(f"{scores.shape[0]} rows of scores for {limits.shape[0]} sentences")
        reached = (limits >= 0) & (generated >= limits)
        reached = reached.repeat_interleave(scores.shape[0] // limits.shape[0])
        if not bool(reached.any()):
            return scores
        keep = torch.zeros(scores.shape[-1], dtype=torch.bool, device=scores.device)
        keep[self.eos.to(scores.device)] = True
        return scores.masked_fill(reached[:, None] & ~keep[None, :], float("-inf"))


class SourceLengthStoppingCriteria(StoppingCriteria):
    """Ends a sentence's hypotheses, without ``</s>``, once they hold `limits[i]` generated tokens (zero's
    `max_target_length`, where ``beam_search_rule="zero"``: model/beam_rules.py). Rows as in
    `SourceLengthLimitLogitsProcessor`."""

    def __init__(self, limits: torch.Tensor) -> None:
        self.limits = limits.long()
        self.prompt_length: int | None = None

    def __call__(
        self, input_ids: torch.LongTensor, scores: torch.FloatTensor | None, **kwargs: Any
    ) -> torch.BoolTensor:
        if self.prompt_length is None:  # first called with one generated token
            self.prompt_length = input_ids.shape[-1] - 1
        limits = self.limits.to(input_ids.device)
        reached = (input_ids.shape[-1] - self.prompt_length) >= limits
        return reached.repeat_interleave(input_ids.shape[0] // limits.shape[0])


def source_lengths_of(
    input_ids: torch.Tensor, attention_mask: torch.Tensor | None, pad_token_id: int | None
) -> torch.Tensor:
    """Each source's length without padding (its ``</s>`` included)."""
    if attention_mask is not None:
        return attention_mask.long().sum(-1)
    if pad_token_id is None:
        return torch.full(
            (input_ids.shape[0],), input_ids.shape[-1], dtype=torch.long, device=input_ids.device
        )
    return input_ids.ne(pad_token_id).long().sum(-1)


def _bounded(config: GenerationConfig, kwargs: dict[str, Any]) -> bool:
    """Whether the call bounds its length itself: `max_length` / `max_new_tokens` passed, or set in its generation
    config (other than Transformers' default of 20), stays a cap over every sentence's limit."""
    if kwargs.get("max_length") is not None or kwargs.get("max_new_tokens") is not None:
        return True
    return config.max_new_tokens is not None or config.max_length != GenerationConfig().max_length


class SourceLengthLimitMixin:
    """`generate` applies the generation config's per-sentence limit; put it before `GenerationMixin` among the
    model's bases."""

    def generate(
        self,
        inputs: torch.Tensor | None = None,
        generation_config: GenerationConfig | None = None,
        logits_processor: LogitsProcessorList | None = None,
        stopping_criteria: StoppingCriteriaList | None = None,
        **kwargs: Any,
    ) -> Any:
        config = generation_config if generation_config is not None else self.generation_config
        if "max_len_a" in kwargs or "max_len_b" in kwargs:  # the call's own limit (None, None: none)
            config = copy.deepcopy(config)
            config.max_len_a = kwargs.pop("max_len_a", getattr(config, "max_len_a", None))
            config.max_len_b = kwargs.pop("max_len_b", getattr(config, "max_len_b", None))
        ids = inputs if inputs is not None else kwargs.get("input_ids")
        if ids is None:  # encoder outputs given: the attention mask still gives the sources' lengths
            ids = kwargs.get("attention_mask")
        given = [p for p in logits_processor or [] if isinstance(p, SourceLengthLimitLogitsProcessor)]
        limits = given[0].limits + 1 if given else None  # the generated length </s> included
        if limits is None and ids is not None and length_limit_of(config) is not None:
            cap = (
                max_positions(self.config, "decoder")
                if hasattr(self.config, "max_position_embeddings")
                else None
            )
            lengths = source_lengths_of(ids, kwargs.get("attention_mask"), config.pad_token_id)
            limits = source_length_limits(lengths, *length_limit_of(config), cap=cap and cap - 1)
            if getattr(config, "beam_search_rule", None) == "zero":  # cut there (beam_rules.py)
                limits = limits.clamp(min=1)
                criteria = SourceLengthStoppingCriteria(limits)
                stopping_criteria = StoppingCriteriaList([*(stopping_criteria or []), criteria])
            else:  # </s> forced after the limit
                if config.eos_token_id is None:
                    raise ValueError("generation_config.max_len_a / max_len_b need an eos_token_id")
                processor = SourceLengthLimitLogitsProcessor(limits, config.eos_token_id)
                logits_processor = LogitsProcessorList([*(logits_processor or []), processor])
                limits = limits + 1
        if limits is None:
            return super().generate(inputs, generation_config, logits_processor, stopping_criteria, **kwargs)
        if not _bounded(config, kwargs):  # the longest sentence's limit fits
            kwargs["max_length"] = int(limits.max()) + 1
        token = _SENTENCE_MAX_LENGTHS.set(limits)
        try:
            return super().generate(inputs, generation_config, logits_processor, stopping_criteria, **kwargs)
        finally:
            _SENTENCE_MAX_LENGTHS.reset(token)


__all__ = [
    "SourceLengthLimitLogitsProcessor",
    "SourceLengthLimitMixin",
    "SourceLengthStoppingCriteria",
    "length_limit_of",
    "sentence_max_lengths",
    "source_length_limits",
    "source_lengths_of",
]
