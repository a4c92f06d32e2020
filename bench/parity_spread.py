"""How far numerical parity results move across CPU instruction sets and attention backends (issue #68).

A tolerance measured on one CPU may not hold on another: torch picks its vectorised kernels by the CPU
(`ATEN_CPU_CAPABILITY`: default = no vectorisation, avx2, avx512 where the CPU has it), and Transformers' SDPA sums
attention in another order than eager. This script measures, in one child process per instruction set:

  converters   for every fixture of tests/fixtures/fairseq (layouts, sentencepiece, Moses), fairseq_vocabularies and zero,
               with eager and SDPA attention, in float32 (what users run) and float64: the largest difference from
               the toolkit's numbers of the teacher-forced log-probs, of the per-token scores of the toolkit's beam
               hypotheses and of their scores; and, in float32, the smallest gap between the best and the second
               token over the greedy steps of the toolkit's greedy outputs (a gap far above the spread keeps greedy
               decoding identical on every CPU). float64 on our side leaves only the toolkit's own float32 rounding
               (fixed in the fixture, the same on every CPU): what the tests compare (tests/fairseq_reference.py,
               tests/zero_reference.py).
  tests        the parity test files (.ci/parity_tests) run under pytest with bench/lib/parity_recorder.py, eager
               and SDPA forced in turn: per test, the largest difference each `assert_close` saw and its ratio to
               the tolerance the test allowed (1 = at the limit), and the fold reports' max |Δlogits|;
               `--tests FILES --attention as-set` runs other files, each test choosing its own backend
               (bench/results/parity_spread_more.*).

    python -m bench.parity_spread                  # both parts (about 20 minutes on a loaded 2-core machine)
    python -m bench.parity_spread --part converters

Writes bench/results/parity_spread.{json,md}. Differences, not times: the load of the machine does not matter.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.lib.common import REPO, markdown_table, write_results

TESTS = REPO / "tests"
BACKENDS = ("eager", "sdpa")


def capabilities() -> list[str]:
    """The instruction sets torch can be limited to on this CPU."""
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    return ["default", "avx2"] + (["avx512"] if " avx512f" in flags else [])


def parity_test_files() -> list[str]:
    return [
        line.strip()
        for line in (REPO / ".ci" / "parity_tests").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]


# ------------------------------------------------------------------------------------------------ converters (child)
def _fairseq_models():
    from fairseq_reference import FIXTURES, MANIFEST, reference

    from deep_nmt_hf.publish.convert_fairseq import fairseq_model

    names = {n: {} for n, spec in MANIFEST["layouts"].items() if "flags" in spec}
    names["spm_unigram_args"] = {"sentencepiece_model": FIXTURES / "spm_unigram.model"}
    names |= {f"moses/{n}": {"bpe_codes": FIXTURES / "moses" / "bpecodes"} for n in MANIFEST["moses"]}
    for name, options in names.items():
        model, _, _ = fairseq_model(FIXTURES / f"{name}.pt", **options)
        yield f"fairseq/{name}", model, reference(name)
    vocabularies = TESTS / "fixtures" / "fairseq_vocabularies"
    model, _, _ = fairseq_model(vocabularies / "postln_two_dictionaries.pt")
    yield (
        "fairseq/postln_two_dictionaries",
        model,
        json.loads((vocabularies / "postln_two_dictionaries.json").read_text()),
    )


def _fairseq_row(model, ref: dict) -> dict[str, float]:
    import torch
    from fairseq_reference import teacher_forced_logprobs

    row = dict(logprobs=0.0, positional=0.0, score=0.0)
    for source, target, expected in zip(ref["sources"], ref["targets"], ref["logprobs"], strict=True):
        ours = teacher_forced_logprobs(model, source, target).double()
        row["logprobs"] = max(row["logprobs"], (ours - torch.tensor(expected).double()).abs().max().item())
    for source, hypotheses in zip(ref["sources"], ref["beam"], strict=True):
        for hypothesis in hypotheses:
            tokens = hypothesis["tokens"]
            lprobs = teacher_forced_logprobs(model, source, tokens).double()
            positional = lprobs.gather(1, torch.tensor(tokens).unsqueeze(1)).squeeze(1)
            gap = (positional - torch.tensor(hypothesis["positional_scores"]).double()).abs().max().item()
            row["positional"] = max(row["positional"], gap)
            score = positional.sum().item() / len(tokens)
            row["score"] = max(row["score"], abs(score - hypothesis["score"]))
    return row


def _zero_row(model, ref: dict) -> dict[str, float]:
    import torch
    from zero_reference import batch_logprobs, token_logprobs

    from deep_nmt_hf.model.length_penalty import gnmt_penalty

    sources = [pair["source"] for pair in ref["pairs"]]
    targets = [pair["target"] for pair in ref["pairs"]]
    lprobs = batch_logprobs(model, sources, targets).double()
    row = dict(logprobs=0.0, positional=float("nan"), score=0.0)
    for index, (target, expected) in enumerate(zip(targets, ref["log_probs"], strict=True)):
        ours = lprobs[index, torch.arange(len(target)), torch.tensor(target)]
        row["logprobs"] = max(row["logprobs"], (ours - torch.tensor(expected).double()).abs().max().item())
    for source, hypotheses in zip(sources, ref["beam"], strict=True):
        for hypothesis in hypotheses:
            tokens = hypothesis["tokens"]
            score = token_logprobs(model, source, tokens).double().sum() / gnmt_penalty(
                len(tokens), ref["alpha"]
            )
            row["score"] = max(row["score"], abs(score.item() - hypothesis["score"]))
    return row


def _greedy_gap(model, sources: list[list[int]], outputs: list[list[int]]) -> float:
    """Smallest log-prob gap between the best and the second token over the toolkit's greedy steps."""
    import torch

    gap = float("inf")
    start = model.config.decoder_start_token_id
    for source, tokens in zip(sources, outputs, strict=True):
        with torch.no_grad():
            logits = model(
                input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([[start, *tokens]])
            ).logits
        top = torch.log_softmax(logits[0].double(), -1).topk(2, dim=-1).values
        gap = min(gap, (top[: len(tokens), 0] - top[: len(tokens), 1]).min().item())
    return gap


