"""The `deep-nmt` launcher parses and checks arguments before torch / transformers / datasets are imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import deep_nmt_hf
from deep_nmt_hf.cli.names import CHOICE_VALUES, MODEL_TYPE_NAMES, VARIANT_MODEL_TYPES
from deep_nmt_hf.model.configuration_deep_nmt import CHOICES

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
from deep_nmt_hf_cli import main
codes = {}
for argv in %s:
    try:
        codes[" ".join(argv)] = main(argv)
    except SystemExit as exit:
        codes[" ".join(argv)] = exit.code
heavy = sorted(name for name in ("torch", "transformers", "datasets") if name in sys.modules)
print(json.dumps({"codes": codes, "heavy": heavy}))
"""


def test_static_names_equal_the_registered_variants_and_choices() -> None:
    assert list(MODEL_TYPE_NAMES) == [config.model_type for config, _, _ in deep_nmt_hf.MODEL_TYPES]
    assert VARIANT_MODEL_TYPES == {name: config.model_type for name, config in deep_nmt_hf.VARIANTS.items()}
    assert CHOICE_VALUES is CHOICES  # both read model/registry.py (tests/model/test_registry.py)


def test_console_script_is_the_launcher() -> None:
    scripts = (ROOT / "pyproject.toml").read_text().split("[project.scripts]")[1].split("\n[")[0]
    assert 'deep-nmt = "deep_nmt_hf_cli:main"' in scripts


@pytest.mark.slow
def test_help_and_argument_errors_import_no_heavy_module(tmp_path: Path) -> None:
    commands = [["--help"], ["train", "--bogus"], ["fold", str(tmp_path / "none"), str(tmp_path / "out")]]
    commands += [
        [command, "--help"] for command in ("train", "evaluate", "translate", "demo", "push", "fold")
    ]
    commands += [["export", "--help"], ["plot", "omega", "--help"], ["data", "to-json", "--help"]]
    commands += [["train", "--data-dir", str(tmp_path / "none"), "--src-lang", "en", "--tgt-lang", "de"]]
    commands[-1] += ["--output-dir", str(tmp_path / "o")]
    commands += [["train", "--data-dir", str(tmp_path), "--src-lang", "en", "--tgt-lang", "de"]]
    commands[-1] += ["--output-dir", str(tmp_path / "o"), "--variant", "nope"]
    result = subprocess.run(
        [sys.executable, "-c", PROBE % json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["heavy"] == []
    codes = list(probe["codes"].values())
    assert codes[0] == 0 and codes[1] == 2 and codes[2] == 2 and codes[3:-2] == [0] * (len(codes) - 5)
    assert codes[-2:] == [2, 2]
    assert "no such directory" in result.stderr and "--variant nope: unknown" in result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out").exists()


def test_the_launchers_field_rules_are_the_configs() -> None:
    """`train --set` and the shape flags are checked before torch against cli/names.py's table: the same rule
    objects as the config's own fields (`FIELD_RULES`), for every field ruled by a named rule."""
    from deep_nmt_hf.cli.names import CONFIG_FIELD_RULES
    from deep_nmt_hf.model import registry
    from deep_nmt_hf.model.configuration_deep_nmt import FIELD_RULES

    named = {id(getattr(registry, name)) for name in ("POSITIVE_INTEGER", "PROBABILITY", "POSITIVE_NUMBER")}
    named |= {id(registry.FLAG), id(registry.LOSS_WEIGHT)}
    assert CONFIG_FIELD_RULES == {name: rule for name, rule in FIELD_RULES.items() if id(rule) in named}


@pytest.mark.slow
def test_argument_errors_that_need_nothing_heavy_answer_before_torch(tmp_path: Path) -> None:
    """Presets, options, config values with a rule of their own, the splits named, an existing output directory
    (train and demo):
    one line, exit 2, before torch / transformers / datasets are imported."""
    data = tmp_path / "data"
    data.mkdir()
    for lang in ("en", "de"):
        (data / f"train.{lang}").write_text("a b\n")
    full = tmp_path / "full"
    full.mkdir()
    (full / "metrics.json").write_text("{}")
    train = ["train", "--data-dir", str(data), "--src-lang", "en", "--tgt-lang", "de"]
    cases = {
        "max_steps=0 must be a positive integer": ["--max-steps", "0"],
        "preset='nonsense' is unknown for variant 'deep_nmt'": ["--preset", "nonsense"],
        "encoder_layers=-2 is not allowed: it must be a positive integer": ["--set", "encoder_layers=-2"],
        "dropout=1.5 is not allowed": ["--dropout", "1.5"],
        "layer_norm_position='mid' is not a valid choice": ["--set", "layer_norm_position=mid"],
        "recipe='nonsense' is unknown": ["--recipe", "nonsense"],
        "unknown split 'val' (no val.* files); available splits for en-de: train": ["--valid-split", "val"],
        "unknown split 'test_2016_flickr'": ["--test-split", "test_2016_flickr"],
        f"{full}: output directory exists and is not empty": [],
    }
    commands = [[*train, "--output-dir", str(tmp_path / "o"), *extra] for extra in cases.values()]
    commands[-1][-1] = str(full)
    commands += [["demo", "--output-dir", str(full)]]
    result = subprocess.run(
        [sys.executable, "-c", PROBE % json.dumps(commands)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    lines = result.stderr.strip().splitlines()
    assert probe["heavy"] == [], lines
    assert list(probe["codes"].values()) == [2] * len(commands) and len(lines) == len(commands), lines
    for line, fragment in zip(lines, [*cases, f"{full}: output directory exists"], strict=True):
        assert line.startswith("error: ") and fragment in line, (fragment, line)
    assert not (tmp_path / "o").exists() and not (tmp_path / "o.partial").exists()
