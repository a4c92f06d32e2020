"""Quality on Multi30k en→de for the same CPU-time budget per model: every variant against stock MarianMTModel.

One joint BPE tokenizer (bench/lib/common.py: multi30k_tokenizer) and one training recipe for every model:
`Seq2SeqTrainer` (deep_nmt_hf.training.DeepNMTTrainer) with the settings of deep_nmt_hf.training.train (Adam
β = (0.9, 0.98), no weight decay, inverse-square-root schedule after a linear warmup, length-grouped batches,
gradient clipping 1.0, label smoothing 0.1), and a callback that stops training once the process has spent its
CPU-time budget (`time.process_time`, one torch thread per model, so that the budget is the same on a shared
machine whatever the other processes do). Stock Marian has no label smoothing in its own loss: it gets the same
label-smoothed cross-entropy (collapse_losses.token_cross_entropy) through the Trainer's `compute_loss_func`.
ADMIN ω is profiled by AdminProfilingCallback at the start of training (inside the budget).

After training, test_2016_flickr is translated with beam 4 (deep_nmt_hf.training.translate) and scored with
sacreBLEU BLEU and chrF (compute_translation_metrics, signatures recorded). Every model trains in its own
subprocess; `--jobs` of them run at once.

    python -m bench.quality_multi30k                 # the full run: 1200 CPU-s per model at d 64, 2 at once
                                                     # (about 75 min on an idle 2-core machine)
    python -m bench.quality_multi30k --quick         # smoke test: tiny models, seconds of budget
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.lib.common import (
    CACHE,
    RESULTS,
    markdown_table,
    model_from_fields,
    module_command,
    multi30k_dir,
    multi30k_pairs,
    multi30k_tokenizer,
    pairs_dataset,
    study_trainer,
    width_fields,
    write_results,
)

RUNS = CACHE / "multi30k-runs"

# name -> (variant short name or "marian", config fields beyond the common width, description)
MODELS: dict[str, tuple[str, dict[str, Any], str]] = {
    "marian-6-6": ("marian", {"encoder_layers": 6, "decoder_layers": 6}, "stock MarianMTModel 6-6 (post-LN)"),
    "base-6-6": ("base", {"encoder_layers": 6, "decoder_layers": 6}, "our post-LN 6-6"),
    "base-6-6-normal": (
        "base",
        {"encoder_layers": 6, "decoder_layers": 6, "init_method": "normal"},
        "our post-LN 6-6, init_method='normal' (N(0, 0.02) like Marian)",
    ),
    "admin-18-6": ("admin", {"encoder_layers": 18, "decoder_layers": 6}, "ADMIN post-LN 18-6 (ω profiled)"),
    "dlcl-18-6": ("dlcl", {"encoder_layers": 18, "decoder_layers": 6}, "pre-norm + DLCL 18-6"),
    "dsinit-matt-18-6": (
        "dsinit_matt",
        {"encoder_layers": 18, "decoder_layers": 6},
        "DS-Init + MAtt post-LN 18-6",
    ),
    "deep-decoder-6-12": (
        "deep_decoder",
        {"encoder_layers": 6, "decoder_layers": 12},
        "pre-LN 6-12, CAD on 2 lowest decoder layers + DDR + ALD",
    ),
    "shared-6x3-3x2": (
        "shared_layers",
        {"encoder_layers": 6, "encoder_layer_repeats": 3, "decoder_layers": 3, "decoder_layer_repeats": 2},
        "pre-LN shared layers: 6 enc ×3, 3 dec ×2 (depth 18-6)",
    ),
}


def build_model(name: str, tokenizer, d_model: int, max_length: int):
    """The model called `name` in MODELS at width `d_model` (special ids from the tokenizer)."""
    variant, fields, _ = MODELS[name]
    return model_from_fields(variant, {**fields, "label_smoothing": 0.1}, tokenizer, d_model, max_length)


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """Train one model for the CPU budget, translate and score the test set; return its record."""
    import torch
    from transformers import Seq2SeqTrainingArguments, TrainerCallback, set_seed

    from deep_nmt_hf.training import (
        DivergenceCallback,
        compute_translation_metrics,
        nmt_recipe,
        tokenize_dataset,
        translate,
    )

    torch.set_num_threads(args.threads)
    tokenizer = multi30k_tokenizer(args.vocab_size)
    set_seed(args.seed)
    model = build_model(args.worker, tokenizer, args.d_model, args.max_length)

    train_pairs = multi30k_pairs("train", limit=args.max_train_samples)
    train_tokens = tokenize_dataset(
        pairs_dataset(train_pairs), tokenizer, "en", "de", args.max_length, args.max_length
    )
    target_tokens_per_epoch = sum(len(ids) for ids in train_tokens["labels"])
    source_tokens_per_epoch = sum(len(ids) for ids in train_tokens["input_ids"])

    class CPUBudget(TrainerCallback):
        """Stops training when this process has used `budget` CPU seconds since the start of training."""

        def __init__(self, budget: float) -> None:
            self.budget = budget
            self.start = 0.0
            self.used = 0.0

        def on_train_begin(self, *a: Any, **k: Any) -> None:
            self.start = time.process_time()

        def on_step_end(self, args_: Any, state: Any, control: Any, **k: Any) -> None:
            self.used = time.process_time() - self.start
            if self.used >= self.budget:
                control.should_training_stop = True

    out_dir = RUNS / f"{args.worker}.trainer"
    training_args = Seq2SeqTrainingArguments(
        output_dir=str(out_dir),
        per_device_train_batch_size=args.batch_size,
        **nmt_recipe(args.learning_rate, args.warmup_steps),
        num_train_epochs=1000,
        eval_strategy="no",
        save_strategy="no",
        logging_strategy="steps",
        logging_steps=50,
        logging_first_step=True,
        logging_nan_inf_filter=False,
        include_num_input_tokens_seen="non_padding",
        report_to="none",
        use_cpu=True,
        seed=args.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    budget = CPUBudget(args.budget)
    divergence = DivergenceCallback()
    trainer = study_trainer(
        model, training_args, tokenizer, train_tokens, [budget, divergence], args.seed, label_smoothing=0.1
    )
    wall = time.perf_counter()
    trainer.train()
    train_wall = time.perf_counter() - wall
    train_cpu = budget.used
    model = trainer.model
    model.config.use_cache = True
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]

    test_pairs = multi30k_pairs("test_2016_flickr", limit=args.max_test_samples)
    cpu = time.process_time()
    wall = time.perf_counter()
    hypotheses = translate(model, tokenizer, [s for s, _ in test_pairs], num_beams=4, batch_size=32)
    decode_cpu = time.process_time() - cpu
    decode_wall = time.perf_counter() - wall
    generated = sum(len(tokenizer(text_target=h)["input_ids"]) for h in hypotheses)
    scores = compute_translation_metrics(hypotheses, [t for _, t in test_pairs])
    source_seen = int(trainer.state.num_input_tokens_seen)
    epochs = float(trainer.state.epoch or 0.0)
    return {
        "name": args.worker,
        "description": MODELS[args.worker][2],
        "architecture": type(model).__name__,
        "num_parameters": int(model.num_parameters()),
        "config": {k: v for k, v in model.config.to_diff_dict().items() if not k.startswith("_")},
        "steps": trainer.state.global_step,
        "epochs": round(epochs, 3),
        "diverged_at": divergence.diverged_at,
        "train_cpu_s": round(train_cpu, 1),
        "train_wall_s": round(train_wall, 1),
        "train_source_tokens": source_seen,
        "train_target_tokens_estimate": int(epochs * target_tokens_per_epoch),
        "train_source_tokens_per_epoch": source_tokens_per_epoch,
        # source + target tokens of one step per CPU second (target from the epoch fraction)
        "train_tokens_per_cpu_s": round((source_seen + epochs * target_tokens_per_epoch) / train_cpu, 1),
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "decode_cpu_s": round(decode_cpu, 1),
        "decode_wall_s": round(decode_wall, 1),
        "generated_tokens": generated,
        "decode_tokens_per_cpu_s": round(generated / decode_cpu, 1),
        "test": scores,
        "sample": [
            {"source": s, "reference": t, "hypothesis": h}
            for (s, t), h in zip(test_pairs[:3], hypotheses[:3], strict=True)
        ],
    }


def worker_main(args: argparse.Namespace) -> None:
    record = run_one(args)
    record["settings"] = settings(args)
    path = RUNS / f"{args.worker}.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=2, default=str) + "\n")
    tmp.rename(path)


def settings(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("budget", "d_model", "vocab_size", "batch_size", "learning_rate", "warmup_steps", "max_length")
    keys += ("threads", "seed", "max_train_samples", "max_test_samples")
    return {key: getattr(args, key) for key in keys}


def forward_args(args: argparse.Namespace) -> list[str]:
    out = []
    for key, value in settings(args).items():
        if value is not None:
            out += [f"--{key.replace('_', '-')}", str(value)]
    return out


def orchestrate(args: argparse.Namespace) -> None:
    multi30k_dir()
    multi30k_tokenizer(args.vocab_size)  # train the tokenizer once, before the workers start
    RUNS.mkdir(parents=True, exist_ok=True)
    names = args.models or list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"error: unknown model(s) {unknown}; valid: {', '.join(MODELS)}")
    todo = []
    for name in names:
        path = RUNS / f"{name}.json"
        if args.reuse and path.exists() and json.loads(path.read_text()).get("settings") == settings(args):
            print(f"[{name}] reusing {path}", flush=True)
            continue
        path.unlink(missing_ok=True)
        todo.append(name)
    running: list[tuple[str, subprocess.Popen]] = []
    failed = []
    while todo or running:
        while todo and len(running) < args.jobs:
            name = todo.pop(0)
            log = open(RUNS / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
            cmd = module_command("bench.quality_multi30k", "--worker", name, *forward_args(args))
            print(f"[{name}] start: {' '.join(cmd)}", flush=True)
            running.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)))
        time.sleep(2)
        for name, proc in list(running):
            if proc.poll() is not None:
                running.remove((name, proc))
                print(f"[{name}] exit {proc.returncode}", flush=True)
                if proc.returncode:
                    failed.append(name)
    records = [json.loads((RUNS / f"{n}.json").read_text()) for n in names if (RUNS / f"{n}.json").exists()]
    report(args, carry_over(args, records), failed)


def carry_over(args: argparse.Namespace, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """This run's records plus, for every model of the previous results file that was not re-run now, its old
    record marked `carried_over_from` (the date of the run that made it). Re-run models keep the previous BLEU
    as `previous_bleu` / `previous_date` so the table shows before and after. Settings must match to carry over."""
    path = RESULTS / ("multi30k.quick.json" if args.quick else "multi30k.json")
    if not path.exists():
        return records
    previous = json.loads(path.read_text())
    if previous.get("settings") != settings(args):
        return records
    date = previous.get("provenance", {}).get("date", "unknown date")
    old = {r["name"]: r for r in previous.get("models", [])}
    fresh = {r["name"] for r in records}
    for record in records:
        if record["name"] in old:
            before = old[record["name"]]
            if (
                before["test"] == record["test"] and before["steps"] == record["steps"]
            ):  # reused (--reuse) run
                if "previous_bleu" in before:
                    record["previous_bleu"] = before["previous_bleu"]
                    record["previous_date"] = before["previous_date"]
                continue
            record["previous_bleu"] = before["test"]["bleu"]
            record["previous_date"] = before.get("carried_over_from", date)
    carried = []
    for name, record in old.items():
        if name not in fresh:
            kept = {k: v for k, v in record.items() if k not in ("previous_bleu", "previous_date")}
            carried.append({**kept, "carried_over_from": record.get("carried_over_from", date)})
    order = {name: i for i, name in enumerate(MODELS)}
    return sorted(records + carried, key=lambda r: order.get(r["name"], len(order)))


def report(args: argparse.Namespace, records: list[dict[str, Any]], failed: list[str]) -> None:
    header = ["model", "params (M)", "steps", "epochs", "BLEU", "chrF", "train tok/CPU-s", "decode tok/CPU-s"]
    header += ["last loss", "BLEU before (run of)"]
    rows = [
        [
            f"{r['name']} ({r['description']})"
            + (
                f" — *carried over from the run of {r['carried_over_from']}*"
                if "carried_over_from" in r
                else ""
            ),
            round(r["num_parameters"] / 1e6, 2),
            r["steps"],
            r["epochs"],
            round(r["test"]["bleu"], 2),
            round(r["test"]["chrf"], 2),
            round(r["train_tokens_per_cpu_s"]),
            round(r["decode_tokens_per_cpu_s"]),
            r["last_loss"],
            f"{round(r['previous_bleu'], 2)} ({r['previous_date']})" if "previous_bleu" in r else "",
        ]
        for r in records
    ]
    signatures = {r["test"]["bleu_signature"] for r in records} | {
        r["test"]["chrf_signature"] for r in records
    }
    width = width_fields(args.d_model)
    markdown = (
        "# Multi30k en→de (test_2016_flickr), same CPU-time budget per model\n\n"
        f"Budget: **{args.budget:g} CPU-seconds of training per model** (`time.process_time`, "
        f"{args.threads} torch thread(s) per model, up to {args.jobs} models at once), then beam-4 decoding of "
        f"{records[0]['test']['num_sentences'] if records else '?'} test sentences (not counted in the budget). "
        f"Width d_model {width['d_model']}, FFN {width['encoder_ffn_dim']}, {width['encoder_attention_heads']} heads; "
        f"joint BPE {args.vocab_size}; batch {args.batch_size} sentences; Adam (0.9, 0.98), lr {args.learning_rate:g}, "
        f"inverse-sqrt after {args.warmup_steps} warmup steps; label smoothing 0.1; dropout 0.1; max length "
        f"{args.max_length}. Train tokens/CPU-s counts source + target tokens (no padding) per CPU second of the "
        "training process; decode tokens/CPU-s counts generated target tokens.\n\n"
        + markdown_table(header, rows)
        + "\n\n"
        + aim(records)
        + "Signatures: "
        + "; ".join(f"`{s}`" for s in sorted(signatures))
        + "\n"
    )
    if failed:
        markdown += f"\nFailed (see bench/.cache/multi30k-runs/*.log): {', '.join(failed)}\n"
    name = "multi30k.quick" if args.quick else "multi30k"
    if records:
        plot(records, args, RESULTS / f"{name}.png")
        markdown += f"\n![BLEU and chrF per model, with the epochs each saw in the budget]({name}.png)\n"
    write_results(name, {"settings": settings(args), "failed": failed, "models": records}, markdown)
    print(markdown)


def aim(records: list[dict[str, Any]]) -> str:
    """Issue #14's aim: our post-LN 6-6 with the default init within 1 BLEU of stock Marian at the same budget."""
    by_name = {r["name"]: r for r in records}
    if "marian-6-6" not in by_name or "base-6-6" not in by_name:
        return ""
    marian, ours = by_name["marian-6-6"], by_name["base-6-6"]
    gap = ours["test"]["bleu"] - marian["test"]["bleu"]
    stale = [r["name"] for r in (marian, ours) if "carried_over_from" in r]
    verdict = "**met**" if gap >= -1.0 else "**not met**"
    return (
        f"Aim (issue #14): our post-LN 6-6 with the default init within 1 BLEU of stock Marian — {verdict}: "
        f"base-6-6 {ours['test']['bleu']:.2f} vs marian-6-6 {marian['test']['bleu']:.2f} ({gap:+.2f} BLEU)"
        + (f"; carried-over rows involved: {', '.join(stale)}" if stale else "")
        + ".\n\n"
    )


