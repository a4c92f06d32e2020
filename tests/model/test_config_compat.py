"""Checkpoints saved before the dataclass configs (issue #57) load unchanged: same config values, same logits.

The fixture (tests/fixtures/pre_dataclass_checkpoints.zip, written by make_config_checkpoints.py) holds the configs
that `save_pretrained` wrote with the code of before, under the newest (5.24) and the lowest (5.10) Transformers of
our range, for one tiny model per variant and per notable option, and that code. The code of then builds and saves
each model in a fresh process without the package; today's package loads every one."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest
import torch
from factories import PAD, padded_batch
from fresh_process import run_without_package
from transformers import AutoConfig, AutoModelForSeq2SeqLM

import deep_nmt_hf

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "pre_dataclass_checkpoints.zip"
SAVERS = ("5.24", "5.10")  # the Transformers release that wrote each copy

OLD_CODE = """
import importlib, json, sys, torch
sys.path.insert(0, ".")
configuration = importlib.import_module("old.configuration_deep_nmt")  # the code of before, as a package
modeling = importlib.import_module("old.modeling_deep_nmt")
out = {}
batch = torch.load("batch.pt")
for folder in json.load(open("folders.json")):
    auto_map = json.load(open(f"{folder}/config.json"))["auto_map"]
    config = getattr(configuration, auto_map["AutoConfig"].split(".")[-1]).from_pretrained(folder)
    torch.manual_seed(0)
    model = getattr(modeling, auto_map["AutoModelForSeq2SeqLM"].split(".")[-1])(config).eval()
    model.save_pretrained(folder)  # weights written by the code of before
    with torch.no_grad():
        out[folder] = model(**batch).logits.tolist()
print(json.dumps(out))
"""


def _loaded_values(config) -> dict:
    return json.loads(config.to_json_string(use_diff=False))


IGNORED = ("transformers_version", "auto_map", "custom_pipelines")  # written by the release / the save


def _assert_same_values(config, saved: dict, where: str) -> None:
    values = _loaded_values(config)
    for key, value in saved.items():
        if key not in IGNORED:
            assert values.get(key) == value, (where, key, values.get(key), value)


@pytest.mark.slow
def test_configs_saved_before_the_dataclass_configs_load_unchanged(tmp_path: Path) -> None:
    with zipfile.ZipFile(FIXTURE) as archive:
        archive.extractall(tmp_path / "fixture")
    (tmp_path / "fixture" / "code").rename(tmp_path / "old")
    (tmp_path / "old" / "__init__.py").write_text("")
    newest, lowest = (tmp_path / "fixture" / saver for saver in SAVERS)
    folders = sorted(case.name for case in newest.iterdir())
    assert set(folders) >= set(deep_nmt_hf.VARIANTS)
    for folder in folders:
        (tmp_path / folder).mkdir()
        for path in (newest / folder).glob("*.json"):
            (tmp_path / folder / path.name).write_bytes(path.read_bytes())
    ids, mask = padded_batch([5, 3])
    batch = {"input_ids": ids, "attention_mask": mask, "decoder_input_ids": torch.full((2, 3), PAD)}
    torch.save(batch, tmp_path / "batch.pt")
    (tmp_path / "folders.json").write_text(json.dumps(folders))

    old = run_without_package(OLD_CODE, tmp_path)

    for folder in folders:
        model, info = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / folder, output_loading_info=True)
        assert type(model).__module__.startswith("deep_nmt_hf.model."), folder  # the package's class
        assert not info["missing_keys"] and not info["unexpected_keys"], (folder, info)
        _assert_same_values(model.config, json.loads((newest / folder / "config.json").read_text()), folder)
        with torch.no_grad():
            logits = model.eval()(**batch).logits
        torch.testing.assert_close(logits, torch.tensor(old[folder]), atol=1e-5, rtol=1e-5, msg=folder)

    # the lowest release wrote the same fields and values (so the same weights and logits follow from them)
    assert sorted(case.name for case in lowest.iterdir()) == folders
    for folder in folders:
        saved = json.loads((lowest / folder / "config.json").read_text())
        newer = json.loads((newest / folder / "config.json").read_text())
        assert {k: v for k, v in saved.items() if k not in IGNORED} == {
            k: v for k, v in newer.items() if k not in IGNORED
        }, folder
        _assert_same_values(AutoConfig.from_pretrained(lowest / folder), saved, f"5.10 {folder}")
