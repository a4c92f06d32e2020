"""fairseq's / zero's beam search for a folded stock model: Transformers' ``custom_generate`` door.

`deep-nmt fold` writes this file as ``custom_generate/generate.py`` into the folded folder of a model whose
generation config asks for a search the stock classes do not run (``beam_search_rule`` "fairseq" or "zero",
model/beam_rules.py; a per-sentence ``max_len_a`` / ``max_len_b``, model/length_limit.py), with the modules it
imports beside it. ``from_pretrained(FOLDER, trust_remote_code=True)`` then replaces the loaded model's `generate`
by `generate` below (Transformers' `load_custom_generate`); a plain load runs no code and searches by Transformers'
rules. The search is the converted model's own: `generate` gives the loaded model's class the same mixins that
`DeepNMTForConditionalGeneration` has (one implementation of each rule), so ``model.generate`` and
``pipeline("translation")`` give the toolkit's n-best lists.
"""

from __future__ import annotations

from typing import Any

from .beam_rules import BeamRulesMixin
from .length_limit import SourceLengthLimitMixin
from .length_penalty import GNMTLengthPenaltyMixin

# each stock class and its subclass that searches by the generation config's rules
_RULED: dict[type, type] = {}


def with_search_rules(model: Any) -> Any:
    """`model` (changed in place) as an instance of a subclass of its class, of the same name, whose `generate`
    applies the generation config's length limit and beam-search rules; a model that has them already is kept."""
    cls = type(model)
    if not issubclass(cls, BeamRulesMixin):
        if cls not in _RULED:
            bases = (SourceLengthLimitMixin, BeamRulesMixin, GNMTLengthPenaltyMixin, cls)
            _RULED[cls] = type(cls.__name__, bases, {"__module__": cls.__module__, "__doc__": cls.__doc__})
        model.__class__ = _RULED[cls]
    return model


def generate(*args: Any, model: Any, **kwargs: Any) -> Any:
    """``model.generate(*args, **kwargs)`` by the search rules of the call's generation config (Transformers
    passes the model as the keyword `model`)."""
    ruled = with_search_rules(model)
    return type(ruled).generate(ruled, *args, **kwargs)


__all__ = ["generate", "with_search_rules"]
