"""The last rough errors of a newcomer's first hour (issue #59, item 3): an unknown model_type, missing weights,
invalid JSON, Ctrl-C during train, and `push --dry-run` after a failure — each one line, exit 2 (130 for
Ctrl-C), at once, nothing left behind."""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from factories import tiny_model

from deep_nmt_hf.cli import common, main
from deep_nmt_hf.cli.interrupt import interrupted_message, resume_argv
from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.data.tokenization import save_tokenizer, train_tokenizer

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = (
    "import sys; from deep_nmt_hf_cli import main; code = main(sys.argv[1:]); "
    "print('heavy:', 'torch' in sys.modules); raise SystemExit(code)"
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny saved model with its tokenizer (config.json with auto_map, as every saved model has)."""
    path = tmp_path_factory.mktemp("saved") / "model"
    tiny_model(seed=5).save_pretrained(path)
    tokenizer = train_tokenizer(["ta voru fatu .", "ela gupebeda avure ."] * 40, vocab_size=40)
    save_tokenizer(tokenizer, path)
    return path


def _copy(source: Path, target: Path) -> Path:
    target.mkdir(parents=True)
    for item in source.iterdir():
        if item.is_file():
            (target / item.name).write_bytes(item.read_bytes())
    return target


def _one_error_line(code: int, err: str, *fragments: str) -> str:
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------------------- unknown model_type
@pytest.mark.parametrize(
    "command", ["translate", "evaluate", "fold", "export", "push", "push-dry-run", "plot-dlcl", "plot-omega"]
)
def test_an_unknown_model_type_is_named_without_a_question_on_stdin(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, command: str
) -> None:
    """Transformers would ask twice whether to run the directory's code, reading the answers from stdin (the
    first sentences of `deep-nmt translate`), then fail without naming the type."""
    model = _copy(model_dir, tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    assert "auto_map" in config
    config["model_type"] = "deep_nmt_future"
    (model / "config.json").write_text(json.dumps(config))
    for split in ("test",):
        (tmp_path / f"{split}.sa").write_text("ta voru fatu .\n")
        (tmp_path / f"{split}.sb").write_text("ta voru fatu .\n")
    stdin_file = tmp_path / "stdin.txt"
    stdin_file.write_text("yes\nyes\nta voru fatu .\n")
    argv = {
        "translate": ["translate", str(model)],
        "evaluate": [
            "evaluate",
            str(model),
            "--data-dir",
            str(tmp_path),
            "--src-lang",
            "sa",
            "--tgt-lang",
            "sb",
        ],
        "fold": ["fold", str(model), str(tmp_path / "out")],
        "export": ["export", str(model), str(tmp_path / "out")],
        "push": ["push", str(model), "me/model", "--staging-dir", str(tmp_path / "out")],
        "push-dry-run": ["push", str(model), "me/model", "--dry-run", "--staging-dir", str(tmp_path / "out")],
        "plot-dlcl": ["plot", "dlcl", str(model), "--out", str(tmp_path / "out.png")],
        "plot-omega": ["plot", "omega", str(model), "--out", str(tmp_path / "out.png")],
    }[command]
    # push: a Hub that answers (no network is test_cli_offline.py's), so that the model's type is what fails
    monkeypatch.setattr(common, "check_hub_reachable", lambda *args, **kwargs: None)
    with stdin_file.open() as stdin:
        monkeypatch.setattr(sys, "stdin", stdin)
        code = main(argv)
        position = stdin.tell()
    captured = capsys.readouterr()
    line = _one_error_line(code, captured.err, "'deep_nmt_future'", "deep_nmt_admin", "marian", "config.json")
    assert "trust_remote_code=True" in line  # the directory ships code: how to run it, if the user trusts it
    assert position == 0, "standard input was read"
    assert "[y/N]" not in captured.out + captured.err
    assert not list(tmp_path.glob("out*")), "an output was written"


# ------------------------------------------------------------------------------- missing weights, invalid JSON
@pytest.mark.slow
@pytest.mark.parametrize(
    "broken, argv, fragments",
    [
        ("no weights", ["translate", "MODEL"], ["model.safetensors: missing", "no weights"]),
        ("config.json", ["export", "MODEL", "OUT"], ["config.json: invalid JSON", "line 1"]),
        ("generation_config.json", ["export", "MODEL", "OUT"], ["generation_config.json: invalid JSON"]),
        ("tokenizer_config.json", ["fold", "MODEL", "OUT"], ["tokenizer_config.json: invalid JSON"]),
    ],
)
def test_missing_weights_and_invalid_json_are_named_before_torch_is_imported(
    model_dir: Path, tmp_path: Path, broken: str, argv: list[str], fragments: list[str]
) -> None:
    model = _copy(model_dir, tmp_path / "model")
    if broken == "no weights":
        (model / "model.safetensors").unlink()
    else:
        (model / broken).write_text('{"vocab_size": ')
    argv = [str(model) if a == "MODEL" else str(tmp_path / "out") if a == "OUT" else a for a in argv]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-c", LAUNCH, *argv], capture_output=True, text=True, env=env, cwd=tmp_path, input=""
    )
    line = _one_error_line(result.returncode, result.stderr, str(model), *fragments)
    assert "Error no file named" not in line
    assert "heavy: False" in result.stdout  # answered before torch and Transformers are imported
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------------------------------- Ctrl-C
def test_interrupted_message_without_a_checkpoint_says_nothing_was_kept(tmp_path: Path) -> None:
    args = argparse.Namespace(command="train", output_dir=tmp_path / "run", save_steps=500)
    argv = ["train", "--data-dir", "d", "--output-dir", str(tmp_path / "run"), "--resume"]
    line = interrupted_message(args, argv)
    assert "before the first checkpoint (one is written every 500 steps" in line
    assert line.endswith(f"deep-nmt train --data-dir d --output-dir {tmp_path / 'run'}")
    assert interrupted_message(argparse.Namespace(command="demo", output_dir=tmp_path), []) == "interrupted"
    assert resume_argv(["train", "--overwrite", "--x", "1"]) == ["train", "--x", "1", "--resume"]
    assert resume_argv(["train", "--resume"]) == ["train", "--resume"]


def test_ctrl_c_in_train_says_where_the_partial_run_is_and_the_printed_command_continues_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, caplog
) -> None:
    """One line, on a line of its own (a progress bar's line has no end), no second "interrupted" log line;
    the resumed run's train_runtime counts the whole run."""
    from deep_nmt_hf.training.trainer import DeepNMTTrainer

    data = tmp_path / "data"
    for split, pairs in demo_splits(train=64, valid=4, test=4, seed=3).items():
        write_parallel_dir(pairs, data, split, SRC_LANG, TGT_LANG)
    out = tmp_path / "run"
    argv = ["train", "--data-dir", str(data), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG]
    argv += ["--output-dir", str(out), "--d-model", "32", "--encoder-layers", "2", "--decoder-layers", "2"]
    argv += [
        "--heads",
        "4",
        "--ffn-dim",
        "64",
        "--vocab-size",
        "120",
        "--batch-size",
        "16",
        "--max-steps",
        "4",
    ]
    argv += ["--save-steps", "1", "--no-final-eval", "--no-progress", "--overwrite"]

    step = DeepNMTTrainer.training_step
    calls = []

    def interrupted_at_the_third_step(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return step(self, *args, **kwargs)

    monkeypatch.setattr(DeepNMTTrainer, "training_step", interrupted_at_the_third_step)
    assert main(argv) == 130
    err = capsys.readouterr().err
    partial = out.with_name("run.partial")
    lines = [line for line in err.splitlines() if line.startswith("interrupted")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "\ninterrupted" in err  # never appended to the end of a progress bar's line
    logged = [r.getMessage() for r in caplog.records if "interrupted" in r.getMessage()]
    assert not logged, logged  # the CLI's line is the only one
    assert f"the partial run is in {partial} (last checkpoint checkpoint-2)" in lines[0], lines[0]
    command = lines[0].split("continue it with: ", 1)[1]
    assert (
        command.startswith("deep-nmt train ")
        and command.endswith(" --resume")
        and "--overwrite" not in command
    )
    assert sorted(p.name for p in partial.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]

    state = json.loads((partial / "checkpoint-2" / "trainer_state.json").read_text())
    before = state["stateful_callbacks"]["TrainingClock"]["attributes"]["before_s"]  # training s up to step 2

    monkeypatch.setattr(DeepNMTTrainer, "training_step", step)
    assert main(shlex.split(command)[1:]) == 0  # the printed command continues the run to its end
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["global_step"] == 4 and not partial.exists()
    runtime = metrics["train"]
    assert runtime["train_runtime_before_resume"] == round(before, 4) and before > 0
    assert runtime["train_runtime"] > before  # the whole run: the part before the resume and the resumed part


# ---------------------------------------------------------------------------------------------- push --dry-run
def test_push_dry_run_leaves_nothing_behind_after_a_failure_and_names_its_temporary_folder(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    dlcl = tmp_path / "dlcl"
    tiny_model(seed=1, encoder_layer_aggregation="dlcl").save_pretrained(dlcl)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (dlcl / name).write_bytes((model_dir / name).read_bytes())
    code = main(["push", str(dlcl), "me/dlcl", "--fold", "--dry-run"])
    _one_error_line(code, capsys.readouterr().err, "encoder_layer_aggregation='dlcl'")
    assert list(temp.iterdir()) == [], "a failed dry run left its temporary folder"

    assert main(["push", str(model_dir), "me/tiny", "--dry-run"]) == 0
    out = capsys.readouterr().out
    match = re.search(r"the folder for me/tiny is (\S+) \(temporary: `rm -r (\S+)` removes it", out)
    assert match, out
    folder, parent = Path(match.group(1)), Path(match.group(2))
    assert folder.parent == parent and parent.parent == temp and (folder / "README.md").is_file()
