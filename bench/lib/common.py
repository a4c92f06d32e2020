"""Shared pieces of the benchmark scripts: provenance, interleaved timing, Multi30k data and models, result files.

Every result file records the exact command, library versions, the machine (cores, CPU model) and the date.
Ratios are measured in one run with the sides interleaved (A B A B ...) and reported as medians over repeats.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "bench" / "results"
CACHE = REPO / "bench" / ".cache"  # tokenizers and tokenized data; git-ignored


def shared_dir() -> Path:
    """../shared beside the checkout, or $DEEP_NMT_SHARED_DIR."""
    return Path(os.environ.get("DEEP_NMT_SHARED_DIR", REPO.parent / "shared"))


def module_command(module: str, *args: str) -> list[str]:
    """The command that runs bench module MODULE (e.g. `bench.scaling`) in a child process: `python -m MODULE ARGS`.

    The child inherits the working directory (the repository root, where `python -m bench.NAME` runs)."""
    return [sys.executable, "-m", module, *args]


def multi30k_dir() -> Path:
    path = shared_dir() / "data" / "multi30k"
    if not path.is_dir():
        raise SystemExit(f"error: {path} not found: the Multi30k benchmarks need ../shared/data/multi30k")
    return path


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _invocation() -> list[str]:
    """sys.argv as typed: `-m bench.NAME ARGS` for a module run (python -m), else the script and its arguments."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return ["-m", spec.name.removesuffix(".__main__"), *sys.argv[1:]]
    return list(sys.argv)


