"""Do the depth study's committed weights reproduce its numbers?

Every finished run of bench/depth_multi30k.py commits its final (averaged) model in float16 beside its record
(bench/lib/study_weights.py), so that a later sitting on another machine can reload it. This script reloads each
committed file, translates test_2016_flickr again with the model's own generation config (the recipe's beam and
length penalty, as the run scored it) and compares with what the run's record measured on the float32 model it
trained: corpus BLEU, and per sentence sacreBLEU's sufficient statistics (the paired bootstrap's input), so it
says how many of the 1000 test sentences come out the same. A file that is not the scored model (another seed's,
a half-trained checkpoint, a layer loaded under the wrong name) changes most sentences; float16 rounding alone
changes a few beam decisions.

A run **reproduces** when at least `SAME_SHARE` of its sentences have the recorded statistics and its BLEU is
within `MAX_DELTA` of the record. One thread; each checked run is cached (bench cache, keyed by the weights file's
sha256 and the torch / transformers versions), so a check that stops resumes where it stopped.

    nice -n 19 python -m bench.depth_weights_check                # every committed run (~20 CPU-s each)
    python -m bench.depth_weights_check --only pre-18-6 --seeds 1  # one run, printed, no result files

Writes bench/results/depth_multi30k_weights.{json,md} (not with --only / --seeds: those only print).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path
from typing import Any

from bench.lib.common import markdown_table, multi30k_pairs, multi30k_tokenizer, write_results
from bench.lib.depth import core
from bench.lib.depth.rows import row_order

NAME = "depth_multi30k_weights"
SAME_SHARE = 0.9  # at least this share of the test sentences decode to the recorded statistics
MAX_DELTA = 0.3  # and corpus BLEU moves by at most this much


def committed_runs(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(row, seed) of every record of the `--epochs` budget with its weights committed beside it, in the
    study's row order."""
    root = core.records_root(args) / f"e{args.epochs}"
    runs = []
    for path in root.glob("*/seed*.averaged.safetensors"):
        name, seed = path.parent.name, int(path.name.split(".")[0].removeprefix("seed"))
        if core.record_path(name, seed, args).exists():
            runs.append((name, seed))
    return sorted(runs, key=lambda run: (row_order(run[0]), run[1]))


def file_sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _versions() -> dict[str, str]:
    import torch
    import transformers

    return {"torch": torch.__version__, "transformers": transformers.__version__}


def check_run(name: str, seed: int, args: argparse.Namespace) -> dict[str, Any]:
    """Reload NAME's committed float16 weights for SEED, decode the test sentences its record scored and compare
    with the record's averaged-model scores. Cached by the weights' sha256 and the library versions."""
    path = core.weights_path(name, seed, args)
    key = {"weights_sha256": file_sha256(path), **_versions()}
    cached_path = core.STUDY_CACHE / "weights-check" / f"e{args.epochs}" / name / f"seed{seed}.json"
    cached = core._read_json(cached_path)
    if cached is not None and cached.get("key") == key:
        return cached["result"]

    import numpy as np
    import torch

    from bench.lib.study_weights import load_weights, tokenizer_digest
    from deep_nmt_hf.science.significance import bleu_from_statistics, bleu_statistics
    from deep_nmt_hf.training import translate

    record = core._read_json(core.record_path(name, seed, args))
    scored = record["test"]["averaged"]
    tokenizer = multi30k_tokenizer(record["settings"]["vocab_size"])
    model = load_weights(path, tokenizer_sha256=tokenizer_digest(tokenizer))  # refuses another tokenizer
    pairs = multi30k_pairs("test_2016_flickr", limit=scored["num_sentences"])
    with torch.inference_mode():
        hypotheses = translate(
            model, tokenizer, [s for s, _ in pairs], num_beams=record["options"]["num_beams"], batch_size=64
        )
    statistics = bleu_statistics(hypotheses, [t for _, t in pairs])
    recorded = scored["bleu_statistics"]
    result = {
        "name": name,
        "seed": seed,
        "recorded_bleu": scored["bleu"],
        "bleu": float(bleu_from_statistics(np.sum(statistics, axis=0))),
        "sentences": len(recorded),
        "same_sentences": sum(a == b for a, b in zip(statistics, recorded, strict=True)),
        "weights_sha256": key["weights_sha256"],
    }
    result["delta"] = result["bleu"] - result["recorded_bleu"]
    result["reproduces"] = reproduces(result)
    core._write_json(cached_path, {"key": key, "result": result})
    return result


