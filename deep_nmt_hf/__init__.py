"""deep_nmt_hf: very deep Transformer models for machine translation as a Transformers model family.

Importing the package registers every model type with AutoConfig, AutoModel and AutoModelForSeq2SeqLM, and
marks the classes for auto-class export, so that `save_pretrained` writes `auto_map` and copies the code files
(a saved model then loads with `trust_remote_code=True` where this package is not installed). It also registers
`pipeline("translation")`, which transformers 5 removed (translation_pipeline.py).

Registration needs transformers' config and model base classes, and with them torch (seconds to import), so this
import stays heavy on purpose. The `deep-nmt` console script does not pay for it before it has checked its
arguments: its launcher (`deep_nmt_hf_cli`, outside this package) loads the parser modules with this file not yet
run and runs it only for a command that executes (`deep_nmt_hf.cli.common.complete_package_import`). The names
`--help` lists, and `MODEL_TYPES` / `VARIANTS` below, all come from the torch-free `model/registry.py`.
"""

from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

from .model import configuration_deep_nmt as _configuration
from .model import modeling_deep_nmt as _modeling
from .model.configuration_deep_nmt import (
    AdminConfig,
    DeepDecoderConfig,
    DeepNMTConfig,
    DeepNormConfig,
    DLCLConfig,
    DSInitMAttConfig,
    SharedLayersConfig,
)
from .model.modeling_deep_nmt import (
    AdminForConditionalGeneration,
    AdminModel,
    DeepDecoderForConditionalGeneration,
    DeepDecoderModel,
    DeepNMTForConditionalGeneration,
    DeepNMTModel,
    DeepNMTPreTrainedModel,
    DeepNormForConditionalGeneration,
    DeepNormModel,
    DLCLForConditionalGeneration,
    DLCLModel,
    DSInitMAttForConditionalGeneration,
    DSInitMAttModel,
    SharedLayersForConditionalGeneration,
    SharedLayersModel,
)
from .model.registry import VARIANT_SPECS
from .model.translation_pipeline import TranslationPipeline, register_translation_pipeline

__version__ = "0.1.0"

# (config class, base model class, seq2seq LM class) for every registered model type, in registry order
MODEL_TYPES: list[tuple[type, type, type]] = [
    (
        getattr(_configuration, spec.config_name),
        getattr(_modeling, spec.model_name),
        getattr(_modeling, spec.lm_name),
    )
    for spec in VARIANT_SPECS.values()
]

# short names for `deep-nmt train --variant NAME` → config class
VARIANTS: dict[str, type] = {
    name: config_class for name, (config_class, _, _) in zip(VARIANT_SPECS, MODEL_TYPES, strict=True)
}


def _register() -> None:
    for config_class, model_class, lm_class in MODEL_TYPES:
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, model_class, exist_ok=True)
        AutoModelForSeq2SeqLM.register(config_class, lm_class, exist_ok=True)
        config_class.register_for_auto_class()
        model_class.register_for_auto_class("AutoModel")
        lm_class.register_for_auto_class("AutoModelForSeq2SeqLM")


_register()
register_translation_pipeline()

__all__ = [
    "MODEL_TYPES",
    "VARIANTS",
    "AdminConfig",
    "AdminForConditionalGeneration",
    "AdminModel",
    "DeepDecoderConfig",
    "DeepDecoderForConditionalGeneration",
    "DeepDecoderModel",
    "DeepNormConfig",
    "DeepNormForConditionalGeneration",
    "DeepNormModel",
    "DLCLConfig",
    "DLCLForConditionalGeneration",
    "DLCLModel",
    "DSInitMAttConfig",
    "DSInitMAttForConditionalGeneration",
    "DSInitMAttModel",
    "SharedLayersConfig",
    "SharedLayersForConditionalGeneration",
    "SharedLayersModel",
    "DeepNMTConfig",
    "DeepNMTForConditionalGeneration",
    "DeepNMTModel",
    "DeepNMTPreTrainedModel",
    "TranslationPipeline",
]
