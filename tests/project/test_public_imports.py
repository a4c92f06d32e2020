"""The package's import surface (issue #57, item 7): the functions users call are importable from `deep_nmt_hf`
(lazily, PEP 562), the module paths of before the layout move raise an `ImportError` naming the new one, and a
plain `import deep_nmt_hf` still registers the Auto classes and the translation pipeline."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import pytest
from fresh_process import run_with_package

import deep_nmt_hf

ROOT = Path(__file__).resolve().parents[2]

USER_FUNCTIONS = {
    "fold_to_stock": "deep_nmt_hf.publish.folding",
    "fold_directory": "deep_nmt_hf.publish.folding",
    "NotFoldableError": "deep_nmt_hf.publish.folding",
    "admin_profile": "deep_nmt_hf.training.admin_profiling",
    "export_ctranslate2": "deep_nmt_hf.publish.export",
    "export_model": "deep_nmt_hf.publish.export",
    "average_checkpoints": "deep_nmt_hf.training.averaging",
    "translation_generation_config": "deep_nmt_hf.training.generation_settings",
}


@pytest.mark.parametrize("name", sorted(USER_FUNCTIONS))
def test_the_functions_users_call_import_from_the_package(name: str) -> None:
    exec(f"from deep_nmt_hf import {name} as value", namespace := {})
    assert namespace["value"] is getattr(importlib.import_module(USER_FUNCTIONS[name]), name)
    assert name in deep_nmt_hf.__all__ and name in dir(deep_nmt_hf)


@pytest.mark.parametrize("old", sorted(deep_nmt_hf.MOVED))
def test_a_path_of_before_the_move_names_its_new_one(old: str) -> None:
    new = f"deep_nmt_hf.{deep_nmt_hf.MOVED[old]}"
    assert importlib.util.find_spec(new) is not None, new
    message = f"deep_nmt_hf.{old} moved to {new}"
    with pytest.raises(ImportError, match=message):
        importlib.import_module(f"deep_nmt_hf.{old}")
    with pytest.raises(ImportError, match=message):
        exec(f"from deep_nmt_hf import {old}")
    with pytest.raises(AttributeError, match=f"moved to {new}"):
        getattr(deep_nmt_hf, old)


def test_the_moved_table_is_every_module_the_move_took_from_the_top() -> None:
    """What the move took from the package's top is what now lives in a folder under its old file name (ADMIN's
    profiling renamed); the table covers it, and no name of today's top level."""
    folders = ("model", "data", "training", "publish", "science")
    for old, new in deep_nmt_hf.MOVED.items():
        folder, name = new.split(".")
        assert folder in folders and (name == old or (old, name) == ("admin", "admin_profiling"))
    top = {
        p.stem for p in (ROOT / "deep_nmt_hf").iterdir() if p.suffix == ".py" or (p / "__init__.py").is_file()
    }
    assert not top & set(deep_nmt_hf.MOVED)
    assert len(deep_nmt_hf.MOVED) == 33  # `git show 147f7e5 --stat`: 33 modules renamed into the folders
    assert not hasattr(deep_nmt_hf, "no_such_name")  # other names: the usual AttributeError / ImportError
    with pytest.raises(ImportError, match="cannot import name 'no_such_name'"):
        exec("from deep_nmt_hf import no_such_name")


PLAIN_IMPORT = """
import json, sys
import deep_nmt_hf
from transformers import AutoConfig, AutoModelForSeq2SeqLM
from transformers.pipelines import PIPELINE_REGISTRY
config = AutoConfig.for_model("deep_nmt_admin", vocab_size=40, d_model=16, encoder_layers=1, decoder_layers=1,
                              encoder_ffn_dim=16, decoder_ffn_dim=16, encoder_attention_heads=2,
                              decoder_attention_heads=2)
print(json.dumps({
    "model": type(AutoModelForSeq2SeqLM.from_config(config)).__name__,
    "pipeline": "translation" in PIPELINE_REGISTRY.supported_tasks,
    "folding_at_import": "deep_nmt_hf.publish.folding" in sys.modules,
    "loaded_outside_model": sorted(m for m in sys.modules if m.startswith("deep_nmt_hf.") and ".model." not in m),
}))
from deep_nmt_hf import fold_to_stock
assert fold_to_stock.__module__ == "deep_nmt_hf.publish.folding"
"""


@pytest.mark.slow
def test_a_plain_import_registers_and_loads_no_more_than_the_model() -> None:
    """`import deep_nmt_hf` registers the model types and the pipeline, as before, and imports the model only (and
    the tokenizer classes of converted folders, in model/, which AutoTokenizer must find by name):
    folding (and the rest) loads when its name is first read."""
    probe = run_with_package(PLAIN_IMPORT)
    assert probe == {
        "model": "AdminForConditionalGeneration",
        "pipeline": True,
        "folding_at_import": False,
        "loaded_outside_model": ["deep_nmt_hf.model"],
    }


SUBMODULE_ACCESS = """
import json, sys
import deep_nmt_hf.training as training
loaded_before = "deep_nmt_hf.training.run" in sys.modules
run = training.run  # a module of the package, read as an attribute (monkeypatching `training.run` does this)
try:
    training.no_such_module
    missing = "no error"
except AttributeError as error:
    missing = str(error)
print(json.dumps({"before": loaded_before, "run": run.__name__, "train": run.train is training.train,
                  "missing": missing}))
"""


@pytest.mark.slow
def test_a_module_of_training_reads_as_an_attribute_in_a_fresh_process() -> None:
    """`deep_nmt_hf.training.run` (the module) is there on first read, not only after something else imported it
    (before: AttributeError in a process that had not imported `training.run` yet); an unknown name still raises."""
    probe = run_with_package(SUBMODULE_ACCESS)
    assert probe == {
        "before": False,
        "run": "deep_nmt_hf.training.run",
        "train": True,
        "missing": "module 'deep_nmt_hf.training' has no attribute 'no_such_module'",
    }
