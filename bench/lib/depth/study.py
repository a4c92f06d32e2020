"""The depth study's training and scheduling: one run trained to the end of its budget and scored (`train_model`,
`finish`), its weights kept and reloaded, a run decoded again under another decode setting (`rescore_run`), the
order of the runs (`plan`) and the scheduler that runs them in worker processes (`orchestrate`, `--until`).

The study itself (what it trains, how, and its command line) is described in bench/depth_multi30k.py, the entry
point, whose `--worker` runs `train_model` in a worker process.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from ..common import (
    model_from_fields,
    module_command,
    multi30k_dir,
    multi30k_pairs,
    multi30k_tokenizer,
    pairs_dataset,
    study_trainer,
)
from ..machine_speed import boot_time, describe, machine_factor, machine_probe, stamp_since_boot
from . import core
from .pricing import cost_class, prior_rates, remaining, started_runs
from .rows import (
    CONTROL_SEEDS,
    CONTROLS,
    HEADLINE,
    HEADLINE_SEEDS,
    IF_FAILS,
    IF_TRAINS,
    MODELS,
    SECOND_SEED,
    stages,
)
from .summaries import failure, row_summary

SCRIPT = "bench.depth_multi30k"  # the entry point; a worker runs it


# ------------------------------------------------------------------------------------------------- one model
def keep_weights(
    name: str, seed: int, args: argparse.Namespace, model: Any = None, tokenizer: Any = None
) -> str | None:
    """Write NAME's averaged weights beside its record (`weights_path`), from `model` or from the run's saved
    averaged model; return the tokenizer digest stored with them, or None when neither model exists (a run
    finished on another machine, or diverged before its first checkpoint)."""
    from transformers import AutoModelForSeq2SeqLM

    from ..study_weights import save_weights, tokenizer_digest

    saved = core.run_dir(name, seed, args) / "averaged"
    if model is None:
        if not (saved / "config.json").exists():
            return None
        model = AutoModelForSeq2SeqLM.from_pretrained(saved)
    tokenizer = tokenizer or multi30k_tokenizer(args.vocab_size)
    digest = tokenizer_digest(tokenizer)
    save_weights(model, core.weights_path(name, seed, args), digest)
    record = core._read_json(core.record_path(name, seed, args))
    if record is not None and "tokenizer_sha256" not in record:  # finished before records named it
        core._write_json(core.record_path(name, seed, args), {**record, "tokenizer_sha256": digest})
    return digest


def load_averaged(name: str, seed: int, args: argparse.Namespace) -> Any:
    """NAME's final (averaged) model for SEED, in eval mode: the run's saved model where this machine has it,
    else the committed float16 weights (checked against the tokenizer `multi30k_tokenizer` builds here)."""
    from transformers import AutoModelForSeq2SeqLM

    from ..study_weights import load_weights, tokenizer_digest

    saved = core.run_dir(name, seed, args) / "averaged"
    if (saved / "config.json").exists():
        return AutoModelForSeq2SeqLM.from_pretrained(saved).eval()
    digest = tokenizer_digest(multi30k_tokenizer(args.vocab_size))
    return load_weights(core.weights_path(name, seed, args), tokenizer_sha256=digest)


def _epoch_checkpoints(trainer_dir: Path) -> list[tuple[float, Path]]:
    """(epoch, checkpoint dir) of every finished epoch checkpoint, in order."""
    found = []
    for path in trainer_dir.glob("checkpoint-*"):
        state = core._read_json(path / "trainer_state.json")
        if state is not None and (path / "model.safetensors").exists():
            found.append((round(float(state["epoch"]), 3), path))
    return sorted(found)


def train_model(name: str, seed: int, args: argparse.Namespace) -> None:
    """Train (or resume) one model epoch by epoch to the end of the annealed budget, then score its best and
    averaged checkpoints on test."""
    import torch
    from transformers import Seq2SeqTrainingArguments, TrainerCallback, set_seed

    from deep_nmt_hf.training import DivergenceCallback, nmt_recipe, tokenize_dataset, translate
    from deep_nmt_hf.training.length_penalty import set_length_penalty
    from deep_nmt_hf.training.metrics import compute_translation_metrics
    from deep_nmt_hf.training.optimizers import optimizer_cls_and_kwargs

    torch.set_num_threads(1)
    here = core.run_dir(name, seed, args)
    trainer_dir = here / "trainer"
    here.mkdir(parents=True, exist_ok=True)
    history_path = here / "epochs.json"
    tokenizer = multi30k_tokenizer(args.vocab_size)
    options, config_fields = core._recipe(name, args)
    row = MODELS[name]
    fields = {**config_fields, **row.fields, "label_smoothing": options["label_smoothing"]}

    checkpoints = _epoch_checkpoints(trainer_dir)
    resume = checkpoints[-1][1] if checkpoints else None
    history = [
        e for e in core._read_json(history_path, []) if resume and e["epoch"] <= checkpoints[-1][0] + 1e-6
    ]
    probe = machine_probe(core.STUDY_CACHE)  # this machine's speed, stamped on every epoch it trains
    written = {epoch: path.stat().st_mtime for epoch, path in checkpoints}
    history = stamp_since_boot(history, [written.get(e["epoch"]) for e in history], probe, boot_time())
    if resume is not None and row.variant == "admin":
        fields["admin_profiled"] = True  # ω is in the checkpoint's weights: never profile over them again
    set_seed(seed)
    model = model_from_fields(row.variant, fields, tokenizer, args.d_model, args.max_length)
    model.generation_config.num_beams = options["num_beams"]
    model.generation_config.max_length = args.max_length + 1
    set_length_penalty(model.generation_config, options["length_penalty"], options["length_penalty_form"])

    train_pairs = multi30k_pairs("train", limit=args.max_train_samples)
    valid_pairs = multi30k_pairs("val", limit=args.valid_sentences)
    lengths = (args.max_length, args.max_length)
    train_tokens = tokenize_dataset(pairs_dataset(train_pairs), tokenizer, "en", "de", *lengths)
    valid_tokens = tokenize_dataset(pairs_dataset(valid_pairs), tokenizer, "en", "de", *lengths)

    divergence = DivergenceCallback()

    class EpochRecord(TrainerCallback):
        """Per epoch: training CPU seconds, mean training loss, grad norm and learning rate, validation loss and
        BLEU; with `--patience` > 0, stops when the validation loss has not improved for that many epochs. After
        a divergence it cancels the end-of-epoch evaluation and checkpoint that the Trainer's DefaultFlowCallback
        orders even when training stopped mid-epoch (the DivergenceCallback clears them only on its step)."""

        def __init__(self) -> None:
            self.start = 0.0
            self.cpu = 0.0

        def on_epoch_begin(self, *a: Any, **k: Any) -> None:
            self.start = time.process_time()

        def on_epoch_end(self, targs: Any, state: Any, control: Any, **k: Any) -> None:
            self.cpu = time.process_time() - self.start
            if divergence.diverged_at is not None:
                control.should_evaluate = control.should_save = False

        def on_evaluate(self, targs: Any, state: Any, control: Any, metrics: Any = None, **k: Any) -> None:
            model_ = k["model"]
            since = history[-1]["epoch"] if history else 0.0
            logs = [e for e in state.log_history if "loss" in e and e.get("epoch", 0) > since + 1e-6]
            norms = [e["grad_norm"] for e in logs if e.get("grad_norm") is not None]
            # an epoch shorter than logging_steps (--quick) has no log: the scheduler's rate at its end
            rate = logs[-1].get("learning_rate") if logs else k["lr_scheduler"].get_last_lr()[0]
            cpu = time.process_time()
            hypotheses = translate(model_, tokenizer, [s for s, _ in valid_pairs], num_beams=4, batch_size=64)
            bleu = compute_translation_metrics(hypotheses, [t for _, t in valid_pairs])
            history.append(
                {
                    "epoch": round(float(state.epoch), 3),
                    "step": state.global_step,
                    "train_cpu_s": round(self.cpu, 1),
                    "valid_decode_cpu_s": round(time.process_time() - cpu, 1),
                    "probe_ms": probe,
                    "train_loss": sum(e["loss"] for e in logs) / len(logs) if logs else None,
                    "grad_norm": sum(norms) / len(norms) if norms else None,
                    "learning_rate": rate,
                    "valid_loss": metrics["eval_loss"],
                    "valid_bleu": bleu["bleu"],
                }
            )
            core._write_json(history_path, history)
            if _stopped(history, args.patience):
                control.should_training_stop = True

    recipe = nmt_recipe(
        options["learning_rate"],
        options["warmup_steps"],
        options["max_grad_norm"],
        betas=(options["adam_beta1"], options["adam_beta2"]),
        epsilon=options["adam_epsilon"],
        weight_decay=options["weight_decay"],
    )
    recipe["lr_scheduler_type"] = args.schedule  # annealed to 0 at the end of the budget (linear / cosine)
    training_args = Seq2SeqTrainingArguments(
        output_dir=str(trainer_dir),
        per_device_train_batch_size=64,  # unused: token batches (max_tokens) make the training batches
        per_device_eval_batch_size=64,
        **recipe,
        num_train_epochs=args.epochs,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=None,
        logging_strategy="steps",
        logging_steps=25,
        logging_nan_inf_filter=False,
        report_to="none",
        use_cpu=not torch.cuda.is_available(),  # the same command trains on a GPU where one is visible
        seed=seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = study_trainer(
        model,
        training_args,
        tokenizer,
        train_tokens,
        [EpochRecord(), divergence],
        seed,
        options["label_smoothing"],
        eval_dataset=valid_tokens,
        max_tokens=args.max_tokens,
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs(
            options["optimizer"],
            options["learning_rate"],
            (options["adam_beta1"], options["adam_beta2"]),
            options["adam_epsilon"],
        ),
    )
    if not history or len(history) < args.epochs and not _stopped(history, args.patience):
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    diverged = None
    if divergence.diverged_at is not None:
        step, loss = divergence.diverged_at
        diverged = {"step": step, "loss": loss, "reason": divergence.reason}
    finish(name, seed, args, tokenizer, history, model, options, diverged)


def _stopped(history: list[dict[str, Any]], patience: int) -> bool:
    losses = [e["valid_loss"] for e in history]
    return patience > 0 and bool(losses) and len(losses) - 1 - losses.index(min(losses)) >= patience


def finish(
    name: str,
    seed: int,
    args: argparse.Namespace,
    tokenizer: Any,
    history: list,
    model: Any,
    options: dict,
    diverged: dict | None = None,
) -> None:
    """Score the best-validation epoch checkpoint and the average of the last `--average` ones on test; save
    both models; measure the diagnosis (over-fitting gap, source reliance) on both; write the record to the work
    tree. A run that diverged (`diverged`: step, loss, reason) is finished too, a result the ADMIN and DLCL papers
    report: scored on its checkpoints before the divergence, or, when it diverged before the first one, recorded
    with `test` and `nll` null."""
    import torch

    from deep_nmt_hf.science.significance import bleu_statistics
    from deep_nmt_hf.training import translate
    from deep_nmt_hf.training.averaging import average_weights
    from deep_nmt_hf.training.metrics import compute_translation_metrics

    here = core.run_dir(name, seed, args)
    checkpoints = _epoch_checkpoints(here / "trainer")
    row = MODELS[name]
    lost = (
        core._read_json(core.record_path(name, seed, args)) if core.weights_lost(name, seed, args) else None
    )
    record = {
        "name": name,
        "seed": seed,
        "description": row.description,
        "variant": row.variant,
        "recipe": row.recipe,
        "baseline": row.baseline,
        "options": {k: options[k] for k in ("learning_rate", "warmup_steps", "num_beams", "length_penalty")},
        "num_parameters": int(model.num_parameters()),
        "epochs": history[-1]["epoch"] if history else 0.0,
        "best_epoch": None,
        "history": history,
        "test": None,
        "nll": None,
        "settings": core.settings(args),
        "saved": str(here),
        "diverged": diverged,
    }
    if lost is not None:  # a re-training to keep the weights: what the first run (same seed) measured
        record["first_run"] = {
            "bleu": lost["test"]["averaged"]["bleu"],
            "bleu_best": lost["test"]["best"]["bleu"],
            "valid_loss": lost["history"][-1]["valid_loss"],
            "saved": lost["saved"],
        }
    if not checkpoints or not history:
        if diverged is None:
            raise RuntimeError(f"{name} seed {seed}: no epoch checkpoint in {here / 'trainer'} to score")
        core._write_json(here / "result.json", record)
        core._write_json(core.record_path(name, seed, args), record)
        return
    by_epoch = {epoch: path for epoch, path in checkpoints}
    best = min(history, key=lambda e: e["valid_loss"] if math.isfinite(e["valid_loss"]) else math.inf)
    test_pairs = multi30k_pairs("test_2016_flickr", limit=args.max_test_samples)
    sources, references = [s for s, _ in test_pairs], [t for _, t in test_pairs]
    scores, nll = {}, {}
    for kind in ("best", "averaged"):
        if kind == "best":
            used = [by_epoch[best["epoch"]]]
            model = type(model).from_pretrained(used[0])
        else:
            used = [path for _, path in checkpoints[-args.average :]]
            model = type(model).from_pretrained(used[-1])  # config, generation config, tied weights
            _, unexpected = model.load_state_dict(average_weights(used), strict=False)
            if unexpected:
                raise RuntimeError(f"{name}: averaged weights the model does not have: {unexpected}")
        model.config.use_cache = True
        model.eval()
        cpu = time.process_time()
        with torch.inference_mode():
            hypotheses = translate(model, tokenizer, sources, num_beams=options["num_beams"], batch_size=64)
        decode_cpu = time.process_time() - cpu
        core._write_lines(here / f"{kind}.test.hyp", hypotheses)
        generated = sum(len(tokenizer(text_target=h)["input_ids"]) for h in hypotheses)
        scores[kind] = {
            **compute_translation_metrics(hypotheses, references),
            "length_ratio": length_ratio(hypotheses, references),
            "bleu_statistics": bleu_statistics(hypotheses, references),
            "checkpoints": [path.name for path in used],
            "decode_tokens_per_cpu_s": round(generated / max(decode_cpu, 1e-9), 1),
        }
        nll[kind] = eval_mode_nll(model, tokenizer, args)
        out = here / kind
        shutil.rmtree(out, ignore_errors=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    digest = keep_weights(name, seed, args, model, tokenizer)  # the averaged model, the last one scored
    record |= {"best_epoch": best["epoch"], "test": scores, "nll": nll, "tokenizer_sha256": digest}
    core._write_json(here / "result.json", record)
    core._write_json(core.record_path(name, seed, args), record)


def eval_mode_nll(model: Any, tokenizer: Any, args: argparse.Namespace) -> dict[str, float]:
    """Token NLL (no label smoothing, no dropout) of `model` on the first `--valid-sentences` training pairs
    ("train"), on the validation pairs ("val"), and on the validation pairs with every source moved to the next
    pair's target ("val_wrong_source"). val − train is the over-fitting gap; val_wrong_source − val is how much
    the model reads the source: a decoder that ignores the source (deep-decoder-cad-crt, sec. 3) loses little when
    it is wrong."""
    import torch
    from transformers import DataCollatorForSeq2Seq

    collate = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    valid = multi30k_pairs("val", limit=args.valid_sentences)
    sets = {
        "train": multi30k_pairs("train", limit=args.valid_sentences),
        "val": valid,
        "val_wrong_source": [(valid[(i + 1) % len(valid)][0], t) for i, (_, t) in enumerate(valid)],
    }
    nll = {}
    for split, pairs in sets.items():
        features = [
            tokenizer(s, text_target=t, max_length=args.max_length, truncation=True) for s, t in pairs
        ]
        total = tokens = 0.0
        with torch.inference_mode():
            for start in range(0, len(features), 64):
                batch = collate(features[start : start + 64])
                logits = model(**batch).logits
                labels = batch["labels"]
                total += torch.nn.functional.cross_entropy(
                    logits.float().flatten(0, 1), labels.flatten(), ignore_index=-100, reduction="sum"
                ).item()
                tokens += labels.ne(-100).sum().item()
        nll[split] = total / tokens
    return nll


def length_ratio(hypotheses: list[str], references: list[str]) -> float:
    """sacreBLEU's hypothesis / reference length ratio (13a tokens; below 1 BLEU's brevity penalty bites)."""
    from sacrebleu.metrics import BLEU

    score = BLEU().corpus_score(hypotheses, [references])
    return score.sys_len / score.ref_len


def rescore_run(name: str, seed: int, setting: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Decode test again with NAME's committed averaged weights (seed SEED) under another row's decode SETTING
    (issue #50: each row decodes with its own recipe's length penalty, so a pair of rows with different settings
    compares decoders too). Cached in `rescore_path`: a rescoring that stops resumes where it stopped."""
    path = core.rescore_path(name, seed, setting, args)
    cached = core._read_json(path)
    if cached is not None and cached.get("setting") == setting:
        return cached
    import numpy as np
    import torch

    from deep_nmt_hf.science.significance import bleu_from_statistics, bleu_statistics
    from deep_nmt_hf.training import translate
    from deep_nmt_hf.training.length_penalty import set_length_penalty

    from ..study_weights import load_weights, tokenizer_digest

    record = core._read_json(core.record_path(name, seed, args))
    scored = record["test"]["averaged"]
    tokenizer = multi30k_tokenizer(record["settings"]["vocab_size"])
    model = load_weights(core.weights_path(name, seed, args), tokenizer_sha256=tokenizer_digest(tokenizer))
    set_length_penalty(model.generation_config, setting["length_penalty"], setting["length_penalty_form"])
    pairs = multi30k_pairs("test_2016_flickr", limit=scored["num_sentences"])
    start = time.process_time()
    with torch.inference_mode():
        hypotheses = translate(
            model, tokenizer, [s for s, _ in pairs], num_beams=setting["num_beams"], batch_size=64
        )
    references = [t for _, t in pairs]
    stats = bleu_statistics(hypotheses, references)
    result = {
        "name": name,
        "seed": seed,
        "setting": setting,
        "own_setting": core.decode_setting(name, args),
        "bleu": float(bleu_from_statistics(np.sum(stats, axis=0))),
        "recorded_bleu": scored["bleu"],
        "length_ratio": length_ratio(hypotheses, references),
        "cpu_s": time.process_time() - start,
        "bleu_statistics": stats,
    }
    core._write_json(path, result)
    return result


