"""Tests for the `deep-nmt` command line (deep_nmt_hf.cli)."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from factories import SAVED_MODEL_FILES
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from deep_nmt_hf.cli import CHOICE_FLAGS, build_parser, main
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG
from deep_nmt_hf.training import translate

SUBCOMMANDS = ("train", "evaluate", "translate", "demo")
DEMO_ARGS = ["--train-size", "300", "--valid-size", "10", "--test-size", "12", "--max-steps", "12"]
DEMO_ARGS += ["--batch-size", "16", "--num-beams", "2", "--no-progress", "--time-budget", "0"]  # every step
TINY_FLAGS = [
    "--d-model",
    "32",
    "--encoder-layers",
    "2",
    "--decoder-layers",
    "2",
    "--heads",
    "4",
    "--ffn-dim",
    "64",
]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A very short `deep-nmt demo` run (small corpus, few steps), shared by the tests below."""
    out = tmp_path_factory.mktemp("demo") / "out"
    assert main(["demo", "--output-dir", str(out), *DEMO_ARGS]) == 0
    return out


# -------------------------------------------------------------------------------------------------------- help
@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_help_mentions_every_flag(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    subparser = _subparsers(build_parser())[command]
    flags = [option for action in subparser._actions for option in action.option_strings]
    assert len(flags) > 3
    for action in subparser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        assert action.help, f"{command}: {action.option_strings or action.dest} has no help text"
        for option in action.option_strings:
            assert option in text, f"{command} --help does not mention {option}"
    if command == "train":
        for field in CHOICE_FLAGS:
            assert "--" + field.replace("_", "-") in text
        for flag in ("--data-dir", "--variant", "--gradient-checkpointing", "--warmup-steps", "--tokenizer"):
            assert flag in text
        assert "(default: 5e-4, or the recipe's)" in text  # defaults are shown (a --recipe may replace them)
        assert "--recipe" in text and "(default: 8000)" in text
        assert "post, pre" in text  # the allowed values of --layer-norm-position


def test_top_level_help_lists_subcommands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert all(command in text for command in SUBCOMMANDS)


# -------------------------------------------------------------------------------------------------------- demo
def test_demo_end_to_end(demo_dir: Path) -> None:
    for name in SAVED_MODEL_FILES:
        assert (demo_dir / name).is_file(), name
    for split in ("train", "valid", "test"):
        assert (demo_dir / "data" / f"{split}.{SRC_LANG}").is_file()
    assert len((demo_dir / "data" / f"test.{TGT_LANG}").read_text().splitlines()) == 12
    assert not demo_dir.with_name(demo_dir.name + ".partial").exists()
    assert not list(demo_dir.glob("checkpoint-*"))
    # the test translations beside metrics.json, one line per test sentence (what the BLEU below scored)
    hypotheses = (demo_dir / f"test.hyp.{TGT_LANG}").read_text(encoding="utf-8").splitlines()
    assert len(hypotheses) == 12 and any(hypotheses)
    metrics = json.loads((demo_dir / "metrics.json").read_text())
    assert metrics["eval_split"] == "test" and metrics["num_sentences"] == 12
    assert isinstance(metrics["bleu"], float) and metrics["bleu_signature"].startswith("nrefs:1|")
    assert metrics["chrf_signature"].startswith("nrefs:1|")
    assert metrics["global_step"] == 12
    assert metrics["data_source"] == str(
        demo_dir / "data"
    )  # recorded where the data ends up, not the staging dir
    assert metrics["model"]["config"]["encoder_layers"] > metrics["model"]["config"]["decoder_layers"]
    model = AutoModelForSeq2SeqLM.from_pretrained(demo_dir)
    tokenizer = AutoTokenizer.from_pretrained(demo_dir)
    outputs = translate(model, tokenizer, ["ta voru fatu .", ""], num_beams=2, max_new_tokens=8)
    assert len(outputs) == 2 and outputs[1] == "" and isinstance(outputs[0], str)


def test_demo_prints_scores_and_loading_instructions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    args = ["demo", "--output-dir", str(tmp_path / "d"), "--train-size", "120", "--valid-size", "4"]
    args += ["--test-size", "4", "--max-steps", "2", "--batch-size", "8", "--num-beams", "1", "--no-progress"]
    threads = torch.get_num_threads()
    try:
        with caplog.at_level("INFO"):
            assert main([*args, "--threads", "1"]) == 0
        assert torch.get_num_threads() == 1  # --threads honoured
    finally:
        torch.set_num_threads(threads)
    assert "expected time: about" in caplog.text and "with 1 thread(s)" in caplog.text
    out = capsys.readouterr().out
    assert "BLEU" in out and "chrF" in out and "nrefs:1|" in out
    assert "AutoModelForSeq2SeqLM.from_pretrained" in out and "trust_remote_code=True" in out
    assert "PreTrainedTokenizerFast.from_pretrained(path)" in out  # the tokenizer is stock
    assert f"test translations: {tmp_path / 'd' / 'test.hyp.sb'}" in out
    assert "import deep_nmt_hf" in out
    # a second run into the same directory is refused (nothing overwritten) unless --overwrite
    assert main(args) == 2
    assert "--overwrite" in capsys.readouterr().err


def test_demo_records_its_threads_and_its_promise(demo_dir: Path) -> None:
    """Issue #59, item 2: metrics.json says with how many threads the demo ran (beside the versions and the
    seed) and what its time budget did, so a user can tell why a score differs."""
    metrics = json.loads((demo_dir / "metrics.json").read_text())
    assert metrics["threads"] == [{"from_step": 0, "threads": 1}]  # OMP_NUM_THREADS=1 in the tests: fixed
    demo = metrics["demo"]
    assert demo["threads_follow_load"] is False and demo["budget_s"] is None  # --time-budget 0
    assert demo["promised_s"] > 0 and demo["stopped_early_at_step"] is None
    assert 0 < demo["training_s"] <= demo["total_s"]
    assert "versions" in metrics and metrics["hyperparameters"]["seed"] == 1234


def test_the_demo_trains_a_smaller_model_when_the_default_would_not_fit() -> None:
    """The model is chosen from the speed measured before training (a fake probe here): the default where its
    steps and scoring fit what is left of the budget, else the smaller one, whose steps are then planned."""
    from deep_nmt_hf.cli.demo import DEMO_MODEL, DEMO_SMALL_MODEL, choose_demo_model
    from deep_nmt_hf.training.time_budget import fits

    def probe(speeds: dict[int, float]):
        return lambda fields: speeds[fields["d_model"]]

    def clock() -> float:
        return 20.0  # 20 s gone on imports

    free = probe({128: 0.25, 64: 0.06})  # a free machine: 800 steps + 30 of scoring = 208 s < 0.85 * 280 s
    assert choose_demo_model(300.0, 800, 30.0, clock, free) == (DEMO_MODEL, [0.25])
    busy = probe({128: 1.6, 64: 0.3})  # load 10: 1328 s for the default; 249 s for the small one
    assert choose_demo_model(300.0, 800, 30.0, clock, busy) == (DEMO_SMALL_MODEL, [1.6, 0.3])
    hopeless = probe({128: 5.0, 64: 1.0})  # neither fits: the small one, its steps planned by the budget
    assert choose_demo_model(300.0, 800, 30.0, clock, hopeless) == (DEMO_SMALL_MODEL, [5.0, 1.0])
    assert choose_demo_model(None, 800, 30.0, clock, busy) == (DEMO_MODEL, [])  # no budget: nothing probed
    assert fits(0.25, 800, 30.0, 280.0) and not fits(0.3, 800, 30.0, 280.0) and fits(9.0, 800, 30.0, None)


def test_each_demo_model_trains_at_its_own_peak_learning_rate_and_steps() -> None:
    """The default (deep, DS-Init) model and the busy machine's smaller one each train at the rate measured best
    for them (bench/results/demo_tuning.md), the smaller one 1.5x the steps, where it matches the default's score;
    --lr and --max-steps override both."""
    from deep_nmt_hf.cli.demo import (
        DEMO_MODEL,
        DEMO_PEAK_LR,
        DEMO_SMALL_MODEL,
        demo_learning_rate,
        demo_steps,
    )

    assert DEMO_MODEL["init_method"] == DEMO_SMALL_MODEL["init_method"] == "ds_init"
    assert demo_learning_rate(DEMO_MODEL, None) == DEMO_PEAK_LR["default"]
    assert demo_learning_rate(DEMO_SMALL_MODEL, None) == DEMO_PEAK_LR["small"]
    assert demo_learning_rate(DEMO_SMALL_MODEL, 1e-4) == demo_learning_rate(DEMO_MODEL, 1e-4) == 1e-4
    assert (demo_steps(DEMO_MODEL, 800, None), demo_steps(DEMO_SMALL_MODEL, 800, None)) == (800, 1200)
    assert demo_steps(DEMO_SMALL_MODEL, 800, 300) == demo_steps(DEMO_MODEL, 800, 300) == 300


# --------------------------------------------------------------------------------------------------- translate
def test_translate_reads_stdin(
    demo_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    sources = (demo_dir / "data" / f"test.{SRC_LANG}").read_text().splitlines()[:3]
    lines = [sources[0], "", sources[1], "   ", sources[2]]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(("\n".join(lines) + "\n").encode())))
    assert (
        main(["translate", str(demo_dir), "--num-beams", "2", "--batch-size", "2", "--max-new-tokens", "12"])
        == 0
    )
    out = capsys.readouterr().out.split("\n")
    assert out[-1] == "" and len(out) == len(lines) + 1  # one line per input line
    assert out[1] == "" and out[3] == ""
    model = AutoModelForSeq2SeqLM.from_pretrained(demo_dir)
    tokenizer = AutoTokenizer.from_pretrained(demo_dir)
    expected = translate(model, tokenizer, sources, num_beams=2, batch_size=2, max_new_tokens=12)
    assert [out[0], out[2], out[4]] == expected


