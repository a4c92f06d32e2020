"""Every command block of README.md runs as written, in order, on a fresh checkout with nothing beside it: the
newcomer's path, top to bottom, on data every user has (the demo's corpus; issue #59).

The ```bash blocks run with bash (``set -e -o pipefail``) and the ```python blocks with a fresh Python, all in
document order and in one working directory: a temporary "checkout" whose entries link to this repository's (no
``../shared`` beside it), so ``examples/...`` and the outputs one block writes for the next (``out/demo/data``,
``out/admin-sa-sb``, ...) resolve exactly as for a user who cloned the repository. ``deep-nmt`` is this checkout's
console script (deep_nmt_hf_cli:main, as pip installs it). A python block that does not name ``deep_nmt_hf`` runs
where the package cannot be imported (it promises to need only stock Transformers).

Convention: a block directly preceded by the line ``<!-- readme-test: skip: REASON -->`` is not run (installs,
downloads, uploads, multi-node launches, hour-long runs); one preceded by ``<!-- readme-test: instead: COMMAND
-->`` runs COMMAND in its place, which must be the block's command with flags added (the demo: its ``--quick``
form). Any other block must run quickly (tiny settings).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SKIP = re.compile(r"^<!-- readme-test: skip: (?P<reason>\S.*?) -->$")
INSTEAD = re.compile(r"^<!-- readme-test: instead: (?P<command>\S.*?) -->$")
# Transformers' warning for a config read through a class of another type (AutoTokenizer on an unregistered type)
TYPE_WARNING = "You are using a model of type"
BLOCK_PACKAGE = (
    'import sys\nsys.modules["deep_nmt_hf"] = None  # this block promises stock Transformers alone\n'
)
FENCE = re.compile(r"^```(?P<lang>[\w+-]*)\s*$")
RUN_LANGS = {"bash": "bash", "sh": "bash", "shell": "bash", "python": "python"}
BLOCK_TIMEOUT = 600  # seconds per block; the whole README runs in a few minutes of CPU


@dataclass
class Block:
    lang: str
    code: str
    line: int  # 1-based line of the opening fence
    skip: str | None  # the reason, when marked to skip
    instead: str | None = None  # the command run in its place, when marked so


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
            marker, instead = SKIP.match(previous), INSTEAD.match(previous)
            if previous.startswith("<!-- readme-test") and marker is None and instead is None:
                raise ValueError(f"README.md:{index}: malformed marker {previous!r}")
            code = "\n".join(lines[index + 1 : end]) + "\n"
            if instead is not None and not instead.group("command").startswith(code.strip()):
                raise ValueError(
                    f"README.md:{index}: {instead.group('command')!r} is not the block's command with flags added"
                )
            blocks.append(
                Block(
                    lang,
                    code,
                    index + 1,
                    marker.group("reason") if marker else None,
                    instead.group("command") + "\n" if instead else None,
                )
            )
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


def test_readme_blocks_take_an_instead_marker() -> None:
    blocks = readme_blocks(
        "<!-- readme-test: instead: deep-nmt demo --quick -->\n```bash\ndeep-nmt demo\n```\n"
    )
    assert [(b.skip, b.instead) for b in blocks] == [(None, "deep-nmt demo --quick\n")]
    with pytest.raises(ValueError, match="not the block's command"):
        readme_blocks("<!-- readme-test: instead: deep-nmt train -->\n```bash\ndeep-nmt demo\n```\n")


def test_readme_examples_read_data_every_user_has() -> None:
    """Issue #59, item 1: no block a user runs reads this project's own data (../shared), the first training run
    reads the demo's corpus, the Hub's Multi30k is named (and skipped for needing the network), the install
    has a clone step and the user's plain install, and the guide says nothing of this project's machines."""
    text = README.read_text(encoding="utf-8")
    blocks = readme_blocks(text)
    for block in blocks:
        assert "../shared" not in block.code, f"README.md:{block.line} reads ../shared"
    runs = [b for b in blocks if b.skip is None and "deep-nmt train" in b.code]
    assert runs and "--data-dir out/demo/data" in runs[0].code, runs[0].code if runs else None
    hub = [b for b in blocks if "--dataset bentrevett/multi30k" in b.code]
    assert hub and all(b.skip is not None and "Hub" in b.skip for b in hub)
    install = "".join(b.code for b in blocks if b.skip == "installs packages")
    assert "git clone" in install and re.search(r"^pip install -e \.$", install, flags=re.M), install
    assert "this project's machines" not in text


def _checkout(tmp_path: Path) -> Path:
    """A fresh-clone layout: tmp/repo (links to this repository's entries, no outputs), nothing beside it."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for entry in ROOT.iterdir():
        if entry.name in (".git", "out", ".pytest_cache", ".ruff_cache") or entry.name.endswith(".partial"):
            continue
        (repo / entry.name).symlink_to(entry)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "deep-nmt"  # what pip writes for [project.scripts] deep-nmt = "deep_nmt_hf_cli:main"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom deep_nmt_hf_cli import main\nsys.exit(main())\n",
        encoding="utf-8",
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return repo


@pytest.mark.slow
def test_readme_commands_run_as_written_in_order(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2", reason="the README's export recipe needs the ctranslate2 extra")
    repo = _checkout(tmp_path)
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
    before = {entry.name for entry in repo.iterdir()}
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if block.skip is not None:
            continue
        code = block.instead or block.code
        if block.lang == "bash":
            command = ["bash", "-e", "-o", "pipefail", "-c", code]
        elif "deep_nmt_hf" in code:
            command = [sys.executable, "-c", code]
        else:
            command = [sys.executable, "-c", BLOCK_PACKAGE + code]
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
        assert TYPE_WARNING not in result.stderr, f"README.md:{block.line}:\n{result.stderr[-3000:]}"
    print("README block wall times (line, s):", " ".join(f"{line}:{sec}" for line, sec in timings))
    # what the blocks promise to leave behind, chained from the first train run
    for path in ("out/demo/data/train.sa", "out/admin-sa-sb/model.safetensors", "out/admin-folded/config.json",
                 "out/admin-marian", "out/admin-ct2/model.bin", "out/admin-ct2/tokenizer.json", "out/omega.png",
                 "out/dlcl.png", "out/train.jsonl", "out/json/train.jsonl"):  # fmt: skip
        assert (repo / path).exists(), path
    left = sorted({entry.name for entry in repo.iterdir()} - before)
    assert left == ["out"], f"the README's examples write outside out/: {left}"


def _hub_layout_copy(folder: Path) -> Path:
    """A local folder laid out as the Hub's bentrevett/multi30k: train/val/test.jsonl of {"en": .., "de": ..}
    rows (which `datasets.load_dataset` serves as the splits train, validation and test)."""
    folder.mkdir()
    words = ["man", "woman", "dog", "bike", "street", "red", "blue", "runs", "sits", "the"]
    german = ["Mann", "Frau", "Hund", "Fahrrad", "Straße", "rot", "blau", "läuft", "sitzt", "der"]
    for name, rows in (("train", 48), ("val", 6), ("test", 6)):
        with (folder / f"{name}.jsonl").open("w", encoding="utf-8") as handle:
            for row in range(rows):
                picks = [(row * 7 + k * 3) % len(words) for k in range(4)]
                en = " ".join(words[i] for i in picks) + " ."
                de = " ".join(german[i] for i in picks) + " ."
                handle.write(json.dumps({"en": en, "de": de}, ensure_ascii=False) + "\n")
    return folder


def test_readme_hub_multi30k_command_reads_the_hubs_layout(tmp_path: Path, monkeypatch, capsys) -> None:
    """The README's Multi30k command, as written (shortened by flags it adds at the end), on a local stand-in for
    the Hub dataset it names: its column layout and split names go through our reader, --valid-split and
    --test-split as the README gives them (the real download is skipped in the README test)."""
    import datasets

    from deep_nmt_hf.cli import common as cli_common
    from deep_nmt_hf.cli import main

    (block,) = [b for b in readme_blocks(README.read_text(encoding="utf-8")) if "--dataset " in b.code]
    argv = shlex.split(block.code.replace("\\\n", " "))
    assert argv[:2] == ["deep-nmt", "train"]
    name = argv[argv.index("--dataset") + 1]
    stand_in = _hub_layout_copy(tmp_path / "multi30k")
    real = datasets.load_dataset

    def load_dataset(path, *args, **kwargs):
        assert path == name, path  # only the README's dataset is asked for
        return real(str(stand_in), *args, cache_dir=str(tmp_path / "hf_cache"), **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    # the stand-in answers for the Hub: no reachability request (cli/common.py's check; never the network here)
    monkeypatch.setattr(cli_common, "check_hub_reachable", lambda *args, **kwargs: None)
    out = tmp_path / "out"
    argv[argv.index("--output-dir") + 1] = str(out)
    short = ["--max-steps", "2", "--batch-size", "8", "--vocab-size", "120", "--final-eval-samples", "3"]
    short += ["--encoder-layers", "2", "--decoder-layers", "1"]  # explicit flags win over the preset
    short += ["--max-eval-samples", "3", "--no-progress"]
    assert main(argv[1:] + short) == 0, capsys.readouterr().err[-3000:]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["data_source"] == name == "bentrevett/multi30k"
    assert (metrics["valid_split"], metrics["test_split"]) == ("validation", "test")
    assert metrics["num_train_examples"] == 48 and metrics["num_sentences"] == 3
