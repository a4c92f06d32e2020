"""Checkpoint averaging: the element-wise mean of the last N checkpoints' weights, as a loadable model directory.

Every paper of this project evaluates an average of its last checkpoints (prenorm-dlcl sec. 4.1: the last 5
epoch checkpoints; dsinit-merged-attention sec. 5: the last 5; recurrent-shared-layers sec. 5.1: averaged), as
fairseq's `scripts/average_checkpoints.py` does. Here the checkpoints are the Trainer's ``checkpoint-<step>``
directories (saved every `save_steps`), or with ``save_strategy="epoch"`` ``checkpoint-<step>-epoch<E>`` (written
at the end of epoch E, as fairseq's ``checkpoint<E>.pt``), ordered by step. ``last_epochs=True`` averages only
epoch checkpoints: fairseq's ``--num-epoch-checkpoints N``, what the authors' evaluation scripts run (the last 10
epochs for ADMIN, Transformer-Clinic ``eval_wmt_en-de.sh``; the last 5 for DLCL, ``train-wmt-en2de-*.sh``).

Floating-point tensors are averaged on the CPU in float64 (whatever device or dtype the checkpoints were trained
in: a bf16 / fp16 checkpoint is upcast exactly) and cast back to their saved dtype; integer / bool tensors (buffers)
must be equal in every checkpoint and are copied. `average_into` copies the mean into a model on any device (its
parameters keep their device and dtype). The output holds ``model.safetensors``, the newest
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

CHECKPOINT_PATTERN = re.compile(r"^checkpoint-(\d+)(?:-epoch(\d+))?$")
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")
# Trainer state and weights: never copied into the averaged model directory
SKIPPED_FILES = re.compile(
    r"^(optimizer\.pt|scheduler\.pt|scaler\.pt|rng_state.*\.pth|trainer_state\.json|training_args\.bin|"
    r"model.*\.safetensors|model\.safetensors\.index\.json|pytorch_model.*\.bin)$"
)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


class AveragingError(ValueError):
    """The checkpoints cannot be averaged (too few, missing weights, mismatched tensors)."""


def checkpoint_name(step: int, epoch: int | None = None) -> str:
    """``checkpoint-<step>``, or ``checkpoint-<step>-epoch<epoch>`` for a checkpoint that closes an epoch."""
    return f"checkpoint-{step}" if epoch is None else f"checkpoint-{step}-epoch{epoch}"


def find_checkpoints(directory: str | os.PathLike[str], epochs_only: bool = False) -> list[Path]:
    """The ``checkpoint-<step>[-epoch<E>]`` directories of a run, oldest first (by step); with `epochs_only` the
    epoch checkpoints alone."""
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(f"{root} is not a directory")
    found = [
        (int(m.group(1)), p)
        for p in root.iterdir()
        if p.is_dir()
        and (m := CHECKPOINT_PATTERN.match(p.name))
        and (m.group(2) is not None or not epochs_only)
    ]
    return [path for _, path in sorted(found)]


def last_checkpoint(directory: str | os.PathLike[str]) -> Path | None:
    """The newest checkpoint of a run (step or epoch), None if there is none or no directory."""
    if not Path(directory).is_dir():
        return None
    checkpoints = find_checkpoints(directory)
    return checkpoints[-1] if checkpoints else None


def load_weights(checkpoint: Path) -> dict[str, torch.Tensor]:
    """The model weights of one checkpoint (single or sharded safetensors), on the CPU."""
    from safetensors.torch import load_file

    single = checkpoint / "model.safetensors"
    if single.is_file():
        return load_file(single, device="cpu")
    index = checkpoint / "model.safetensors.index.json"
    if index.is_file():
        shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        weights: dict[str, torch.Tensor] = {}
        for shard in shards:
            weights.update(load_file(checkpoint / shard, device="cpu"))
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
    directory: str | os.PathLike[str],
    last: int,
    output: str | os.PathLike[str] | None = None,
    epochs: bool = False,
) -> Path:
    """Average the last `last` checkpoints of the run in `directory` (with `epochs`: its last `last` epoch
    checkpoints) into `output` (default ``<directory>/averaged-last-<last>`` or ``-epochs``); return the output
    path. Errors name what is wrong."""
    from safetensors.torch import save_file

    flag = "--last-epochs" if epochs else "--last"
    if isinstance(last, bool) or not isinstance(last, int) or last < 1:
        raise ValueError(f"{flag} {last!r} must be a positive integer")
    root = Path(directory)
    checkpoints = find_checkpoints(root, epochs_only=epochs)
    if len(checkpoints) < last:
        kind = "checkpoint-*-epoch*" if epochs else "checkpoint-*"
        names = ", ".join(p.name for p in checkpoints) or "none"
        hint = "--save-strategy epoch, " if epochs else ""
        raise AveragingError(
            f"{root} has {len(checkpoints)} {kind} director{'y' if len(checkpoints) == 1 else 'ies'} "
            f"({names}); {flag} {last} needs at least {last} (train with {hint}--keep-checkpoints and "
            f"--save-total-limit >= {last})"
        )
    chosen = checkpoints[-last:]
    suffix = "-epochs" if epochs else ""
    out = Path(output) if output is not None else root / f"averaged-last-{last}{suffix}"
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
        record["unit"] = "epoch" if epochs else "checkpoint"
        (tmp / "averaging.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out


def average_into(
    model: torch.nn.Module, directory: str | os.PathLike[str], last: int, epochs: bool
) -> list[str]:
    """Load the mean of the last `last` (epoch) checkpoints of `directory` into `model`; the names averaged, or []
    (the final weights kept, with a warning) when fewer were written."""
    import logging

    logger = logging.getLogger(__name__)
    checkpoints = find_checkpoints(directory, epochs_only=epochs)[-last:]
    if len(checkpoints) < last:
        logger.warning(
            "average_last_checkpoints=%d: only %d %scheckpoint(s) written; keeping the final weights",
            last,
            len(checkpoints),
            "epoch " if epochs else "",
        )
        return []
    # the CPU mean is copied into the parameters where they live (device and dtype kept)
    missing, unexpected = model.load_state_dict(average_weights(checkpoints), strict=False)
    tied = set(getattr(model, "all_tied_weights_keys", {}) or {})
    if unexpected or set(missing) - tied:
        raise RuntimeError(
            f"averaged checkpoints do not match the model: missing {missing}, unexpected {unexpected}"
        )
    logger.info("final model = average of %s", ", ".join(p.name for p in checkpoints))
    return [p.name for p in checkpoints]
