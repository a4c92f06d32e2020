"""The Transformers names that moved inside the release range we support (see README, "Install").

Transformers 5.24 renamed the decoder cache from `past_key_values` to `cache`: `generate` passes it to `forward` as
`cache=` and reads it back from the output's `cache` field; earlier 5.x releases pass and read `past_key_values`.
Our model classes do what Transformers' own models do: their `forward` takes `cache`, and Transformers'
`deprecate_kwarg` renames the old keyword to it. Outputs are Transformers' own output classes, built with the field
name the installed release declares (`CACHE_FIELD`).

`TrainingArguments`' checkpointing switch is `activation_checkpointing` in recent releases and
`gradient_checkpointing` (now a deprecated alias) in 5.10: `checkpointing_argument` names the installed one.

This module ships with saved checkpoints (`trust_remote_code`): it imports only transformers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transformers.modeling_outputs import Seq2SeqLMOutput
from transformers.utils.deprecation import deprecate_kwarg

# the field under which outputs carry the decoder cache, and the keyword `generate` passes it under
CACHE_FIELD: str = "cache" if "cache" in Seq2SeqLMOutput.__dataclass_fields__ else "past_key_values"
OLD_CACHE_NAME = "past_key_values"

# On a release that reads `cache`, `past_key_values` is deprecated as in Transformers' own models (a FutureWarning
# until 5.40). On an earlier release, `past_key_values` is what its `generate` passes: renamed without a notice
# (deprecate_kwarg stays silent once the installed release is at or past the version given).
_RENAME_OLD_CACHE_NAME = deprecate_kwarg(
    OLD_CACHE_NAME, "5.40.0" if CACHE_FIELD == "cache" else "5.0.0", new_name="cache"
)


def takes_cache(forward: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a `forward(..., cache=None, ...)` so that it also takes the cache as `past_key_values=`."""
    return _RENAME_OLD_CACHE_NAME(forward)


def cache_of(outputs: Any) -> Any:
    """The decoder cache an output carries, under the installed release's field name."""
    return getattr(outputs, CACHE_FIELD, None)


def with_cache(cache: Any) -> dict[str, Any]:
    """`{field: cache}` for building a Transformers output class on the installed release."""
    return {CACHE_FIELD: cache}


def checkpointing_argument() -> str:
    """The `TrainingArguments` field that turns on activation (gradient) checkpointing: `activation_checkpointing`
    in recent releases, `gradient_checkpointing` before (5.10), where the new name is unknown."""
    from transformers import TrainingArguments

    fields = TrainingArguments.__dataclass_fields__
    return "activation_checkpointing" if "activation_checkpointing" in fields else "gradient_checkpointing"


__all__ = ["CACHE_FIELD", "OLD_CACHE_NAME", "cache_of", "checkpointing_argument", "takes_cache", "with_cache"]
