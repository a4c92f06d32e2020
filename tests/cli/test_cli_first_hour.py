"""A new user's first hour on a shared machine (issue #49 item 6): --threads on every command and a default that
does not collapse on shared cores; a model argument that is not a local directory fails at once in one line;
corrupt weights give one line naming the file; the tokenizer loads as a stock fast tokenizer."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from factories import tiny_model
from fresh_process import run_without_package

from deep_nmt_hf.cli import build_parser, common, main
from deep_nmt_hf.data.tokenization import save_tokenizer, train_tokenizer

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = "import sys; from deep_nmt_hf_cli import main; code = main(sys.argv[1:]); print('heavy:', 'torch' in sys.modules); raise SystemExit(code)"


def _leaf_parsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    children = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not children:
        yield path, parser
    for action in children:
        for name, child in action.choices.items():
            yield from _leaf_parsers(child, (*path, name))


def _one_error_line(code: int, capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    assert code == 2
    err = capsys.readouterr().err
    lines = [line for line in err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# ----------------------------------------------------------------------------------------------------- threads
def test_every_command_takes_threads() -> None:
    leaves = list(_leaf_parsers(build_parser()))
    assert len(leaves) >= 12
    for path, parser in leaves:
        action = next((a for a in parser._actions if "--threads" in a.option_strings), None)
        assert action is not None, f"{' '.join(path)} has no --threads"
        assert "OMP_NUM_THREADS" in action.help


def test_default_threads_honour_omp_and_leave_busy_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(common, "usable_cores", lambda: 2)
    monkeypatch.setattr(common, "other_jobs", lambda: 1.2)  # another job runs: one core is left
    assert common.resolve_threads(None) == 1
    monkeypatch.setattr(common, "other_jobs", lambda: 0.0)
    assert common.resolve_threads(None) == 2
    monkeypatch.setattr(common, "usable_cores", lambda: 64)
    assert common.resolve_threads(None) == common.THREADS_CAP == 4
    monkeypatch.setattr(common, "other_jobs", lambda: 100.0)
    assert common.resolve_threads(None) == 1 and common.resolve_threads(3) == 3
    monkeypatch.setenv("OMP_NUM_THREADS", "6")
    assert common.resolve_threads(None) == 6 and common.resolve_threads(2) == 2
    for bad in ("many", "0"):
        monkeypatch.setenv("OMP_NUM_THREADS", bad)
        with pytest.raises(ValueError, match="OMP_NUM_THREADS"):
            common.resolve_threads(None)
    with pytest.raises(ValueError, match="--threads 0"):
        common.resolve_threads(0)


def test_the_real_core_and_load_probes_answer() -> None:
    cores = common.usable_cores()
    assert 1 <= cores <= (os.cpu_count() or cores)
    assert common.other_jobs() >= 0 and 1 <= common.default_threads() <= common.THREADS_CAP


def test_threads_flag_sets_torch_threads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.en").write_text("a b\n")
    (data / "train.de").write_text("c d\n")
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        argv = ["data", "to-json", "--data-dir", str(data), "--src-lang", "en", "--tgt-lang", "de"]
        assert main([*argv, "--split", "train", str(tmp_path / "t.jsonl"), "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1
        _one_error_line(
            main([*argv, "--split", "train", str(tmp_path / "u.jsonl"), "--threads", "0"]),
            capsys,
            "--threads 0",
        )
    finally:
        torch.set_num_threads(before)


def test_the_suite_pins_its_threads() -> None:
    # tests/conftest.py: one thread unless the user set OMP_NUM_THREADS; subprocesses inherit the variable
    assert os.environ.get("OMP_NUM_THREADS", "").strip()
    assert torch.get_num_threads() == int(os.environ["OMP_NUM_THREADS"])


# -------------------------------------------------------------------------------------------- model argument
@pytest.fixture
def in_empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # an empty Hub cache
    return tmp_path


def test_a_bare_name_is_neither_a_directory_nor_a_hub_id(in_empty_dir: Path, capsys) -> None:
    line = _one_error_line(main(["translate", "admin-en-de"]), capsys, "admin-en-de", "not a local directory")
    assert "owner/name" in line and "did you mean" not in line
    (in_empty_dir / "out" / "admin-en-de").mkdir(parents=True)
    _one_error_line(main(["translate", "admin-en-de"]), capsys, f"did you mean {Path('out/admin-en-de')}?")
    _one_error_line(
        main(["evaluate", "admin-en-de", "--data-dir", "."]),
        capsys,
        "no such model directory",
        "did you mean",
    )


@pytest.mark.parametrize("model", ["./missing", "../missing-too", "missing/", "~/surely-missing-deep-nmt"])
def test_a_missing_path_is_no_such_directory(in_empty_dir: Path, capsys, model: str) -> None:
    _one_error_line(
        main(["translate", model]), capsys, model, "no such model directory", "saved model directory"
    )


def test_a_hub_id_offline_fails_in_one_line(in_empty_dir: Path, capsys, monkeypatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    _one_error_line(main(["translate", "me/nosuch-model"]), capsys, "me/nosuch-model", "HF_HUB_OFFLINE")
    # the commands that need the model's files take a local directory only
    _one_error_line(main(["fold", "me/nosuch-model", "x"]), capsys, "no such model directory")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "fragment"),
    [("me/nosuch-model", "the Hub cannot be reached"), ("admin-en-de", "not a Hub id (owner/name)")],
)
def test_no_network_fails_at_once_without_retries(tmp_path: Path, model: str, fragment: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "PYTHONPATH"))}
    # a closed local port: every connection is refused (the test never depends on the real network)
    env.update(HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(tmp_path / "hf_home"), PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-c", LAUNCH, "translate", model],
        cwd=tmp_path,
        env=env,
        input="hello\n",
        capture_output=True,
        text=True,
        timeout=60,  # the old code retried for about a minute
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0], result.stderr
    assert "heavy: False" in result.stdout  # answered before torch was imported


# ------------------------------------------------------------------------------------------------ bad weights
@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("saved") / "model"
    tiny_model(seed=3).save_pretrained(path)
    return path


def _corrupt(source: Path, target: Path, how: str) -> Path:
    target.mkdir(parents=True)
    (target / "config.json").write_bytes((source / "config.json").read_bytes())
    weights = (source / "model.safetensors").read_bytes()
    (target / "model.safetensors").write_bytes(b"" if how == "empty" else weights[: len(weights) // 2])
    return target / "model.safetensors"


@pytest.mark.parametrize("how", ["empty", "truncated"])
@pytest.mark.parametrize("command", ["translate", "evaluate", "fold", "export", "push", "average", "plot"])
def test_corrupt_weights_give_one_line_naming_the_file(
    saved_model, tmp_path, capsys, how: str, command: str
) -> None:
    if command == "average":
        weights = _corrupt(saved_model, tmp_path / "run" / "checkpoint-1", how)
        argv = ["average", str(tmp_path / "run"), "--last", "1"]
    else:
        weights = _corrupt(saved_model, tmp_path / "model", how)
        model = str(tmp_path / "model")
        argv = {
            "translate": ["translate", model],
            "evaluate": [
                "evaluate",
                model,
                "--data-dir",
                str(tmp_path),
                "--src-lang",
                "a",
                "--tgt-lang",
                "b",
            ],
            "fold": ["fold", model, str(tmp_path / "out")],
            "export": ["export", model, str(tmp_path / "out")],
            "push": ["push", model, "me/model", "--dry-run"],
            "plot": ["plot", "dlcl", model],
        }[command]
    line = _one_error_line(main(argv), capsys, str(weights), "corrupt weights", how)
    assert not (tmp_path / "out").exists()
    assert line.count("\n") == 0


# --------------------------------------------------------------------------------------------------- tokenizer
LOAD_TOKENIZERS = """
import contextlib, io, json
from transformers import AutoTokenizer
printed = io.StringIO()
with contextlib.redirect_stdout(printed):
    alone = AutoTokenizer.from_pretrained("tok")  # a tokenizer directory: no config.json, nothing to ask
    beside = AutoTokenizer.from_pretrained("model", trust_remote_code=False)  # beside a model's config.json
