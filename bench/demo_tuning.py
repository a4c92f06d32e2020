"""Which model and learning rate should `deep-nmt demo` train? Each candidate is the demo itself (its corpus,
schedule, 800 steps, beam-4 test BLEU) with the model's fields and the peak learning rate changed, trained without a
time budget on one thread, so its BLEU does not depend on the machine's load (the demo's budget only decides which
model and how many steps; bench/demo_promise.py checks that part).

Each run is a child process (`--one NAME`) that sets the demo's model list to the candidate's fields and runs
`deep-nmt demo --time-budget 0 --threads 1 --lr LR`; its BLEU and training time are cached in
bench/.cache/demo_tuning/NAME.json, so an interrupted study resumes where it stopped. `--jobs` runs that many
children at once (one thread each). Writes bench/results/demo_tuning.{json,md}.

    python -m bench.demo_tuning --jobs 2
    python -m bench.demo_tuning --only small_3e-3 small_5e-3
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .lib.common import CACHE, markdown_table, module_command, write_results

SMALL = {
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_ffn_dim": 256,
    "decoder_ffn_dim": 256,
}
NARROW = {"d_model": 64, "encoder_ffn_dim": 256, "decoder_ffn_dim": 256}
XAVIER = {"init_method": "xavier"}
THIN = {"encoder_ffn_dim": 128, "decoder_ffn_dim": 128}
# name: (fields changed from the demo's DEMO_MODEL, peak learning rate[, steps: 800 where not given])
CANDIDATES: dict[str, tuple[Any, ...]] = {
    "8+2 d128 xavier 1e-3": (XAVIER, 1e-3),
    "8+2 d128 xavier 2e-3": (XAVIER, 2e-3),
    "8+2 d128 xavier 3e-3": (XAVIER, 3e-3),
    "8+2 d128 ds_init 2e-3": ({}, 2e-3),
    "8+2 d128 ds_init 3e-3": ({}, 3e-3),
    "8+2 d128 ds_init 5e-3": ({}, 5e-3),
    "6+2 d64 xavier 3e-3": ({**NARROW, **XAVIER, "encoder_layers": 6}, 3e-3),
    "6+2 d64 ds_init 2e-3": ({**NARROW, "encoder_layers": 6}, 2e-3),
    "6+2 d64 ds_init 3e-3": ({**NARROW, "encoder_layers": 6}, 3e-3),
    "6+2 d64 ds_init 5e-3": ({**NARROW, "encoder_layers": 6}, 5e-3),
    "4+2 d64 xavier 1e-3": ({**NARROW, **XAVIER, "encoder_layers": 4}, 1e-3),
    "4+2 d64 xavier 3e-3": ({**NARROW, **XAVIER, "encoder_layers": 4}, 3e-3),
    "4+2 d64 ds_init 3e-3": ({**NARROW, "encoder_layers": 4}, 3e-3),
    "2+2 d64 xavier 1e-3": ({**SMALL, **XAVIER}, 1e-3),
    "2+2 d64 xavier 2e-3": ({**SMALL, **XAVIER}, 2e-3),
    "2+2 d64 xavier 3e-3": ({**SMALL, **XAVIER}, 3e-3),
    "2+2 d64 xavier 5e-3": ({**SMALL, **XAVIER}, 5e-3),
    "2+2 d64 ds_init 3e-3": (SMALL, 3e-3),
    "2+2 d64 ds_init 5e-3": (SMALL, 5e-3),
    "2+2 d64 ds_init 5e-3 1200 steps": (SMALL, 5e-3, 1200),
    "2+2 d64 ds_init 5e-3 1600 steps": (SMALL, 5e-3, 1600),
    "2+1 d64 ds_init 5e-3 1200 steps": ({**SMALL, "decoder_layers": 1}, 5e-3, 1200),
    "2+2 d64 ffn 128 ds_init 5e-3 1200 steps": ({**SMALL, **THIN}, 5e-3, 1200),
}
WORK = CACHE / "demo_tuning"


def cache_name(name: str) -> str:
    """The cache file's stem for a candidate's name."""
    return name.replace(" ", "_").replace("+", "p")


def run_one(name: str) -> int:
    """Train candidate `name` as the demo would (in this process) and cache its BLEU."""
    from deep_nmt_hf.cli import demo
    from deep_nmt_hf_cli import main as cli_main

    fields, lr, steps = (*CANDIDATES[name], 800)[:3]
    demo.DEMO_MODEL.update(fields)  # no budget: the demo trains DEMO_MODEL, the first of its models
    out = WORK / cache_name(name)
    start = time.monotonic()
    argv = ["demo", "--output-dir", str(out), "--overwrite", "--no-progress", "--time-budget", "0"]
    code = cli_main([*argv, "--threads", "1", "--lr", str(lr), "--max-steps", str(steps)])
    if code:
        return code
    record = json.loads((out / "metrics.json").read_text(encoding="utf-8"))
    result = {
        "bleu": record["bleu"],
        "steps": record["global_step"],
        "training_s": record["demo"]["training_s"],
        "wall_s": round(time.monotonic() - start, 1),
        "fields": dict(demo.DEMO_MODEL),
        "lr": lr,
    }
    (WORK / f"{cache_name(name)}.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--one", choices=sorted(CANDIDATES), help=argparse.SUPPRESS)  # a child's candidate
    parser.add_argument("--only", nargs="+", choices=sorted(CANDIDATES), help="run these candidates only")
    parser.add_argument("--jobs", type=int, default=1, help="children at once (one thread each)")
    args = parser.parse_args()
    if args.one:
        return run_one(args.one)
    WORK.mkdir(parents=True, exist_ok=True)
    names = args.only or list(CANDIDATES)
    todo = [name for name in names if not (WORK / f"{cache_name(name)}.json").is_file()]

    def child(name: str) -> int:
        print(f"training {name}", flush=True)
        log = (WORK / f"{cache_name(name)}.log").open("w", encoding="utf-8")
        return subprocess.run(
            module_command("bench.demo_tuning", "--one", name), stdout=log, stderr=log
        ).returncode

    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        failed = [name for name, code in zip(todo, pool.map(child, todo), strict=True) if code]
    results = {
        name: json.loads((WORK / f"{cache_name(name)}.json").read_text(encoding="utf-8"))
        for name in CANDIDATES
        if (WORK / f"{cache_name(name)}.json").is_file()
    }
    rows = [
        [
            name,
            f"{r['lr']:g}",
            r["steps"],
            f"{r['bleu']:.2f}",
            "" if (WORK / cache_name(name) / "metrics.json").is_file() else "*",
        ]
        for name, r in results.items()
    ]
    rows.sort(key=lambda row: -float(row[3]))
    markdown = (
        "# The demo's model and learning rate (`bench/demo_tuning.py`)\n\n"
        "Each row: `deep-nmt demo` (its synthetic corpus, 800 steps, beam-4 BLEU on the 500-sentence test split) "
        "with the model, the peak learning rate and (where named) the steps changed, trained without a time budget on "
        "one thread (the BLEU does not depend on the load). Pre-LN throughout; `ds_init`: depth-scaled "
        "initialisation (dsinit-merged-attention eq. 10), `xavier`: fairseq's. One seed (1234) per row: rows a "
        "few BLEU apart are not told apart.\n\n"
        + markdown_table(["model, init, peak lr", "lr", "steps", "test BLEU", "seeded"], rows)
        + "\n\n*: trained by the same procedure (the demo with its model list patched, `--time-budget 0 --threads 1 "
        "--lr LR --max-steps N`) from a scratch script on 2026-11-29 before this one was written; their results "
        "seeded the cache.\n"
    )
    write_results("demo_tuning", {"results": results}, markdown)
    if failed:
        print(f"failed: {', '.join(failed)} (logs in {WORK})", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
