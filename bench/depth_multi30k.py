"""Depth that pays? Every deep variant against the 6-6 models on Multi30k en→de at equal epochs.

Each model trains with its paper's recipe (deep_nmt_hf.recipes: optimizer, β's, ε, clipping, dropouts, label
smoothing, embedding sharing, beam and length penalty, averaging) for the same number of epochs: at most
`--epochs` (12), stopping early for every model by the same rule — validation loss not improved for `--patience`
(2) epochs. What the papers set for WMT-size batches is scaled to Multi30k for every model alike: token batches of
`--max-tokens` (fairseq's --max-tokens), peak learning rate `--learning-rate` after `--warmup-steps`; every model at
width `--d-model`. The 6-6 baselines train with the recipe of the paper they are the baseline of (post-LN 6-6: the
ADMIN recipe without ω; pre-LN 6-6: the DLCL recipe without layer aggregation); stock MarianMTModel with the
project's pre-#14 `marian` recipe.

After every epoch: validation loss and validation BLEU (beam 4, `--valid-sentences` sentences). At the end:
test_2016_flickr BLEU / chrF / TER (sacreBLEU, signatures) of the best-validation-loss epoch checkpoint and of the
average of the last `--average` epoch checkpoints (the papers report averaged models); both models are saved with
the tokenizer (``~/.cache/deep_nmt_bench/depth-runs/NAME/best`` and ``.../averaged``; $DEEP_NMT_BENCH_CACHE moves it) and load with AutoModelForSeq2SeqLM.

Every model trains in its own process with one torch thread, `--jobs` at once; its Trainer checkpoints (one per
epoch), per-epoch record and final result live in ``~/.cache/deep_nmt_bench/depth-runs/NAME/``, so the study spans sittings:
``--reuse`` keeps finished models and resumes unfinished ones from their last epoch checkpoint. A status line per
running model shows epochs done, the last validation numbers and the CPU time still to go. The table and plots
are rebuilt from whatever is cached (``--report-only``).

    python bench/depth_multi30k.py --reuse                  # the study (hours of CPU; resumable)
    python bench/depth_multi30k.py --reuse --only admin-18-6  # one model
    python bench/depth_multi30k.py --report-only            # table + plots from the cached runs
    python bench/depth_multi30k.py --quick                  # smoke test: d 32, 2 epochs, 1000 pairs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    RESULTS,
    markdown_table,
    multi30k_dir,
    multi30k_pairs,
    multi30k_tokenizer,
    write_results,
)
from quality_multi30k import model_from_fields

from deep_nmt_hf.atomic import atomic_write

# outside the work tree, so that a study spans sittings (and fresh clones) on the same machine
STUDY_CACHE = Path(os.environ.get("DEEP_NMT_BENCH_CACHE", Path.home() / ".cache" / "deep_nmt_bench"))
RUNS = STUDY_CACHE / "depth-runs"
SIX_SIX = {"encoder_layers": 6, "decoder_layers": 6}
DEEP = {"encoder_layers": 18, "decoder_layers": 6}

# name -> (variant, recipe, config fields, description, the 6-6 baseline it is measured against)
MODELS: dict[str, tuple[str, str, dict[str, Any], str, str | None]] = {
    "marian-6-6": ("marian", "marian", SIX_SIX, "stock MarianMTModel 6-6", None),
    "post-6-6": ("base", "admin", {**SIX_SIX, "layer_norm_position": "post"}, "our post-LN 6-6", None),
    "pre-6-6": ("base", "dlcl", {**SIX_SIX, "layer_norm_position": "pre"}, "our pre-LN 6-6", None),
    "admin-18-6": ("admin", "admin", DEEP, "ADMIN 18-6 (ω profiled)", "post-6-6"),
    "deepnorm-18-6": ("deepnorm", "admin", DEEP, "DeepNorm 18-6 (ADMIN's recipe)", "post-6-6"),
    "dsinit-matt-18-6": ("dsinit_matt", "dsinit_matt", DEEP, "DS-Init + MAtt 18-6", "post-6-6"),
    "dlcl-18-6": ("dlcl", "dlcl", DEEP, "pre-norm DLCL 18-6", "pre-6-6"),
    "shared-18-6": (
        "shared_layers",
        "shared_layers",
        {"encoder_layers": 6, "encoder_layer_repeats": 3, "decoder_layers": 3, "decoder_layer_repeats": 2},
        "shared layers: 6 unique ×3 / 3 unique ×2 (18-6 applications)",
        "pre-6-6",
    ),
    "deep-decoder-6-12": (
        "deep_decoder",
        "deep_decoder",
        {"encoder_layers": 6, "decoder_layers": 12},
        "deep decoder 6-12, CAD + DDR + ALD",
        "pre-6-6",
    ),
    "admin-36-6": ("admin", "admin", {"encoder_layers": 36, "decoder_layers": 6}, "ADMIN 36-6", "post-6-6"),
    # a control, not a baseline: the initialisation alone (bench/results/multi30k.md: 14.7 -> 27.2 BLEU at d 64)
    "post-6-6-normal": (
        "base",
        "admin",
        {**SIX_SIX, "layer_norm_position": "post", "init_method": "normal"},
        "our post-LN 6-6, init_method='normal' (Marian's N(0, 0.02); control)",
        None,
    ),
    # a control: DS-Init + MAtt with the paper's 6-layer dropouts (Table 3: dp_r 0.1, dp_a 0.1) instead of its deep ones
    "dsinit-matt-18-6-dp0.1": (
        "dsinit_matt",
        "dsinit_matt",
        {**DEEP, "dropout": 0.1, "attention_dropout": 0.1},
        "DS-Init + MAtt 18-6, dropouts 0.1 / 0.1 (the paper's 6-layer ones; control)",
        "post-6-6",
    ),
    # controls: does depth pay once the initialisation is Marian's? (pre-LN pair, the best deep model's family)
    "pre-6-6-normal": (
        "base",
        "dlcl",
        {**SIX_SIX, "layer_norm_position": "pre", "init_method": "normal"},
        "our pre-LN 6-6, init_method='normal' (control)",
        None,
    ),
    "dlcl-18-6-normal": (
        "dlcl",
        "dlcl",
        {**DEEP, "init_method": "normal"},
        "pre-norm DLCL 18-6, init_method='normal' (control)",
        "pre-6-6-normal",
    ),
    # control: ADMIN (the papers' headline method) with Marian's initialisation, against post-6-6-normal
    "admin-18-6-normal": (
        "admin",
        "admin",
        {**DEEP, "init_method": "normal"},
        "ADMIN 18-6, init_method='normal' (control)",
        "post-6-6-normal",
    ),
}
# controls change one setting to find a cause; they are not candidates
CONTROLS = (
    "post-6-6-normal",
    "dsinit-matt-18-6-dp0.1",
    "pre-6-6-normal",
    "dlcl-18-6-normal",
    "admin-18-6-normal",
)
OPTIONAL = ("admin-36-6", *CONTROLS)  # run only when named with --only
RECIPE_OPTIONS = ("optimizer", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "max_grad_norm")
RECIPE_OPTIONS += ("label_smoothing", "num_beams", "length_penalty", "length_penalty_form")


# ------------------------------------------------------------------------------------------------- one model
def _write_json(path: Path, payload: Any) -> None:
    with atomic_write(path) as handle:
        handle.write(json.dumps(payload, indent=2, default=str) + "\n")


def _write_lines(path: Path, lines: list[str]) -> None:
    with atomic_write(path) as handle:
        handle.write("".join(line.replace("\n", " ") + "\n" for line in lines))


def _read_json(path: Path, default: Any = None) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def _recipe(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(training options, config fields) of the model's recipe; the variant comes from MODELS."""
    from deep_nmt_hf.recipes import recipe_config, recipe_options

    recipe = MODELS[name][1]
    options = {k: v for k, v in recipe_options(recipe).items() if k in RECIPE_OPTIONS}
    return options, recipe_config(recipe)