sentences = ["hello world", "hallo welt baz", "foo"]
print(json.dumps({"classes": [type(t).__module__ + "." + type(t).__name__ for t in (alone, beside)],
                  "ids": [t(sentences)["input_ids"] for t in (alone, beside)], "printed": printed.getvalue()}))
"""


@pytest.mark.slow
def test_the_tokenizer_loads_as_a_stock_fast_tokenizer_without_the_package(saved_model, tmp_path) -> None:
    tokenizer = train_tokenizer(["hello world foo bar", "hallo welt baz qux"] * 40, vocab_size=40)
    save_tokenizer(tokenizer, tmp_path / "tok")
    config = json.loads((tmp_path / "tok" / "tokenizer_config.json").read_text())
    assert "auto_map" not in config  # no remote code for the tokenizer
    (tmp_path / "model").mkdir()
    for item in saved_model.iterdir():
        (tmp_path / "model" / item.name).write_bytes(item.read_bytes())
    save_tokenizer(tokenizer, tmp_path / "model")
    result = run_without_package(LOAD_TOKENIZERS, tmp_path)
    assert all(name.startswith("transformers.") for name in result["classes"]), result["classes"]
    expected = tokenizer(["hello world", "hallo welt baz", "foo"])["input_ids"]
    assert result["ids"] == [expected, expected]
    assert "[y/N]" not in result["printed"]