def provenance() -> dict[str, Any]:
    """Command, versions, machine and date for a result file."""
    import tokenizers
    import torch
    import transformers

    versions = {"python": platform.python_version(), "torch": torch.__version__}
    versions |= {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__}
    for name in ("accelerate", "datasets", "sacrebleu", "ctranslate2"):
        try:
            versions[name] = __import__(name).__version__
        except ImportError:
            continue
    return {
        "command": " ".join(shlex.quote(a) for a in [Path(sys.executable).name, *_invocation()]),
        "versions": versions,
        "machine": {"cores": os.cpu_count(), "cpu": cpu_model(), "torch_threads": torch.get_num_threads()},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def write_results(name: str, payload: dict[str, Any], markdown: str | None = None) -> Path:
    """Write bench/results/NAME.json (payload + provenance) and optionally NAME.md; return the JSON path."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    info = provenance()
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps({"provenance": info, **payload}, indent=2, default=str) + "\n")
    if markdown is not None:
        header = (
            f"Command: `{info['command']}`  \n"
            f"Machine: {info['machine']['cores']} cores, {info['machine']['cpu']}  \n"
            f"Versions: {', '.join(f'{k} {v}' for k, v in info['versions'].items())}  \n"
            f"Date: {info['date']}\n\n"
        )
        (RESULTS / f"{name}.md").write_text(markdown.rstrip() + "\n\n" + header)
    return path


def interleaved(
    sides: dict[str, Callable[[], Any]],
    repeats: int,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, dict[str, float]]:
    """Run every side once per round (A B A B ...), `warmup` untimed rounds first, each call timed with `clock`
    (wall time by default; `time.process_time` counts the CPU seconds of every thread of this process, which a
    shared machine disturbs far less when each side uses one thread). Returns median and all times per side."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    for round_index in range(warmup + repeats):
        for name, run in sides.items():
            start = clock()
            run()
            elapsed = clock() - start
            if round_index >= warmup:
                times[name].append(elapsed)
    return {name: {"median_s": statistics.median(v), "times_s": v} for name, v in times.items()}


def profile_ops(
    fn: Callable[[], Any], top: int = 15, groups: dict[str, Sequence[str]] | None = None
) -> dict[str, Any]:
    """Run `fn` once under torch.profiler (CPU). The profiler times operators by the wall clock, so shares are
    of the call's wall time (`total_s`; on a shared machine both include time spent waiting for a core). Returns
    `total_s`, the summed self time of all operators (`ops_s`; the rest is Python and framework code between
    them), the `top` operators by self time with their share of `total_s`, and for each of `groups` (name ->
    operator names) the summed self seconds of its operators."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()  # inside: the profiler's own start-up and teardown are not counted
        fn()
        total_s = time.perf_counter() - start
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    rows = [
        {
            "op": e.key,
            "calls": e.count,
            "self_ms": round(e.self_cpu_time_total / 1000, 2),
            "share": round(e.self_cpu_time_total / 1e6 / total_s, 4),
        }
        for e in events
    ]
    self_s = {e.key: e.self_cpu_time_total / 1e6 for e in events}
    return {
        "total_s": total_s,
        "ops_s": sum(self_s.values()),
        "top": rows[:top],
        "groups": {name: sum(self_s.get(op, 0.0) for op in ops) for name, ops in (groups or {}).items()},
    }


def ops_table(profile: dict[str, Any], rows: int = 10) -> str:
    """Markdown table of a `profile_ops` result: the top operators and the time outside any operator."""
    body = [[r["op"], r["calls"], r["self_ms"], f"{r['share']:.1%}"] for r in profile["top"][:rows]]
    outside = profile["total_s"] - profile["ops_s"]
    body.append(
        [
            "(outside operators: Python, framework)",
            "",
            round(1000 * outside, 2),
            f"{outside / profile['total_s']:.1%}",
        ]
    )
    return markdown_table(["op", "calls", "self ms", "share of the call"], body)


def ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator else float("nan")


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def multi30k_pairs(
    split: str, src: str = "en", tgt: str = "de", limit: int | None = None
) -> list[tuple[str, str]]:
    """(source, target) sentence pairs of one Multi30k split, read with deep_nmt_hf.data."""
    from deep_nmt_hf.data import read_parallel_dir

    rows = read_parallel_dir(multi30k_dir(), split, src, tgt)
    pairs = [(r["translation"][src], r["translation"][tgt]) for r in rows]
    return pairs[:limit] if limit else pairs


def multi30k_tokenizer(vocab_size: int = 8000):
    """The joint BPE tokenizer of Multi30k train (en+de), trained once and cached in bench/.cache."""
    from transformers import AutoTokenizer

    from deep_nmt_hf.data.tokenization import train_tokenizer

    path = CACHE / f"multi30k-bpe{vocab_size}"
    if (path / "tokenizer.json").exists():
        return AutoTokenizer.from_pretrained(path)
    pairs = multi30k_pairs("train")
    tokenizer = train_tokenizer([s for pair in pairs for s in pair], vocab_size=vocab_size)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    return tokenizer


def tokenized_batches(
    tokenizer, pairs: Sequence[tuple[str, str]], batch_size: int, max_length: int = 64
) -> list[dict]:
    """Padded training batches (input_ids, attention_mask, labels with -100 on padding), in order."""
    batches = []
    for start in range(0, len(pairs), batch_size):
        chunk = pairs[start : start + batch_size]
        enc = tokenizer(
            [s for s, _ in chunk],
            text_target=[t for _, t in chunk],
            padding=True,
            truncation=True,
            max_length=max_length,
            return_tensors="pt",
        )
        enc["labels"] = enc["labels"].masked_fill(enc["labels"] == tokenizer.pad_token_id, -100)
        batches.append(dict(enc))
    return batches


def pairs_dataset(pairs: Sequence[tuple[str, str]], src: str = "en", tgt: str = "de") -> Any:
    """(source, target) pairs as a `datasets.Dataset` with the `translation` column run_translation.py reads."""
    import datasets

    return datasets.Dataset.from_dict({"translation": [{src: s, tgt: t} for s, t in pairs]})


def study_trainer(
    model: Any,
    training_args: Any,
    tokenizer: Any,
    train_dataset: Any,
    callbacks: list[Any],
    seed: int,
    label_smoothing: float,
    **kwargs: Any,
) -> Any:
    """A DeepNMTTrainer for a Multi30k study's model. Stock MarianMTModel computes its loss without label
    smoothing, so it trains on `collapse_losses.token_cross_entropy` with `label_smoothing` (our variants smooth in
    their own loss, `config.label_smoothing`); an ADMIN model gets `AdminProfilingCallback(seed=seed)` after
    `callbacks` (ω profiled on the first training batch). `kwargs` go to the trainer (eval set, max_tokens, ...)."""
    from transformers import DataCollatorForSeq2Seq, MarianMTModel

    from deep_nmt_hf.model.collapse_losses import token_cross_entropy
    from deep_nmt_hf.training import DeepNMTTrainer
    from deep_nmt_hf.training.admin_profiling import AdminProfilingCallback

    if getattr(model.config, "residual_scaling", None) == "admin":
        callbacks = [*callbacks, AdminProfilingCallback(seed=seed)]

    def smoothed_loss(outputs: Any, labels: Any, num_items_in_batch: Any = None) -> Any:
        return token_cross_entropy(outputs["logits"], labels, label_smoothing)

    return DeepNMTTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        callbacks=callbacks,
        compute_loss_func=smoothed_loss if isinstance(model, MarianMTModel) else None,
        **kwargs,
    )


def width_fields(d_model: int) -> dict[str, Any]:
    """The width of a Multi30k study model: `d_model`, feed-forward 4 × d_model, a head per 32 dimensions."""
    heads = max(1, d_model // 32)
    return {
        "d_model": d_model,
        "encoder_ffn_dim": 4 * d_model,
        "decoder_ffn_dim": 4 * d_model,
        "encoder_attention_heads": heads,
        "decoder_attention_heads": heads,
    }


def model_from_fields(variant: str, fields: dict[str, Any], tokenizer, d_model: int, max_length: int):
    """A fresh model of `variant` ("marian" = stock MarianMTModel built from our base config) with `fields` on
    top of the common width `d_model`; special ids from the tokenizer."""
    from transformers import MarianMTModel

    from deep_nmt_hf import VARIANTS
    from deep_nmt_hf.publish.folding import stock_config
    from deep_nmt_hf.training import build_config, resolve_variant
    from deep_nmt_hf.training.generation_settings import translation_generation_config

    fields = {**width_fields(d_model), **fields}
    lengths = {"max_source_length": max_length, "max_target_length": max_length}
    if variant == "marian":
        ours = build_config(tokenizer, VARIANTS["base"], **lengths, **fields)
        model = MarianMTModel(stock_config(ours))
        model.generation_config = translation_generation_config(ours)
        return model
    config_class, lm_class = resolve_variant(variant)
    config = build_config(tokenizer, config_class, **lengths, **fields)
    model = lm_class(config)
    model.generation_config = translation_generation_config(config)  # as trained models save it
    return model