def _epoch_checkpoints(trainer_dir: Path) -> list[tuple[float, Path]]:
    """(epoch, checkpoint dir) of every finished epoch checkpoint, in order."""
    found = []
    for path in trainer_dir.glob("checkpoint-*"):
        state = _read_json(path / "trainer_state.json")
        if state is not None and (path / "model.safetensors").exists():
            found.append((round(float(state["epoch"]), 3), path))
    return sorted(found)


def train_model(name: str, args: argparse.Namespace) -> None:
    """Train (or resume) one model epoch by epoch, then score its best and averaged checkpoints on test."""
    import datasets
    import torch
    from transformers import (
        DataCollatorForSeq2Seq,
        MarianMTModel,
        Seq2SeqTrainingArguments,
        TrainerCallback,
        set_seed,
    )

    from deep_nmt_hf.admin import AdminProfilingCallback
    from deep_nmt_hf.collapse_losses import token_cross_entropy
    from deep_nmt_hf.length_penalty import set_length_penalty
    from deep_nmt_hf.optimizers import optimizer_cls_and_kwargs
    from deep_nmt_hf.training import (
        DeepNMTTrainer,
        DivergenceCallback,
        nmt_recipe,
        tokenize_dataset,
        translate,
    )
    from deep_nmt_hf.training.metrics import compute_translation_metrics

    torch.set_num_threads(1)
    run_dir = RUNS / name
    trainer_dir = run_dir / "trainer"
    run_dir.mkdir(parents=True, exist_ok=True)
    history_path = run_dir / "epochs.json"
    tokenizer = multi30k_tokenizer(args.vocab_size)
    options, config_fields = _recipe(name)
    variant, _, fields, _, _ = MODELS[name]
    fields = {**config_fields, **fields, "label_smoothing": options["label_smoothing"]}

    checkpoints = _epoch_checkpoints(trainer_dir)
    resume = checkpoints[-1][1] if checkpoints else None
    history = [e for e in _read_json(history_path, []) if resume and e["epoch"] <= checkpoints[-1][0] + 1e-6]
    if resume is not None and variant == "admin":
        fields["admin_profiled"] = True  # ω is in the checkpoint's weights: never profile over them again
    set_seed(args.seed)
    model = model_from_fields(variant, fields, tokenizer, args.d_model, args.max_length)
    model.generation_config.num_beams = options["num_beams"]
    model.generation_config.max_length = args.max_length + 1
    set_length_penalty(model.generation_config, options["length_penalty"], options["length_penalty_form"])
    is_marian = isinstance(model, MarianMTModel)

    def pairs_dataset(pairs: list[tuple[str, str]]) -> datasets.Dataset:
        return datasets.Dataset.from_dict({"translation": [{"en": s, "de": t} for s, t in pairs]})

    train_pairs = multi30k_pairs("train", limit=args.max_train_samples)
    valid_pairs = multi30k_pairs("val", limit=args.valid_sentences)
    lengths = (args.max_length, args.max_length)
    train_tokens = tokenize_dataset(pairs_dataset(train_pairs), tokenizer, "en", "de", *lengths)
    valid_tokens = tokenize_dataset(pairs_dataset(valid_pairs), tokenizer, "en", "de", *lengths)

    class EpochRecord(TrainerCallback):
        """Per epoch: training CPU seconds, mean training loss and grad norm, validation loss and BLEU; stops
        training when the validation loss has not improved for `patience` epochs (the same rule for all)."""

        def __init__(self) -> None:
            self.start = 0.0
            self.cpu = 0.0

        def on_epoch_begin(self, *a: Any, **k: Any) -> None:
            self.start = time.process_time()

        def on_epoch_end(self, *a: Any, **k: Any) -> None:
            self.cpu = time.process_time() - self.start

        def on_evaluate(self, targs: Any, state: Any, control: Any, metrics: Any = None, **k: Any) -> None:
            model_ = k["model"]
            since = history[-1]["epoch"] if history else 0.0
            logs = [e for e in state.log_history if "loss" in e and e.get("epoch", 0) > since + 1e-6]
            norms = [e["grad_norm"] for e in logs if e.get("grad_norm") is not None]
            cpu = time.process_time()
            hypotheses = translate(model_, tokenizer, [s for s, _ in valid_pairs], num_beams=4, batch_size=64)
            bleu = compute_translation_metrics(hypotheses, [t for _, t in valid_pairs])
            history.append(
                {
                    "epoch": round(float(state.epoch), 3),
                    "step": state.global_step,
                    "train_cpu_s": round(self.cpu, 1),
                    "valid_decode_cpu_s": round(time.process_time() - cpu, 1),
                    "train_loss": sum(e["loss"] for e in logs) / len(logs) if logs else None,
                    "grad_norm": sum(norms) / len(norms) if norms else None,
                    "valid_loss": metrics["eval_loss"],
                    "valid_bleu": bleu["bleu"],
                }
            )
            _write_json(history_path, history)
            if _stopped(history, args.patience):
                control.should_training_stop = True

    training_args = Seq2SeqTrainingArguments(
        output_dir=str(trainer_dir),
        per_device_train_batch_size=64,  # unused: token batches (max_tokens) make the training batches
        per_device_eval_batch_size=64,
        **nmt_recipe(
            args.learning_rate,
            args.warmup_steps,
            options["max_grad_norm"],
            betas=(options["adam_beta1"], options["adam_beta2"]),
            epsilon=options["adam_epsilon"],
            weight_decay=options["weight_decay"],
        ),
        num_train_epochs=args.epochs,
        eval_strategy="epoch",
        save_strategy="epoch",
        save_total_limit=None,
        logging_strategy="steps",
        logging_steps=25,
        logging_nan_inf_filter=False,
        report_to="none",
        use_cpu=True,
        seed=args.seed,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    callbacks: list[Any] = [EpochRecord(), DivergenceCallback()]
    if getattr(model.config, "residual_scaling", None) == "admin":
        callbacks.append(AdminProfilingCallback(seed=args.seed))

    def smoothed_loss(outputs: Any, labels: Any, num_items_in_batch: Any = None) -> Any:
        return token_cross_entropy(outputs["logits"], labels, options["label_smoothing"])

    trainer = DeepNMTTrainer(
        model=model,
        args=training_args,
        train_dataset=train_tokens,
        eval_dataset=valid_tokens,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        callbacks=callbacks,
        compute_loss_func=smoothed_loss if is_marian else None,
        max_tokens=args.max_tokens,
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs(
            options["optimizer"],
            args.learning_rate,
            (options["adam_beta1"], options["adam_beta2"]),
            options["adam_epsilon"],
        ),
    )
    if not history or len(history) < args.epochs and not _stopped(history, args.patience):
        trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    finish(name, args, tokenizer, history, model, options)


def _stopped(history: list[dict[str, Any]], patience: int) -> bool:
    losses = [e["valid_loss"] for e in history]
    return bool(losses) and len(losses) - 1 - losses.index(min(losses)) >= patience


def finish(
    name: str, args: argparse.Namespace, tokenizer: Any, history: list, model: Any, options: dict
) -> None:
    """Score the best-validation epoch checkpoint and the average of the last `--average` ones on test."""
    import torch

    from deep_nmt_hf.averaging import average_weights
    from deep_nmt_hf.training import translate
    from deep_nmt_hf.training.metrics import compute_translation_metrics

    run_dir = RUNS / name
    checkpoints = _epoch_checkpoints(run_dir / "trainer")
    by_epoch = {epoch: path for epoch, path in checkpoints}
    best = min(history, key=lambda e: e["valid_loss"])
    test_pairs = multi30k_pairs("test_2016_flickr", limit=args.max_test_samples)
    sources, references = [s for s, _ in test_pairs], [t for _, t in test_pairs]
    scores = {}
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
        _write_lines(run_dir / f"{kind}.test.hyp", hypotheses)
        generated = sum(len(tokenizer(text_target=h)["input_ids"]) for h in hypotheses)
        scores[kind] = {
            **compute_translation_metrics(hypotheses, references),
            "checkpoints": [path.name for path in used],
            "decode_tokens_per_cpu_s": round(generated / max(decode_cpu, 1e-9), 1),
        }
        out = run_dir / kind
        shutil.rmtree(out, ignore_errors=True)
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
    _write_json(
        run_dir / "result.json",
        {
            "name": name,
            "description": MODELS[name][3],
            "variant": MODELS[name][0],
            "recipe": MODELS[name][1],
            "baseline": MODELS[name][4],
            "num_parameters": int(model.num_parameters()),
            "epochs": history[-1]["epoch"],
            "best_epoch": best["epoch"],
            "history": history,
            "test": scores,
            "settings": settings(args),
        },
    )


# ------------------------------------------------------------------------------------------------ the study
def settings(args: argparse.Namespace) -> dict[str, Any]:
    keys = ("epochs", "patience", "d_model", "vocab_size", "max_tokens", "learning_rate", "warmup_steps")
    keys += ("max_length", "seed", "max_train_samples", "valid_sentences", "max_test_samples", "average")
    return {key: getattr(args, key) for key in keys}


def forward_args(args: argparse.Namespace) -> list[str]:
    out = []
    for key, value in settings(args).items():
        if value is not None:
            out += [f"--{key.replace('_', '-')}", str(value)]
    return out + (["--quick"] if args.quick else [])


def status(name: str, args: argparse.Namespace) -> str:
    """One line: epochs done, the last validation numbers, CPU per epoch and the CPU time still to go."""
    history = _read_json(RUNS / name / "epochs.json", [])
    if not history:
        return f"[{name}] epoch 0/{args.epochs}: training the first epoch"
    last = history[-1]
    per_epoch = sum(e["train_cpu_s"] + e["valid_decode_cpu_s"] for e in history) / len(history)
    left = (args.epochs - len(history)) * per_epoch
    return (
        f"[{name}] epoch {len(history)}/{args.epochs}: valid loss {last['valid_loss']:.3f}, BLEU "
        f"{last['valid_bleu']:.1f}; {per_epoch:.0f} CPU-s/epoch, ≤ {left / 60:.0f} CPU-min to go"
    )


def orchestrate(args: argparse.Namespace) -> None:
    multi30k_dir()
    multi30k_tokenizer(args.vocab_size)  # train the tokenizer once, before the workers start
    RUNS.mkdir(parents=True, exist_ok=True)
    names = args.only or [n for n in MODELS if n not in OPTIONAL]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"error: unknown model(s) {', '.join(unknown)}; valid: {', '.join(MODELS)}")
    todo = []
    for name in names:
        run_dir = RUNS / name
        saved = _read_json(run_dir / "settings.json")
        if saved is not None and saved != settings(args):
            changed = sorted(k for k in settings(args) if saved.get(k) != settings(args)[k])
            raise SystemExit(
                f"error: {run_dir} was run with other settings ({', '.join(changed)}); delete it"
            )
        if saved is not None and not args.reuse:
            raise SystemExit(f"error: {run_dir} exists; pass --reuse to continue it, or delete it")
        if (run_dir / "result.json").exists():
            print(f"[{name}] finished: reusing {run_dir / 'result.json'}", flush=True)
            continue
        run_dir.mkdir(parents=True, exist_ok=True)
        _write_json(run_dir / "settings.json", settings(args))
        todo.append(name)
    running: list[tuple[str, subprocess.Popen]] = []
    failed: list[str] = []
    last_status = 0.0
    while todo or running:
        while todo and len(running) < args.jobs:
            name = todo.pop(0)
            log = open(RUNS / name / "train.log", "a")  # noqa: SIM115 - closed with the process
            cmd = [sys.executable, __file__, "--worker", name, *forward_args(args)]
            env = {**os.environ, "OMP_NUM_THREADS": "1"}
            print(f"[{name}] start: {' '.join(cmd)}", flush=True)
            running.append((name, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)))
        time.sleep(2)
        if time.monotonic() - last_status > args.status_every:
            last_status = time.monotonic()
            for name, _ in running:
                print(status(name, args), flush=True)
        for name, proc in list(running):
            if proc.poll() is not None:
                running.remove((name, proc))
                print(f"[{name}] exit {proc.returncode} (log: {RUNS / name / 'train.log'})", flush=True)
                if proc.returncode:
                    failed.append(name)
    report(args, failed)


