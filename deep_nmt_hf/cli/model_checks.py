"""A saved model directory, checked before anything loads it: its JSON files parse, its weights are there, and
its ``model_type`` is one this installation knows — each failure one line naming the file or the type.

Transformers, given a directory whose ``model_type`` it does not know but whose config.json has an ``auto_map``,
asks on standard input whether to run the directory's code (twice, and `deep-nmt translate` would lose the
first sentences of its input to the question), then fails with a message about ``trust_remote_code`` that never
names the type; a missing ``model.safetensors`` fails only after torch and Transformers are imported. The
checks here run first: `check_model_files` before any heavy import (standard library only),
`check_model_type` once the package has registered its types.
"""

from __future__ import annotations

import json
from pathlib import Path

# what `from_pretrained` reads weights from, one of these per directory
WEIGHT_FILES = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
# the stock Transformers types a deep_nmt_hf model folds into (named in the error beside ours)
STOCK_TYPES = ("marian", "pegasus")


def check_model_files(model_dir: Path) -> None:
    """Every top-level ``*.json`` of `model_dir` parses (config.json as an object), and its weights exist;
    ValueError / FileNotFoundError naming the file otherwise. Standard library only."""
    for path in sorted(model_dir.glob("*.json")):
        if not path.is_file():
            continue
        try:
            value = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"{path}: not a UTF-8 JSON file; save or copy the model again") from None
        except json.JSONDecodeError as error:
            raise ValueError(
                f"{path}: invalid JSON ({error.msg} at line {error.lineno} column {error.colno}); save or copy "
                "the model again"
            ) from None
        if path.name == "config.json" and not isinstance(value, dict):
            raise ValueError(f"{path}: expected a JSON object, found a {type(value).__name__}")
    if not any((model_dir / name).is_file() for name in WEIGHT_FILES):
        raise FileNotFoundError(
            f"{model_dir / WEIGHT_FILES[0]}: missing (the directory has config.json but no weights: "
            f"{', '.join(WEIGHT_FILES)}); save or copy the model again"
        )


def check_model_type(model_dir: Path) -> None:
    """config.json's ``model_type`` is registered with Transformers' Auto classes (ours are, once the package
    is imported); ValueError naming the type and the known ones otherwise — never a remote-code prompt."""
    import transformers
    from transformers import CONFIG_MAPPING

    config_file = model_dir / "config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in CONFIG_MAPPING:
        return
    known = list(CONFIG_MAPPING.keys())
    ours = sorted(name for name in known if name.startswith("deep_nmt"))
    stock = [name for name in STOCK_TYPES if name in known]
    listing = f"{', '.join(ours + stock)} and {len(known) - len(ours) - len(stock)} other Transformers types"
    what = "has no model_type" if model_type is None else f"model_type {model_type!r} is unknown"
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours_version = version("deep_nmt_hf")
    except PackageNotFoundError:
        ours_version = "?"
    hint = ""
    if isinstance(config.get("auto_map"), dict):
        hint = (
            "; the directory ships its own code: a newer deep_nmt_hf may know the type, or load it from Python "
            "with trust_remote_code=True if you trust that code"
        )
    raise ValueError(
        f"{config_file}: {what} to deep_nmt_hf {ours_version} with transformers {transformers.__version__} "
        f"(known: {listing}){hint}"
    )
