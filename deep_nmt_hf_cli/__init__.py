"""The `deep-nmt` console script: answers `--help` and argument errors before torch is imported.

Importing `deep_nmt_hf` registers the model types with the Auto classes, which needs transformers and torch
(measured: 3-13 s on a busy 2-core machine; bench/results/cli_latency.md). Users rely on that registration, so
the package keeps it; this launcher, outside the package, instead puts the package module in `sys.modules`
*without running its __init__*, imports the parser modules (`deep_nmt_hf.cli`, which import nothing heavy at
module level) and parses the arguments; `deep_nmt_hf.cli.main` then completes the package import (registration
included) only for a command that runs. `python -m deep_nmt_hf.cli` (accelerate launch, torchrun) imports the
package normally and gives the same behaviour.
"""

from __future__ import annotations

import importlib.util
import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `deep-nmt` console script; returns the exit code (a rank of a `torchrun` /
    `accelerate launch` run instead ends its process here: `deep_nmt_hf.training.distributed.exit_if_a_rank`)."""
    if "deep_nmt_hf" not in sys.modules:
        spec = importlib.util.find_spec("deep_nmt_hf")
        if spec is None or spec.loader is None:
            raise SystemExit("error: the deep_nmt_hf package is not installed")
        package = importlib.util.module_from_spec(spec)
        package._import_deferred = True  # completed by deep_nmt_hf.cli.common.complete_package_import
        sys.modules["deep_nmt_hf"] = package
    from deep_nmt_hf.cli import main as cli_main

    code = cli_main(argv)
    distributed = sys.modules.get("deep_nmt_hf.training.distributed")  # imported by every command that ran
    if distributed is not None:
        distributed.exit_if_a_rank(code)
    return code