def _load_saved(model_dir: Path) -> tuple[Any, Any]:
    """A saved final model (eval mode, one torch thread, as the workers ran) and its tokenizer."""
    import torch
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    import deep_nmt_hf  # noqa: F401 - registers the variants with the Auto classes

    torch.set_num_threads(1)
    return AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval(), AutoTokenizer.from_pretrained(model_dir)


DECODING = ("num_beams", "length_penalty", "length_penalty_form")


def _decoding(name: str) -> tuple[Any, ...]:
    """The beam size and length penalty (α, form) of NAME's recipe."""
    options = _recipe(name)[0]
    return tuple(options[k] for k in DECODING)


def saved_test_translations(
    name: str, kind: str, args: argparse.Namespace, decoding_of: str | None = None
) -> list[str]:
    """NAME's test_2016_flickr translations by its `kind` model (best / averaged), kept in NAME/KIND.test.hyp.
    Runs finished before the file was kept are translated again from the saved model (one thread, the recipe's
    beam, as `finish` did); their BLEU must equal the recorded one, or the saved model is not the scored one.
    `decoding_of=OTHER` decodes with OTHER's recipe's beam and length penalty instead (NAME/KIND.test.as-OTHER.hyp):
    the same model, the baseline's decoding."""
    path = RUNS / name / (f"{kind}.test.hyp" if decoding_of is None else f"{kind}.test.as-{decoding_of}.hyp")
    if path.exists():
        return path.read_text().splitlines()
    import torch

    from deep_nmt_hf.length_penalty import set_length_penalty
    from deep_nmt_hf.training import translate
    from deep_nmt_hf.training.metrics import compute_translation_metrics

    record = _read_json(RUNS / name / "result.json")
    model_dir = RUNS / name / kind
    model, tokenizer = _load_saved(model_dir)
    pairs = multi30k_pairs("test_2016_flickr", limit=args.max_test_samples)
    beams, alpha, form = _decoding(decoding_of or name)
    set_length_penalty(model.generation_config, alpha, form)
    with torch.inference_mode():
        hypotheses = translate(model, tokenizer, [s for s, _ in pairs], num_beams=beams, batch_size=64)
    bleu = compute_translation_metrics(hypotheses, [t for _, t in pairs])["bleu"]
    if decoding_of is None and abs(bleu - record["test"][kind]["bleu"]) > 1e-6:
        raise RuntimeError(
            f"{model_dir}: BLEU {bleu:.4f} re-translated, {record['test'][kind]['bleu']:.4f} recorded"
        )
    _write_lines(path, hypotheses)
    return hypotheses