def converters() -> list[dict]:
    """Child: the converter quantities under this process's ATEN_CPU_CAPABILITY."""
    import torch
    from zero_reference import FIXTURES as ZERO
    from zero_reference import NAMES, reference

    from deep_nmt_hf.publish.convert_zero import zero_model

    def models():
        yield from _fairseq_models()
        for name in NAMES:
            yield f"zero/{name}", zero_model(ZERO / name)[0], reference(name)

    rows = []
    for name, model, ref in models():
        model.eval()
        compare = _zero_row if name.startswith("zero/") else _fairseq_row
        for backend in BACKENDS:
            for dtype in (torch.float32, torch.float64):
                copied = copy.deepcopy(model).to(dtype)
                copied.config._attn_implementation = backend
                row = dict(fixture=name, backend=backend, dtype=str(dtype).removeprefix("torch."))
                row |= compare(copied, ref)
                if dtype == torch.float32:
                    if name.startswith("zero/"):
                        sources = [pair["source"] for pair in ref["pairs"]]
                        row["greedy_gap"] = _greedy_gap(copied, sources, ref["greedy"])
                    else:
                        row["greedy_gap"] = _greedy_gap(copied, ref["sources"], ref["greedy"])
                rows.append(row)
    return rows


# ------------------------------------------------------------------------------------------------------ parent
def run_converters(caps: list[str]) -> list[dict]:
    rows = []
    for cap in caps:
        env = {**os.environ, "ATEN_CPU_CAPABILITY": cap, "OMP_NUM_THREADS": "1"}
        env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(TESTS), env.get("PYTHONPATH", "")])
        done = subprocess.run(
            [sys.executable, "-m", "bench.parity_spread", "--child"],
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise SystemExit(
                f"error: the converters child under ATEN_CPU_CAPABILITY={cap} failed:\n{done.stderr}"
            )
        rows += [row | {"capability": cap} for row in json.loads(done.stdout.splitlines()[-1])]
    return rows


def run_tests(caps: list[str], files: list[str], backends: tuple[str, ...]) -> list[dict]:
    rows = []
    for cap in caps:
        for backend in backends:
            with tempfile.TemporaryDirectory() as work:
                record = Path(work) / "record.jsonl"
                env = {**os.environ, "ATEN_CPU_CAPABILITY": cap, "OMP_NUM_THREADS": "1"}
                env |= {
                    "PARITY_RECORD": str(record),
                    "PARITY_ATTENTION": "" if backend == "as-set" else backend,
                }
                env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
                command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow"]
                command += ["-p", "bench.lib.parity_recorder", *files]
                done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
                failed = [line for line in done.stdout.splitlines() if line.startswith("FAILED")]
                lines = record.read_text().splitlines() if record.exists() else []
                rows += aggregate(
                    [json.loads(line) | {"capability": cap, "backend": backend} for line in lines]
                )
                summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
                rows.append(dict(capability=cap, backend=backend, summary=summary, failed=failed))
                print(f"tests under {cap} + {backend}: {summary}", file=sys.stderr)
    return rows


def aggregate(records: list[dict]) -> list[dict]:
    """One row per (test without its parameters, comparison, instruction set, backend): the largest difference,
    the largest ratio to the tolerance and how many comparisons."""
    groups: dict[tuple, dict] = {}
    for record in records:
        key = (record["test"].split("[")[0], record["kind"], record["capability"], record["backend"])
        row = groups.setdefault(
            key, dict(zip(("test", "kind", "capability", "backend"), key, strict=True)) | {"count": 0}
        )
        row["diff"] = max(row.get("diff", 0.0), record["diff"])
        if record["ratio"] is not None:
            row["ratio"] = max(row.get("ratio") or 0.0, record["ratio"])
        row.setdefault("ratio", None)
        row["count"] += record.get("count", 1)
    return list(groups.values())


def _fmt(value: float | None) -> str:
    if value is None or value != value:
        return "–"
    return f"{value:.1e}"


def converters_markdown(rows: list[dict]) -> str:
    fixtures = sorted({row["fixture"] for row in rows})
    table = []
    for fixture in fixtures:
        mine = [row for row in rows if row["fixture"] == fixture]
        f32 = [row for row in mine if row["dtype"] == "float32"]
        f64 = [row for row in mine if row["dtype"] == "float64"]
        cells = [fixture]
        for key in ("logprobs", "positional", "score"):
            cells.append(_fmt(max(row[key] for row in f32)))
            cells.append(_fmt(max(row[key] for row in f64)))
        cells.append(_fmt(min(row["greedy_gap"] for row in f32)))
        table.append(cells)
    header = ["fixture", "log-probs f32", "f64", "beam token scores f32", "f64", "beam scores f32", "f64"]
    return markdown_table(header + ["greedy: smallest top-2 gap"], table)


def tests_markdown(rows: list[dict]) -> str:
    records = [row for row in rows if "test" in row]
    by_test: dict[tuple[str, str], list[dict]] = {}
    for row in records:
        by_test.setdefault((row["test"], row["kind"]), []).append(row)
    table = []
    for (test, kind), group in sorted(by_test.items()):
        ratios = [row["ratio"] for row in group if row["ratio"] is not None]
        per_run = [row["diff"] for row in group]  # one row per (instruction set, backend)
        table.append(
            [
                test,
                kind,
                f"{_fmt(min(per_run))} – {_fmt(max(per_run))}",
                _fmt(max(ratios) if ratios else None),
                sum(row["count"] for row in group),
            ]
        )
    lines = []
    for row in (row for row in rows if "summary" in row):
        lines.append(f"- {row['capability']} + {row['backend']}: {row['summary']}")
        lines += [f"  - {name.removeprefix('FAILED ')}" for name in row["failed"]]
    header = ["test", "comparison", "largest diff (smallest – largest run)", "largest diff / tolerance"]
    return "\n".join(lines) + "\n\n" + markdown_table(header + ["comparisons"], table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("converters", "tests", "both"), default="both")
    parser.add_argument(
        "--tests",
        nargs="+",
        help="test files for the tests part (default: .ci/parity_tests); results then go to "
        "bench/results/parity_spread_more.*",
    )
    parser.add_argument(
        "--attention",
        nargs="+",
        default=list(BACKENDS),
        choices=(*BACKENDS, "as-set"),
        help="attention forced in the tests part (as-set: what each test sets)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(converters()))
        return
    caps = capabilities()
    payload: dict = {"capabilities": caps}
    parts = []
    if args.part in ("converters", "both"):
        payload["converters"] = run_converters(caps)
        parts.append(
            "## Converters against the toolkits' fixtures\n\nLargest |ours - toolkit| over every instruction set "
            f"({', '.join(caps)}) and both attention backends, our model in float32 and in float64:\n\n"
            + converters_markdown(payload["converters"])
        )
    if args.part in ("tests", "both"):
        payload["tests"] = run_tests(caps, args.tests or parity_test_files(), tuple(args.attention))
        parts.append(
            f"## Parity tests ({' '.join(args.tests) if args.tests else '.ci/parity_tests'}) under each "
            "instruction set x attention backend\n\n" + tests_markdown(payload["tests"])
        )
    markdown = (
        "# Parity spread across instruction sets and attention backends\n\n" + "\n\n".join(parts) + "\n"
    )
    write_results("parity_spread_more" if args.tests else "parity_spread", payload, markdown)


if __name__ == "__main__":
    main()
