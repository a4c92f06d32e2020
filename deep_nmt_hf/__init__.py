"""deep_nmt_hf: very deep Transformer models for machine translation as a Transformers model family.

Importing the package registers every model type with AutoConfig, AutoModel and AutoModelForSeq2SeqLM, and
marks the classes for auto-class export, so that `save_pretrained` writes `auto_map` and copies the code files
(a saved model then loads with `trust_remote_code=True` where this package is not installed). It also registers
`pipeline("translation")`, which transformers 5 removed (model/translation_pipeline.py). `register()` does both;
it is idempotent.

The public names are lazy attributes (PEP 562): a name's module is imported when the name is first read, so
``from deep_nmt_hf import fold_to_stock`` loads the folding code and nothing else, and the submodules the
`deep-nmt` parser reads (cli/, model/registry.py, training/options.py) import without torch. Registration needs
transformers' config and model base classes, and with them torch (seconds); the `deep-nmt` console script
(`deep_nmt_hf_cli`) imports this package with registration held (`deep_nmt_hf_cli.deferring_registration`) and
registers once its arguments pass, so `--help` and flag errors answer in well under a second.

The modules the layout move of issue #51 put in folders (``deep_nmt_hf.folding`` → ``deep_nmt_hf.publish.folding``,
...) raise an `ImportError` naming their new path when imported by their old one (`MOVED`).
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from .model.registry import VARIANT_SPECS

__version__ = "0.1.0"

_CONFIGURATION, _MODELING = ".model.configuration_deep_nmt", ".model.modeling_deep_nmt"

# public name -> the module that defines it (relative to this package), imported on first use
_EXPORTS: dict[str, str] = {
    **{spec.config_name: _CONFIGURATION for spec in VARIANT_SPECS.values()},
    **{name: _MODELING for spec in VARIANT_SPECS.values() for name in (spec.model_name, spec.lm_name)},
    "DeepNMTPreTrainedModel": _MODELING,
    "TranslationPipeline": ".model.translation_pipeline",
    "translation_generation_config": ".training.generation_settings",
    "admin_profile": ".training.admin_profiling",
    "average_checkpoints": ".training.averaging",
    "fold_to_stock": ".publish.folding",
    "fold_directory": ".publish.folding",
    "NotFoldableError": ".publish.folding",
    "FoldCheckError": ".publish.folding",
    "export_ctranslate2": ".publish.export",
    "export_model": ".publish.export",
    "int8_quantization_config": ".publish.quantization",
    "quantize_int8": ".publish.quantization",
    "convert_fairseq": ".publish.convert_fairseq",
    "FairseqMosesTokenizer": ".model.tokenization_moses",
    "FairseqBPE01Tokenizer": ".model.tokenization_bpe01",
    "PairedTokenizerFast": ".model.tokenization_paired",
}

# the top-level modules of before the layout move (issue #51) -> where they are now
_MOVED_INTO: dict[str, str] = {
    "model": "caches collapse_losses configuration_deep_nmt initialization layer_aggregation layer_sharing "
    "merged_attention modeling_deep_nmt pipeline_shipping residual transformers_compat translation_pipeline",
    "data": "atomic batching preprocessing streaming synthetic tokenization",
    "training": "activation_memory averaging distributed generation_settings length_penalty optimizers sharding",
    "publish": "export folding hub",
    "science": "paper_presets plots recipes significance",
}
MOVED: dict[str, str] = {
    name: f"{into}.{name}" for into, names in _MOVED_INTO.items() for name in names.split()
}
MOVED["admin"] = "training.admin_profiling"


def _model_types() -> list[tuple[type, type, type]]:
    configuration = importlib.import_module(_CONFIGURATION, __name__)
    modeling = importlib.import_module(_MODELING, __name__)
    return [
        (getattr(configuration, s.config_name), getattr(modeling, s.model_name), getattr(modeling, s.lm_name))
        for s in VARIANT_SPECS.values()
    ]


def __getattr__(name: str) -> Any:
    """PEP 562: the public names, imported on first use; `MODEL_TYPES` (config, base model, seq2seq LM class of
    every registered model type, in registry order) and `VARIANTS` (`--variant` short name -> config class)."""
    if name == "MODEL_TYPES":
        value: Any = _model_types()
    elif name == "VARIANTS":
        value = {
            short: types[0] for short, types in zip(VARIANT_SPECS, __getattr__("MODEL_TYPES"), strict=True)
        }
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    else:
        moved = f" (moved to {__name__}.{MOVED[name]})" if name in MOVED else ""
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}{moved}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


_registered = False


def register() -> None:
    """Register every model type with AutoConfig / AutoModel / AutoModelForSeq2SeqLM, mark the classes for
    auto-class export, and register `pipeline("translation")`. Idempotent; importing the package calls it."""
    global _registered
    if _registered:
        return
    from transformers import AutoConfig, AutoModel, AutoModelForSeq2SeqLM

    from .model.translation_pipeline import register_translation_pipeline

    for config_class, model_class, lm_class in __getattr__("MODEL_TYPES"):
        AutoConfig.register(config_class.model_type, config_class, exist_ok=True)
        AutoModel.register(config_class, model_class, exist_ok=True)
        AutoModelForSeq2SeqLM.register(config_class, lm_class, exist_ok=True)
        config_class.register_for_auto_class()
        model_class.register_for_auto_class("AutoModel")
        lm_class.register_for_auto_class("AutoModelForSeq2SeqLM")
    register_translation_pipeline()
    _register_tokenizer_names()
    _registered = True


def _register_tokenizer_names() -> None:
    """Let AutoTokenizer find the tokenizer classes a converted fairseq Moses or subword-nmt 0.1 folder or a
    two-vocabulary folder names (`tokenizer_class`), so that it loads without `trust_remote_code`, as our model
    classes do. Transformers
    registers a tokenizer name only with `AutoTokenizer.register(config_class, ...)`, which would also make it every
    DeepNMTConfig's default tokenizer; the name alone goes into the table that `tokenizer_class_from_name` reads
    first. Where that table is gone, the folder still loads with `trust_remote_code=True` (the class ships in it)."""
    from transformers.models.auto import tokenization_auto

    names = getattr(tokenization_auto, "REGISTERED_TOKENIZER_CLASSES", None)
    if isinstance(names, dict):
        for name in ("FairseqMosesTokenizer", "FairseqBPE01Tokenizer", "PairedTokenizerFast"):
            names.setdefault(name, __getattr__(name))


class _MovedModules:
    """A meta path finder (after the usual ones): a module imported by its path of before the layout move raises an
    `ImportError` naming the new path."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        package, _, name = fullname.rpartition(".")
        if package == __name__ and name in MOVED:
            raise ImportError(
                f"{fullname} moved to {__name__}.{MOVED[name]} (issue #51): import it from there",
                name=fullname,
            )
        return None


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModules())

_launcher = sys.modules.get("deep_nmt_hf_cli")
if _launcher is None or not _launcher.deferring_registration():
    register()

__all__ = [
    "MODEL_TYPES",
    "VARIANTS",
    "register",
    *sorted(_EXPORTS),
]
