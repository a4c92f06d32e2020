"""What every `deep-nmt` command shares: the help formatter, data / generation flags, model loading,
score printing and logging setup."""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from .hub_access import DATASET_COMMANDS, _check_hub_model, _hub_cached, check_hub_reachable
from .model_checks import check_model_files, check_model_type
from .names import CHOICE_VALUES, variant_names

logger = logging.getLogger("deep_nmt_hf")

EXIT_ERROR = 2


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Shows defaults, except for flags whose default is None or a switch (their help says what happens)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or isinstance(action.default, bool):
            return action.help
        return super()._get_help_string(action)


def _variant_names() -> list[str]:
    return variant_names()


def _choice_help(field: str) -> str:
    values = ", ".join(CHOICE_VALUES.get(field, ())) or "see DeepNMTConfig"
    return f"config field {field}: one of {values} (default: the variant's)"


def _add_data_flags(parser: argparse.ArgumentParser, required: bool = True) -> None:
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument(
        "--data-dir", type=Path, help="directory of line-aligned {split}.{lang}[.gz] files (or {split}.jsonl)"
    )
    group.add_argument(
        "--data", type=Path, help='one JSON-lines file of {"translation": {src: ..., tgt: ...}} rows'
    )
    group.add_argument("--dataset", help="a Hugging Face Hub dataset name (needs the network)")


def _add_generation_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--num-beams", type=int, default=4, help="beam size of beam search (1 = greedy)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per generation batch")


def _data_source(args: argparse.Namespace) -> str | Path:
    if args.data_dir is not None:
        if not args.data_dir.is_dir():
            raise NotADirectoryError(f"--data-dir {args.data_dir}: no such directory")
        return args.data_dir
    if args.data is not None:
        if not args.data.is_file():
            raise FileNotFoundError(f"--data {args.data}: no such file")
        return args.data
    return args.dataset


def _print_scores(record: dict[str, Any], header: str) -> None:
    print(header)
    for name, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("ter", "TER")):
        print(f"{label:<5}= {record[name]:6.2f}  {record[name + '_signature']}")


def _load_model(model: str) -> tuple[Any, Any]:
    from transformers import AutoModelForSeq2SeqLM  # Auto classes: registered by the package

    _check_model_path(model, hub=True)
    if Path(model).expanduser().is_dir():
        check_model_type(Path(model).expanduser())
    try:  # trust_remote_code=False: never Transformers' question on stdin (a Hub model of another type fails)
        from ..model.tokenization_paired import load_folder_tokenizer  # two vocabularies: PairedTokenizerFast

        return (
            AutoModelForSeq2SeqLM.from_pretrained(model, trust_remote_code=False),
            load_folder_tokenizer(model, trust_remote_code=False),
        )
    except Exception as error:  # safetensors' SafetensorError is no OSError: one line naming the model
        if type(error).__name__ != "SafetensorError":
            raise
        raise ValueError(
            f"{model}: its weights cannot be read ({error}); save or copy the model again"
        ) from error


def precheck(args: argparse.Namespace) -> None:
    """Checks that need no heavy import, run before any: paths that must exist, the variant name, the model
    argument (a saved model directory with readable weights, or for `translate` a Hub id) and --threads."""
    for flag, is_ok, what in (
        ("data_dir", Path.is_dir, "no such directory"),
        ("data", Path.is_file, "no such file"),
    ):
        value = getattr(args, flag, None)
        if isinstance(value, Path) and not is_ok(value):
            raise FileNotFoundError(f"--{flag.replace('_', '-')} {value}: {what}")
    variant = getattr(args, "variant", None)
    if variant is not None and variant not in variant_names():
        raise ValueError(f"--variant {variant}: unknown; valid variants: {', '.join(variant_names())}")
    for flag in MODEL_ARGUMENTS:
        value = getattr(args, flag, None)
        if value is not None:
            _check_model_path(str(value), hub=getattr(args, "command", None) in HUB_MODEL_COMMANDS)
    command = getattr(args, "command", None)
    if command == "push" and not getattr(args, "dry_run", True):
        check_hub_reachable(
            f"push {args.repo_id}", "pass --dry-run to prepare the folder without the network"
        )
    dataset = getattr(args, "dataset", None)
    if command in DATASET_COMMANDS and dataset is not None and not Path(dataset).expanduser().exists():
        check_hub_reachable(
            f"--dataset {dataset}", "give --data-dir or --data to read local files", offline_ok=True
        )
    run_dir = getattr(args, "run_dir", None)  # average
    if run_dir is not None and not Path(run_dir).expanduser().is_dir():
        raise FileNotFoundError(
            _missing_directory(str(run_dir), "a run directory holding checkpoint-* directories", "directory")
        )
    if hasattr(args, "threads"):
        args.threads_requested = args.threads  # None unless --threads was given (the demo follows the load)
        args.threads = resolve_threads(args.threads)


