"""`deep-nmt demo`: the built-in synthetic corpus and a deep pre-LN model that trains on it in minutes."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import THREADS_CAP, _HelpFormatter, _print_scores, logger, usable_cores

# the built-in demo: a deep pre-LN model that trains on the synthetic corpus in a few CPU minutes. Depth-scaled
# initialisation (DS-Init, dsinit-merged-attention eq. 10) lets it train at the learning rate its 800 steps want: with
# it, BLEU 69.0 at a peak rate of 2e-3; with Xavier's init the same model scored 18.2 at its best rate (1e-3) and
# 7.7 at 2e-3 (bench/results/demo_tuning.md)
DEMO_MODEL = {
    "d_model": 128,
    "encoder_layers": 8,
    "decoder_layers": 2,
    "encoder_attention_heads": 4,
    "decoder_attention_heads": 4,
    "encoder_ffn_dim": 512,
    "decoder_ffn_dim": 512,
    "layer_norm_position": "pre",
    "init_method": "ds_init",
    "dropout": 0.1,
}
# on a machine too busy to train DEMO_MODEL's steps in the budget (its speed measured before training:
# `choose_demo_model`): a model about 5x faster a step that reaches the default's score in SMALL_STEPS_FACTOR times
# its steps (1200 steps: BLEU 73.5; with feed-forward width 256, 20% slower a step: 71.6, and 55.9 in 800 steps;
# bench/results/demo_tuning.md)
DEMO_SMALL_MODEL = {
    **DEMO_MODEL,
    "d_model": 64,
    "encoder_layers": 2,
    "decoder_layers": 2,
    "encoder_ffn_dim": 128,
    "decoder_ffn_dim": 128,
}
DEMO_MODELS = (DEMO_MODEL, DEMO_SMALL_MODEL)  # the preferred first
# each model's peak learning rate: the best of those tried for it (bench/results/demo_tuning.md)
DEMO_PEAK_LR = {"default": 2e-3, "small": 5e-3}
SMALL_STEPS_FACTOR = 1.5  # the smaller model's steps, in the default's (unless --max-steps fixes them)


def demo_learning_rate(fields: dict[str, Any], requested: float | None) -> float:
    """The peak learning rate the demo trains `fields` (one of DEMO_MODELS) with: `requested` (--lr) where given,
    else the model's own (DEMO_PEAK_LR)."""
    if requested is not None:
        return requested
    return DEMO_PEAK_LR["default" if fields is DEMO_MODEL else "small"]


def demo_steps(fields: dict[str, Any], default_steps: int, requested: int | None) -> int:
    """The steps the demo plans for `fields`: `requested` (--max-steps) where given, else the default's for
    DEMO_MODEL and SMALL_STEPS_FACTOR times them for the smaller one (the budget may plan fewer)."""
    if requested is not None or fields is DEMO_MODEL:
        return requested or default_steps
    return round(default_steps * SMALL_STEPS_FACTOR)


PROBE_LENGTH = (
    16  # tokens per sentence of the speed probe's batch (the corpus: 3-20 words, about as many tokens)
)
DEMO_DEFAULTS = {
    "train_size": 12000,
    "valid_size": 200,
    "test_size": 500,
    "max_steps": 800,
    "batch_size": 64,
    "warmup_steps": 200,
    "vocab_size": 2000,
}
CALIBRATION_STEPS = 20  # steps measured before the expected time is printed
QUICK_DEMO = {"train_size": 1000, "valid_size": 50, "test_size": 100, "max_steps": 100}


