"""What the multi-process tests share: a free port, the tiny training corpus and the `deep-nmt train` arguments."""

from __future__ import annotations

import socket
from pathlib import Path

from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits

STEPS = 4


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_train_split(directory: Path) -> Path:
    """64 synthetic pairs as a train split only (no validation split: no scoring at the end)."""
    write_parallel_dir(
        demo_splits(train=64, valid=1, test=1, seed=7)["train"], directory, "train", SRC_LANG, TGT_LANG
    )
    return directory


def train_args(data_dir: Path, out: Path, batch_size: int, model_flags: list[str], *extra: str) -> list[str]:
    """`deep-nmt train` for STEPS steps with a random sampler (so that W processes × B = one process × W·B)."""
    return [
        "train", "--data-dir", str(data_dir), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG,
        "--output-dir", str(out), "--vocab-size", "200", *model_flags, "--batch-size", str(batch_size),
        "--max-steps", str(STEPS), "--logging-steps", "1", "--save-steps", "2", "--warmup-steps", "1",
        "--lr", "1e-3", "--train-sampling", "random", "--num-beams", "1", "--no-progress", *extra,
    ]  # fmt: skip
