"""Run Python in a fresh process where `deep_nmt_hf` is NOT importable and the Hub is offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

BLOCK_PACKAGE = """
import sys
sys.modules["deep_nmt_hf"] = None  # any `import deep_nmt_hf` now raises ImportError
try:
    import deep_nmt_hf
    raise SystemExit("deep_nmt_hf must not be importable here")
except ImportError:
    pass  # expected: the code below runs without the package
"""


def run_without_package(code: str, tmp_path: Path, hf_home: Path | None = None, timeout: int = 300) -> dict:
    """Run `code` (which must print one JSON object as its last stdout line) and return that object."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_", "PYTHONPATH"))}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(hf_home or tmp_path / "hf_home"))
    script = BLOCK_PACKAGE + textwrap.dedent(code)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise AssertionError(f"fresh process failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


REMOTE_GENERATE = """
import json, torch
from transformers import AutoModelForSeq2SeqLM
model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
out = model.generate(**torch.load("batch.pt"), **json.load(open("generate.json")))
print(json.dumps({"class": type(model).__name__, "out": out.tolist()}))
"""


def generate_with_remote_code(model, batch: dict, tmp_path: Path, **generate_kwargs) -> tuple[str, list]:
    """Save `model` and `batch`, load the model with `trust_remote_code=True` in a fresh process without the
    package and generate there; returns (class name, output ids)."""
    import torch

    model.save_pretrained(tmp_path / "model")
    torch.save(batch, tmp_path / "batch.pt")
    (tmp_path / "generate.json").write_text(json.dumps(generate_kwargs))
    result = run_without_package(REMOTE_GENERATE, tmp_path)
    return result["class"], result["out"]