@pytest.mark.slow
def test_translate_as_module_subprocess(demo_dir: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "deep_nmt_hf.cli",
            "translate",
            str(demo_dir),
            "--num-beams",
            "1",
            "--max-new-tokens",
            "6",
        ],
        input="ta voru fatu .\n\nvu no mevada .\n",
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""


# ---------------------------------------------------------------------------------------------------- evaluate
def test_evaluate_prints_scores_with_signatures(demo_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["evaluate", str(demo_dir), "--data-dir", str(demo_dir / "data"), "--split", "test"]
    args += ["--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG, "--num-beams", "2", "--batch-size", "64"]
    assert main(args) == 0
    out = capsys.readouterr().out
    saved = json.loads((demo_dir / "metrics.json").read_text())
    bleu_line = next(line for line in out.splitlines() if line.startswith("BLEU"))
    assert saved["bleu_signature"] in bleu_line
    assert f"{saved['bleu']:6.2f}".strip() in bleu_line  # the demo scored the same split with the same beam
    assert any(line.startswith("chrF") and "nrefs:1|" in line for line in out.splitlines())
    assert any(line.startswith("TER") and "nrefs:1|" in line for line in out.splitlines())
    # --json, languages taken from the model's metrics.json
    assert (
        main(["evaluate", str(demo_dir), "--data-dir", str(demo_dir / "data"), "--num-beams", "1", "--json"])
        == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["split"] == "test" and result["src_lang"] == SRC_LANG and result["num_sentences"] == 12
    assert result["chrf_signature"].startswith("nrefs:1|")


# ------------------------------------------------------------------------------------------------------ errors
def _train_args(data_dir: Path, out: Path, *extra: str) -> list[str]:
    args = ["train", "--data-dir", str(data_dir), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG]
    return args + ["--output-dir", str(out), "--max-steps", "1", "--vocab-size", "300", *TINY_FLAGS, *extra]


def _expect_error(args: list[str], capsys: pytest.CaptureFixture[str], *fragments: str) -> str:
    assert main(args) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.strip().splitlines() if line.startswith("error:")]
    assert len(lines) == 1, captured.err
    assert "Traceback" not in captured.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def test_train_missing_data_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    _expect_error(_train_args(tmp_path / "nowhere", out), capsys, "nowhere")
    assert not list(tmp_path.iterdir())


def test_train_unknown_split(demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    _expect_error(_train_args(demo_dir / "data", out, "--train-split", "nosuch"), capsys, "nosuch")
    _expect_error(_train_args(demo_dir / "data", out, "--valid-split", "dev2"), capsys, "dev2")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--layer-norm-position", "middle"], "layer_norm_position"),
        (["--decoder-attention", "sideways"], "decoder_attention"),
        (["--set", "dlcl_window=-5"], "dlcl_window"),
        (["--set", "no_such_field=1"], "no_such_field"),
        (["--variant", "nonsense"], "deep_nmt"),
        (["--dropout", "1.5"], "dropout"),
    ],
)
def test_train_bad_config_value(
    demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], fragment: str
) -> None:
    out = tmp_path / "out"
    _expect_error(_train_args(demo_dir / "data", out, *flags), capsys, fragment)
    assert not list(tmp_path.iterdir())  # no output dir, no staging dir


