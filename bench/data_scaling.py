"""Memory and start-up time of the data path as the corpus grows (0.25M, 1M, 4M pairs; issue #16).

Corpora come from the project's synthetic generator (`deep_nmt_hf.data.synthetic.iter_pairs`), written with the
streaming writer `write_parallel_dir` (the largest is generated once; smaller ones are its prefixes, read line
by line). For each size, every measurement runs in a fresh child process (this script with ``--child``),
which reports its wall time and its peak RSS (``VmHWM`` of /proc/self/status; worker processes of
``--num-proc`` report through ``getrusage(RUSAGE_CHILDREN)``):

* ``preprocess``: ``deep-nmt preprocess`` into an empty cache (read to Arrow, train BPE, tokenize), then again
  (cached);
* ``train_first``: ``deep-nmt train --max-steps 1`` (tiny model, no validation split so no evaluation or
  scoring) into an empty cache, timed up to the end of its first optimizer step; ``train_cached``: the same
  command again, every cache entry reused; ``train_cached_sequential``: the same with
  ``--train-sampling sequential`` (the Trainer's default samplers build an O(corpus) index list);
* ``tokenize_np1`` / ``tokenize_np2``: tokenization alone (`preprocessing.tokenize_cached` into an empty
  cache, corpus and tokenizer already cached) with ``--num-proc`` 1 and 2: pairs per second.

Every finished piece is stored as JSON under the work dir (default ``~/.cache/deep_nmt_bench/data_scaling``,
outside the repository), so an interrupted run resumes; ``--redo SIZE`` re-measures one size; ``--sizes`` picks
the sizes to measure now and ``--train-only SIZE`` skips the preprocess pieces of one size; the report covers
every size measured so far. Results:
bench/results/data_scaling{,_quick}.{json,md,png}. ``--quick`` uses 2k / 8k / 32k pairs.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.lib.common import module_command

SIZES = (250_000, 1_000_000, 4_000_000)
QUICK_SIZES = (2_000, 8_000, 32_000)
SRC, TGT = "sa", "sb"
TINY_MODEL = ["--d-model", "16", "--encoder-layers", "1", "--decoder-layers", "1", "--heads", "2"]
TINY_MODEL += ["--ffn-dim", "32", "--batch-size", "16", "--max-steps", "1", "--warmup-steps", "1"]
COMMON = ["--src-lang", SRC, "--tgt-lang", TGT, "--vocab-size", "4000", "--tokenizer-sample", "200000"]
COMMON += ["--no-progress"]
NUM_PROC_UP_TO = 1_000_000  # the --num-proc 1 vs 2 comparison runs for sizes up to this


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


# ------------------------------------------------------------------------------------------------- children
def child(out: Path, kind: str, argv: list[str]) -> None:
    """Run one measurement in this (fresh) process and write wall time and peak RSS to `out`."""
    start = time.perf_counter()
    first_step: dict[str, float] = {}
    result: dict[str, Any] = {"load_1min": os.getloadavg()[0]}  # how busy the machine was when it started
    anon = {"peak": 0}  # RssAnon has no kernel peak counter: sample it every 20 ms

    def sample() -> None:
        while True:
            anon["peak"] = max(anon["peak"], _status_kib("RssAnon"))
            time.sleep(0.02)

    threading.Thread(target=sample, daemon=True).start()
    if kind == "cli":
        from transformers.trainer_callback import CallbackHandler

        original = CallbackHandler.on_step_end

        def on_step_end(self: Any, args: Any, state: Any, control: Any) -> Any:
            first_step.setdefault("s", time.perf_counter() - start)
            return original(self, args, state, control)

        CallbackHandler.on_step_end = on_step_end  # type: ignore[method-assign]
        # what every run imports anyway, first: the fixed start-up, apart from the data path's own time
        import datasets  # noqa: F401

        import deep_nmt_hf.training.run  # noqa: F401
        from deep_nmt_hf.cli import main

        result["imports_s"] = time.perf_counter() - start

        code = main(argv)
        if code != 0:
            raise SystemExit(f"deep-nmt {' '.join(argv)} exited with {code}")
    else:  # tokenize: data_dir cache_dir tokenizer_dir out_cache num_proc
        from transformers import AutoTokenizer

        from deep_nmt_hf.data import read_parallel_dir
        from deep_nmt_hf.data.preprocessing import tokenize_cached

        data_dir, cache_dir, tokenizer_dir, out_cache, num_proc = argv
        dataset = read_parallel_dir(data_dir, "train", SRC, TGT, cache_dir=cache_dir)
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
        begin = time.perf_counter()
        split = tokenize_cached(
            dataset, tokenizer, SRC, TGT, 128, 128, num_proc=int(num_proc), cache_dir=out_cache
        )
        result["tokenize_s"] = time.perf_counter() - begin
        result["pairs"] = len(split.dataset)
        assert not split.from_cache
    result.update(
        wall_s=time.perf_counter() - start,
        first_step_s=first_step.get("s"),
        peak_rss_mib=_status_kib("VmHWM") / 1024,
        peak_anon_rss_mib=max(anon["peak"], _status_kib("RssAnon")) / 1024,
        children_peak_rss_mib=resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    )
    out.write_text(json.dumps(result) + "\n")


def _run_child(out: Path, kind: str, argv: list[str]) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    command = module_command("bench.data_scaling", "--child", str(out), kind, "--", *argv)
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"child failed ({' '.join(command)}):\n{done.stderr[-3000:]}")
    return json.loads(out.read_text())


# ------------------------------------------------------------------------------------------------- corpora
def _corpus(work: Path, size: int, largest: int) -> Path:
    from deep_nmt_hf.data import write_parallel_dir
    from deep_nmt_hf.data.synthetic import iter_pairs

    directory = work / "corpora" / str(size)
    if (directory / f"train.{SRC}").is_file() and (directory / f"train.{TGT}").is_file():
        return directory
    if size == largest:
        print(f"generating {size} pairs ...", flush=True)
        write_parallel_dir(iter_pairs(size, seed=16), directory, "train", SRC, TGT)
        return directory
    source = _corpus(work, largest, largest)
    with (
        open(source / f"train.{SRC}", encoding="utf-8") as s,
        open(source / f"train.{TGT}", encoding="utf-8") as t,
    ):
        pairs = ((a.rstrip("\n"), b.rstrip("\n")) for a, b in itertools.islice(zip(s, t, strict=True), size))
        write_parallel_dir(pairs, directory, "train", SRC, TGT)
    return directory


# ---------------------------------------------------------------------------------------------- one size
def measure(
    work: Path, size: int, largest: int, num_proc_up_to: int = NUM_PROC_UP_TO, preprocess: bool = True
) -> dict[str, Any]:
    pieces = work / "pieces" / str(size)
    pieces.mkdir(parents=True, exist_ok=True)
    caches = work / "caches" / str(size)
    data = _corpus(work, size, largest)
    results: dict[str, Any] = {}

    def piece(name: str, kind: str, argv: list[str], fresh: list[Path] = ()) -> dict[str, Any]:
        path = pieces / f"{name}.json"
        if not path.is_file():
            for directory in fresh:
                shutil.rmtree(directory, ignore_errors=True)
            print(f"  {size}: {name} ...", flush=True)
            _run_child(path, kind, argv)
        results[name] = json.loads(path.read_text())
        return results[name]

    pre_cache = caches / "preprocess"
    pre = ["preprocess", "--data-dir", str(data), *COMMON[:-1], "--cache-dir", str(pre_cache)]
    if preprocess or (pieces / "preprocess_first.json").is_file():
        piece("preprocess_first", "cli", pre, fresh=[pre_cache])
        piece("preprocess_cached", "cli", pre)
    measured = (pieces / "tokenize_np2.json").is_file()
    for workers in (1, 2) if size <= num_proc_up_to and (preprocess or measured) else ():
        tokenizer_dir = next(pre_cache.glob("tokenizer-*"))
        out_cache = caches / f"tokenize_np{workers}"
        argv = [str(data), str(pre_cache), str(tokenizer_dir), str(out_cache), str(workers)]
        piece(f"tokenize_np{workers}", "tokenize", argv, fresh=[out_cache])
        shutil.rmtree(out_cache, ignore_errors=True)

    train_cache = caches / "train"
    output = caches / "model"
    train = ["train", "--data-dir", str(data), *COMMON, *TINY_MODEL, "--cache-dir", str(train_cache)]
    train += ["--output-dir", str(output), "--overwrite", "--num-beams", "1"]
    piece("train_first", "cli", train, fresh=[train_cache])
    piece("train_cached", "cli", train)
    piece("train_cached_sequential", "cli", [*train, "--train-sampling", "sequential"])
    return results


# ------------------------------------------------------------------------------------------------- report
def _load_range(results: dict[int, dict[str, Any]]) -> str:
    loads = [p["load_1min"] for r in results.values() for p in r.values() if "load_1min" in p]
    return f"{min(loads):.1f}-{max(loads):.1f}" if loads else "not recorded"


def _after_imports(piece: dict[str, Any]) -> float:
    return piece["first_step_s"] - piece["imports_s"]


def report(sizes: tuple[int, ...], results: dict[int, dict[str, Any]], name: str) -> None:
    from bench.lib.common import markdown_table, write_results

    rows = []
    for size in sizes:
        r = results[size]
        rows.append(
            [
                f"{size:,}",
                *(
                    [
                        f"{r['preprocess_first']['wall_s']:.1f}",
                        f"{r['preprocess_first']['peak_rss_mib']:.0f}",
                        f"{r['preprocess_cached']['wall_s']:.1f}",
                    ]
                    if "preprocess_first" in r
                    else ["-", "-", "-"]
                ),
                f"{r['train_first']['first_step_s']:.1f}",
                f"{r['train_first']['peak_rss_mib']:.0f}",
                f"{r['train_cached']['first_step_s']:.1f}",
                f"{r['train_cached']['peak_rss_mib']:.0f}",
                f"{r['train_cached_sequential']['peak_rss_mib']:.0f}",
                f"{r['train_cached'].get('peak_anon_rss_mib', float('nan')):.0f}",
                f"{r['train_cached_sequential'].get('peak_anon_rss_mib', float('nan')):.0f}",
                f"{r['train_first']['first_step_s'] / r['train_cached']['first_step_s']:.1f}",
                *(
                    [
                        f"{r['tokenize_np1']['pairs'] / r['tokenize_np1']['tokenize_s']:,.0f}",
                        f"{r['tokenize_np2']['pairs'] / r['tokenize_np2']['tokenize_s']:,.0f}",
                        f"{r['tokenize_np1']['tokenize_s'] / r['tokenize_np2']['tokenize_s']:.2f}",
                    ]
                    if "tokenize_np2" in r
                    else ["-", "-", "-"]
                ),
            ]
        )
    header = [
        "pairs", "preprocess s", "preprocess RSS MiB", "preprocess cached s", "train 1st step s (first)",
        "train RSS MiB (first)", "train 1st step s (cached)", "train RSS MiB (cached)",
        "train RSS MiB (cached, sequential)", "train anon RSS MiB (cached)",
        "train anon RSS MiB (cached, sequential)", "first / cached", "tokenize pairs/s np1", "tokenize pairs/s np2",
        "np2 speed-up",
    ]  # fmt: skip
    small, big = sizes[0], sizes[-1]
    rss_ratio = results[big]["train_cached"]["peak_rss_mib"] / results[small]["train_cached"]["peak_rss_mib"]
    seq_ratio = (
        results[big]["train_cached_sequential"]["peak_rss_mib"]
        / results[small]["train_cached_sequential"]["peak_rss_mib"]
    )
    anon_ratio = results[big]["train_cached"].get("peak_anon_rss_mib", float("nan")) / results[small][
        "train_cached"
    ].get("peak_anon_rss_mib", float("nan"))
    seq_anon_ratio = results[big]["train_cached_sequential"].get("peak_anon_rss_mib", float("nan")) / results[
        small
    ]["train_cached_sequential"].get("peak_anon_rss_mib", float("nan"))
    aims = [
        f"- peak anonymous RSS (process memory without the file-backed pages of memory-mapped Arrow files) of the "
        f"cached train run, {big:,} / {small:,} pairs: {anon_ratio:.2f}x; with `--train-sampling sequential`: "
        f"{seq_anon_ratio:.2f}x (aim <= 1.2x)",
        f"- peak RSS of the cached train run, {big:,} / {small:,} pairs: {rss_ratio:.2f}x "
        f"(aim <= 1.2x); with `--train-sampling sequential`: {seq_ratio:.2f}x",
        "- cached start vs first start (time to the first optimizer step): "
        + ", ".join(
            f"{size:,}: {results[size]['train_first']['first_step_s'] / results[size]['train_cached']['first_step_s']:.1f}x"
            for size in sizes
        )
        + " (aim >= 10x)",
        "- the same after the fixed start-up (Python, torch / transformers / datasets imports; "
        "`imports_s`, measured in each run), i.e. the data path's own part: "
        + ", ".join(
            f"{size:,}: {_after_imports(results[size]['train_first']) / _after_imports(results[size]['train_cached']):.1f}x "
            f"({_after_imports(results[size]['train_cached']):.1f} s of {results[size]['train_cached']['first_step_s']:.1f} s)"
            for size in sizes
            if "imports_s" in results[size]["train_cached"]
        ),
        "- tokenization throughput, `--num-proc 2` / `--num-proc 1`: "
        + ", ".join(
            f"{size:,}: {results[size]['tokenize_np1']['tokenize_s'] / results[size]['tokenize_np2']['tokenize_s']:.2f}x"
            for size in sizes
            if "tokenize_np2" in results[size]
        ),
    ]
    markdown = (
        "# Data path scaling (issue #16)\n\n"
        + markdown_table(header, rows)
        + "\n\n"
        + "\n".join(aims)
        + f"\n\nThe machine's 1-minute load average when each piece started: {_load_range(results)} (2 cores; "
        "above ~1 other work shared them: read the ratios, not the absolute seconds). Each cell is one fresh child process (peak RSS = its VmHWM; the "
        "`--num-proc 2` workers are separate processes, not included). VmHWM also counts the file-backed pages of the "
        "memory-mapped Arrow files that the run touches (opening a file reads every record batch's header; the "
        "files are written in 10,000-row batches so that stays small, see deep_nmt_hf/data/arrow.py); the "
        "anonymous RSS column (sampled every 20 ms) is the process's own memory. The preprocess pieces' RSS "
        "includes the tokenizer's training on its 200k-pair sample. Train runs: tiny model (d 16, 1+1 "
        "layers), `--max-steps 1`, no validation split (no evaluation, no scoring); time up to the end of the "
        "first optimizer step, including Python start-up and imports. The tokenizer is trained on a 200k-pair "
        "sample (`--tokenizer-sample 200000`). The `--num-proc` comparison runs up to 1M pairs.\n"
    )
    write_results(name, {"sizes": list(sizes), "results": {str(k): v for k, v in results.items()}}, markdown)
    _plot(sizes, results, name)


def _plot(sizes: tuple[int, ...], results: dict[int, dict[str, Any]], name: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bench.lib.common import RESULTS

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (
        ("preprocess_first", "preprocess (first)"),
        ("train_first", "train, first"),
        ("train_cached", "train, cached"),
        ("train_cached_sequential", "train, cached, sequential"),
    ):
        have = [s for s in sizes if key in results[s]]
        left.plot(have, [results[s][key]["peak_rss_mib"] for s in have], marker="o", label=label)
        time_key = "wall_s" if key.startswith("preprocess") else "first_step_s"
        right.plot(have, [results[s][key][time_key] for s in have], marker="o", label=label)
    for key, label in (
        ("train_cached", "train, cached"),
        ("train_cached_sequential", "train, cached, sequential"),
    ):
        have = [s for s in sizes if "peak_anon_rss_mib" in results[s][key]]
        anon = [results[s][key]["peak_anon_rss_mib"] for s in have]
        left.plot(have, anon, marker="x", linestyle="--", label=f"{label} (anonymous RSS)")
    for ax, ylabel in ((left, "peak RSS (MiB)"), (right, "seconds (to 1st optimizer step for train)")):
        ax.set_xscale("log")
        ax.set_xticks(list(sizes), [f"{size / 1e6:g}M" for size in sizes])
        ax.minorticks_off()
        ax.set_xlabel("training pairs")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    right.set_yscale("log")
    left.legend(fontsize=8)
    fig.suptitle("deep_nmt_hf data path: memory and start-up time vs corpus size (shared 2-core CPU)")
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=120)
    plt.close(fig)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        out, kind, separator, *argv = sys.argv[2:]
        assert separator == "--"
        child(Path(out), kind, argv)
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (2k, 8k, 32k pairs)")
    parser.add_argument(
        "--work-dir", type=Path, default=Path("~/.cache/deep_nmt_bench/data_scaling").expanduser()
    )
    parser.add_argument("--redo", type=int, action="append", default=[], help="re-measure this size")
    parser.add_argument("--sizes", type=int, nargs="+", help="corpus sizes to measure (default: 0.25M 1M 4M)")
    parser.add_argument(
        "--train-only",
        type=int,
        action="append",
        default=[],
        help="for this size measure only the train runs",
    )
    parser.add_argument(
        "--num-proc-up-to",
        type=int,
        default=NUM_PROC_UP_TO,
        help="largest size with the --num-proc comparison",
    )
    args = parser.parse_args()
    sizes = tuple(args.sizes) if args.sizes else QUICK_SIZES if args.quick else SIZES
    work = args.work_dir / ("quick" if args.quick else "full")
    for size in args.redo:
        shutil.rmtree(work / "pieces" / str(size), ignore_errors=True)
    everything = QUICK_SIZES if args.quick else SIZES
    for size in sizes:  # a report after every size: an interrupted run still leaves the finished sizes
        measure(work, size, max(everything), args.num_proc_up_to, preprocess=size not in args.train_only)
        done = {
            s: measure(work, s, max(everything), args.num_proc_up_to, preprocess=False)
            for s in everything
            if (work / "pieces" / str(s) / "train_cached_sequential.json").is_file()
        }  # every size measured so far, in this run or an earlier one (stored pieces are not re-run)
        report(tuple(done), done, "data_scaling_quick" if args.quick else "data_scaling")
    print(
        (
            Path(__file__).parent / "results" / ("data_scaling_quick.md" if args.quick else "data_scaling.md")
        ).read_text()
    )


if __name__ == "__main__":
    main()
