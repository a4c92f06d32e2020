"""Commands that need the Hub, run without a network: one line naming the address and HF_HUB_OFFLINE, exit 2,
before torch is imported (huggingface_hub and datasets would retry for half a minute or print a traceback).
No network is simulated by an endpoint nothing listens on (HF_ENDPOINT=http://127.0.0.1:9): no remote host is
ever contacted."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from factories import tiny_model

ROOT = Path(__file__).resolve().parents[2]
LAUNCH = (
    "import sys; from deep_nmt_hf_cli import main; code = main(sys.argv[1:]); "
    "print('heavy:', 'torch' in sys.modules); raise SystemExit(code)"
)
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: refused at once on any machine


def _launch(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    environment.update(PYTHONPATH=str(ROOT), HF_ENDPOINT=UNREACHABLE, HF_HOME=str(cwd / "hf_home"), **env)
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, *argv],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd,
        input="",
    )


def _one_line(result: subprocess.CompletedProcess, *fragments: str) -> str:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert "heavy: False" in result.stdout  # answered before torch and Transformers are imported
    return lines[0]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("offline") / "model"
    tiny_model(seed=2).save_pretrained(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("fold", [False, True], ids=["custom", "fold"])
def test_push_without_a_network_names_the_hub_and_hf_hub_offline(
    saved: Path, tmp_path: Path, fold: bool
) -> None:
    argv = ["push", str(saved), "me/model", "--staging-dir", str(tmp_path / "upload")] + ["--fold"] * fold
    _one_line(_launch(argv, tmp_path), "push me/model", UNREACHABLE, "HF_HUB_OFFLINE", "--dry-run")
    _one_line(_launch(argv, tmp_path, HF_HUB_OFFLINE="1"), "HF_HUB_OFFLINE is set", UNREACHABLE, "--dry-run")
    assert not (tmp_path / "upload").exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["train", "evaluate", "preprocess"])
def test_a_hub_dataset_without_a_network_is_one_line_before_any_retry(tmp_path: Path, command: str) -> None:
    argv = [command, "--dataset", "someone/corpus", "--src-lang", "en", "--tgt-lang", "de"]
    argv += {"train": ["--output-dir", "out"], "evaluate": ["MODEL"], "preprocess": []}[command]
    if command == "evaluate":
        tiny_model(seed=2).save_pretrained(tmp_path / "model")
        argv[-1] = str(tmp_path / "model")
    line = _one_line(
        _launch(argv, tmp_path), "--dataset someone/corpus", UNREACHABLE, "HF_HUB_OFFLINE", "--data-dir"
    )
    assert "Retrying" not in line and not (tmp_path / "out").exists()