def significance(
    records: dict[str, dict[str, Any]], references: list[str], args: argparse.Namespace
) -> dict[str, dict[str, dict[str, Any]]]:
    """Per model with a baseline, per kind (best / averaged): sacreBLEU's paired bootstrap (1000 resamples) of
    its test BLEU against the baseline's (`deep_nmt_hf.training.paired_bootstrap`); against stock Marian; and,
    where the two recipes decode differently (beam, length penalty), with the model decoded as the baseline."""
    from deep_nmt_hf.training import paired_bootstrap

    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, record in records.items():
        base = record.get("baseline")
        if base in records:
            out[name] = {
                kind: paired_bootstrap(
                    saved_test_translations(base, kind, args),
                    saved_test_translations(name, kind, args),
                    references,
                )
                for kind in ("averaged", "best")
            }
            if "marian-6-6" in records:
                marian = saved_test_translations("marian-6-6", "averaged", args)
                averaged = saved_test_translations(name, "averaged", args)
                out[name]["averaged vs marian-6-6"] = paired_bootstrap(marian, averaged, references)
            # the two recipes decode differently: also compare like with like
            if _decoding(name) != _decoding(base):
                for kind in ("averaged", "best"):
                    out[name][f"{kind}, {base}'s decoding"] = paired_bootstrap(
                        saved_test_translations(base, kind, args),
                        saved_test_translations(name, kind, args, decoding_of=base),
                        references,
                    )
    return out


