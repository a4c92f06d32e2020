"""model/registry.py: the one torch-free table of variant, choice and preset names that everything else reads."""

from __future__ import annotations

import ast
import io
import json
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from factories import PAD, VOCAB, padded_batch, tiny_config
from fresh_process import run_with_package, run_without_package

import deep_nmt_hf
from deep_nmt_hf.cli import common, names
from deep_nmt_hf.model import configuration_deep_nmt, modeling_deep_nmt, registry
from deep_nmt_hf.science import paper_presets, preset_names, recipes

ROOT = Path(__file__).resolve().parents[2]
REGISTRY = ROOT / "deep_nmt_hf" / "model" / "registry.py"
HEAVY = ("torch", "transformers", "datasets")


# ------------------------------------------------------------------------------------------------- torch-free
def test_registry_and_model_init_import_only_the_standard_library() -> None:
    tree = ast.parse(REGISTRY.read_text())
    imported = {
        (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
        if not (isinstance(node, ast.ImportFrom) and node.level)
    }
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
    assert not any(isinstance(node, ast.ImportFrom) and node.level for node in ast.walk(tree))  # ships alone
    # the launcher imports the registry through deep_nmt_hf.model, whose __init__ must stay import-free
    model_init = ast.parse((ROOT / "deep_nmt_hf" / "model" / "__init__.py").read_text())
    assert not [node for node in ast.walk(model_init) if isinstance(node, ast.Import | ast.ImportFrom)]


@pytest.mark.slow
def test_registry_loads_by_file_path_without_torch_or_the_package() -> None:
    probe = f"""
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("registry", {str(REGISTRY)!r})
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
loaded = sorted(name for name in sys.modules if name.split(".")[0] in {HEAVY!r} + ("deep_nmt_hf",))
print(json.dumps({{"loaded": loaded, "variants": list(module.VARIANT_SPECS)}}))
"""
    probe = run_with_package(probe)
    assert probe["loaded"] == []
    assert probe["variants"] == list(registry.VARIANT_SPECS)


@pytest.mark.slow
def test_the_launcher_reads_the_registry_without_running_the_package_init() -> None:
    """`deep-nmt train --help` (deep_nmt_hf_cli: the package imported with its registration held) lists the
    registry's names: the registry is imported, torch and the config module are not."""
    probe = """
import contextlib, io, json, sys
from deep_nmt_hf_cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    try:
        main(["train", "--help"])
    except SystemExit:
        pass
reg, cli_names = sys.modules["deep_nmt_hf.model.registry"], sys.modules["deep_nmt_hf.cli.names"]
print(json.dumps({
    "heavy": sorted(name for name in ("torch", "transformers", "datasets") if name in sys.modules),
    "deferred": not sys.modules["deep_nmt_hf"]._registered,
    "config_module": "deep_nmt_hf.model.configuration_deep_nmt" in sys.modules,
    "registry_file": reg.__file__,
    "same_choices": cli_names.CHOICE_VALUES is reg.CHOICES,
    "help": out.getvalue(),
}))
"""
    probe = run_with_package(probe)
    assert probe["heavy"] == [] and probe["deferred"] and not probe["config_module"]
    assert Path(probe["registry_file"]) == REGISTRY and probe["same_choices"]
    help_text = "".join(probe["help"].split())  # argparse wraps lines, also at the names' hyphens
    assert all(name in help_text for name in preset_names.PAPER_PRESET_NAMES)
    assert all(spec.model_type in help_text for spec in registry.VARIANT_SPECS.values())
    assert "oneofpost,pre" in help_text


# ------------------------------------------------------------------------------------------- derived from it
def test_variants_and_model_types_are_derived_from_the_registry() -> None:
    assert list(deep_nmt_hf.VARIANTS) == list(registry.VARIANT_SPECS)
    assert len(deep_nmt_hf.MODEL_TYPES) == len(registry.VARIANT_SPECS)
    for (name, spec), (config, model, lm) in zip(
        registry.VARIANT_SPECS.items(), deep_nmt_hf.MODEL_TYPES, strict=True
    ):
        assert deep_nmt_hf.VARIANTS[name] is config
        assert config is getattr(configuration_deep_nmt, spec.config_name)
        assert model is getattr(modeling_deep_nmt, spec.model_name)
        assert lm is getattr(modeling_deep_nmt, spec.lm_name)
        assert config.model_type == spec.model_type
        assert config.PRESETS is spec.shapes  # `train --preset` shapes and from_preset read the registry
        assert model.config_class is config and lm.config_class is config
        for public in (config, model, lm):
            assert getattr(deep_nmt_hf, public.__name__) is public
            assert public.__name__ in deep_nmt_hf.__all__
    assert set(configuration_deep_nmt.__all__) >= {
        spec.config_name for spec in registry.VARIANT_SPECS.values()
    }


def test_cli_names_and_config_choices_are_the_registry_tables() -> None:
    assert configuration_deep_nmt.CHOICES is registry.CHOICES
    assert names.CHOICE_VALUES is registry.CHOICES
    assert names.MODEL_TYPE_NAMES is registry.MODEL_TYPE_NAMES
    assert names.PAPER_PRESET_NAMES is preset_names.PAPER_PRESET_NAMES
    assert names.VARIANT_MODEL_TYPES == {n: s.model_type for n, s in registry.VARIANT_SPECS.items()}
    assert names.MODEL_TYPE_NAMES == tuple(s.model_type for s in registry.VARIANT_SPECS.values())
    # one slot per field: the values allowed (no "not implemented yet" slot)
    for values in registry.CHOICES.values():
        assert values and all(isinstance(value, str) for value in values)


def test_a_value_added_to_the_registry_is_accepted_by_check_and_listed_by_the_cli(monkeypatch) -> None:
    with pytest.raises(ValueError, match="dlcl_init='zeros' is not a valid choice; allowed: 'avg', 'one'"):
        tiny_config(dlcl_init="zeros")
    monkeypatch.setitem(registry.CHOICES, "dlcl_init", (*registry.CHOICES["dlcl_init"], "zeros"))
    assert tiny_config(dlcl_init="zeros").dlcl_init == "zeros"
    assert "one of avg, one, zeros" in common._choice_help("dlcl_init")


def test_paper_presets_follow_the_registry_and_name_registered_shapes() -> None:
    assert tuple(paper_presets.PRESETS) == preset_names.PAPER_PRESET_NAMES
    for name, preset in paper_presets.PRESETS.items():
        variant = recipes.get_recipe(preset.recipe)["variant"].value
        assert preset.shape in registry.VARIANT_SPECS[variant].shapes, name
    # `train --preset NAME` tries the paper presets first: a shape of the same name would be unreachable
    shapes = {shape for spec in registry.VARIANT_SPECS.values() for shape in spec.shapes}
    assert not shapes & set(preset_names.PAPER_PRESET_NAMES)
    for name in recipes.RECIPES:
        variant = recipes.get_recipe(name)["variant"].value
        assert variant in registry.VARIANT_SPECS or variant in registry.MODEL_TYPE_NAMES, (name, variant)


# --------------------------------------------------------------------------------------------- in checkpoints
LOAD_VARIANT = """
import json, sys, torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
batch = torch.load("batch.pt")
with torch.no_grad():
    logits = model(**batch).logits
config_module = sys.modules[type(model.config).__module__]
registry = sys.modules[config_module.__name__.rsplit(".", 1)[0] + ".registry"]
print(json.dumps({"class": type(model).__name__, "module": type(model).__module__,
                  "model_type": model.config.model_type, "presets": list(type(model.config).PRESETS),
                  "same_choices": config_module.CHOICES is registry.CHOICES,
                  "registry_file": registry.__file__, "logits": logits.tolist()}))
"""


@pytest.mark.slow
def test_a_saved_checkpoint_ships_the_registry_and_loads_without_the_package(tmp_path) -> None:
    """The config imports registry.py relatively, so save_pretrained copies it; a fresh process without
    deep_nmt_hf builds a variant (model_type, PRESETS from the shipped registry) and gives the same logits.
    tests/model/test_remote_code.py covers the base model and generation."""
    config = deep_nmt_hf.DeepDecoderConfig.from_preset("tiny", vocab_size=VOCAB, max_position_embeddings=64)
    torch.manual_seed(5)
    model = deep_nmt_hf.DeepDecoderForConditionalGeneration(config).eval()
    model.save_pretrained(tmp_path / "model")
    shipped = tmp_path / "model" / "registry.py"
    assert shipped.read_text() == REGISTRY.read_text()
    ids, mask = padded_batch([5, 3])
    batch = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": torch.full((2, 2), PAD)}
    torch.save(batch, tmp_path / "batch.pt")

    result = run_without_package(LOAD_VARIANT, tmp_path)

    assert result["class"] == "DeepDecoderForConditionalGeneration"
    assert result["module"].startswith("transformers_modules.")
    assert result["model_type"] == registry.VARIANT_SPECS["deep_decoder"].model_type
    assert result["presets"] == list(registry.VARIANT_SPECS["deep_decoder"].shapes)
    assert result["same_choices"] and "deep_nmt_hf" not in result["registry_file"]
    with torch.no_grad():
        expected = model(**batch).logits
    torch.testing.assert_close(torch.tensor(result["logits"]), expected, atol=1e-5, rtol=1e-5)


def test_configs_saved_before_the_registry_build_field_for_field(tmp_path) -> None:
    """tests/fixtures/pre_layout_checkpoints.zip: the config.json of each variant as the code before the
    registry saved it builds today's class of that variant with every saved field unchanged."""
    from transformers import AutoConfig

    with zipfile.ZipFile(
        io.BytesIO((ROOT / "tests" / "fixtures" / "pre_layout_checkpoints.zip").read_bytes())
    ) as z:
        z.extractall(tmp_path)
    for name, spec in registry.VARIANT_SPECS.items():
        saved = json.loads((tmp_path / name / "config.json").read_text())
        config = AutoConfig.from_pretrained(tmp_path / name)
        assert type(config) is deep_nmt_hf.VARIANTS[name] and saved["model_type"] == spec.model_type
        now = config.to_dict()
        for key, value in saved.items():
            if key not in ("transformers_version", "custom_pipelines", "auto_map"):
                assert now[key] == value, (name, key)
