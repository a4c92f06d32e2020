"""One path for every value (issue #57 item 5): `resolve_run`'s precedence, one default per field, and every value
checked before any data work (issue #59 item 3)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path

import pytest

from deep_nmt_hf import training
from deep_nmt_hf.cli import main
from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.training import TrainingOptions, resolve_run
from deep_nmt_hf.training.options import option_default

BASE = dict(output_dir="out", data_source="data", src_lang="a", tgt_lang="b")
PACKAGE = Path(training.__file__).parent.parent


def test_each_layer_wins_over_the_ones_below() -> None:
    """defaults < shape preset < recipe < paper preset < --set < explicit, one field decided at each layer."""
    run = resolve_run(BASE)
    assert dataclasses.asdict(run.options) == dataclasses.asdict(TrainingOptions(**BASE))
    assert run.config == {"label_smoothing": 0.1, "max_position_embeddings": 256}  # the defaults only
    # shape preset (60 encoder layers), recipe (β2 0.98, attention dropout), paper preset over the recipe
    # (warmup 8000 over admin's 4000, lr 7e-4 over 1e-3), its recipe's variant
    run = resolve_run({**BASE, "preset": "admin-60-12-wmt14-en-fr"})
    assert (run.options.variant, run.options.preset, run.options.recipe) == ("admin", "60L-12L", "admin")
    assert (run.options.warmup_steps, run.options.learning_rate, run.options.optimizer) == (
        8000,
        7e-4,
        "radam",
    )
    assert (run.config["encoder_layers"], run.config["attention_dropout"]) == (60, 0.1)
    # --set over the paper preset and the shape; explicit options and config fields over --set
    run = resolve_run(
        {**BASE, "preset": "admin-60-12-wmt14-en-fr", "warmup_steps": 10},
        {"dropout": 0.2},
        config_set={"dropout": 0.3, "encoder_layers": 3, "attention_dropout": 0.0},
    )
    assert run.options.warmup_steps == 10
    assert (run.config["dropout"], run.config["encoder_layers"], run.config["attention_dropout"]) == (
        0.2,
        3,
        0.0,
    )
    assert run.overrides == {"dropout": 0.2, "encoder_layers": 3, "attention_dropout": 0.0}
    # an explicit recipe replaces the paper preset's recipe; the preset's own values stay above it
    run = resolve_run({**BASE, "preset": "admin-60-12-wmt14-en-fr", "recipe": "marian"})
    assert (run.options.recipe, run.options.optimizer, run.options.warmup_steps) == ("marian", "adam", 8000)
    # a TrainingOptions counts as given field by field; train() resolves the same run from (options, overrides)
    again = resolve_run(run.options, run.overrides)
    assert (again.options, again.config) == (run.options, run.config)


def test_label_smoothing_is_one_value(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--set label_smoothing sets the run's option, which the config takes; --label-smoothing wins over it. Before,
    the model trained with the --set value while the options (and metrics.json) kept 0.1."""
    seen = {}
    monkeypatch.setattr(training, "train", lambda options, overrides: seen.update(options=options) or {})
    for lang in ("a", "b"):  # the training split (checked before anything runs)
        (tmp_path / f"train.{lang}").write_text("x\n")
    common = ["train", "--data-dir", str(tmp_path), "--src-lang", "a", "--tgt-lang", "b", "--output-dir", "o"]
    assert main([*common, "--set", "label_smoothing=0.2"]) == 0
    assert seen["options"].label_smoothing == 0.2
    assert main([*common, "--set", "label_smoothing=0.2", "--label-smoothing", "0.3"]) == 0
    assert seen["options"].label_smoothing == 0.3
    run = resolve_run(seen["options"], {"label_smoothing": 0.05})  # the Python API's config field sets it too
    assert run.options.label_smoothing == run.config["label_smoothing"] == 0.05


