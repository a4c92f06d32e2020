"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


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