def _delta(test: dict[str, Any]) -> str:
    """A paired bootstrap result in words: "+1.23 BLEU (paired bootstrap p = 0.004)"."""
    return f"{test['delta']:+.2f} BLEU (paired bootstrap p = {test['p_value']:.3f})"


def _aim(delta: float) -> str:
    return "holds" if delta >= 0.5 else "does not hold"


def _verdicts(records: dict[str, dict[str, Any]], tests: dict[str, dict[str, dict[str, Any]]]) -> list[str]:
    """Which of the study's aims hold, in words, from the cached results and the paired bootstrap tests."""
    lines = []
    for name, record in records.items():
        base = record.get("baseline")
        if name not in tests:
            continue
        for kind in ("averaged", "best"):
            test = tests[name][kind]
            if name in CONTROLS:
                lines.append(f"- {name} (control) vs {base} ({kind}): {_delta(test)}.")
                if kind == "best":
                    marian = _delta(tests[name]["averaged vs marian-6-6"])
                    lines.append(f"- {name} (control) vs stock Marian 6-6 (averaged): {marian}.")
                continue
            lines.append(f"- {name} vs {base} ({kind}): {_delta(test)} — the +0.5 aim {_aim(test['delta'])}.")
            same = tests[name].get(f"{kind}, {base}'s decoding")
            if same is not None:
                lines.append(
                    f"  - decoded with {base}'s beam and length penalty: {_delta(same)} — the +0.5 aim "
                    f"{_aim(same['delta'])}."
                )
    marian = records.get("marian-6-6")
    deep = [r for n, r in records.items() if r.get("baseline") and n not in CONTROLS]
    if marian and deep:
        top = max(deep, key=lambda r: r["test"]["averaged"]["bleu"])
        test = tests[top["name"]]["averaged vs marian-6-6"]
        verdict = "holds" if test["delta"] > 0 else "does not hold"
        lines.append(
            f"- best deep model {top['name']} vs stock Marian 6-6 (averaged): {_delta(test)} — {verdict}."
        )
    return lines


