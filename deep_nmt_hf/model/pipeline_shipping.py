"""The translation pipeline carried in every model directory we write, so Hub users need no install (issue #25).

Transformers 5 removed its "translation" task; importing `deep_nmt_hf` registers ours again
(translation_pipeline.py), but where the package is not installed there is nothing to import. Transformers' own
way for a model to bring its pipeline is what `Pipeline.save_pretrained` writes for a pipeline registered with
`PIPELINE_REGISTRY.register_pipeline`: ``config.json`` maps the task to ``"module.Class"`` and the model classes
under ``custom_pipelines``, and the module file lies beside the weights. ``pipeline("translation",
model=DIR_OR_REPO, trust_remote_code=True)`` then loads that class as remote code, and the model with its own.

One code path writes both, `save_pretrained` of every model class (issue #49): `DeepNMTPreTrainedModel.save_pretrained`
saves under `carrying_translation_pipeline(model)`, which puts the entry in the config for that save only, and
translation_pipeline.py is a relative import of the model code (modeling_deep_nmt.py imports this module, which
imports it), so Transformers' `custom_object_save` copies it with modeling_deep_nmt.py, as it copies every module
the model code imports. So a plain ``model.save_pretrained(DIR)``, training's final model, every Trainer checkpoint
and `hub.prepare_upload` (``deep-nmt push``) carry it alike, and so does a save of the model loaded as remote code
without the package; `averaging.average_checkpoints` copies it from the newest checkpoint with the config. Folded
stock models keep their promise of no code files and do not carry it.

With the package imported, the task is already registered with this very class: `DeepNMTConfig` then drops the
entry when it reads a config (`served_by_the_registered_task`), so ``pipeline("translation", model=DIR)`` takes the
registered pipeline without ``trust_remote_code`` (Transformers asks for it, or for ``pipeline_class=``, whenever
the config names the task under ``custom_pipelines``).

This module ships with the model code: it imports only transformers and its flat sibling translation_pipeline.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from transformers.dynamic_module_utils import get_relative_import_files
from transformers.pipelines import PIPELINE_REGISTRY

from . import translation_pipeline
from .translation_pipeline import TranslationPipeline, register_translation_pipeline

TASK = "translation"
PIPELINE_FILE = Path(translation_pipeline.__file__).name


def custom_pipelines_entry() -> dict[str, Any]:
    """``{"translation": {"impl": "translation_pipeline.TranslationPipeline", "pt": [...], "type": "text"}}``:
    the registration of `TranslationPipeline` as `Pipeline.save_pretrained` records it in config.json."""
    register_translation_pipeline()
    # the registry's entry: a process that loaded two remote-code checkpoints registered only the first one's
    # copy of the class, so the second copy has no `_registered_impl` of its own
    info = dict(getattr(TranslationPipeline, "_registered_impl", PIPELINE_REGISTRY.supported_tasks)[TASK])
    info["impl"] = f"{info['impl'].__module__.split('.')[-1]}.{info['impl'].__name__}"
    info["pt"] = [model_class.__name__ for model_class in info["pt"]]
    return {TASK: info}


def shipped_files() -> list[Path]:
    """translation_pipeline.py and the flat sibling modules it imports."""
    source = Path(translation_pipeline.__file__)
    return [source, *(Path(path) for path in get_relative_import_files(str(source)))]


@contextlib.contextmanager
def carrying_translation_pipeline(model: Any) -> Iterator[None]:
    """Around `model.save_pretrained`: config.json gets the ``custom_pipelines`` entry (the model's config as it
    was is restored afterwards). Only for a model whose code is saved with it (`_auto_class` set, as for every
    registered model class and remote code), since the entry names a module file saved beside that code."""
    config = model.config
    if getattr(model, "_auto_class", None) is None:
        yield
        return
    missing = object()
    before = config.__dict__.get("custom_pipelines", missing)
    config.custom_pipelines = {**(before if isinstance(before, dict) else {}), **custom_pipelines_entry()}
    try:
        yield
    finally:
        if before is missing:
            del config.custom_pipelines
        else:
            config.custom_pipelines = before


def served_by_the_registered_task(custom_pipelines: dict[str, Any]) -> dict[str, Any]:
    """`custom_pipelines` without our translation entry when the "translation" task is registered with this very
    `TranslationPipeline` class (the package imported: its own import registered it), so that `pipeline()` takes
    the registered class instead of asking for ``trust_remote_code``. Loaded as remote code without the package,
    the task is not registered with the remote class and the entry stays."""
    entry = custom_pipelines.get(TASK)
    registered = PIPELINE_REGISTRY.supported_tasks.get(TASK, {}).get("impl")
    if not isinstance(entry, dict) or registered is not TranslationPipeline:
        return custom_pipelines
    if entry.get("impl") != custom_pipelines_entry()[TASK]["impl"]:
        return custom_pipelines  # someone else's pipeline under the task name: theirs to serve
    return {task: info for task, info in custom_pipelines.items() if task != TASK}