def plot(records: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    """BLEU and chrF per model side by side, each bar labelled with the epochs the model saw in the budget."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["name"] for r in records]
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.5 * len(records) + 1.5), sharey=True)
    for ax, metric in zip(axes, ("bleu", "chrf"), strict=True):
        values = [r["test"][metric] for r in records]
        bars = ax.barh(
            names, values, color=["#888888" if n.startswith("marian") else "#3b75af" for n in names]
        )
        for bar, record in zip(bars, records, strict=True):
            ax.text(
                bar.get_width(),
                bar.get_y() + bar.get_height() / 2,
                f" {record['epochs']:.1f} ep",
                va="center",
            )
        ax.set_xlabel("sacreBLEU BLEU" if metric == "bleu" else "chrF")
        ax.set_xlim(0, max(values) * 1.25 if max(values) > 0 else 1)
    axes[0].invert_yaxis()
    fig.suptitle(
        f"Multi30k en→de test_2016_flickr, {args.budget:g} training CPU-s per model, d_model {args.d_model} "
        "(grey: stock Marian)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: d 32, 5 CPU-s, 2000 pairs, 40 test")
    parser.add_argument("--budget", type=float, default=1200.0, help="training CPU-seconds per model")
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=200)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per model")
    parser.add_argument("--jobs", type=int, default=2, help="models trained at once")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-train-samples", type=int, default=None)
    parser.add_argument("--max-test-samples", type=int, default=None)
    parser.add_argument("--models", nargs="*", help=f"subset of: {', '.join(MODELS)}")
    parser.add_argument("--reuse", action="store_true", help="keep finished runs with the same settings")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.budget, args.d_model, args.warmup_steps = min(args.budget, 5.0), 32, 10
        args.max_train_samples = args.max_train_samples or 2000
        args.max_test_samples = args.max_test_samples or 40
    return args


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    arguments = parse_args()
    if arguments.worker:
        worker_main(arguments)
    else:
        orchestrate(arguments)