def add_parsers(commands: Any) -> dict[str, Any]:
    """The `demo` parser; returns {command: handler}."""
    demo = commands.add_parser(
        "demo",
        help="train a deep model on the built-in synthetic corpus (a few CPU minutes)",
        description="Generate the built-in synthetic language pair (sa -> sb), train a deep pre-LN model "
        f"({DEMO_MODEL['encoder_layers']}-layer encoder, {DEMO_MODEL['decoder_layers']}-layer decoder, "
        f"d_model {DEMO_MODEL['d_model']}) on it, score the test split and save everything.",
        formatter_class=_HelpFormatter,
    )
    demo.add_argument(
        "--output-dir", type=Path, default=Path("out/demo"), help="where data and model are saved"
    )
    demo.add_argument(
        "--quick",
        action="store_true",
        help=f"a much shorter run (corpus {QUICK_DEMO['train_size']}/{QUICK_DEMO['valid_size']}/"
        f"{QUICK_DEMO['test_size']} pairs, {QUICK_DEMO['max_steps']} steps); low BLEU",
    )
    demo.add_argument(
        "--max-steps", type=int, help=f"optimizer steps (default: {DEMO_DEFAULTS['max_steps']}, quick: fewer)"
    )
    demo.add_argument(
        "--train-size", type=int, help=f"training pairs (default: {DEMO_DEFAULTS['train_size']})"
    )
    demo.add_argument(
        "--valid-size", type=int, help=f"validation pairs (default: {DEMO_DEFAULTS['valid_size']})"
    )
    demo.add_argument("--test-size", type=int, help=f"test pairs (default: {DEMO_DEFAULTS['test_size']})")
    demo.add_argument(
        "--batch-size", type=int, default=DEMO_DEFAULTS["batch_size"], help="training batch size"
    )
    demo.add_argument(
        "--lr",
        type=float,
        help=f"peak learning rate (default: the model's own, {DEMO_PEAK_LR['default']:g} for the default model, "
        f"{DEMO_PEAK_LR['small']:g} for the smaller one)",
    )
    demo.add_argument("--num-beams", type=int, default=4, help="beam size for the final evaluation")
    demo.add_argument("--seed", type=int, default=1234, help="corpus and training seed")
    demo.add_argument(
        "--time-budget",
        type=float,
        default=DEMO_BUDGET_MINUTES,
        metavar="MINUTES",
        help="the most the whole run may take: after 20 steps the demo prints its expected time (the forecast, "
        "at most this) and, on a machine too busy for the default model, trains a smaller one (2+2 layers, d_model "
        f"64, {SMALL_STEPS_FACTOR:g}x the steps) and plans the steps that fit with the learning rate cooled down by "
        "the last one rather than miss it; 0: no budget (the default model, every step trained, however long)",
    )
    demo.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    demo.add_argument("--no-progress", action="store_true", help="hide progress bars")

    return {"demo": _cmd_demo}


# the default --time-budget: the 800 steps on 2 free cores fit it; a busier machine plans fewer (time_budget.py)
DEMO_BUDGET_MINUTES = 5.0
# the work after training (scoring the 500-sentence test split with beam 4, saving), in training steps of the
# same run: 28 measured after 20 steps (an untrained model writes to the length limit; a trained one is faster)
SCORING_STEPS_PER_500 = 30.0


def translations_file_name(tgt_lang: str) -> str:
    """The demo's test translations beside metrics.json: ``test.hyp.<tgt>``, one line per test sentence."""
    return f"test.hyp.{tgt_lang}"


def threads_line(changes: list[list[int]]) -> str:
    """``2`` or ``2 (1 from step 45, 2 from step 300)``: the threads of a run whose threads followed the load."""
    if len(changes) <= 1:
        return str(changes[0][1]) if changes else "?"
    shown = ", ".join(f"{n} from step {step}" for step, n in changes[1:6])
    return f"{changes[0][1]} ({shown}{', ...' if len(changes) > 6 else ''})"


def precheck(args: argparse.Namespace) -> None:
    """What `demo` can check before torch is imported (`deep_nmt_hf.cli.main` runs it first): --time-budget
    and an existing output directory (`staging.check_output_path`, as the run itself would refuse it)."""
    from ..training.staging import check_output_path

    if not args.time_budget >= 0:
        raise ValueError(f"--time-budget {args.time_budget}: must be >= 0 (minutes; 0: no budget)")
    check_output_path(args.output_dir, overwrite=args.overwrite)


