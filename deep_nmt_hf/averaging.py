"""Checkpoint averaging: the element-wise mean of the last N checkpoints' weights, as a loadable model directory.

Every paper of this project evaluates an average of its last checkpoints (prenorm-dlcl sec. 4.1: the last 5
epoch checkpoints; dsinit-merged-attention sec. 5: the last 5; recurrent-shared-layers sec. 5.1: averaged), as
fairseq's `scripts/average_checkpoints.py` does. Here the checkpoints are the Trainer's ``checkpoint-<step>``
directories (saved every `save_steps`, or each epoch with ``save_strategy="epoch"``), ordered by step.

Floating-point tensors are averaged in float64 and cast back to their dtype; integer / bool tensors (buffers)
must be equal in every checkpoint and are copied. The output holds ``model.safetensors``, the newest
checkpoint's config, generation config, custom code and tokenizer files (or the run directory's tokenizer), and
``averaging.json`` naming the averaged checkpoints. It is written into a temporary sibling directory and renamed
into place, so it is never half-written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import torch

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)$")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
# Trainer state and weights: never copied into the averaged model directory
SKIPPED_FILES = re.compile(
    r"^(optimizer\.pt|scheduler\.pt|scaler\.pt|rng_state.*\.pth|trainer_state\.json|training_args\.bin|"
    r"model.*\.safetensors|model\.safetensors\.index\.json|pytorch_model.*\.bin)$"
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


class AveragingError(ValueError):
    """The checkpoints cannot be averaged (too few, missing weights, mismatched tensors)."""


def find_checkpoints(directory: str | os.PathLike[str]) -> list[Path]:
    """The ``checkpoint-<step>`` directories of a run, oldest first (by step)."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    found = [
        (int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := CHECKPOINT_PATTERN.match(p.name))
    ]
    return [path for _, path in sorted(found)]


def load_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The model weights of one checkpoint (single or sharded safetensors)."""
    from safetensors.torch import load_file

    single = checkpoint / "model.safetensors"
    if single.is_file():
        return load_file(single)
    index = checkpoint / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        weights: dict[str, torch.Tensor] = {}
        for shard in shards:
            weights.update(load_file(checkpoint / shard))
        return weights
    raise AveragingError(f"{checkpoint} has no model.safetensors (or sharded index); cannot average it")


def average_weights(checkpoints: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of the checkpoints' floating-point tensors (equal non-float tensors are copied)."""
    if not checkpoints:
        raise AveragingError("no checkpoints to average")
    first = load_weights(checkpoints[0])
    sums = {k: v.double() if v.is_floating_point() else v.clone() for k, v in first.items()}
    for checkpoint in checkpoints[1:]:
        weights = load_weights(checkpoint)
        if weights.keys() != sums.keys():
            diff = sorted(weights.keys() ^ sums.keys())
            raise AveragingError(f"{checkpoint} holds other tensors than {checkpoints[0]}: {diff[:5]}")
        for key, value in weights.items():
            if value.shape != sums[key].shape:
                raise AveragingError(
                    f"{checkpoint}: {key} has shape {tuple(value.shape)}, {checkpoints[0]} {tuple(sums[key].shape)}"
                )
            if value.is_floating_point():
                sums[key] += value.double()
            elif not torch.equal(value, sums[key]):
                raise AveragingError(f"{checkpoint}: non-float tensor {key} differs from {checkpoints[0]}")
    count = len(checkpoints)
    return {k: (v / count).to(first[k].dtype) if first[k].is_floating_point() else v for k, v in sums.items()}


def average_checkpoints(
    directory: str | os.PathLike[str], last: int, output: str | os.PathLike[str] | None = None
) -> Path:
    """Average the last `last` checkpoints of the run in `directory` into `output` (default
    ``<directory>/averaged-last-<last>``); return the output path. Errors name what is wrong."""
    from safetensors.torch import save_file

    if isinstance(last, bool) or not isinstance(last, int) or last < 1:
        raise ValueError(f"--last {last!r} must be a positive integer")
    root = Path(directory)
    checkpoints = find_checkpoints(root)
    if len(checkpoints) < last:
        names = ", ".join(p.name for p in checkpoints) or "none"
        raise AveragingError(
            f"{root} has {len(checkpoints)} checkpoint-* director{'y' if len(checkpoints) == 1 else 'ies'} "
            f"({names}); --last {last} needs at least {last} (train with --keep-checkpoints and "
            f"--save-total-limit >= {last})"
        )
    chosen = checkpoints[-last:]
    out = Path(output) if output is not None else root / f"averaged-last-{last}"
    if out.exists():
        raise FileExistsError(f"{out} exists already; choose a new --output")
    weights = average_weights(chosen)
    newest = chosen[-1]
    if not (newest / "config.json").is_file():
        raise AveragingError(f"{newest} has no config.json; it is not a Trainer checkpoint")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        for path in newest.iterdir():
            if path.is_file() and not SKIPPED_FILES.match(path.name):
                shutil.copy2(path, tmp / path.name)
        if not any((tmp / name).is_file() for name in TOKENIZER_FILES):
            for name in os.listdir(root):  # the run directory's tokenizer (the final model dir has one)
                if name in TOKENIZER_FILES or name.startswith(("vocab", "merges")):
                    shutil.copy2(root / name, tmp / name)
        save_file(
            {k: v.contiguous() for k, v in weights.items()},
            tmp / "model.safetensors",
            metadata={"format": "pt"},
        )
        record = {"averaged": [p.name for p in chosen], "source": str(root.absolute()), "last": last}
        (tmp / "averaging.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out
