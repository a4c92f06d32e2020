"""The `deep-nmt` console script: answers `--help` and argument errors before torch is imported.

Importing `deep_nmt_hf` registers the model types with the Auto classes, which needs transformers and torch
(measured: 3-13 s on a busy 2-core machine; bench/results/cli_latency.md); users rely on that registration.
Everything else the parser reads is light: the package's public names are lazy (PEP 562), and its command-line
modules, `model/registry.py` and `training/options.py` import only the standard library. So this launcher imports
the parser while `deferring_registration()` says so (the package's __init__ then leaves registration out), and
`deep_nmt_hf.cli.main` registers once the arguments pass. `python -m deep_nmt_hf.cli` (accelerate launch,
torchrun) imports the package normally and gives the same behaviour.
"""

from __future__ import annotations

import sys

_deferring = False


def deferring_registration() -> bool:
    """True while the launcher imports the package: `deep_nmt_hf/__init__.py` then does not register (torch)."""
    return _deferring


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `deep-nmt` console script; returns the exit code (a rank of a `torchrun` /
    `accelerate launch` run instead ends its process here: `deep_nmt_hf.training.distributed.exit_if_a_rank`)."""
    global _deferring
    _deferring = True
    try:
        from deep_nmt_hf.cli import main as cli_main
    except ModuleNotFoundError as error:
        if error.name != "deep_nmt_hf":
            raise
        raise SystemExit("error: the deep_nmt_hf package is not installed") from None
    finally:
        _deferring = False

    code = cli_main(argv)
    distributed = sys.modules.get("deep_nmt_hf.training.distributed")  # imported by every command that ran
    if distributed is not None:
        distributed.exit_if_a_rank(code)
    return code