def choose_demo_model(
    budget_s: float | None,
    steps: int,
    after_steps: float,
    elapsed: Callable[[], float],
    probe: Callable[[dict[str, Any]], float],
) -> tuple[dict[str, Any], list[float]]:
    """The model the demo trains: the first of DEMO_MODELS whose steps and scoring fit what is left of the budget
    at the speed `probe` measures for it (seconds per step), else the last, whose steps `WallClockBudget` then
    plans; DEMO_MODEL without a budget. Returns it and the speeds measured."""
    from ..training.time_budget import fits

    speeds: list[float] = []
    for fields in DEMO_MODELS:
        if budget_s is None:
            return fields, speeds
        speeds.append(probe(fields))
        if fits(speeds[-1], steps, after_steps, budget_s - elapsed()):
            return fields, speeds
    return DEMO_MODELS[-1], speeds


def _probe(fields: dict[str, Any], batch_size: int) -> float:
    from ..model.configuration_deep_nmt import DeepNMTConfig
    from ..model.modeling_deep_nmt import DeepNMTForConditionalGeneration
    from ..training.time_budget import probe_seconds_per_step

    vocab = DEMO_DEFAULTS["vocab_size"]
    config = DeepNMTConfig(**fields, vocab_size=vocab, max_position_embeddings=256)
    return probe_seconds_per_step(DeepNMTForConditionalGeneration(config), batch_size, PROBE_LENGTH, vocab)


