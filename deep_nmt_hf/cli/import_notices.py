"""Import-time notices of third-party libraries that are noise in a command's output."""

from __future__ import annotations

import logging

# loggers whose import-time notices are noise in a command's output: torchao (the `int8` extra, imported by
# Transformers' loaders whenever installed) warns that its CPU wheel cannot load its CUDA-only libraries, and torch
# notes torchao's enums; errors still show
IMPORT_NOTICES = ("torchao", "torch.utils._pytree")


def quiet_import_notices() -> None:
    """Let only errors through IMPORT_NOTICES' loggers (a filter: torch's logging setup resets their levels);
    call before torch and transformers are imported."""
    for name in IMPORT_NOTICES:
        logging.getLogger(name).addFilter(_errors_only)


def _errors_only(record: logging.LogRecord) -> bool:
    return record.levelno >= logging.ERROR
