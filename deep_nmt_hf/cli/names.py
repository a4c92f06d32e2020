"""The names the parser lists, importable without torch / transformers: read from `model/registry.py` (variants,
choices), `science/preset_names.py` (paper presets) and `training/precision.py` (precisions).

`deep-nmt --help` and argument errors must answer without importing the model code. The registry is plain data
(standard library only), `deep_nmt_hf/model/__init__.py` imports nothing, and the package's public names are lazy
(PEP 562), so importing this module stays light. A new variant or choice value goes into the registry only, a paper
preset's name into science/preset_names.py.
"""

from __future__ import annotations

from ..model.registry import CHOICES, MODEL_TYPE_NAMES, VARIANT_SPECS
from ..science.preset_names import PAPER_PRESET_NAMES
from ..training.precision import PRECISIONS  # `train --precision`

# short name for `--variant` -> model_type (`deep_nmt_hf.VARIANTS` maps the same names to config classes)
VARIANT_MODEL_TYPES: dict[str, str] = {name: spec.model_type for name, spec in VARIANT_SPECS.items()}

# config field -> the values `DeepNMTConfig.check` accepts (the registry's table itself)
CHOICE_VALUES: dict[str, tuple[str, ...]] = CHOICES


def variant_names() -> list[str]:
    """Every value `--variant` accepts: model types, then short names."""
    return list(MODEL_TYPE_NAMES) + sorted(VARIANT_MODEL_TYPES)


__all__ = [
    "CHOICE_VALUES",
    "MODEL_TYPE_NAMES",
    "PAPER_PRESET_NAMES",
    "PRECISIONS",
    "VARIANT_MODEL_TYPES",
    "variant_names",
]
