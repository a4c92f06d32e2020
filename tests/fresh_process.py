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


ROOT = Path(__file__).resolve().parents[1]


def run_with_package(code: str, timeout: int = 300) -> dict:
    """Run `code` in a fresh interpreter with the checkout first on the path (a process that has imported nothing
    yet); returns the JSON object it prints as its last stdout line."""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if result.returncode != 0:
        raise AssertionError(f"fresh process failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


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


PIPELINE_TRANSLATE = """
import json
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline
request = json.load(open("request.json"))
out = {}
for name, raw in request["raw"].items():
    tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=True)
    AutoModelForSeq2SeqLM.from_pretrained(name, trust_remote_code=True)
    translate = pipeline("translation", model=name, trust_remote_code=True)
    texts = [translate(s, num_beams=1, max_new_tokens=request["max_new_tokens"])[0]["translation_text"] for s in raw]
    out[name] = {"class": type(tokenizer).__name__, "ids": tokenizer(raw).input_ids, "texts": texts}
print(json.dumps(out))
"""


def translate_folders_without_package(
    folders: dict[str, Path], raw: dict[str, list[str]], max_new_tokens: int, tmp_path: Path
) -> dict:
    """Copy each model folder, then in a fresh process without the package load its tokenizer, model and
    `pipeline("translation")` with `trust_remote_code=True` and translate `raw[name]` greedily; returns
    {name: {"class": tokenizer class name, "ids": the encoded raw text, "texts": the translations}}."""
    import shutil

    for name, folder in folders.items():
        shutil.copytree(folder, tmp_path / name)
    request = {"raw": raw, "max_new_tokens": max_new_tokens}
    (tmp_path / "request.json").write_text(json.dumps(request))
    return run_without_package(PIPELINE_TRANSLATE, tmp_path)
