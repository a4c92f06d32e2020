"""A pytest plugin for bench/parity_spread.py: records how close every numerical comparison of a test came.

Loaded with `python -m pytest -p bench.lib.parity_recorder FILES`; writes one JSON line per comparison to
$PARITY_RECORD: the test, the largest |actual - expected| and its ratio to the tolerance the test allowed
(`atol + rtol * |expected|`, torch's defaults where the test gives none), so a ratio near 1 is a tolerance that
barely holds on this CPU. It wraps `torch.testing.assert_close` (most parity tests) and folding's
`compare_models` (whose report the fold tests bound); comparisons written as `abs(a - b) < tol` are not seen.

$PARITY_ATTENTION (eager / sdpa), when set, is the attention every model runs whose config asks for eager, SDPA
or the default (FSMT, which has eager attention only, excepted): Transformers' private
`PretrainedConfig._attn_implementation` property is wrapped to say so (bench instrumentation only; no test depends
on it).
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import torch

_RECORD = os.environ.get("PARITY_RECORD")
_ATTENTION = os.environ.get("PARITY_ATTENTION")
_CURRENT = {"test": ""}
_DEFAULT_TOLERANCES = {
    torch.float64: (1e-7, 1e-7),
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
}


def _write(kind: str, diff: float, ratio: float | None) -> None:
    if _RECORD:
        with open(_RECORD, "a") as handle:
            handle.write(json.dumps(dict(test=_CURRENT["test"], kind=kind, diff=diff, ratio=ratio)) + "\n")


def _pairs(actual: Any, expected: Any):
    """(actual, expected) tensor pairs of assert_close's inputs (tensors, numbers, or sequences of them)."""
    if (
        isinstance(actual, list | tuple)
        and isinstance(expected, list | tuple)
        and len(actual) == len(expected)
    ):
        for a, e in zip(actual, expected, strict=True):
            yield from _pairs(a, e)
    elif isinstance(actual, dict) and isinstance(expected, dict):
        for key in actual.keys() & expected.keys():
            yield from _pairs(actual[key], expected[key])
    else:
        try:
            yield torch.as_tensor(actual), torch.as_tensor(expected)
        except (TypeError, ValueError, RuntimeError):
            return


def _measure(actual: Any, expected: Any, rtol: float | None, atol: float | None) -> None:
    for a, e in _pairs(actual, expected):
        if a.shape != e.shape or not (a.is_floating_point() or e.is_floating_point()) or a.numel() == 0:
            continue
        default_rtol, default_atol = _DEFAULT_TOLERANCES.get(a.dtype, (1.3e-6, 1e-5))
        r = default_rtol if rtol is None else rtol
        t = default_atol if atol is None else atol
        a64, e64 = a.detach().cpu().double(), e.detach().cpu().double()
        finite = torch.isfinite(a64) & torch.isfinite(e64)
        if not finite.any():
            continue
        gap = (a64 - e64).abs()[finite]
        allowed = t + r * e64.abs()[finite]
        ratio = (gap / allowed).max().item() if (allowed > 0).all() else None
        _write("assert_close", gap.max().item(), ratio)


def pytest_configure(config) -> None:
    original = torch.testing.assert_close

    def assert_close(actual, expected, *args, rtol=None, atol=None, **kwargs):
        with contextlib.suppress(Exception):  # recording must never change a test's outcome
            _measure(actual, expected, rtol, atol)
        return original(actual, expected, *args, rtol=rtol, atol=atol, **kwargs)

    torch.testing.assert_close = assert_close
    from deep_nmt_hf.publish import folding

    compare = folding.compare_models

    def compare_models(*args, **kwargs):
        report = compare(*args, **kwargs)
        _write("fold max |dlogits|", float(report.max_abs_logit_diff), None)
        return report

    folding.compare_models = compare_models
    if _ATTENTION:
        from transformers import PretrainedConfig

        stored = PretrainedConfig._attn_implementation

        def forced(self):
            value = stored.fget(self)
            if getattr(self, "model_type", "") == "fsmt":  # FSMT has eager attention only
                return value
            return _ATTENTION if value in (None, "eager", "sdpa") else value

        PretrainedConfig._attn_implementation = property(forced, stored.fset)


def pytest_runtest_setup(item) -> None:
    _CURRENT["test"] = item.nodeid
