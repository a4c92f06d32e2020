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
