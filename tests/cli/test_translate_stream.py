"""`deep-nmt translate` reads stdin line by line: batches as lines arrive, undecodable lines reported by number."""

from __future__ import annotations

import io
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from factories import save_untrained_model

from deep_nmt_hf.cli import main
from deep_nmt_hf.cli.streaming import UndecodableLine, arriving_batches, decode_lines

LAUNCHER = "import sys; from deep_nmt_hf_cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny untrained model with a tokenizer, saved (translate only needs something that generates)."""
    return save_untrained_model(tmp_path_factory.mktemp("translate") / "model", 300, 200)


def _run(model_dir: Path, data: bytes, *flags: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-c", LAUNCHER, "translate", str(model_dir), "--num-beams", "1"]
    command += ["--max-new-tokens", "4", *flags]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(command, input=data, capture_output=True, timeout=300, env=env)


def test_decode_lines_reports_the_bad_line_and_keeps_the_others() -> None:
    lines = list(decode_lines(io.BytesIO(b"ok one\r\n\xff\xfe bad\nok three\n")))
    assert lines[0] == "ok one" and lines[2] == "ok three"
    assert isinstance(lines[1], UndecodableLine) and lines[1].number == 2
    assert "stdin line 2" in lines[1].message and "--errors replace" in lines[1].message
    assert list(decode_lines(io.BytesIO(b"a\xffb\n"), errors="replace")) == ["a\ufffdb"]


def test_arriving_batches_never_exceed_the_batch_size_and_keep_order() -> None:
    lines = [f"line {i}" for i in range(23)]
    batches = list(arriving_batches(iter(lines), batch_size=5))
    assert [line for batch in batches for line in batch] == lines
    assert all(1 <= len(batch) <= 5 for batch in batches)
    with pytest.raises(ValueError, match="--batch-size"):
        next(arriving_batches(iter(lines), batch_size=0))


@pytest.mark.slow
def test_a_non_utf8_line_is_named_and_the_valid_lines_are_translated(model_dir: Path) -> None:
    good = b"kol nuto vugat .\n"
    strict = _run(model_dir, good + b"caf\xe9 .\n" + good)
    assert strict.returncode == 2
    err = strict.stderr.decode()
    assert "stdin line 2: not valid utf-8" in err and "Traceback" not in err
    assert "Loading weights" not in err  # no progress bar for a load that takes milliseconds
    out = strict.stdout.decode().split("\n")
    assert len(out) == 4 and out[1] == "" and out[0] == out[2] != ""  # alignment kept, others translated


def test_errors_replace_and_encoding(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def translate(data: bytes, *flags: str) -> list[str]:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert main(["translate", str(model_dir), "--num-beams", "1", "--max-new-tokens", "4", *flags]) == 0
        return capsys.readouterr().out.split("\n")

    replaced = translate(b"kol nuto\xe9 .\nkol nuto .\n", "--errors", "replace")
    latin = translate(b"kol nuto\xe9 .\n", "--encoding", "latin-1")
    assert len(replaced) == 3 and len(latin) == 2 and replaced[0] and latin[0]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"x\n")))
    assert main(["translate", str(model_dir), "--encoding", "no-such-codec"]) == 2
    assert "--encoding no-such-codec: unknown encoding" in capsys.readouterr().err


@pytest.mark.slow
def test_translations_come_back_while_stdin_is_still_open(model_dir: Path) -> None:
    """Interactive use: each line is answered (and flushed) before the next one is typed."""
    command = [sys.executable, "-c", LAUNCHER, "translate", str(model_dir), "--num-beams", "1"]
    command += ["--max-new-tokens", "4", "--batch-size", "8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
    )
    try:
        for sentence in (b"kol nuto vugat .\n", b"ela gupebeda .\n"):
            process.stdin.write(sentence)
            process.stdin.flush()
            deadline = time.monotonic() + 240
            ready: list = []
            while not ready and time.monotonic() < deadline:
                ready, _, _ = select.select([process.stdout], [], [], 1.0)
            assert ready, "no translation arrived while stdin stayed open"
            assert process.stdout.readline().endswith(b"\n")
        process.stdin.close()
        assert process.wait(timeout=120) == 0
    finally:
        process.kill()