def test_evaluate_and_translate_errors(
    demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _expect_error(
        ["evaluate", str(tmp_path / "nomodel"), "--data-dir", str(demo_dir / "data")], capsys, "nomodel"
    )
    _expect_error(
        ["evaluate", str(demo_dir), "--data-dir", str(demo_dir / "data"), "--split", "nosuch"],
        capsys,
        "nosuch",
    )
    _expect_error(["evaluate", str(demo_dir), "--data-dir", str(tmp_path / "nodata")], capsys, "nodata")
    _expect_error(["translate", str(tmp_path / "nomodel")], capsys, "nomodel")


def test_train_cli_end_to_end(demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "model"
    args = _train_args(
        demo_dir / "data", out, "--layer-norm-position", "pre", "--num-beams", "1", "--no-progress"
    )
    args += ["--max-train-samples", "64", "--batch-size", "8", "--json", "--set", "encoder_layer_repeats=2"]
    args += ["--final-eval-samples", "3"]
    assert main(args) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["valid_split"] == "valid" and record["bleu_signature"].startswith("nrefs:1|")
    assert record["num_sentences"] == 3  # only the first 3 of the 10 validation sentences were scored
    assert record["split_sentences"] == 10
    from deep_nmt_hf.publish.hub import render_model_card

    assert "| valid | 3 (the first, of 10) |" in str(render_model_card(out))  # the card says it is partial
    config = json.loads((out / "config.json").read_text())
    assert config["layer_norm_position"] == "pre" and config["encoder_layer_repeats"] == 2
    assert (
        config["d_model"] == 32
        and config["encoder_attention_heads"] == config["decoder_attention_heads"] == 4
    )
    assert config["label_smoothing"] == pytest.approx(0.1)


def test_train_without_final_scoring_base_preset_and_resume_with_nothing_to_resume(
    demo_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "model"
    args = ["train", "--data-dir", str(demo_dir / "data"), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG]
    args += ["--output-dir", str(out), "--max-steps", "1", "--vocab-size", "300", "--max-train-samples", "32"]
    args += [
        "--variant",
        "base",
        "--preset",
        "tiny",
        "--no-final-eval",
        "--resume",
        "--json",
        "--no-progress",
    ]
    with caplog.at_level("INFO"):
        assert main(args) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["eval_split"] is None and record["metrics"] == {} and "bleu" not in record
    assert "--resume: nothing to resume" in caplog.text and "final scoring skipped" in caplog.text
    config = json.loads((out / "config.json").read_text())
    assert (config["d_model"], config["encoder_layers"], config["decoder_layers"]) == (64, 6, 2)
    _expect_error(args, capsys, "--overwrite", "nothing to resume")  # the run is complete
