"""Parallel data: readers (`reading`), the Arrow cache they stream into (`arrow`) and atomic writers (`writing`).

Every public name of the former ``deep_nmt_hf/data.py`` is importable from here. See `reading` for the
sources, the empty-line policy and the errors, `arrow` for the on-disk cache (``$DEEP_NMT_HF_CACHE``).
"""

import importlib
import importlib.util
from typing import Any

# public name -> the module that defines it: read on first use (PEP 562), so that the light modules of this package
# (`errors`, `split_files`, `atomic`) import without datasets: `deep-nmt train` checks its splits before torch
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("CACHE_ENV", "cache_root", "source_fingerprint"), ".arrow"),
    "DataError": ".errors",
    "available_splits": ".split_files",
    **dict.fromkeys(
        ("ReadReport", "load_hub_dataset", "load_parallel", "read_jsonl", "read_parallel_dir"), ".reading"
    ),
    **dict.fromkeys(("write_jsonl", "write_parallel_dir"), ".writing"),
}


def __getattr__(name: str) -> Any:
    """PEP 562: a public name, or a module of this package (`data.reading`), imported on first use."""
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    elif not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


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
