"""What .ci/run's issue-68 steps rely on: the parity test list is complete, and .ci/fresh_home leaves nothing of the
machine's own HOME or caches visible."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PARITY_TESTS = ROOT / ".ci" / "parity_tests"


def listed() -> list[str]:
    return [line.strip() for line in PARITY_TESTS.read_text().splitlines() if line.strip() and line[0] != "#"]


def test_parity_list_names_existing_files_and_every_test_against_a_toolkits_numbers() -> None:
    """Every file .ci/run reruns under other instruction sets exists, and every test file that compares with the
    fairseq or zero fixtures' numbers (check_against_fairseq / check_against_zero) is among them."""
    files = listed()
    assert files and all((ROOT / name).is_file() for name in files), files
    comparing = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if re.search(r"^\s+check_against_(fairseq|zero)\(", path.read_text(), re.MULTILINE)
    }
    assert comparing <= set(files), sorted(comparing - set(files))


@pytest.mark.slow
def test_fresh_home_hides_home_and_every_cache(tmp_path: Path) -> None:
    """Under .ci/fresh_home, HOME is an empty folder and every cache variable points inside the fresh tree."""
    names = ["HF_HOME", "HF_HUB_CACHE", "HF_DATASETS_CACHE", "TORCH_HOME", "TORCHINDUCTOR_CACHE_DIR"]
    names += [
        "TRITON_CACHE_DIR",
        "XDG_CACHE_HOME",
        "DEEP_NMT_HF_CACHE",
        "DEEP_NMT_BENCH_CACHE",
        "MPLCONFIGDIR",
    ]
    names += ["PIP_CACHE_DIR", "SACREBLEU"]
    code = (
        "import json, os, pathlib; home = pathlib.Path.home(); "
        f"print(json.dumps([str(home), os.listdir(home), [os.environ.get(k) for k in {names}]]))"
    )
    env = {**os.environ, "HF_HOME": str(tmp_path / "kept"), "DEEP_NMT_BENCH_CACHE": str(tmp_path / "kept")}
    done = subprocess.run(
        ["bash", str(ROOT / ".ci" / "fresh_home"), sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    home, contents, caches = json.loads(done.stdout.splitlines()[-1])
    fresh = Path(home).parent
    assert contents == [] and Path(home) != Path.home()
    assert all(value and Path(value).is_relative_to(fresh) for value in caches), dict(
        zip(names, caches, strict=True)
    )
    assert not fresh.exists()  # removed after the command
