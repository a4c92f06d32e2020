"""Training and decoding speed per variant at the papers' shapes, and where a `deep-nmt train` step's host time goes
(issue #48 items 3 and 5). One command on CPU (the smoke run, ``--quick``) and on CUDA (the real measure).

Sections (``--sections``, default all):

- ``train``: per model (every variant at its paper shape, stock `MarianMTModel` 6-6 and a plain pre-LN
  `torch.nn.Transformer` of each depth, same width and vocabulary) and precision (fp32; bf16 and fp16 autocast
  over fp32 weights, fp16 with a GradScaler: what the Trainer's ``--bf16`` / ``--fp16`` do): the raw loop — the
  same token-budget batches (`TokenBudgetBatchSampler`, collated by the training collator, already on the
  device), forward + backward + clipping + the optimizer `deep-nmt train` builds — eager and ``torch.compile``d.
  Step time, target tokens/s, peak memory, FLOPs per step (`torch.utils.flop_counter.FlopCounterMode` on one
  step) and their share of the chip's dense bf16 peak (`PEAK_BF16`), the ratio to Marian 6-6 and to the
  `nn.Transformer` of the same depth.
- ``trainer``: the `deep-nmt train` path (`DeepNMTTrainer` with `training_arguments` / `training_callbacks` /
  `training_collator` exactly as `training.run` builds them) against the raw loop on the same batches: steady
  step time, target tokens/s, the first steps' times (start-up stall) and the ratio trainer / raw.
- ``generate``: beam-4 `generate` on 64 sources: sentences/s eager, and with a static cache + ``torch.compile``
  (a variant that refuses a static cache is recorded as refused).
- ``split``: the host work of a training step, old pipeline (before issue #48: exact-length padding, collation in
  the main process, a device sync per micro-batch for the tokens seen and the loss components, the parameter
  count walked every micro-batch) against the new one, side by side: sampler and collation ms per batch, distinct
  batch shapes in an epoch, device syncs per non-logging step by call site (a `TorchFunctionMode` counting
  ``.item()`` / ``float()`` / ``int()`` / ``bool()`` / ``.tolist()`` on tensors, `SyncCounter`), operators per
  step (torch.profiler), callback time and the Trainer's step time against the raw loop.

Every measured part runs in its own try/except (a failure is an error row) and the json is rewritten after every
row, so a short GPU session keeps what it measured; ``--budget-s`` skips (and records) what would not fit.
Timing: CUDA steps are timed between synchronisations over ``--steps`` steps after ``--warmup`` steps; CPU steps by
the wall clock (and process CPU time), on whatever the machine gives — see the result file's notes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

from bench.lib.common import RESULTS
from bench.lib.gpu.generate_phase import generate_rows
from bench.lib.gpu.models import MODELS, PRECISIONS, QUICK_MODELS, SECTIONS, STALL_PLANS, synthetic_corpus
from bench.lib.gpu.report import markdown, plot
from bench.lib.gpu.results import Results
from bench.lib.gpu.split_phase import split_section
from bench.lib.gpu.stalls import stall_rows
from bench.lib.gpu.train_phase import train_rows
from bench.lib.gpu.trainer_phase import trainer_rows


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    cuda = torch.cuda.is_available()
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: tiny shapes, 2 variants, a few steps"
    )
    parser.add_argument("--device", default="cuda" if cuda else "cpu")
    parser.add_argument("--variants", nargs="+", choices=list(MODELS), help="default: all (--quick: 2)")
    parser.add_argument(
        "--precisions", nargs="+", choices=PRECISIONS, help="default: fp32 bf16 fp16 (CPU: fp32 bf16)"
    )
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--steps", type=int, help="timed steps (default 10; --quick 2)")
    parser.add_argument("--warmup", type=int, help="untimed steps first (default 3; --quick 1)")
    parser.add_argument("--max-tokens", type=int, help="token budget per batch (default 8192; --quick 256)")
    parser.add_argument("--d-model", type=int, help="width (default 512; --quick 32); FFN 4x")
    parser.add_argument("--heads", type=int, help="attention heads (default 8; --quick 4)")
    parser.add_argument("--vocab", type=int, help="vocabulary (default 8000; --quick 256)")
    parser.add_argument(
        "--compile-variants",
        nargs="*",
        help="rows also measured compiled ('all'; default: all on CUDA, none on CPU)",
    )
    parser.add_argument(
        "--compile-modes",
        nargs="+",
        choices=("regions", "compiled"),
        default=["regions"],
        help="compiled rows: regions (each layer class compiled once, `deep-nmt train --torch-compile`) and / or "
        "compiled (the whole model, torch.compile(model): compile time grows with depth)",
    )
    parser.add_argument(
        "--trainer-variants", nargs="*", help="default: admin-18-6 (the issue's case) and base-6-6"
    )
    parser.add_argument("--stall-variant", default="admin-18-6", help="model of the stalls section")
    parser.add_argument(
        "--stall-plans",
        nargs="+",
        choices=STALL_PLANS,
        help="padding plans of the stalls section (default: exact pad8 buckets)",
    )
    parser.add_argument(
        "--stall-cudnn",
        nargs="+",
        choices=("on", "off"),
        help="stalls section: cuDNN SDPA on and / or off per plan (default: on off on CUDA, on on CPU)",
    )
    parser.add_argument(
        "--stall-epochs", type=int, default=2, help="stalls: epochs per side (the first untimed for tokens/s)"
    )
    parser.add_argument("--split-variant", help="model of the host-time split (default admin-18-6)")
    parser.add_argument(
        "--split-steps", type=int, help="trainer steps per side in the split (default 12; --quick 4)"
    )
    parser.add_argument(
        "--split-rounds", type=int, default=2, help="alternations of old / new / raw for step times"
    )
    parser.add_argument("--split-collate-batches", type=int, default=50)
    parser.add_argument("--logging-steps", type=int, default=50)
    parser.add_argument(
        "--dataloader-workers", type=int, help="new trainer path's collating workers (default: loader.py's)"
    )
    parser.add_argument(
        "--pad",
        default="auto",
        help="new pipeline's padding: auto (loader.py's: 8 and length buckets on CUDA, exact on CPU), buckets "
        "(8 and length buckets anywhere) or a multiple N (1: exact lengths)",
    )
    parser.add_argument(
        "--cudnn-sdp",
        choices=("on", "off"),
        default="on",
        help="off: torch.backends.cuda.enable_cudnn_sdp(False) before anything runs, so SDPA picks flash / "
        "memory-efficient kernels (the H200 run's suspect for bf16's per-shape cost: bench/results/gpu_h200)",
    )
    parser.add_argument("--generate-batch", type=int, default=64)
    parser.add_argument(
        "--generate-tokens", type=int, help="decoded tokens per sentence (default 32; --quick 4)"
    )
    parser.add_argument("--generate-repeats", type=int, default=2)
    parser.add_argument(
        "--generate-precisions",
        nargs="+",
        default=["fp32"],
        choices=("fp32", "bf16", "fp16", "int8"),
        help="generate rows beside fp32 eager: the model cast to bf16 / fp16, or int8 (publish/quantization.py: "
        "oneDNN on a CPU, torchao's dynamic int8 on CUDA)",
    )
    parser.add_argument("--no-references", action="store_true", help="skip the Marian / nn.Transformer rows")
    parser.add_argument(
        "--budget-s", type=float, help="skip (and record) parts that start after this many seconds"
    )
    parser.add_argument("--corpus", type=int, help="synthetic sentence pairs (default 30000; --quick 400)")
    parser.add_argument(
        "--out", help="result file stem (default bench/results/gpu_training_<device>[_quick])"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    defaults = dict(
        steps=2 if quick else 10, warmup=1 if quick else 3, max_tokens=256 if quick else 8192,
        d_model=32 if quick else 512, heads=4 if quick else 8, vocab=256 if quick else 8000,
        split_variant="admin-18-6", split_steps=4 if quick else 12, generate_tokens=4 if quick else 32,
        corpus=400 if quick else 30000,
    )  # fmt: skip
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    if args.variants is None:
        args.variants = list(QUICK_MODELS) if quick else [m for m in MODELS if m != "marian-6-6"]
    if args.precisions is None:
        args.precisions = ["fp32", "bf16"] if quick or args.device == "cpu" else list(PRECISIONS)
    if args.compile_variants is None:
        args.compile_variants = ["all"] if args.device.startswith("cuda") and not quick else []
    if args.stall_plans is None:
        args.stall_plans = list(STALL_PLANS)
    if args.stall_cudnn is None:
        args.stall_cudnn = ["on", "off"] if args.device.startswith("cuda") else ["on"]
    if args.trainer_variants is None:
        args.trainer_variants = ["admin-18-6"] if quick else ["admin-18-6", "base-6-6"]
    if args.pad not in ("auto", "buckets"):
        args.pad = int(args.pad) if int(args.pad) > 1 else None
    if quick:
        args.generate_batch = min(args.generate_batch, 8)
        args.generate_repeats = 1
        args.split_rounds = 1
        args.split_collate_batches = min(args.split_collate_batches, 10)
    return args


def apply_backend_settings(args: argparse.Namespace) -> None:
    """`--cudnn-sdp off`: SDPA may not pick cuDNN's attention (recorded with the settings)."""
    torch.backends.cuda.enable_cudnn_sdp(args.cudnn_sdp == "on")


def main(argv: list[str] | None = None) -> Path:
    args = parse(argv)
    device = torch.device(args.device)
    apply_backend_settings(args)
    stem = args.out or str(RESULTS / f"gpu_training_{device.type}{'_quick' if args.quick else ''}")
    path = Path(stem).with_suffix(".json")
    results = Results(path, args)
    corpus = synthetic_corpus(args.corpus, args.vocab)
    for section in args.sections:
        if section == "split":
            split_section(results, corpus, args, device)
        elif section == "trainer":
            trainer_rows(results, corpus, args, device)
        elif section == "train":
            train_rows(results, corpus, args, device)
        elif section == "generate":
            generate_rows(results, corpus, args, device)
        elif section == "stalls":
            stall_rows(results, corpus, args, device)
    results.write()
    path.with_suffix(".md").write_text(markdown(results.data))
    if not args.quick:
        plot(results.data, path.with_suffix(".png"))
    print(f"wrote {path}", flush=True)
    return path


if __name__ == "__main__":
    main()