MODEL_ARGUMENTS = ("model", "input", "model_dir")  # evaluate / translate / plot, fold / export, push


def check_saved_model_types(args: argparse.Namespace) -> None:
    """Every saved model directory a command names has a `model_type` this installation knows (once the package
    has registered its types): one line otherwise, before any `from_pretrained` could ask on standard input
    whether to run the directory's code (`model_checks.check_model_type`)."""
    for flag in MODEL_ARGUMENTS:
        value = getattr(args, flag, None)
        if value is not None and Path(value).expanduser().is_dir():
            check_model_type(Path(value).expanduser())


# commands whose model argument may also be a Hugging Face Hub id (the others write next to it or need its files)
HUB_MODEL_COMMANDS = ("translate",)
SAVED_MODEL = "a saved model directory: config.json and weights, as deep-nmt train / demo write them"
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")


def _looks_like_path(model: str) -> bool:
    """./x, ../x, /x, ~/x, x/ (a trailing separator), or a/b whose first component exists here."""
    if model.startswith(("./", "../", "/", "~", "." + os.sep, ".." + os.sep)) or model.endswith(
        ("/", os.sep)
    ):
        return True
    parts = Path(model).parts
    return len(parts) > 1 and Path(parts[0]).exists()


def _missing_directory(model: str, expected: str = "", what: str = "model directory") -> str:
    message = f"{model}: no such {what}" + (f" (expected {expected})" if expected else "")
    hint = Path("out") / model
    if not Path(model).is_absolute() and hint.is_dir():
        message += f"; did you mean {hint}?"
    return message


def _check_model_path(model: str, hub: bool = False) -> None:
    """A model argument, checked before anything heavy is imported: an existing directory must hold config.json
    and readable weights; anything else fails at once with one line (ValueError / FileNotFoundError), except,
    with `hub`, an owner/name Hub id that is in the local cache or that the Hub answers for (no retries)."""
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{model}: not a saved model directory (no config.json)")
        check_model_files(path)  # its JSON files parse, its weights are there
        check_weights(path)
        return
    if path.exists():
        raise NotADirectoryError(f"{model}: is a file; expected {SAVED_MODEL}")
    if _looks_like_path(model) or not hub:
        raise FileNotFoundError(_missing_directory(model, SAVED_MODEL))
    if _HUB_ID.match(model):
        _check_hub_model(model)
        return
    if _hub_cached(model):  # a legacy bare Hub name already downloaded
        return
    message = f"{model}: not a local directory, and not a Hub id (owner/name)"
    hint = Path("out") / model
    if hint.is_dir():
        message += f"; did you mean {hint}?"
    raise FileNotFoundError(message)


