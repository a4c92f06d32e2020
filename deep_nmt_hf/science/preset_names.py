"""The names of the paper presets (`deep-nmt train --preset NAME`), importable without torch: plain data.

`science/paper_presets.py` holds each preset's setting, in this order; `cli/names.py` re-exports the names for
`deep-nmt --help`, which answers before the package (torch, transformers) is imported. They are names of the
command line and its recipes, not of a model, so checkpoints do not ship them (model/registry.py holds what a
model needs: variants, shape presets, choices). A paper preset and a variant's shape never share a name
(tests/model/test_registry.py): `train --preset NAME` tries the paper presets first.
"""

from __future__ import annotations

# each paper's headline setting (`deep_nmt_hf.science.paper_presets.PRESETS`, same order)
PAPER_PRESET_NAMES: tuple[str, ...] = (
    "admin-60-12-wmt14-en-fr",
    "admin-60-12-wmt14-en-de",
    "dsinit-matt-12-12-wmt14-en-de",
    "dsinit-matt-20-20-wmt14-en-de",
    "dlcl-30-6-wmt16-en-de",
    "shared-layers-t4-enc20-dec4-wmt16-en-de",
    "deep-decoder-27-27-wmt14-en-de",
)

__all__ = ["PAPER_PRESET_NAMES"]
