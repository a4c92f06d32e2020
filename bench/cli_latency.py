"""How fast `deep-nmt` answers `--help` and argument errors, before and after the light launcher (issue #18.5).

"before": the code of a git revision (default: the merge base with main, i.e. before this change) extracted to a
temporary directory and run as its console script did, `from deep_nmt_hf.cli import main` (which imports the
package and with it torch and transformers). "after": this checkout's console script, `deep_nmt_hf_cli:main`,
which parses and checks the arguments first. Each case runs both sides alternately in fresh processes (A B A B
...), so a busy machine slows both alike; reported: median wall time and median CPU time of the child process
(user + sys), and the before / after ratios.

    python -m bench.cli_latency [--before REV] [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.lib.common import REPO, markdown_table, ratio, write_results

CASES = {
    "--help": ["--help"],
    "bad flag (train --bogus)": ["train", "--bogus"],
    "missing --data-dir": ["train", "--data-dir", "/nonexistent", "--src-lang", "en", "--tgt-lang", "de"]
    + ["--output-dir", "/tmp/deep-nmt-latency-out"],
}
BEFORE_CODE = "import sys; from deep_nmt_hf.cli import main; sys.exit(main())"
AFTER_CODE = "import sys; from deep_nmt_hf_cli import main; sys.exit(main())"


def _run(code: str, path: Path, argv: list[str]) -> tuple[float, float, int]:
    """(wall s, child CPU s, exit code) of one fresh process."""
    env = {**os.environ, "PYTHONPATH": str(path)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result.returncode


def import_profile(modules: tuple[str, ...] = ("torch", "transformers", "datasets", "deep_nmt_hf")) -> dict:
    """Cumulative import time (s) of each top-level module within `import deep_nmt_hf` (python -X importtime):
    where the old console script's time went."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import deep_nmt_hf"],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        check=True,
    )
    cumulative: dict[str, float] = {}
    for line in result.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() in modules and parts[1].strip().isdigit():
            cumulative.setdefault(
                parts[2].strip(), int(parts[1]) / 1e6
            )  # one line per module: where it was first imported
    return cumulative


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", help="git revision of the 'before' side (default: merge-base HEAD main)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    revision = (
        args.before
        or subprocess.run(
            ["git", "merge-base", "HEAD", "main"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    rows, payload = [], {"before_revision": revision, "repeats": args.repeats, "cases": {}}
    with tempfile.TemporaryDirectory() as old:
        archive = subprocess.run(
            ["git", "archive", revision, "deep_nmt_hf"], cwd=REPO, capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", old], input=archive.stdout, check=True)
        sides = {"before": (BEFORE_CODE, Path(old)), "after": (AFTER_CODE, REPO)}
        for case, argv in CASES.items():
            measured: dict[str, dict[str, list[float]]] = {side: {"wall": [], "cpu": []} for side in sides}
            codes = {}
            for round_index in range(1 + args.repeats):  # one untimed round warms the file cache
                for side, (code, path) in sides.items():
                    wall, cpu, codes[side] = _run(code, path, argv)
                    if round_index:
                        measured[side]["wall"].append(wall)
                        measured[side]["cpu"].append(cpu)
            medians = {side: {k: statistics.median(v) for k, v in m.items()} for side, m in measured.items()}
            payload["cases"][case] = {
                "argv": argv,
                "exit_codes": codes,
                "times": measured,
                "medians": medians,
            }
            rows.append(
                [
                    case,
                    f"{codes['before']} / {codes['after']}",
                    medians["before"]["wall"],
                    medians["after"]["wall"],
                    ratio(medians["before"]["wall"], medians["after"]["wall"]),
                    medians["before"]["cpu"],
                    medians["after"]["cpu"],
                    ratio(medians["before"]["cpu"], medians["after"]["cpu"]),
                ]
            )
    imports = import_profile()
    payload["import_profile_s"] = imports
    table = markdown_table(
        ["case", "exit codes", "before wall s", "after wall s", "×", "before CPU s", "after CPU s", "×"], rows
    )
    markdown = (
        "# `deep-nmt` latency: --help and argument errors\n\n"
        f"Before: revision `{revision[:10]}` run as its console script did (`from deep_nmt_hf.cli import main`: the "
        "package import, torch and transformers first). After: `deep_nmt_hf_cli:main`, which parses and checks "
        "the arguments before any heavy import. Fresh process per run, both sides alternating, "
        f"{args.repeats} timed rounds after one warm-up; medians of wall time and of the child's CPU time (user + "
        "sys). The machine is shared (other developers' tests were running), so wall times vary between runs; "
        "the side-by-side ratios and CPU times are the robust numbers.\n\n"
        + table
        + "\n\nWhere the old path's time goes (`python -X importtime -c 'import deep_nmt_hf'`, cumulative, one run): "
        + ", ".join(f"{name} {seconds:.2f} s" for name, seconds in imports.items())
        + ". Registering the Auto classes needs transformers' config and model base classes, which import torch, so "
        "`import deep_nmt_hf` stays heavy (users rely on its registration); the launcher avoids running it until "
        "a command runs.\n"
    )
    write_results("cli_latency", payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
