"""`deep-nmt train`'s flags (issue #51): a snapshot of the parser keeps the command line unchanged for users.

`tests/fixtures/train_flags.json` records every action of the `train` parser as it was before its flags were
generated from `TrainingOptions`' field metadata (`deep_nmt_hf/cli/flags.py`): option strings, dest, default,
choices, nargs, type, help, metavar, required, const, the action's kind, its argument group and its mutually
exclusive group, in parser order (the order `--help` lists them). A deliberate change of a flag rewrites the
fixture: `python tests/cli/test_cli_flags.py` (then review its diff).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from fresh_process import run_with_package

from deep_nmt_hf import training
from deep_nmt_hf.cli import build_parser
from deep_nmt_hf.cli import train as train_command
from deep_nmt_hf.cli.flags import FieldFlags, add_field_flags, field_values, flag_dest, flag_fields
from deep_nmt_hf.science.paper_presets import preset_values
from deep_nmt_hf.science.recipes import recipe_options
from deep_nmt_hf.training import TrainingOptions
from deep_nmt_hf.training import options as options_module

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "train_flags.json"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def train_parser() -> argparse.ArgumentParser:
    """The `train` subparser, as tests/cli/test_cli.py obtains it."""
    return _subparsers(build_parser())["train"]


def _type_name(kind: Any) -> str | None:
    return None if kind is None else getattr(kind, "__name__", repr(kind))


def snapshot(parser: argparse.ArgumentParser) -> dict[str, Any]:
    """The parser's argument groups and every action's settings, as JSON data."""
    group_of = {id(a): group.title for group in parser._action_groups for a in group._group_actions}
    numbered = enumerate(parser._mutually_exclusive_groups)
    exclusive = {id(a): index for index, group in numbered for a in group._group_actions}
    actions = [
        {
            "option_strings": list(action.option_strings),
            "dest": action.dest,
            "action": type(action).__name__,
            "default": action.default,
            "choices": None if action.choices is None else list(action.choices),
            "nargs": action.nargs,
            "type": _type_name(action.type),
            "help": action.help,
            "metavar": action.metavar,
            "required": action.required,
            "const": action.const,
            "group": group_of.get(id(action)),
            "mutually_exclusive_group": exclusive.get(id(action)),
        }
        for action in parser._actions
    ]
    groups = [group.title for group in parser._action_groups]
    exclusive_groups = [group.required for group in parser._mutually_exclusive_groups]
    record = {"groups": groups, "mutually_exclusive_groups_required": exclusive_groups, "actions": actions}
    return json.loads(json.dumps(record))  # tuples as lists, exactly as the fixture reads back


def test_train_parser_equals_the_snapshot() -> None:
    expected = json.loads(FIXTURE.read_text())
    current = snapshot(train_parser())
    assert current["groups"] == expected["groups"]
    assert current["mutually_exclusive_groups_required"] == expected["mutually_exclusive_groups_required"]
    flags = [action["option_strings"] for action in current["actions"]]
    assert flags == [action["option_strings"] for action in expected["actions"]]  # same flags, same order
    for now, then in zip(current["actions"], expected["actions"], strict=True):
        assert now == then, f"{then['option_strings']} changed"


def _actions_by_option(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def test_each_generated_flag_takes_help_and_choices_from_its_field() -> None:
    """Change detector: the flag of every `TrainingOptions` field with flag metadata says exactly what the
    metadata says (the help text lives once, beside the field)."""
    fields = flag_fields(TrainingOptions)
    assert len(fields) >= 45  # the options' flags are generated, not written twice
    actions = _actions_by_option(train_parser())
    for field in fields:
        option = field.metadata.get("flag", "--" + field.name.replace("_", "-"))
        action = actions[option]
        assert action.help == field.metadata["help"], option
        assert action.dest == flag_dest(field), option
        assert action.choices == field.metadata.get("choices"), option
        if "metavar" in field.metadata:
            assert action.metavar == field.metadata["metavar"], option
        default = field.metadata.get("flag_default", field.default)
        if field.default is not dataclasses.MISSING:
            assert action.default == default, option
        else:
            assert action.required, option


def test_train_parses_into_the_fields_it_was_made_from() -> None:
    argv = ["train", "--data-dir", "d", "--src-lang", "en", "--tgt-lang", "de", "--output-dir", "o"]
    argv += ["--lr", "1e-3", "--epochs", "3", "--update-freq", "2", "--fsdp", "--tokenizer", "tok"]
    values = field_values(build_parser().parse_args(argv), TrainingOptions)
    assert {f.name for f in flag_fields(TrainingOptions)} == set(values)
    assert values["learning_rate"] == 1e-3 and values["num_train_epochs"] == 3.0
    assert values["gradient_accumulation_steps"] == 2 and values["fsdp"] is True
    assert values["tokenizer_dir"] == Path("tok") and values["output_dir"] == Path("o")
    assert values["warmup_steps"] is None and values["batch_size"] == 32  # unset: the recipe's; a default


def _options_of(argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TrainingOptions:
    """The TrainingOptions `deep-nmt train ARGV` hands to `train` (which does not run here)."""
    captured: dict[str, Any] = {}

    def fake_train(options: TrainingOptions, config: dict[str, Any]) -> dict[str, Any]:
        captured["options"] = options
        return {"process_index": 1}  # a non-zero rank: the command prints nothing

    monkeypatch.setattr(training, "train", fake_train)
    base = ["train", "--data-dir", str(tmp_path), "--src-lang", "en", "--tgt-lang", "de"]
    assert train_command._cmd_train(build_parser().parse_args([*base, "--output-dir", "out", *argv])) == 0
    return captured["options"]


def test_train_hands_the_flags_recipe_and_preset_to_the_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    options = _options_of(["--recipe", "admin", "--lr", "1e-3", "--tokenizer", "tok"], tmp_path, monkeypatch)
    recipe = recipe_options("admin")
    assert options.recipe == "admin" and options.learning_rate == 1e-3  # an explicit flag wins
    assert options.warmup_steps == recipe["warmup_steps"] and options.variant == recipe["variant"]
    assert options.tokenizer_dir == "tok" and options.output_dir == "out" and options.data_source == tmp_path
    assert options.max_steps == -1 and options.batch_size == 32 and options.disable_tqdm is None

    name = "dlcl-30-6-wmt16-en-de"
    options = _options_of(["--preset", name, "--update-freq", "4"], tmp_path, monkeypatch)
    preset_recipe, preset_options, _ = preset_values(name)
    assert options.recipe == preset_recipe and options.gradient_accumulation_steps == 4
    assert options.num_train_epochs == preset_options["num_train_epochs"]  # --epochs not given

    # a preset that sets fields whose flags have defaults (max_steps, save_steps): the flag at its default yields,
    # an explicit value wins (this raised "got multiple values" before)
    name = "dsinit-matt-12-12-wmt14-en-de"
    _, preset_options, _ = preset_values(name)
    options = _options_of(["--preset", name], tmp_path, monkeypatch)
    assert (options.max_steps, options.save_steps) == (
        preset_options["max_steps"],
        preset_options["save_steps"],
    )
    options = _options_of(["--preset", name, "--max-steps", "7"], tmp_path, monkeypatch)
    assert options.max_steps == 7 and options.save_steps == preset_options["save_steps"]

    options = _options_of(["--no-progress", "--bf16", "--no-final-eval", "--streaming", "--max-steps", "2"],
                          tmp_path, monkeypatch)  # fmt: skip
    assert options.disable_tqdm is True and options.precision == "bf16" and options.final_eval_samples == 0
    assert options.streaming and options.max_steps == 2 and options.recipe is None


@dataclasses.dataclass
class _Toy:
    name: str = dataclasses.field(metadata={"help": "a required name"})
    steps: int = dataclasses.field(default=3, metadata={"help": "steps to run"})
    rate: float | None = dataclasses.field(default=None, metadata={"help": "the rate", "flag": "--lr"})
    mode: str = dataclasses.field(
        default="a", metadata={"help": "the mode", "choices": ("a", "b"), "flag_default": None}
    )
    fast: bool = dataclasses.field(default=False, metadata={"help": "go fast"})
    where: str | None = dataclasses.field(
        default=None, metadata={"help": "a folder", "type": Path, "metavar": "DIR", "dest": "folder"}
    )
    hidden: int = 7  # no metadata: no flag


def test_a_field_with_metadata_gets_a_flag_automatically() -> None:
    parser = argparse.ArgumentParser()
    add_field_flags(parser, _Toy)
    actions = _actions_by_option(parser)
    assert set(actions) == {"-h", "--help", "--name", "--steps", "--lr", "--mode", "--fast", "--where"}
    assert actions["--name"].required and actions["--steps"].type is int and actions["--steps"].default == 3
    assert actions["--lr"].type is float and actions["--lr"].dest == "lr"
    assert actions["--mode"].choices == ("a", "b") and actions["--mode"].default is None
    assert isinstance(actions["--fast"], argparse._StoreTrueAction)
    assert actions["--where"].metavar == "DIR" and actions["--where"].dest == "folder"
    args = parser.parse_args(["--name", "x", "--lr", "0.5", "--fast", "--where", "out"])
    assert field_values(args, _Toy) == {
        "name": "x", "steps": 3, "rate": 0.5, "mode": None, "fast": True, "where": Path("out")
    }  # fmt: skip
    with pytest.raises(SystemExit):
        parser.parse_args(["--name", "x", "--mode", "c"])  # choices are checked

    # a new field with metadata: its flag appears, nothing else to write
    grown = dataclasses.make_dataclass(
        "Grown", [("extra", int, dataclasses.field(default=1, metadata={"help": "one more"}))], bases=(_Toy,)
    )
    parser = argparse.ArgumentParser()
    add_field_flags(parser, grown)
    assert _actions_by_option(parser)["--extra"].help == "one more"


def test_a_new_training_option_with_metadata_gets_a_train_flag(monkeypatch: pytest.MonkeyPatch) -> None:
    """`deep-nmt train` places the flags it knows; a TrainingOptions field added with metadata gets its flag
    (at the end of the training group) without any change to cli/train.py."""
    help_text = "a brand-new option"
    grown = dataclasses.make_dataclass(
        "TrainingOptions",
        [("new_option", int, dataclasses.field(default=5, metadata={"help": help_text}))],
        bases=(TrainingOptions,),
    )
    monkeypatch.setattr(options_module, "TrainingOptions", grown)
    parser = train_parser()
    action = _actions_by_option(parser)["--new-option"]
    assert action.help == help_text and action.default == 5 and action.type is int
    group = next(group for group in parser._action_groups if group.title == "training")
    assert group._group_actions[-1] is action


def test_field_flags_refuse_unknown_metadata_and_repeats() -> None:
    @dataclasses.dataclass
    class Typo:
        steps: int = dataclasses.field(default=1, metadata={"help": "h", "chioces": (1, 2)})

    with pytest.raises(TypeError, match="chioces"):
        add_field_flags(argparse.ArgumentParser(), Typo)
    flags = FieldFlags(_Toy)
    parser = argparse.ArgumentParser()
    flags.add(parser, "steps")
    with pytest.raises(ValueError, match="already"):
        flags.add(parser, "steps")
    with pytest.raises(KeyError):
        flags.add(parser, "hidden")  # no metadata: no flag


LIGHT_PARSE = """
import json, sys
from deep_nmt_hf_cli import main
try:
    main(["train", "--help"])
