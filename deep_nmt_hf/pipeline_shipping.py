"""The translation pipeline carried in every checkpoint we write, so Hub users need no install (issue #25).

Transformers 5 removed its "translation" task; importing `deep_nmt_hf` registers ours again
(translation_pipeline.py), but where the package is not installed there is nothing to import. Transformers' own
way for a model to bring its pipeline: ``config.json`` maps the task to ``"module.Class"`` and the model classes
under ``custom_pipelines``, and the module file lies beside the weights — what `Pipeline.save_pretrained` writes for
a pipeline registered with `PIPELINE_REGISTRY.register_pipeline`. ``pipeline("translation", model=DIR_OR_REPO,
trust_remote_code=True)`` then loads that class as remote code, and the model with its own remote code.

`ship_translation_pipeline(directory)` adds exactly that to a saved model directory: the ``custom_pipelines``
entry (built from the registration as `Pipeline.save_pretrained` builds it) and ``translation_pipeline.py`` with
the flat sibling modules it imports (none today: it imports only transformers, the rule for shipped files).
It is called after ``save_pretrained`` wherever we write a model: training's final model and every Trainer
checkpoint (`DeepNMTTrainer._save`), and `hub.prepare_upload` (``deep-nmt push``); `averaging.average_checkpoints`
copies it from the newest checkpoint with the config. A plain ``model.save_pretrained`` does not add it (that
needs a line in modeling_deep_nmt.py). Folded stock models keep their promise of no code files and do not carry it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from transformers.dynamic_module_utils import get_relative_import_files

from . import translation_pipeline
from .atomic import atomic_write
from .translation_pipeline import TranslationPipeline, register_translation_pipeline

TASK = "translation"
PIPELINE_FILE = Path(translation_pipeline.__file__).name


def custom_pipelines_entry() -> dict[str, Any]:
    """``{"translation": {"impl": "translation_pipeline.TranslationPipeline", "pt": [...], "type": "text"}}``:
    the registration of `TranslationPipeline` as `Pipeline.save_pretrained` records it in config.json."""
    register_translation_pipeline()
    info = dict(TranslationPipeline._registered_impl[TASK])
    info["impl"] = f"{info['impl'].__module__.split('.')[-1]}.{info['impl'].__name__}"
    info["pt"] = [model_class.__name__ for model_class in info["pt"]]
    return {TASK: info}


def shipped_files() -> list[Path]:
    """translation_pipeline.py and the flat sibling modules it imports."""
    source = Path(translation_pipeline.__file__)
    return [source, *(Path(path) for path in get_relative_import_files(str(source)))]


def ship_translation_pipeline(directory: str | os.PathLike[str]) -> None:
    """Make the saved model in `directory` carry the translation pipeline: copy its module file(s) and add the
    ``custom_pipelines`` entry to ``config.json`` (each file written atomically)."""
    directory = Path(directory)
    config_path = directory / "config.json"
    if not config_path.is_file():
        raise FileNotFoundError(f"{directory}: no config.json; save the model before shipping its pipeline")
    for source in shipped_files():
        with atomic_write(directory / source.name) as handle:
            handle.write(source.read_text(encoding="utf-8"))
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config["custom_pipelines"] = custom_pipelines_entry()
    with atomic_write(config_path) as handle:  # as PreTrainedConfig.to_json_string writes it
        handle.write(json.dumps(config, indent=2, sort_keys=True) + "\n")
