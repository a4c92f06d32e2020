"""Every command block of README.md runs as written, in order, on a fresh checkout beside ../shared.

The ```bash blocks run with bash (``set -e -o pipefail``) and the ```python blocks with a fresh Python, all in
document order and in one working directory: a temporary "checkout" whose entries link to this repository's,
beside a ``shared`` link to the shared data folder, so ``../shared/data/multi30k``, ``examples/...`` and the
outputs one block writes for the next (``out/admin-en-de``, ...) resolve exactly as for a user who cloned the
repository. ``deep-nmt`` is this checkout's console script (deep_nmt_hf_cli:main, as pip installs it).

Convention: a block directly preceded by the line ``<!-- readme-test: skip: REASON -->`` is not run (installs,
uploads, multi-node launches, hour-long runs). Any other block must run quickly (tiny settings).
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SKIP = re.compile(r"^<!-- readme-test: skip: (?P<reason>\S.*?) -->$")
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
RUN_LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python"}
BLOCK_TIMEOUT = 600  # seconds per block; the whole README runs in a few minutes of CPU


@dataclass
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    skip: str | None  # the reason, when marked to skip


def readme_blocks(text: str) -> list[Block]:
    """The fenced code blocks of `text` that we run (bash / python), with their skip reasons."""
    lines = text.splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        match = FENCE.match(lines[index])
        if not match or not match.group("lang"):
            index += 1
            continue
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"README.md:{index + 1}: code block is never closed")
        lang = RUN_LANGS.get(match.group("lang"))
        if lang is not None:
            previous = lines[index - 1].strip() if index > 0 else ""
            marker = SKIP.match(previous)
            if previous.startswith("<!-- readme-test") and marker is None:
                raise ValueError(f"README.md:{index}: malformed marker {previous!r}")
            code = "\n".join(lines[index + 1 : end]) + "\n"
            blocks.append(Block(lang, code, index + 1, marker.group("reason") if marker else None))
        index = end + 1
    return blocks


def test_readme_blocks_parse_and_skip_markers() -> None:
    text = "\n".join(
        [
            "```bash",
            "echo one",
            "```",
            "<!-- readme-test: skip: uploads -->",
            "```bash",
            "deep-nmt push",
            "```",
            "```python",
            "print(2)",
            "```",
            "```text",
            "not run",
            "```",
        ]
    )
    blocks = readme_blocks(text)
    assert [(b.lang, b.skip, b.line) for b in blocks] == [
        ("bash", None, 1),
        ("bash", "uploads", 5),
        ("python", None, 8),
    ]
    assert blocks[0].code == "echo one\n"
    with pytest.raises(ValueError, match="malformed marker"):
        readme_blocks("<!-- readme-test: skip -->\n```bash\nx\n```\n")
    real = readme_blocks(README.read_text(encoding="utf-8"))
    assert any(b.skip is None and b.lang == "bash" for b in real)
    assert any(b.skip is None and b.lang == "python" for b in real)


def test_readme_install_line_installs_what_ci_installs() -> None:
    """The README's `pip install -e ".[extras]"` is CI's (.ci/run), so a README user runs the same tests."""

    def extras(text: str) -> list[str]:
        return re.findall(r"pip install[^\n]*?-e\s+\"?\.\[([\w,]+)\]", text)

    ci = extras((ROOT / ".ci" / "run").read_text(encoding="utf-8"))
    readme = extras(README.read_text(encoding="utf-8"))
    assert ci and readme and set(readme) == set(ci), (readme, ci)


def _checkout(tmp_path: Path, shared: Path) -> Path:
    """A fresh-clone layout: tmp/repo (links to this repository's entries, no outputs) beside tmp/shared."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in (".git", "out", ".pytest_cache", ".ruff_cache") or entry.name.endswith(".partial"):
            continue
        (repo / entry.name).symlink_to(entry)
    (tmp_path / "shared").symlink_to(shared)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "deep-nmt"  # what pip writes for [project.scripts] deep-nmt = "deep_nmt_hf_cli:main"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom deep_nmt_hf_cli import main\nsys.exit(main())\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return repo


@pytest.mark.shared_data
@pytest.mark.slow
def test_readme_commands_run_as_written_in_order(tmp_path: Path, multi30k_dir: Path) -> None:
    pytest.importorskip("ctranslate2", reason="the README's export recipe needs the ctranslate2 extra")
    repo = _checkout(tmp_path, multi30k_dir.parents[1])
    env = {key: value for key, value in os.environ.items() if not key.startswith("PYTHONPATH")}
    env.update(
        PYTHONPATH=str(ROOT),
        PATH=f"{tmp_path / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf_home"),
        OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
        MPLBACKEND="Agg",
    )
    timings = []
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if block.skip is not None:
            continue
        if block.lang == "bash":
            command = ["bash", "-e", "-o", "pipefail", "-c", block.code]
        else:
            command = [sys.executable, "-c", block.code]
        start = time.monotonic()
        result = subprocess.run(
            command, cwd=repo, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT
        )
        timings.append((block.line, round(time.monotonic() - start, 1)))
        assert result.returncode == 0, (
            f"README.md:{block.line}: the {block.lang} block failed (exit {result.returncode}):\n"
            f"{block.code}\n--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-5000:]}"
        )
        assert "Traceback" not in result.stderr, f"README.md:{block.line}:\n{result.stderr[-3000:]}"
    print("README block wall times (line, s):", " ".join(f"{line}:{sec}" for line, sec in timings))
    # what the blocks promise to leave behind, chained from the first train run
    for path in ("out/admin-en-de/model.safetensors", "out/admin-folded/config.json", "out/admin-marian",
                 "out/admin-ct2/model.bin", "out/admin-ct2/tokenizer.json", "omega.png", "dlcl.png",
                 "train.jsonl", "json/train.jsonl"):  # fmt: skip
        assert (repo / path).exists(), path
