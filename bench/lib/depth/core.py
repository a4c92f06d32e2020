"""The depth study's core: its settings and each row's recipe, where its runs and records live and how they are read
and written, and what an epoch costs.

Every other part of the study imports this module (bench/lib/depth/: pricing, summaries, study, pilot, report)
and it imports none of them but `rows`, so the study's parts depend on each other one way (the package's
docstring). The paths are module globals read at call time: a test points RUNS or RECORDS elsewhere with
monkeypatch.setattr(core, ...).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deep_nmt_hf.data.atomic import atomic_write

from ..common import RESULTS
from ..machine_speed import measured_cpu_s, reference_cpu_s
from .rows import MODELS, row_order

# outside the work tree, so that a study spans sittings on the same machine: epoch checkpoints and saved models
STUDY_CACHE = Path(os.environ.get("DEEP_NMT_BENCH_CACHE", Path.home() / ".cache" / "deep_nmt_bench"))
RUNS = STUDY_CACHE / "depth-annealed"
QUICK_RUNS = STUDY_CACHE / "depth-annealed-quick"
# in the work tree: each finished run's record (numbers only: histories, scores, per-sentence BLEU statistics),
# committed, so the report and the significance tests survive a new machine
RECORDS = RESULTS / "depth_multi30k"
QUICK_RECORDS = STUDY_CACHE / "depth-records-quick"  # --quick: smoke-test records stay out of the work tree
RECIPE_OPTIONS = ("optimizer", "adam_beta1", "adam_beta2", "adam_epsilon", "weight_decay", "max_grad_norm")
RECIPE_OPTIONS += ("label_smoothing", "num_beams", "length_penalty", "length_penalty_form")
RECIPE_OPTIONS += ("learning_rate", "warmup_steps")


# ------------------------------------------------------------------------------------------- files
def _write_json(path: Path, payload: Any) -> None:
    with atomic_write(path) as handle:
        handle.write(json.dumps(payload, indent=2, default=str) + "\n")


def _write_lines(path: Path, lines: list[str]) -> None:
    with atomic_write(path) as handle:
        handle.write("".join(line.replace("\n", " ") + "\n" for line in lines))


def _read_json(path: Path, default: Any = None) -> Any:
    return json.loads(path.read_text()) if path.exists() else default


def runs_root(args: argparse.Namespace) -> Path:
    """Where the runs (checkpoints, logs, saved models) live: RUNS, or QUICK_RUNS with `--quick`."""
    return QUICK_RUNS if args.quick else RUNS


def records_root(args: argparse.Namespace) -> Path:
    """Where the finished records live: RECORDS (in the work tree), or QUICK_RECORDS with `--quick`. A function
    of the arguments, not a global switched by main()."""
    return QUICK_RECORDS if args.quick else RECORDS


def run_dir(name: str, seed: int, args: argparse.Namespace) -> Path:
    """Where NAME's run with SEED keeps its checkpoints, logs and saved models (outside the work tree)."""
    return runs_root(args) / f"e{args.epochs}" / name / f"seed{seed}"


def record_path(name: str, seed: int, args: argparse.Namespace) -> Path:
    """NAME's finished record for SEED: in the work tree (committed), or under QUICK_RECORDS with `--quick`."""
    return records_root(args) / f"e{args.epochs}" / name / f"seed{seed}.json"


def weights_path(name: str, seed: int, args: argparse.Namespace) -> Path:
    """NAME's final (averaged) weights for SEED, float16, beside its record (committed: study_weights.py)."""
    return record_path(name, seed, args).with_suffix(".averaged.safetensors")


