"""Shared pytest fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# The tiny models of the tests run on one thread: torch's default (every core) collapses when other jobs share
# the cores (OpenMP threads wait for each other at every operation). Subprocesses (fresh_process, launching,
# the CLI's) inherit the variable; a value the user set wins.
if not os.environ.get("OMP_NUM_THREADS", "").strip():
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:  # imported before this file (a plugin): its pool is already sized
        sys.modules["torch"].set_num_threads(1)
# The suite never contacts a remote host: a Hub request (a test that forgot to stand in for the network, the
# commands' reachability check) goes to the discard port of the loopback and is refused at once, here and in every
# process a test starts. Set before any test imports huggingface_hub, which reads it once.
os.environ.setdefault("HF_ENDPOINT", "http://127.0.0.1:9")


def shared_dir() -> Path:
    """The shared folder: $DEEP_NMT_SHARED_DIR, else ../shared beside the repo checkout."""
    override = os.environ.get("DEEP_NMT_SHARED_DIR")
    if override:
        return Path(override).expanduser().resolve()
    return Path(__file__).resolve().parents[2] / "shared"


@pytest.fixture
def multi30k_dir() -> Path:
    """The Multi30k folder of the shared data; skips the test when it is absent."""
    path = shared_dir() / "data" / "multi30k"
    if not path.is_dir():
        pytest.skip("../shared/data/multi30k not found beside the checkout: shared-data tests need it")
    return path


@pytest.fixture(autouse=True, scope="session")
def _private_data_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Arrow / tokenization cache entries of the tests go to a temporary folder, not the user's cache."""
    if "DEEP_NMT_HF_CACHE" not in os.environ:
        os.environ["DEEP_NMT_HF_CACHE"] = str(tmp_path_factory.mktemp("deep_nmt_hf_cache"))