# modules on the path of a run's values: none may write a default of a TrainingOptions field itself
PATH_MODULES = [
    "cli/train.py",
    "cli/schedule_flags.py",
    "cli/flags.py",
    "training/run.py",
    "training/inputs.py",
    "training/options.py",
    "training/resolution.py",
    "training/arguments.py",
    "science/paper_presets.py",
]


def _is_value(node: ast.AST | None) -> bool:
    """A literal that could be a field's value (None means "not given"; a "{...}" string is a template)."""
    if not isinstance(node, ast.Constant) or node.value is None:
        return False
    return not (isinstance(node.value, str) and "{" in node.value)


def _literal_defaults(tree: ast.AST, fields: set[str]) -> list[str]:
    """Where a module writes a literal default for one of `fields`: a parameter default, `.setdefault(field, x)`,
    `.get(field, x)`, or a module constant DEFAULT_*."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args.args + node.args.kwonlyargs
            defaults = [None] * (len(node.args.args) - len(node.args.defaults)) + node.args.defaults
            defaults += node.args.kw_defaults
            for arg, default in zip(args, defaults, strict=True):
                if arg.arg in fields and _is_value(default):
                    found.append(f"{node.name}({arg.arg}={default.value!r})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("setdefault", "get") and len(node.args) == 2:
                key, value = node.args
                if isinstance(key, ast.Constant) and key.value in fields and _is_value(value):
                    found.append(f".{node.func.attr}({key.value!r}, {value.value!r})")
        elif isinstance(node, ast.Assign) and node.col_offset == 0:
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
            found += [name for name in names if name.startswith("DEFAULT_")]
    return found


def test_one_default_per_field() -> None:
    """Every default of a run option is its TrainingOptions field's (`option_default`): no module on the path
    writes one again (before: build_config's label_smoothing 0.1 and lengths 128, nmt_recipe's clipping 1.0, the
    CLI's DEFAULT_EPOCHS, the paper preset command's save_steps 1000)."""
    fields = {f.name for f in dataclasses.fields(TrainingOptions)}
    found = {
        name: _literal_defaults(ast.parse((PACKAGE / name).read_text(encoding="utf-8")), fields)
        for name in PATH_MODULES
    }
    assert {name: where for name, where in found.items() if where} == {}
    # what build_config and the config take when nothing is given is the option's default
    assert resolve_run(BASE).config["label_smoothing"] == option_default("label_smoothing")
    # the help texts that state a default state the field's
    for field in dataclasses.fields(TrainingOptions):
        stated = re.search(r"\(default: ([-\w.]+)[,)]", field.metadata.get("help", ""))
        if stated and field.default not in (None, dataclasses.MISSING):
            if isinstance(field.default, str):
                assert stated.group(1) == field.default, field.name
            else:
                assert float(stated.group(1)) == field.default, field.name


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("data")
    for split, pairs in demo_splits(train=40, valid=4, test=4, seed=3).items():
        write_parallel_dir(pairs, directory, split, SRC_LANG, TGT_LANG)
    return directory


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--max-steps", "0"], "max_steps=0"),
        (["--preset", "nonsense"], "preset='nonsense'"),
        (["--set", "encoder_layers=-2"], "encoder_layers=-2"),
        (["--preset", "tiny", "--set", "max_position_embeddings=8"], "max_position_embeddings=8"),
    ],
)
def test_bad_values_are_refused_before_any_data_work(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fragment: str
) -> None:
    """One line, exit 2, no output folder, and no corpus read nor tokenizer trained (the cache stays empty).
    Before, --max-steps 0 trained one step and the others failed after the tokenizer was trained."""
    out, cache = tmp_path / "out", tmp_path / "cache"
    args = ["train", "--data-dir", str(data_dir), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG]
    args += ["--output-dir", str(out), "--cache-dir", str(cache), "--vocab-size", "120", "--no-final-eval"]
    assert main([*args, "--max-steps", "1", *flags] if "--max-steps" not in flags else [*args, *flags]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in err, err
    assert not out.exists() and not out.with_name("out.partial").exists()
    assert not cache.exists(), sorted(cache.rglob("*"))