def reproduces(result: dict[str, Any]) -> bool:
    """The rule: `SAME_SHARE` of the sentences unchanged and |Δ BLEU| ≤ `MAX_DELTA`."""
    same = result["same_sentences"] >= SAME_SHARE * result["sentences"]
    return bool(same and abs(result["delta"]) <= MAX_DELTA)


def report_markdown(results: list[dict[str, Any]]) -> str:
    """The table of every checked run and a summary line."""
    rows = [
        [
            r["name"],
            r["seed"],
            f"{r['recorded_bleu']:.2f}",
            f"{r['bleu']:.2f}",
            f"{r['delta']:+.2f}",
            f"{r['same_sentences']} / {r['sentences']}",
            "yes" if r["reproduces"] else "**no**",
        ]
        for r in results
    ]
    failed = [f"{r['name']} seed {r['seed']}" for r in results if not r["reproduces"]]
    deltas = [abs(r["delta"]) for r in results]
    shares = [r["same_sentences"] / r["sentences"] for r in results]
    summary = (
        f"{len(results) - len(failed)} of {len(results)} committed runs reproduce their record"
        + (f" (not: {', '.join(failed)})" if failed else "")
        + (
            f"; largest |Δ BLEU| {max(deltas):.2f}, fewest unchanged sentences {min(shares):.1%}."
            if results
            else "."
        )
    )
    return (
        "# The depth study's committed weights, reloaded\n\n"
        "Each finished run's final (averaged) model is committed in float16 beside its record "
        "(bench/lib/study_weights.py). Reloaded on this machine and decoded again on test_2016_flickr with its own "
        "generation config, against what the record measured on the float32 model: corpus BLEU and the sentences "
        "whose sacreBLEU statistics are unchanged. A run reproduces when at least "
        f"{SAME_SHARE:.0%} of its sentences are unchanged and its BLEU moves by at most {MAX_DELTA} "
        "(bench/depth_weights_check.py).\n\n"
        + summary
        + "\n\n"
        + markdown_table(
            ["row", "seed", "BLEU recorded", "BLEU reloaded", "Δ", "sentences unchanged", "reproduces"], rows
        )
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--only", nargs="+", metavar="ROW", help="check only these rows (prints, writes nothing)"
    )
    parser.add_argument(
        "--seeds", nargs="+", type=int, metavar="S", help="check only these seeds (prints only)"
    )
    parser.add_argument(
        "--epochs", type=int, default=30, help="the study's epoch budget whose records to check"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    import torch
    from tqdm.auto import tqdm

    args = build_parser().parse_args(argv)
    args.quick = False
    torch.set_num_threads(1)
    runs = committed_runs(args)
    unknown = sorted(set(args.only or []) - {name for name, _ in runs})
    if unknown:
        known = sorted({name for name, _ in runs})
        raise SystemExit(f"--only: no committed weights for {', '.join(unknown)}; rows with weights: {known}")
    runs = [
        (name, seed)
        for name, seed in runs
        if (not args.only or name in args.only) and (not args.seeds or seed in args.seeds)
    ]
    results = [check_run(name, seed, args) for name, seed in tqdm(runs, desc="reloading", unit="run")]
    markdown = report_markdown(results)
    if not (args.only or args.seeds):  # a subset only prints
        write_results(NAME, {"same_share": SAME_SHARE, "max_delta": MAX_DELTA, "runs": results}, markdown)
    print(markdown)
    return 0 if all(r["reproduces"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