def check_weights(model_dir: Path) -> None:
    """Every *.safetensors file of `model_dir` is complete: its header parses and the tensors it announces fit
    in the file (an empty, truncated or overwritten file fails here with one line naming it, before torch)."""
    for weights in sorted(model_dir.glob("*.safetensors")):
        size = weights.stat().st_size
        problem = None
        try:
            with weights.open("rb") as handle:
                head = handle.read(8)
                length = int.from_bytes(head, "little") if len(head) == 8 else -1
                if length < 0 or length > size - 8:
                    problem = "empty" if size == 0 else "truncated (no complete header)"
                else:
                    header = json.loads(handle.read(length))
                    end = max(
                        (int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"),
                        default=0,
                    )
                    if 8 + length + end > size:
                        problem = f"truncated ({size} bytes; its header announces {8 + length + end})"
        except (ValueError, KeyError, TypeError, IndexError, AttributeError):
            problem = "not a safetensors file (unreadable header)"
        if problem is not None:
            raise ValueError(f"{weights}: corrupt weights, {problem}; save or copy the model again")


# torch threads: --threads, else $OMP_NUM_THREADS, else a count that does not collapse on shared cores
THREADS_CAP = 4
THREADS_HELP = (
    "CPU threads for torch (default: $OMP_NUM_THREADS if set, else the free cores: the usable "
    f"cores (affinity, cgroup quota) minus the other jobs running, at least 1, at most {THREADS_CAP})"
)


def add_threads_flag(parser: argparse.ArgumentParser) -> None:
    """--threads on `parser`, or on every leaf parser below it (`plot dlcl`, `data to-json`)."""
    children = [
        choice
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for choice in dict.fromkeys(action.choices.values())
    ]
    if not children:
        parser.add_argument("--threads", type=int, metavar="N", help=THREADS_HELP)
    for child in children:
        add_threads_flag(child)


def usable_cores() -> int:
    """CPUs this process may run on: its affinity mask, bounded by a cgroup CPU quota (containers)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    for quota_file, period_file in (
        ("/sys/fs/cgroup/cpu.max", None),
        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "/sys/fs/cgroup/cpu/cpu.cfs_period_us"),
    ):
        try:
            fields = Path(quota_file).read_text().split()
            quota = fields[0]
            period = fields[1] if period_file is None else Path(period_file).read_text().strip()
            if quota not in ("max", "-1") and int(period) > 0:
                cores = min(cores, max(1, -(-int(quota) // int(period))))
            break
        except (OSError, ValueError, IndexError):
            continue
    return max(1, cores)


def other_jobs() -> float:
    """Runnable work of other processes: the smaller of the 1-minute load average and the tasks running now
    (less this one; the larger of three looks 10 ms apart), scaled to this process's share of the machine's
    CPUs. 0 where neither is available."""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0
    running = []
    for attempt in range(3):
        try:
            running.append(int(Path("/proc/loadavg").read_text().split()[3].split("/")[0]) - 1)
        except (OSError, ValueError, IndexError):
            break
        if attempt < 2:
            time.sleep(0.01)
    busy = min(load, max(running)) if running else load
    return max(0.0, busy) * usable_cores() / max(os.cpu_count() or 1, usable_cores())


def default_threads() -> int:
    """Free cores, 1 to THREADS_CAP. torch's own default (every core) collapses when another job shares them:
    OpenMP threads wait for each other at every operation, and one descheduled thread stalls the rest (the
    demo went from 5 minutes to an hour, the test suite's ctranslate2 tests from 5 s to 134-356 s). The models
    run here gain little beyond 4 threads."""
    return max(1, min(THREADS_CAP, usable_cores() - round(other_jobs())))


def resolve_threads(requested: int | None) -> int:
    """--threads, else $OMP_NUM_THREADS, else `default_threads()`; ValueError naming a bad value."""
    if requested is None:
        raw = os.environ.get("OMP_NUM_THREADS", "").strip()
        if not raw:
            return default_threads()
        try:
            requested = int(raw)
        except ValueError:
            raise ValueError(f"OMP_NUM_THREADS={raw!r}: expected a positive integer") from None
        if requested < 1:
            raise ValueError(f"OMP_NUM_THREADS={raw!r}: expected a positive integer")
    if requested < 1:
        raise ValueError(f"--threads {requested}: must be at least 1")
    return requested


def apply_threads(args: argparse.Namespace) -> int:
    """Set torch's intra-op threads from --threads / $OMP_NUM_THREADS / `default_threads()` (the command's one
    place, before any torch work); stored in `args.threads` for anything else that runs threads. Returns it."""
    import torch

    threads = resolve_threads(getattr(args, "threads", None))
    torch.set_num_threads(threads)
    args.threads = threads
    return threads


def _setup_logging(quiet: bool = False) -> None:
    from transformers.utils import logging as hf_logging

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    logger.setLevel(logging.INFO)
    hf_logging.set_verbosity_warning()
    # Transformers' "Loading weights" / "Writing model shards" bars flash at every tiny load and checkpoint;
    # the long work keeps its bars (training steps, translation batches, datasets maps, Hub transfers).
    from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars

    hub_bars = not are_progress_bars_disabled()
    hf_logging.disable_progress_bar()  # also turns off the Hub's bars: restored below
    if hub_bars:
        enable_progress_bars()
    if quiet:
        os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
