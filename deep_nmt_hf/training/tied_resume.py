"""Resuming from a checkpoint that holds a tied embedding once: `TiedWeightsResume`.

A checkpoint holds the shared embedding once (`save_pretrained` drops the stacks' `embed_tokens` and a tied
`lm_head.weight`); loading it back is complete, not a "missing keys" case: the trainer ties and does not warn.
Overrides the Trainer's private `_issue_warnings_after_load` (named in tests/model/test_transformers_surfaces.py).
"""

from __future__ import annotations

from typing import Any

from transformers import Trainer


class TiedWeightsResume(Trainer):
    """No "missing keys" warning for the tied aliases of a resumed checkpoint; the ties restored."""

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        tied = getattr(self.model, "all_tied_weights_keys", None) or {}
        missing = [key for key in load_result.missing_keys if key not in tied]
        if len(missing) < len(load_result.missing_keys):
            self.model.tie_weights()
        super()._issue_warnings_after_load(load_result._replace(missing_keys=missing))