def run_history(name: str, seed: int, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The epochs NAME's run with SEED has finished so far (its epochs.json beside its checkpoints; [] if none)."""
    return _read_json(run_dir(name, seed, args) / "epochs.json", [])


def weights_facts_path(args: argparse.Namespace) -> Path:
    """The committed facts about the weights the records cannot show (`weights.json` beside the records): per
    budget, the finished runs whose averaged weights were lost with their machine ("lost", written by the study
    when it finds one: `find_lost_weights`) and those left out of the repository on purpose ("not_committed")."""
    return records_root(args) / "weights.json"


def _weights_facts(args: argparse.Namespace) -> dict[str, list[list[Any]]]:
    budget = _read_json(weights_facts_path(args), {}).get(f"e{args.epochs}", {})
    return {key: [list(run) for run in budget.get(key, [])] for key in ("lost", "not_committed")}


def weights_lost(name: str, seed: int, args: argparse.Namespace) -> bool:
    """Whether NAME's finished run with SEED is one whose averaged weights were lost (committed data: listed as
    "lost" in `weights_facts_path`, its record has test scores and no weights were committed since): the study re-trains it, last, with the same
    seed; its record's numbers stand until then (`finish` keeps them). Reads committed files only, so the report
    is the same on every machine."""
    record = _read_json(record_path(name, seed, args))
    if record is None or record.get("test") is None or weights_path(name, seed, args).exists():
        return False
    return [name, seed] in _weights_facts(args)["lost"]


def weights_left_out(name: str, seed: int, args: argparse.Namespace) -> bool:
    """Whether NAME's run with SEED is one whose weights are left out of the repository on purpose
    ("not_committed" in `weights_facts_path`): the study neither writes them beside the record nor re-trains it."""
    return [name, seed] in _weights_facts(args)["not_committed"]


def find_lost_weights(name: str, seed: int, args: argparse.Namespace) -> bool:
    """Whether NAME's run with SEED has test scores but no averaged weights, neither committed nor in this
    machine's run directory, nor left out on purpose (it ran on a machine not handed on, before the study kept
    weights); if so, record it as "lost" in `weights_facts_path` (the study calls this where it runs)."""
    record = _read_json(record_path(name, seed, args))
    if record is None or record.get("test") is None or weights_path(name, seed, args).exists():
        return False
    facts = _weights_facts(args)
    if (
        weights_left_out(name, seed, args)
        or (run_dir(name, seed, args) / "averaged" / "config.json").exists()
    ):
        return False
    if [name, seed] not in facts["lost"]:
        everything = _read_json(weights_facts_path(args), {})
        facts["lost"].append([name, seed])
        everything[f"e{args.epochs}"] = facts
        _write_json(weights_facts_path(args), everything)
    return True


def load_records(root: Path, epochs: int) -> dict[str, list[dict[str, Any]]]:
    """Every record of the `epochs` budget under `root` (e{epochs}/ROW/seed{S}.json), by row in MODELS order
    (rows no longer in MODELS last), each row's seeds in order."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path in sorted((root / f"e{epochs}").glob("*/seed*.json")):
        record = json.loads(path.read_text())
        found.setdefault(record["name"], []).append(record)
    return {name: sorted(found[name], key=lambda r: r["seed"]) for name in sorted(found, key=row_order)}


def budgets(root: Path) -> list[int]:
    """The epoch budgets that have records under `root`, ascending."""
    return sorted(int(p.name[1:]) for p in root.glob("e*") if p.is_dir() and p.name[1:].isdigit())


def _output_name(base: str, args: argparse.Namespace) -> str:
    return f"{base}.quick" if args.quick else base


# ------------------------------------------------------------------------------------------- settings
def settings(args: argparse.Namespace) -> dict[str, Any]:
    """The study's settings: every run of one budget (`--epochs`) has the same ones."""
    keys = ("epochs", "schedule", "warmup_scale", "patience", "d_model", "vocab_size", "max_tokens")
    keys += ("max_length", "max_train_samples", "valid_sentences", "max_test_samples", "average")
    return {key: getattr(args, key) for key in keys}


def _recipe(name: str, args: argparse.Namespace) -> tuple[dict[str, Any], dict[str, Any]]:
    """(training options, config fields) of the row's recipe with the row's overrides; the recipe's warmup
    scaled by `--warmup-scale` (the papers' warmups are for WMT-size runs of 100k+ updates)."""
    from deep_nmt_hf.science.recipes import recipe_config, recipe_options

    row = MODELS[name]
    options = {k: v for k, v in recipe_options(row.recipe).items() if k in RECIPE_OPTIONS}
    options |= row.options
    options["warmup_steps"] = round(options["warmup_steps"] * args.warmup_scale)
    return options, recipe_config(row.recipe)


# what a row trains with besides its architecture: the recipe's training options and these config fields; two
# rows that differ in any of them differ in more than a claim names (depth.decision.confounds)
TRAINING_OPTIONS = tuple(
    o for o in RECIPE_OPTIONS if o not in ("num_beams", "length_penalty", "length_penalty_form")
)
TRAINING_FIELDS = ("dropout", "attention_dropout", "activation_dropout", "share_encoder_decoder_embeddings")


def training_setting(name: str, warmup_scale: float = 0.1) -> dict[str, Any]:
    """What row NAME trains with besides its architecture, from its recipe and its row's overrides: the training
    options (optimizer, β's, ε, weight decay, clipping, label smoothing, learning rate, warmup × `warmup_scale`)
    and the config fields TRAINING_FIELDS (dropouts, embedding sharing). Decoding is not in it: a pair that
    decodes differently is rescored under both settings (report.decoded_alike_text)."""
    from deep_nmt_hf.science.recipes import recipe_config

    options, _ = _recipe(name, argparse.Namespace(warmup_scale=warmup_scale))
    row = MODELS[name]
    fields = {**recipe_config(row.recipe), **row.fields}
    return {**{k: options.get(k) for k in TRAINING_OPTIONS}, **{k: fields.get(k) for k in TRAINING_FIELDS}}


DECODE_OPTIONS = ("num_beams", "length_penalty", "length_penalty_form")  # what a row's recipe decodes with


def decode_setting(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """The beam and length penalty row NAME's recipe decodes test with (its record was scored with them)."""
    options, _ = _recipe(name, args)
    return {
        "num_beams": options["num_beams"],
        "length_penalty": float(options["length_penalty"]),
        "length_penalty_form": options.get("length_penalty_form") or "fairseq",
    }


def setting_tag(setting: dict[str, Any]) -> str:
    """A decode setting as a file-name tag: "fairseq-0.6-beam4"."""
    return f"{setting['length_penalty_form']}-{setting['length_penalty']:g}-beam{setting['num_beams']}"


def rescore_path(name: str, seed: int, setting: dict[str, Any], args: argparse.Namespace) -> Path:
    """Where NAME's run SEED rescored under SETTING is kept: committed beside the records (numbers only)."""
    return (
        records_root(args) / "rescored" / f"e{args.epochs}" / name / f"seed{seed}.{setting_tag(setting)}.json"
    )


# ------------------------------------------------------------------------------------------- costs
def epoch_cpu_s(history: Sequence[dict[str, Any]], reference: bool = True) -> list[float]:
    """CPU-s of each epoch of a run's history (training + validation decoding), the study's one cost measure: in
    the reference machine's seconds (machine_speed.reference_cpu_s), or as measured (`reference` False)."""
    measured = [e for e in history if e.get("train_cpu_s") is not None]
    return [reference_cpu_s(measured_cpu_s(e), e) if reference else measured_cpu_s(e) for e in measured]


def _cpu_s_per_epoch(history: Sequence[dict[str, Any]]) -> float:
    """As measured: a status line speaks of the machine the run trains on."""
    return statistics.fmean(epoch_cpu_s(history, reference=False))
