"""The names the parser lists, importable without torch / transformers: read from `model/registry.py` (variants,
choices) and `science/preset_names.py` (paper presets).

`deep-nmt --help` and argument errors must answer without importing the model code. The registry is plain data
(standard library only) and `deep_nmt_hf/model/__init__.py` imports nothing, so importing it here stays light
also under the `deep-nmt` launcher, which loads these modules before `deep_nmt_hf/__init__.py` runs. A new variant
or choice value goes into the registry only, a paper preset's name into science/preset_names.py.
"""

from __future__ import annotations

from ..model.registry import CHOICES, MODEL_TYPE_NAMES, VARIANT_SPECS
from ..science.preset_names import PAPER_PRESET_NAMES

# short name for `--variant` -> model_type (`deep_nmt_hf.VARIANTS` maps the same names to config classes)
VARIANT_MODEL_TYPES: dict[str, str] = {name: spec.model_type for name, spec in VARIANT_SPECS.items()}

# config field -> the values `DeepNMTConfig.check` accepts (the registry's table itself)
CHOICE_VALUES: dict[str, tuple[str, ...]] = CHOICES

# `TrainingOptions.precision` values (`deep_nmt_hf.training.precision.PRECISIONS`): `train --precision`
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")


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
