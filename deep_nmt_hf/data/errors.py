"""`DataError`: the one error of bad or missing parallel data (standard library only: the light launcher raises it
too, before torch and datasets are imported)."""

from __future__ import annotations


class DataError(ValueError):
    """Bad or missing parallel data; the message names the file (and line) and what was expected."""


__all__ = ["DataError"]
