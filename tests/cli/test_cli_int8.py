"""`deep-nmt translate --int8` / `evaluate --int8` (publish/quantization.py): int8 at load time, and one line with
exit code 2 where it cannot serve."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import pytest
from factories import save_untrained_model

from deep_nmt_hf.cli import main


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny untrained model with its tokenizer, saved."""
    return save_untrained_model(tmp_path_factory.mktemp("int8") / "model", 200, 150)


def _translate(model_dir: Path, monkeypatch, *flags: str) -> int:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"kol nuto vugat .\nnuto kol .\n")))
    return main(["translate", str(model_dir), "--num-beams", "2", "--max-new-tokens", "4", *flags])


def test_translate_int8_quantizes_and_translates(model_dir: Path, monkeypatch, capsys) -> None:
    pytest.importorskip("torchao")
    from deep_nmt_hf.publish import quantization

    quantized = []
    original = quantization.quantize_int8
    monkeypatch.setattr(
        quantization, "quantize_int8", lambda model: quantized.append(model) or original(model)
    )
    assert _translate(model_dir, monkeypatch, "--int8") == 0
    out = capsys.readouterr().out.split("\n")
    assert len(out) == 3 and out[0] and out[1]
    assert len(quantized) == 1
    assert type(quantized[0].get_output_embeddings().weight).__name__ == "OneDNNInt8Weight"


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_int8_without_torchao_is_one_line_and_exit_2(
    command: str, model_dir: Path, monkeypatch, capsys
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "torchao" else real(name, *a)
    )
    if command == "translate":
        code = _translate(model_dir, monkeypatch, "--int8")
    else:
        data = model_dir.parent / "data"
        data.mkdir(exist_ok=True)
        for lang in ("en", "de"):
            (data / f"test.{lang}").write_text("kol nuto .\n", encoding="utf-8")
        code = main(["evaluate", str(model_dir), "--data-dir", str(data), "--src-lang", "en", "--tgt-lang", "de",
                     "--int8"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2 and captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and "int8 needs torchao" in lines[0] and "deep_nmt_hf[int8]" in lines[0], lines