except SystemExit:
    pass
import deep_nmt_hf
light = {"heavy": sorted(m for m in ("torch", "transformers") if m in sys.modules),
         "training_modules": sorted(m for m in sys.modules if m.startswith("deep_nmt_hf.training")),
         "registered": deep_nmt_hf._registered}
deep_nmt_hf.register()
from transformers import AutoConfig
from deep_nmt_hf.training import TrainingOptions, train
light["real"] = TrainingOptions is sys.modules["deep_nmt_hf.training.options"].TrainingOptions
light["auto"] = type(AutoConfig.for_model("deep_nmt_admin")).__name__
print(json.dumps(light))
"""


@pytest.mark.slow
def test_train_help_reads_the_options_without_torch_and_registers_after() -> None:
    """The launcher builds `train`'s parser from `training/options.py` with the package's lazy names (PEP 562:
    no torch, no stand-in package, no module dropped or re-run); registration, held while it parses, runs once
    asked and the same modules serve the rest of the process."""
    probe = run_with_package(LIGHT_PARSE)
    assert probe == {
        "heavy": [],
        "training_modules": [
            "deep_nmt_hf.training",
            "deep_nmt_hf.training.options",
            "deep_nmt_hf.training.precision",
        ],
        "registered": False,
        "real": True,
        "auto": "AdminConfig",
    }


if __name__ == "__main__":  # rewrite the fixture from the current parser
    FIXTURE.parent.mkdir(exist_ok=True)
    FIXTURE.write_text(json.dumps(snapshot(train_parser()), indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {FIXTURE}")