# ------------------------------------------------------------------------------------------------ the study
def forward_args(args: argparse.Namespace) -> list[str]:
    out = []
    for key, value in core.settings(args).items():
        if value is not None:
            out += [f"--{key.replace('_', '-')}", str(value)]
    return out + (["--quick"] if args.quick else [])


def hours_left(name: str, seed: int, args: argparse.Namespace) -> float | None:
    """CPU-hours NAME's run with SEED still needs on the reference machine, its final scoring counted as one more
    epoch, at the CPU-s per epoch pricing.remaining prices it with (its own epochs so far, else its row's or
    its cost class's finished or started runs, else an estimate), as the report prices it; None when nothing
    prices it."""
    history = core.run_history(name, seed, args)
    records = core.load_records(core.records_root(args), args.epochs)
    started = started_runs(dict.fromkeys([*plan(args), (name, seed)]), args)
    left = remaining([(name, seed)], records, args.epochs, started, prior_rates(core.settings(args)))
    if not left:
        return 0.0
    rate = left[0]["cpu_s_per_epoch"]
    return None if rate is None else (args.epochs + 1 - len(history)) * rate / 3600


def deadline(until: str, now: float | None = None) -> float:
    """The epoch time of the next `until` ("HH:MM", local time): today's, or tomorrow's when it has passed."""
    import datetime

    try:
        hour, minute = (int(part) for part in until.split(":"))
        at = datetime.time(hour, minute)
    except ValueError:
        raise SystemExit(f"error: --until {until!r}: expected a time of day HH:MM, e.g. 17:15") from None
    start = datetime.datetime.fromtimestamp(time.time() if now is None else now)
    target = datetime.datetime.combine(start.date(), at)
    if target <= start:
        target += datetime.timedelta(days=1)
    return target.timestamp()