def eval_mode_nll(name: str, args: argparse.Namespace) -> dict[str, float]:
    """Token NLL (no label smoothing, no dropout) of the best checkpoint on the first `--valid-sentences` training
    pairs ("train"), on the validation pairs ("val"), and on the validation pairs with every source moved to the
    next pair's target ("val_wrong_source"). val − train is the over-fitting gap: the training loss the Trainer
    logs has dropout (and, for the deep decoder, the DDR / ALD terms) in it, so valid − logged train is negative
    and says nothing. val_wrong_source − val is how much the model reads the source: a decoder that ignores the
    source (deep-decoder-cad-crt, sec. 3) loses little when it is wrong. Cached in NAME/diagnosis.json next to the
    result it was computed from."""
    run_dir = RUNS / name
    result = run_dir / "result.json"
    cache = _read_json(run_dir / "diagnosis.json", {})
    if cache.get("result_mtime") == result.stat().st_mtime and "val_wrong_source" in cache["nll"]:
        return cache["nll"]
    import torch
    from transformers import DataCollatorForSeq2Seq

    model, tokenizer = _load_saved(run_dir / "best")
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
    _write_json(run_dir / "diagnosis.json", {"result_mtime": result.stat().st_mtime, "nll": nll})
    return nll


def length_ratio(hypotheses: list[str], references: list[str]) -> float:
    """sacreBLEU's hypothesis / reference length ratio (13a tokens; below 1 BLEU's brevity penalty bites)."""
    from sacrebleu.metrics import BLEU

    score = BLEU().corpus_score(hypotheses, [references])
    return score.sys_len / score.ref_len


