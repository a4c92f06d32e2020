"""Parallel data: readers (`reading`), the Arrow cache they stream into (`arrow`) and atomic writers (`writing`).

Every public name of the former ``deep_nmt_hf/data.py`` is importable from here. See `reading` for the
sources, the empty-line policy and the errors, `arrow` for the on-disk cache (``$DEEP_NMT_HF_CACHE``).
"""

from __future__ import annotations

from .arrow import CACHE_ENV, cache_root, source_fingerprint
from .reading import (
    DataError,
    ReadReport,
    available_splits,
    load_hub_dataset,
    load_parallel,
    read_jsonl,
    read_parallel_dir,
)
from .writing import write_jsonl, write_parallel_dir

__all__ = [
    "CACHE_ENV",
    "DataError",
    "ReadReport",
    "available_splits",
    "cache_root",
    "load_hub_dataset",
    "load_parallel",
    "read_jsonl",
    "read_parallel_dir",
    "source_fingerprint",
    "write_jsonl",
    "write_parallel_dir",
]
