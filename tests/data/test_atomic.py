"""Files and directories we write get the umask's modes (not mkstemp's 0600 / mkdtemp's 0700)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from deep_nmt_hf.data import write_jsonl, write_parallel_dir
from deep_nmt_hf.data.atomic import atomic_directory, atomic_path, atomic_write


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_atomic_helpers_give_umask_modes(tmp_path: Path, umask_022) -> None:
    with atomic_write(tmp_path / "a.txt") as handle:
        handle.write("x\n")
    with atomic_path(tmp_path / "b.png") as temp:
        temp.write_bytes(b"png")
    with atomic_directory(tmp_path / "dir") as work:
        (work / "sub").mkdir()
        (work / "sub" / "c.bin").write_bytes(b"c")
        os.chmod(work / "sub" / "c.bin", 0o600)  # as safetensors leaves its files
    assert _mode(tmp_path / "a.txt") == 0o644 and (tmp_path / "a.txt").read_text() == "x\n"
    assert _mode(tmp_path / "b.png") == 0o644
    assert _mode(tmp_path / "dir") == 0o755 and _mode(tmp_path / "dir" / "sub") == 0o755
    assert _mode(tmp_path / "dir" / "sub" / "c.bin") == 0o644
    os.umask(0o077)
    with atomic_write(tmp_path / "private.txt") as handle:
        handle.write("y")
    assert _mode(tmp_path / "private.txt") == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.png", "dir", "private.txt"]


def test_failed_writes_leave_nothing(tmp_path: Path) -> None:
    for context in (atomic_write(tmp_path / "a.txt"), atomic_path(tmp_path / "b.png")):
        with pytest.raises(RuntimeError), context:
            raise RuntimeError("boom")
    with pytest.raises(RuntimeError), atomic_directory(tmp_path / "d") as work:
        (work / "f").write_text("half")
        raise RuntimeError("boom")
    with pytest.raises(FileExistsError, match="exists already"), atomic_directory(tmp_path):
        pass
    assert list(tmp_path.iterdir()) == []


def test_data_writers_and_a_saved_model_are_readable_by_others(tmp_path: Path, umask_022) -> None:
    import torch

    from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration
    from deep_nmt_hf.training import staged_output_dir

    write_parallel_dir([("a b", "c d")], tmp_path / "data", "train", "en", "de")
    write_jsonl([{"translation": {"en": "a", "de": "b"}}], tmp_path / "train.jsonl", "en", "de")
    assert {_mode(p) for p in (tmp_path / "data").iterdir()} == {0o644}
    assert _mode(tmp_path / "train.jsonl") == 0o644
    torch.manual_seed(0)
    config = DeepNMTConfig(vocab_size=20, d_model=16, encoder_layers=1, decoder_layers=1)
    config.update(dict(encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=16))
    config.update(dict(decoder_ffn_dim=16, max_position_embeddings=32))
    with staged_output_dir(tmp_path / "model") as staging:
        DeepNMTForConditionalGeneration(config).save_pretrained(staging)
    saved = tmp_path / "model"
    assert _mode(saved) == 0o755
    assert _mode(saved / "model.safetensors") == 0o644  # safetensors alone writes 0600
    assert {_mode(p) for p in saved.iterdir()} == {0o644}