def _diagnosis(record: dict[str, Any], nll: dict[str, float], ratio: float) -> str:
    """Over-fitting gap (eval-mode NLL, valid − train), source reliance (valid NLL with wrong sources − valid NLL),
    the valid-loss slope over the last two epochs (too few epochs), the mean gradient norm of the last epoch
    (optimisation), the hypothesis / reference length ratio of the averaged model on test (decoding)."""
    history = record["history"]
    slope = (history[-1]["valid_loss"] - history[-3]["valid_loss"]) / 2 if len(history) >= 3 else float("nan")
    norm = history[-1]["grad_norm"]
    text = f"gap {nll['val'] - nll['train']:+.2f}, src {nll['val_wrong_source'] - nll['val']:+.2f}"
    text += f", slope {slope:+.3f}/ep" + (f", |g| {norm:.2f}" if norm is not None else "")
    return text + f", len {ratio:.2f}"


def report(args: argparse.Namespace, failed: list[str]) -> None:
    names = [n for n in MODELS if (RUNS / n / "result.json").exists()]
    records = {n: _read_json(RUNS / n / "result.json") for n in names}
    header = ["model", "recipe", "params (M)", "epochs", "best ep", "CPU-s/ep", "decode tok/CPU-s"]
    header += ["BLEU best", "chrF best", "TER best", "BLEU avg", "chrF avg", "TER avg", "diagnosis"]
    references = [t for _, t in multi30k_pairs("test_2016_flickr", limit=args.max_test_samples)]
    rows = []
    for name, r in records.items():
        nll = eval_mode_nll(name, args)
        per_epoch = sum(e["train_cpu_s"] for e in r["history"]) / len(r["history"])
        best, avg = r["test"]["best"], r["test"]["averaged"]
        rows.append(
            [f"{name} ({r['description']})", r["recipe"], round(r["num_parameters"] / 1e6, 2), r["epochs"]]
            + [r["best_epoch"], round(per_epoch), round(avg["decode_tokens_per_cpu_s"])]
            + [round(best[m], 2) for m in ("bleu", "chrf", "ter")]
            + [round(avg[m], 2) for m in ("bleu", "chrf", "ter")]
            + [_diagnosis(r, nll, length_ratio(saved_test_translations(name, "averaged", args), references))]
        )
    tests = significance(records, references, args)
    signatures = sorted(
        {r["test"]["best"][f"{m}_signature"] for r in records.values() for m in ("bleu", "chrf", "ter")}
        | {kinds[kind]["signature"] for kinds in tests.values() for kind in kinds}
    )
    name = "depth_multi30k.quick" if args.quick else "depth_multi30k"
    markdown = (
        "# Depth that pays? Multi30k en→de at equal epochs\n\n"
        f"Every model: at most {args.epochs} epochs, stopped when validation loss has not improved for "
        f"{args.patience} epochs; width d_model {args.d_model}; batches of ≤ {args.max_tokens} padded tokens per side; "
        f"peak lr {args.learning_rate:g} after {args.warmup_steps} warmup steps (inverse sqrt); the rest from each "
        "model's recipe (deep_nmt_hf.recipes). Validation: loss and BLEU (beam 4) on "
        f"{args.valid_sentences} sentences after every epoch. Test: test_2016_flickr, the best-validation-loss "
        f"epoch checkpoint (best) and the average of the last {args.average} epoch checkpoints (avg), the recipe's "
        "beam and length penalty. Diagnosis: the over-fitting gap (token NLL of the best checkpoint in eval mode, "
        f"{args.valid_sentences} validation minus {args.valid_sentences} training pairs), the source reliance (src: the validation NLL "
        "when every source is another sentence's, minus the true one; a decoder that ignores the source scores "
        "near 0), the valid-loss slope over the last two epochs (negative: still improving), the mean gradient "
        "norm of the last epoch, the test length ratio of the averaged model (len: hypothesis / reference "
        "tokens; below 1 BLEU's brevity penalty bites).\n\n"
        + (markdown_table(header, rows) if rows else "No finished model yet.")
        + "\n\n## Which aims hold\n\n"
        + "Test BLEU of each model against its 6-6 baseline (the aim: +0.5), with sacreBLEU's paired bootstrap "
        "p-value (1000 resamples of the test sentences; below 0.05 the difference is unlikely to be chance). "
        "Controls change one setting of a model to find a cause; they are not candidates.\n\n"
        + ("\n".join(_verdicts(records, tests)) or "Not enough finished models to compare.")
        + "\n\nSignatures: "
        + "; ".join(f"`{s}`" for s in signatures)
        + "\n"
    )
    if failed:
        markdown += f"\nFailed (see {RUNS}/NAME/train.log): {', '.join(failed)}\n"
    pending = [n for n in MODELS if n not in records and n not in OPTIONAL]
    if pending:
        markdown += f"\nNot finished yet: {', '.join(pending)}\n"
    if records:
        plot(records, RESULTS / f"{name}.png")
        markdown += (
            "\n![validation loss and BLEU per epoch, BLEU against training CPU time, gradient norm per epoch]"
            f"({name}.png)\n"
        )
    payload = {"settings": settings(args), "failed": failed, "models": records, "significance": tests}
    write_results(name, payload, markdown)
    print(markdown)