def _cmd_demo(args: argparse.Namespace) -> int:
    import torch

    from ..data import write_parallel_dir
    from ..data.atomic import atomic_write
    from ..data.synthetic import SRC_LANG, TGT_LANG, demo_splits
    from ..training import TrainingOptions, staged_output_dir, train
    from ..training.time_budget import WallClockBudget, format_duration, process_age

    base = {**DEMO_DEFAULTS, **(QUICK_DEMO if args.quick else {})}
    sizes = {
        name: getattr(args, f"{name}_size") or base[f"{name}_size"] for name in ("train", "valid", "test")
    }
    max_steps = args.max_steps or base["max_steps"]
    if not args.time_budget >= 0:
        raise ValueError(f"--time-budget {args.time_budget}: must be >= 0 (minutes; 0: no budget)")
    used = torch.get_num_threads()  # --threads / $OMP_NUM_THREADS / the free cores: set by cli.main
    fixed = getattr(args, "threads_requested", None) is not None or bool(
        os.environ.get("OMP_NUM_THREADS", "").strip()
    )
    logger.info(
        "%s thread(s) (%s); the expected time follows after the first steps (%s)",
        used,
        "fixed by --threads / OMP_NUM_THREADS" if fixed else "following the free cores while it runs",
        f"at most {format_duration(args.time_budget * 60)}: --time-budget"
        if args.time_budget
        else "no budget",
    )
    logging.getLogger("sacrebleu").setLevel(logging.ERROR)  # the synthetic text is tokenized on purpose
    start = time.monotonic() - process_age()  # the promise counts from the command's start
    budget = WallClockBudget(
        start,
        args.time_budget * 60 if args.time_budget else None,
        after_training_steps=SCORING_STEPS_PER_500 * sizes["test"] / 500 * args.num_beams / 4,
        usable_cores=usable_cores(),
        max_threads=THREADS_CAP,
        follow_load=not fixed,
        calibration_steps=min(CALIBRATION_STEPS, max(1, max_steps // 4)),
    )
    model, speeds = choose_demo_model(
        budget.budget_s,
        max_steps,
        budget.after_training_steps,
        lambda: time.monotonic() - start,
        lambda fields: _probe(fields, args.batch_size),
    )
    if model is not DEMO_MODEL:
        logger.info(
            "the %d+%d-layer d_model %d model would not train its %d steps in the budget here now (%.2f s a step): "
            "training a %d+%d-layer d_model %d one instead (%.2f s a step)",
            DEMO_MODEL["encoder_layers"],
            DEMO_MODEL["decoder_layers"],
            DEMO_MODEL["d_model"],
            max_steps,
            speeds[0],
            model["encoder_layers"],
            model["decoder_layers"],
            model["d_model"],
            speeds[-1],
        )
    max_steps = demo_steps(model, max_steps, args.max_steps)
    final = args.output_dir.expanduser().absolute()
    with staged_output_dir(final, overwrite=args.overwrite) as staging:
        logger.info("generating the synthetic corpus (%s -> %s): %s", SRC_LANG, TGT_LANG, sizes)
        data_dir = staging / "data"
        splits = demo_splits(seed=args.seed, **sizes)
        for split, pairs in splits.items():
            write_parallel_dir(pairs, data_dir, split, SRC_LANG, TGT_LANG)
        options = TrainingOptions(
            output_dir=str(final),
            data_source=data_dir,
            src_lang=SRC_LANG,
            tgt_lang=TGT_LANG,
            valid_split="valid",
            test_split="test",
            vocab_size=DEMO_DEFAULTS["vocab_size"],
            batch_size=args.batch_size,
            eval_batch_size=64,
            learning_rate=demo_learning_rate(model, args.lr),
            warmup_steps=min(DEMO_DEFAULTS["warmup_steps"], max(1, max_steps // 4)),
            max_steps=max_steps,
            save_steps=max_steps,
            save_total_limit=1,
            logging_steps=max(1, min(50, max_steps // 10)),
            num_beams=args.num_beams,
            seed=args.seed,
            score_valid=False,
            disable_tqdm=True if args.no_progress else None,
        )
        logger.info(
            "training a %d+%d-layer pre-LN model (d_model %d, %s init) for %d steps, peak learning rate %g",
            model["encoder_layers"],
            model["decoder_layers"],
            model["d_model"],
            model["init_method"],
            max_steps,
            options.learning_rate,
        )
        translations: dict[str, list[str]] = {}
        with contextlib.redirect_stdout(sys.stderr):  # Trainer logs to stderr; the summary to stdout
            record = train(
                options, dict(model), staging_dir=staging, translations=translations, callbacks=[budget]
            )
        hypotheses_name = translations_file_name(TGT_LANG)
        with atomic_write(staging / hypotheses_name) as handle:  # one line per test sentence, in order
            handle.writelines(" ".join(text.splitlines()) + "\n" for text in translations.get("test", []))
        # the threads beside the versions and the seed: what a user needs to tell why a score differs
        record["threads"] = budget.summary()["threads"]
        record["demo"] = budget.summary(total_s=time.monotonic() - start)
        record["demo"]["model"] = "default" if model is DEMO_MODEL else "small (the default would not fit)"
        record["demo"]["probed_s_per_step"] = [round(value, 3) for value in speeds]
        with atomic_write(staging / "metrics.json") as handle:
            handle.write(json.dumps(record, indent=2, default=str) + "\n")
    total = time.monotonic() - start
    minutes, seconds = divmod(total, 60)
    _print_scores(record, f"\ndemo test split ({record['num_sentences']} sentences, beam {args.num_beams}):")
    print(
        f"\ntrained {record['global_step']} of {max_steps} steps"
        + (
            f" (planned at the measured speed to keep the expected time, the learning rate cooled down to zero "
            f"by the last step; all {max_steps} would take about {format_duration(budget.full_run_s)} here now: "
            f"--time-budget {math.ceil(budget.full_run_s / 60)})"
            if budget.stopped_at is not None and budget.full_run_s is not None
            else ""
        )
        + f"; total time {int(minutes)} min {seconds:.0f} s"
        + (f" (expected {format_duration(budget.promised_s)})" if budget.promised_s is not None else "")
        + f"; threads {threads_line(budget.threads)}\n"
        f"saved to {final} (model, tokenizer, generation_config.json, metrics.json, data/)\n"
        f"test translations: {final / hypotheses_name} (one line per sentence of {final / 'data'}/test.{SRC_LANG})"
        "\n\n"
        "load it:\n"
        "  import deep_nmt_hf  # registers the model classes\n"
        "  from transformers import AutoModelForSeq2SeqLM, AutoTokenizer\n"
        f"  model = AutoModelForSeq2SeqLM.from_pretrained({str(final)!r})\n"
        f"  tokenizer = AutoTokenizer.from_pretrained({str(final)!r})\n"
        "without the package installed: AutoModelForSeq2SeqLM.from_pretrained(path, trust_remote_code=True); the\n"
        "  tokenizer is a stock fast tokenizer: PreTrainedTokenizerFast.from_pretrained(path) loads it running no\n"
        "  custom code\n"
        f"or from the shell: echo '{splits['test'][0][0]}' | deep-nmt translate {final}"
    )
    return 0