def status(name: str, seed: int, args: argparse.Namespace) -> str:
    """One line: epochs done, the last validation numbers, CPU per epoch and the CPU time still to go."""
    history = core.run_history(name, seed, args)
    tag = f"[{name} seed {seed}]"
    if not history:
        return f"{tag} epoch 0/{args.epochs}: training the first epoch"
    last = history[-1]
    per_epoch = core._cpu_s_per_epoch(history)
    left = (args.epochs - len(history)) * per_epoch
    return (
        f"{tag} epoch {len(history)}/{args.epochs}: valid loss {last['valid_loss']:.3f}, BLEU "
        f"{last['valid_bleu']:.1f}; {per_epoch:.0f} CPU-s/epoch, ≤ {left / 60:.0f} CPU-min to go"
    )


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(row, seed) in the order the study runs them: `--only` × `--seeds` when given; otherwise every row of
    FIRST_PASS with seed 1 (each claim's counterfactual beside its claimed row) and the conditional rows whose
    condition (of a first-pass row: IF_FAILS, it failed; IF_TRAINS, it trained) holds (`triggered`), then seeds 2
    and 3 of the HEADLINE rows and of the best deep row finished so far (highest averaged test BLEU of seed 1),
    then the LATER rows with seed 1 and the conditional rows that depend on them, then a second seed of every
    other row (SECOND_SEED), cheapest first (fewest layer applications × decoder passes), so that no claim rests
    on one training run; last the CONTROLS of issue #50 with CONTROL_SEEDS each. Re-planned at every start: a
    LATER row that becomes the best gets its seeds then."""
    if args.only:
        unknown = [n for n in args.only if n not in MODELS]
        if unknown:
            raise SystemExit(f"error: unknown model(s) {', '.join(unknown)}; valid: {', '.join(MODELS)}")
        return [(name, seed) for seed in args.seeds for name in args.only]
    first_pass, rest = stages(triggered(args))
    tasks = [(name, 1) for name in first_pass]
    headline = list(HEADLINE)
    finished = {}
    for name in MODELS:
        path = core.record_path(name, 1, args)
        test = core._read_json(path)["test"] if path.exists() else None
        if (
            MODELS[name].baseline is not None and name not in CONTROLS and test is not None
        ):  # None: diverged before a checkpoint
            finished[name] = test["averaged"]["bleu"]
    if finished:
        headline.append(max(finished, key=finished.get))
    for seed in HEADLINE_SEEDS[1:]:
        tasks += [(name, seed) for name in dict.fromkeys(headline)]
    tasks += [(name, 1) for name in rest if (name, 1) not in tasks]
    tasks = [task for task in tasks if task[0] not in CONTROLS]
    others = [name for name, seed in tasks if seed == 1 and (name, SECOND_SEED) not in tasks]
    tasks += [(name, SECOND_SEED) for name in sorted(others, key=_applications)]
    return tasks + [(name, seed) for name in CONTROLS for seed in CONTROL_SEEDS]


def _applications(name: str) -> int:
    """Layer applications × decoder passes of a training step: what orders the SECOND_SEED runs by cost."""
    encoder, decoder, passes = cost_class(name)
    return (encoder + decoder) * passes


def triggered(args: argparse.Namespace) -> list[str]:
    """The conditional rows whose condition holds: IF_FAILS rows whose row has a record and fails
    (summaries.failure: diverged, or it barely reads the source), IF_TRAINS rows whose row has a record and
    does not fail."""
    records = core.load_records(core.records_root(args), args.epochs)
    rows = {name: row_summary(name, recs) for name, recs in records.items()}
    fails = [name for name, needed in IF_FAILS.items() if needed in rows and failure(needed, rows)]
    return fails + [
        name for name, needed in IF_TRAINS.items() if needed in rows and not failure(needed, rows)
    ]


# wall seconds per CPU-second of a worker with a core of its own (nice 19, shared machine)
WALL_PER_CPU = 1.15


def too_late(name: str, seed: int, args: argparse.Namespace, end: float, factor: float = 1.0) -> str:
    """Why NAME's run with SEED should not start before `end` (`--until`) on a machine FACTOR times slower than
    the reference one (machine_speed.machine_factor): it would not finish by then, or its cost is unknown; ""
    when it fits. A run that cannot finish by the deadline is not begun, so a sitting leaves no half-trained run
    behind for a machine that may not be handed on; with `--kept` (the machine is kept between sittings) every
    run may begin: it stops at the deadline and `--reuse` resumes it in a later sitting."""
    if args.kept:
        return ""
    hours = hours_left(name, seed, args)
    if hours is None:
        return f"its cost is unknown (no row of its cost class has finished) and --until {args.until} is set"
    finish_at = time.time() + hours * factor * 3600 * WALL_PER_CPU
    if finish_at > end:
        at = time.strftime("%H:%M", time.localtime(finish_at))
        return (
            f"it needs ≈ {hours * factor:.1f} CPU-hours here ({hours:.1f} on the reference machine), to about "
            f"{at}, past --until {args.until}"
        )
    return ""


def prepare(name: str, seed: int, args: argparse.Namespace) -> str:
    """Give NAME's run with SEED its directory and the study's settings.json; why it cannot run ("" when it can):
    its directory holds a run with other settings, or (without `--reuse`) any run."""
    here = core.run_dir(name, seed, args)
    saved = core._read_json(here / "settings.json")
    if saved is not None and saved != core.settings(args):
        changed = sorted(k for k in core.settings(args) if saved.get(k) != core.settings(args)[k])
        return f"{here} was run with other settings ({', '.join(changed)}); delete it"
    if saved is not None and not args.reuse:
        return f"{here} exists; pass --reuse to continue it, or delete it"
    here.mkdir(parents=True, exist_ok=True)
    core._write_json(here / "settings.json", core.settings(args))
    return ""


def replan(
    args: argparse.Namespace, todo: list[tuple[str, int]], begun: set[tuple[str, int]]
) -> list[tuple[str, int]]:
    """The runs still to start after a run ended: `plan()` again (a finished run may trigger an IF_FAILS row or
    become the best deep row), without the runs BEGUN this sitting (running, ended or skipped) or finished, in the new plan's order; the
    re-trainings (runs in TODO with a record) stay last. A run new to the plan is `prepare`d, or skipped with the
    reason printed."""
    retrain = [run for run in todo if core.record_path(*run, args).exists()]
    fresh = [run for run in plan(args) if run not in begun and not core.record_path(*run, args).exists()]
    out = []
    for name, seed in fresh:
        if (name, seed) not in todo:
            if why := prepare(name, seed, args):
                print(f"[{name} seed {seed}] not started: {why}", flush=True)
                continue
            print(f"[{name} seed {seed}] added to the plan by the runs finished so far", flush=True)
        out.append((name, seed))
    return out + retrain


def start_worker(name: str, seed: int, args: argparse.Namespace) -> subprocess.Popen:
    """NAME's run with SEED in its own process: one thread, nice 19, its output appended to its train.log."""
    log = open(core.run_dir(name, seed, args) / "train.log", "a")  # noqa: SIM115 - closed with the process
    cmd = module_command(SCRIPT, "--worker", name, "--seeds", str(seed), *forward_args(args))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    print(f"[{name} seed {seed}] start: {' '.join(cmd)}", flush=True)
    return subprocess.Popen(
        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=lambda: os.nice(19)
    )


def orchestrate(args: argparse.Namespace) -> None:
    """Run the plan `--jobs` at a time, each model in its own process with one thread (niced to 19: the study
    runs beside other work); finished runs (a record in bench/results/depth_multi30k/) are skipped, except those
    whose weights were lost (`core.find_lost_weights`, which records them in the committed weights.json): they
    are re-trained last, with the same seed."""
    multi30k_dir()
    multi30k_tokenizer(args.vocab_size)  # train the tokenizer once, before the workers start
    todo, retrain = [], []
    for name, seed in plan(args):
        if core.record_path(name, seed, args).exists():
            kept = core.weights_path(name, seed, args).exists() or core.weights_left_out(name, seed, args)
            if not kept and keep_weights(name, seed, args):
                print(
                    f"[{name} seed {seed}] averaged weights: {core.weights_path(name, seed, args)}",
                    flush=True,
                )
            if core.find_lost_weights(name, seed, args):
                print(
                    f"[{name} seed {seed}] finished, but its averaged weights were not kept (it ran on a machine "
                    "not handed on): re-trained last, with the same seed, to keep them",
                    flush=True,
                )
                retrain.append((name, seed))
            else:
                print(f"[{name} seed {seed}] finished: {core.record_path(name, seed, args)}", flush=True)
            continue
        todo.append((name, seed))
    for name, seed in todo + retrain:
        if why := prepare(name, seed, args):
            raise SystemExit(f"error: {why}")
    todo += retrain
    end = deadline(args.until) if args.until else None
    probe = machine_probe(core.STUDY_CACHE)  # before the workers, which stamp it on their epochs
    print(describe(probe), flush=True)
    running: list[tuple[str, int, subprocess.Popen]] = []
    failed: list[str] = []
    begun: set[tuple[str, int]] = set()
    last_status = 0.0
    while todo or running:
        while todo and len(running) < args.jobs:
            name, seed = todo.pop(0)
            begun.add((name, seed))
            late = end is not None and too_late(name, seed, args, end, machine_factor(probe))
            if late:
                print(f"[{name} seed {seed}] not started: {late}", flush=True)
                continue
            running.append((name, seed, start_worker(name, seed, args)))
        if end is not None and time.time() >= end:
            for name, seed, proc in running:
                proc.terminate()
                proc.wait()
                print(
                    f"[{name} seed {seed}] stopped at --until {args.until}; `--reuse` resumes it from its "
                    "last epoch checkpoint",
                    flush=True,
                )
            break
        time.sleep(2)
        if time.monotonic() - last_status > args.status_every:
            last_status = time.monotonic()
            for name, seed, _ in running:
                print(status(name, seed, args), flush=True)
        for name, seed, proc in list(running):
            if proc.poll() is not None:
                running.remove((name, seed, proc))
                log_path = core.run_dir(name, seed, args) / "train.log"
                print(f"[{name} seed {seed}] exit {proc.returncode} (log: {log_path})", flush=True)
                if proc.returncode:
                    failed.append(f"{name} seed {seed}")
                todo = replan(args, todo, begun)
    if failed:
        print(f"failed: {', '.join(failed)}", flush=True)


def build_parser(description: str | None = None) -> argparse.ArgumentParser:
    """The study's command line (its defaults are the study's settings; the tests build their arguments from it);
    `description`: its --help text (bench/depth_multi30k.py's docstring)."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help="rows to run (default: the plan, see plan())"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[1], help="seeds of the --only rows")
    parser.add_argument("--reuse", action="store_true", help="resume unfinished runs from their last epoch")
    parser.add_argument("--report-only", action="store_true", help="rebuild table and plots from the records")
    parser.add_argument(
        "--pilot",
        action="store_true",
        help="pilot report: rows recorded at several budgets (--epochs: the one chosen)",
    )
    parser.add_argument(
        "--rescore",
        action="store_true",
        help="decode the runs of every verdict pair whose rows decode differently under the other row's beam and "
        "length penalty too (committed weights, cached, resumable; the report shows both)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: d 32, 2 epochs, 1000 pairs")
    parser.add_argument("--jobs", type=int, default=2, help="models trained at once (one thread each)")
    parser.add_argument(
        "--until",
        metavar="HH:MM",
        help="end of the sitting: start only runs that finish before it (by their measured CPU-s per epoch, "
        "scaled by this machine's speed probe: machine_speed.py), and stop the workers at it (they resume from "
        "their last epoch checkpoint)",
    )
    parser.add_argument(
        "--kept",
        action="store_true",
        help="with --until: this machine is kept between sittings (its ~/.cache survives), so also start runs "
        "that will not finish by --until or whose cost is unknown; they stop at it and --reuse resumes them later "
        "(the runs longer than a sitting: the deep decoders with CAD + CRT)",
    )
    parser.add_argument(
        "--epochs",
        type=int,
        default=30,
        help="the epoch budget; the learning rate reaches 0 at its end (30: the pilot's rule, see --pilot)",
    )
    parser.add_argument(
        "--schedule",
        choices=("linear", "cosine"),
        default="linear",
        help="warmup, then decay to 0 at the end of the budget (Transformers' lr_scheduler_type)",
    )
    parser.add_argument(
        "--warmup-scale",
        type=float,
        default=0.1,
        help="each recipe's warmup steps times this (the papers' warmups are for runs of 100k+ updates)",
    )
    parser.add_argument(
        "--patience", type=int, default=0, help="stop after N epochs without a better valid loss (0: never)"
    )
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--max-tokens", type=int, default=1536, help="padded tokens per batch and side")
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--max-train-samples", type=int)
    parser.add_argument("--valid-sentences", type=int, default=500)
    parser.add_argument("--max-test-samples", type=int)
    parser.add_argument("--average", type=int, default=5, help="epoch checkpoints averaged")
    parser.add_argument("--status-every", type=float, default=300.0, help="seconds between status lines")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    return parser