def plot(records: dict[str, dict[str, Any]], path: Path) -> None:
    """Top: validation loss per epoch; validation BLEU against cumulative training CPU time (the cost of depth).
    Bottom: validation BLEU per epoch; the mean gradient norm per epoch (an optimisation problem shows there)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((loss, cost), (bleu, norm)) = plt.subplots(2, 2, figsize=(13, 9))
    colours = plt.get_cmap("tab20").colors
    for name, record in records.items():
        history = record["history"]
        epochs = [e["epoch"] for e in history]
        line = ":" if name in CONTROLS else "--" if record.get("baseline") is None else "-"
        colour = colours[list(MODELS).index(name) % len(colours)]
        style = {"linestyle": line, "color": colour, "marker": ".", "label": name}
        loss.plot(epochs, [e["valid_loss"] for e in history], **style)
        bleu.plot(epochs, [e["valid_bleu"] for e in history], **style)
        norm.plot(epochs, [e["grad_norm"] for e in history], **style)
        cpu, total = [], 0.0
        for e in history:
            total += e["train_cpu_s"]
            cpu.append(total / 3600)
        cost.plot(cpu, [e["valid_bleu"] for e in history], **style)
    loss.set(xlabel="epoch", ylabel="validation loss (label-smoothed)", title="validation loss per epoch")
    cost.set(
        xlabel="training CPU-hours", ylabel="validation BLEU (beam 4)", title="BLEU against training cost"
    )
    bleu.set(xlabel="epoch", ylabel="validation BLEU (beam 4)", title="validation BLEU per epoch")
    norm.set(xlabel="epoch", ylabel="mean gradient norm (before clipping)", title="gradient norm per epoch")
    norm.set_yscale("log")
    cost.legend(fontsize=8)
    fig.suptitle("Multi30k en→de: deep variants (solid), the 6-6 models (dashed), controls (dotted)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only", nargs="+", metavar="NAME", help=f"models to run (default: all but {OPTIONAL})"
    )
    parser.add_argument("--reuse", action="store_true", help="keep finished models, resume unfinished ones")
    parser.add_argument("--report-only", action="store_true", help="rebuild table and plots from cached runs")
    parser.add_argument("--quick", action="store_true", help="smoke test: d 32, 2 epochs, 1000 pairs")
    parser.add_argument("--jobs", type=int, default=2, help="models trained at once (one thread each)")
    parser.add_argument("--epochs", type=int, default=12, help="at most this many epochs per model")
    parser.add_argument(
        "--patience", type=int, default=2, help="stop after N epochs without a better valid loss"
    )
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--max-tokens", type=int, default=1536, help="padded tokens per batch and side")
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=400)
    parser.add_argument("--max-length", type=int, default=64)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-train-samples", type=int)
    parser.add_argument("--valid-sentences", type=int, default=500)
    parser.add_argument("--max-test-samples", type=int)
    parser.add_argument("--average", type=int, default=5, help="epoch checkpoints averaged")
    parser.add_argument("--status-every", type=float, default=300.0, help="seconds between status lines")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        global RUNS
        RUNS = STUDY_CACHE / "depth-runs-quick"
        args.d_model, args.epochs, args.max_train_samples = 32, 2, 1000
        args.valid_sentences, args.max_test_samples, args.average = 40, 40, 2
        args.warmup_steps, args.status_every = 20, 30.0
    if args.worker:
        train_model(args.worker, args)
    elif args.report_only:
        report(args, [])
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
