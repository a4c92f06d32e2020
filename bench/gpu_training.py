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
import contextlib
import dataclasses
import inspect
import json
import math
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from bench.lib.common import RESULTS, markdown_table, provenance

# dense bf16 tensor-core peak (no sparsity), TFLOP/s, by a substring of torch.cuda.get_device_name()
PEAK_BF16 = {
    "H200": (989.0, "NVIDIA H200 datasheet (SXM): 1979 TFLOP/s bf16 with sparsity, 989 dense"),
    "H100 PCIe": (756.0, "NVIDIA H100 datasheet (PCIe): 1513 with sparsity, 756 dense"),
    "H100": (989.0, "NVIDIA H100 datasheet (SXM): 1979 TFLOP/s bf16 with sparsity, 989 dense"),
    "A100": (312.0, "NVIDIA A100 datasheet: 312 TFLOP/s bf16 dense"),
    "L40S": (362.0, "NVIDIA L40S datasheet: 362 TFLOP/s bf16 dense"),
}

# name -> (variant or "marian", encoder layers, decoder layers, extra config fields); paper shapes (PRESETS)
MODELS: dict[str, tuple[str, int, int, dict[str, Any]]] = {
    "marian-6-6": ("marian", 6, 6, {}),
    "base-6-6": ("base", 6, 6, {}),
    "admin-18-6": ("admin", 18, 6, {}),
    "admin-36-6": ("admin", 36, 6, {}),
    "admin-60-12": ("admin", 60, 12, {}),
    "dlcl-30-6": ("dlcl", 30, 6, {}),
    "matt-12-12": ("dsinit_matt", 12, 12, {}),
    "deep-decoder-6-12": ("deep_decoder", 6, 12, {}),
    "deep-decoder-15-15": ("deep_decoder", 15, 15, {}),
    "shared-8x5-4x2": ("shared_layers", 8, 4, {"encoder_layer_repeats": 5, "decoder_layer_repeats": 2}),
}
QUICK_MODELS = ("base-6-6", "admin-18-6")
MAX_POSITIONS = 256  # the benched models' max_position_embeddings: loader.py's buckets reach it
PRECISIONS = ("fp32", "bf16", "fp16")
SECTIONS = ("split", "trainer", "train", "generate", "stalls")
STALL_PLANS = ("exact", "pad8", "buckets")
ROW_FIELDS = {
    "train": ("model", "precision", "mode", "status", "step_ms", "target_tokens_per_s", "peak_memory_mib"),
    "trainer": ("model", "precision", "status", "trainer_step_ms", "raw_step_ms", "trainer_over_raw"),
    "generate": ("model", "mode", "status", "sentences_per_s"),
    "stalls": ("model", "precision", "plan", "cudnn_sdp", "status", "trainer_over_raw_tokens_per_s"),
}


# ---------------------------------------------------------------------------------------------- host syncs


class SyncCounter(TorchFunctionMode):
    """Counts the calls that read a tensor's value on the host (a device sync on CUDA): ``.item()``,
    ``float()`` / ``int()`` / ``bool()`` of a tensor, ``.tolist()``; each under `label` (set it per step) and its
    call site (the first frame outside torch). Reads inside ``torch/optim`` (the optimizers' step counters live
    on the CPU unless capturable) and ``torch/utils/data`` (the loader's CPU tensors) are not device syncs and are
    not counted."""

    READS = {"item", "__float__", "__int__", "__bool__", "tolist", "__index__"}
    SKIP = (f"torch{os.sep}optim{os.sep}", f"torch{os.sep}utils{os.sep}data{os.sep}")

    def __init__(self) -> None:
        super().__init__()
        self.label: Any = None
        self.calls: list[tuple[Any, str, str]] = []

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = getattr(func, "__name__", "")
        if name in self.READS:
            site = self._site()
            if site is not None:
                self.calls.append((self.label, name, site))
        return func(*args, **(kwargs or {}))

    def _site(self) -> str | None:
        torch_dir = os.path.dirname(torch.__file__) + os.sep
        frame = inspect.currentframe()
        frame = frame.f_back.f_back if frame is not None and frame.f_back is not None else None
        while frame is not None:
            path = frame.f_code.co_filename
            if path.startswith(torch_dir):
                if any(part in path for part in self.SKIP):
                    return None
                frame = frame.f_back
                continue
            parts = Path(path).parts
            short = "/".join(parts[-2:])
            return f"{short}:{frame.f_lineno}"
        return None

    def per_label(self) -> dict[Any, int]:
        return dict(Counter(label for label, _, _ in self.calls))

    def sites(self, labels: Any = None) -> dict[str, int]:
        keep = None if labels is None else set(labels)
        return dict(Counter(site for label, _, site in self.calls if keep is None or label in keep))


# ------------------------------------------------------------------------------------------------- data


def synthetic_corpus(count: int, vocab: int, seed: int = 0, max_length: int = 64) -> dict[str, list]:
    """Token ids with Multi30k-like lengths (BPE 8000: source ~13, target ~15 tokens with EOS, sd ~5), seeded.
    Ids 0-3 are special (pad 0, eos 1, unk 2, spare 3), as the joint BPE tokenizer lays them out."""
    generator = torch.Generator().manual_seed(seed)
    src = (torch.randn(count, generator=generator) * 5 + 13).round().clamp(3, max_length).long()
    tgt = (
        (src.float() * 1.1 + torch.randn(count, generator=generator) * 2).round().clamp(3, max_length).long()
    )
    ids = torch.randint(4, vocab, (count, 2 * max_length), generator=generator)
    rows = {"input_ids": [], "attention_mask": [], "labels": []}
    for index in range(count):
        s, t = int(src[index]), int(tgt[index])
        rows["input_ids"].append(ids[index, : s - 1].tolist() + [1])
        rows["attention_mask"].append([1] * s)
        rows["labels"].append(ids[index, max_length : max_length + t - 1].tolist() + [1])
    return rows


def word_tokenizer(vocab: int) -> Any:
    """A fast tokenizer over ids only (`tokenizer.pad` is all the collator asks): pad 0, eos 1, unk 2."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from transformers import PreTrainedTokenizerFast

    words = {"<pad>": 0, "</s>": 1, "<unk>": 2, "<s>": 3} | {f"w{i}": i for i in range(4, vocab)}
    backend = Tokenizer(WordLevel(words, unk_token="<unk>"))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", eos_token="</s>", unk_token="<unk>"
    )


# ------------------------------------------------------------------------------------------------ models


class PreLNTransformer(torch.nn.Module):
    """The reference: `torch.nn.Transformer` (pre-LN, `norm_first=True`), sinusoid-free learned positions, one
    shared embedding tied to the output projection, token cross-entropy with label smoothing 0.1."""

    def __init__(self, vocab: int, d_model: int, heads: int, ffn: int, enc: int, dec: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, d_model, padding_idx=0)
        self.positions = torch.nn.Embedding(512, d_model)
        self.core = torch.nn.Transformer(
            d_model, heads, enc, dec, ffn, dropout=0.1, batch_first=True, norm_first=True
        )
        self.scale = math.sqrt(d_model)

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(ids.shape[1], device=ids.device)
        return self.embed(ids) * self.scale + self.positions(positions)

    def forward(
        self, input_ids: Any, attention_mask: Any, labels: Any, decoder_input_ids: Any, **_: Any
    ) -> Any:
        length = decoder_input_ids.shape[1]
        causal = torch.nn.Transformer.generate_square_subsequent_mask(length, device=input_ids.device)
        hidden = self.core(
            self._embed(input_ids),
            self._embed(decoder_input_ids),
            tgt_mask=causal,
            src_key_padding_mask=attention_mask.eq(0),
            memory_key_padding_mask=attention_mask.eq(0),
            tgt_is_causal=True,
        )
        logits = hidden @ self.embed.weight.t()
        loss = torch.nn.functional.cross_entropy(
            logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100, label_smoothing=0.1
        )
        return {"loss": loss, "logits": logits}


def width(args: argparse.Namespace) -> dict[str, int]:
    return {"d_model": args.d_model, "ffn": 4 * args.d_model, "heads": args.heads, "vocab": args.vocab}


def depths(name: str, args: argparse.Namespace) -> tuple[int, int, dict[str, Any]]:
    if name.startswith("torch-pre-ln-"):
        enc, dec = (int(x) for x in name.rsplit("-", 2)[-2:])
        return enc, dec, {}
    _, enc, dec, extra = MODELS[name]
    if args.quick:  # tiny: 2 encoder / 1 decoder layer(s), loops 2
        enc, dec = 2, 1
        extra = {k: 2 for k in extra}
    return enc, dec, extra


def applied_depth(name: str, args: argparse.Namespace) -> tuple[int, int]:
    """Layer applications per side (shared layers: unique layers × loops): the nn.Transformer reference's depth."""
    enc, dec, extra = depths(name, args)
    return enc * extra.get("encoder_layer_repeats", 1), dec * extra.get("decoder_layer_repeats", 1)


def build_model(name: str, args: argparse.Namespace) -> torch.nn.Module:
    w = width(args)
    enc, dec, extra = depths(name, args)
    torch.manual_seed(0)
    if name.startswith("torch-pre-ln-"):
        return PreLNTransformer(w["vocab"], w["d_model"], w["heads"], w["ffn"], enc, dec)
    variant = MODELS[name][0]
    shape = dict(
        vocab_size=w["vocab"], d_model=w["d_model"], encoder_layers=enc, decoder_layers=dec,
        encoder_attention_heads=w["heads"], decoder_attention_heads=w["heads"], encoder_ffn_dim=w["ffn"],
        decoder_ffn_dim=w["ffn"], max_position_embeddings=MAX_POSITIONS, pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0,
    )  # fmt: skip
    if variant == "marian":
        from transformers import MarianConfig, MarianMTModel

        return MarianMTModel(MarianConfig(**shape, forced_eos_token_id=1))
    from deep_nmt_hf.training import resolve_variant

    config_class, model_class = resolve_variant(variant)
    return model_class(config_class(**shape, unk_token_id=2, label_smoothing=0.1, **extra))


# ------------------------------------------------------------------------------------------------ steps


def autocast(device: torch.device, precision: str) -> Any:
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16" else torch.float16)


def raw_stepper(
    model: torch.nn.Module, device: torch.device, precision: str
) -> Callable[[dict], torch.Tensor]:
    """forward + backward + clip 1.0 + the optimizer `deep-nmt train` builds (Adam, lr 5e-4, β 0.9/0.98)."""
    from deep_nmt_hf.training.optimizers import optimizer_cls_and_kwargs

    cls, kwargs = optimizer_cls_and_kwargs("adam", 5e-4)
    parameters = [p for p in model.parameters() if p.requires_grad]
    optimizer = cls(parameters, **kwargs)
    scaler = torch.amp.GradScaler(device.type) if precision == "fp16" else None

    def step(batch: dict) -> torch.Tensor:
        inputs = {k: v for k, v in batch.items() if k != "_target_tokens"}
        with autocast(device, precision):
            out = model(**inputs)
            loss = out["loss"]
        if scaler is None:
            loss.backward()
        else:
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(parameters, 1.0)
        if scaler is None:
            optimizer.step()
        else:
            scaler.step(optimizer)
            scaler.update()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_steps(
    step: Callable[[dict], Any], batches: list[dict], warmup: int, steps: int, device: Any
) -> dict:
    """Warm up, then run `steps` steps between two synchronisations: mean ms per step, target tokens/s."""
    for index in range(warmup):
        step(batches[index % len(batches)])
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    tokens = 0
    wall, cpu = time.perf_counter(), time.process_time()
    for index in range(steps):
        batch = batches[(warmup + index) % len(batches)]
        step(batch)
        tokens += int(batch["_target_tokens"])
    sync(device)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None
    return {
        "step_ms": 1000 * wall / steps,
        "cpu_ms_per_step": 1000 * cpu / steps,
        "target_tokens_per_s": tokens / wall,
        "peak_memory_mib": peak,
    }


def bench_pad(args: argparse.Namespace, device: torch.device) -> int:
    """The new pipeline's padding multiple on `device` (1: exact lengths)."""
    if args.pad == "auto":
        return 8 if device.type == "cuda" else 1
    if args.pad == "buckets":
        return 8
    return args.pad or 1


def bench_buckets(args: argparse.Namespace, device: torch.device) -> tuple[int, ...] | None:
    """The new pipeline's length buckets on `device` (loader.bucket_lengths: CUDA only; ``--pad buckets``: any)."""
    from deep_nmt_hf.data.batching import length_buckets

    if args.pad == "buckets" or (args.pad == "auto" and device.type == "cuda"):
        return length_buckets(MAX_POSITIONS)
    return None


def device_batches(
    corpus: dict, args: argparse.Namespace, device: torch.device, count: int | None, pad: int | None = None,
    buckets: tuple[int, ...] | None | str = "plan",
) -> list:  # fmt: skip
    """`count` token-budget batches (None: a whole epoch) as the training pipeline makes them (sampler +
    collator), on the device; each carries its target-token count under ``_target_tokens`` (stripped before the
    model sees it). `pad` / `buckets` default to the run's plan (`bench_pad`, `bench_buckets`)."""
    from deep_nmt_hf.data.batching import TokenBudgetBatchSampler
    from deep_nmt_hf.training.loader import training_collator

    if buckets == "plan":
        buckets = bench_buckets(args, device) if pad is None else None
    pad = bench_pad(args, device) if pad is None else pad
    tokenizer = word_tokenizer(args.vocab)
    model = build_model("base-6-6", argparse.Namespace(**{**vars(args), "quick": True}))
    collator = training_collator(
        tokenizer, model, pad_to_multiple_of=pad if pad > 1 else None, buckets=buckets
    )
    lengths = [len(x) for x in corpus["input_ids"]], [len(x) for x in corpus["labels"]]
    sampler = TokenBudgetBatchSampler(
        *lengths, max_tokens=args.max_tokens, seed=1, pad_to_multiple_of=pad, length_buckets=buckets
    )
    batches = []
    for indices in sampler:
        features = [{k: corpus[k][i] for k in ("input_ids", "attention_mask", "labels")} for i in indices]
        batch = {k: v.to(device) for k, v in collator(features).items()}
        batch["_target_tokens"] = int(batch["labels"].ne(-100).sum())
        batches.append(batch)
        if count is not None and len(batches) == count:
            break
    return batches


def step_flops(model: torch.nn.Module, batch: dict) -> float | None:
    from torch.utils.flop_counter import FlopCounterMode

    inputs = {k: v for k, v in batch.items() if k != "_target_tokens"}
    counter = FlopCounterMode(display=False)
    with counter:
        model(**inputs)["loss"].backward()
    model.zero_grad(set_to_none=True)
    return float(counter.get_total_flops())


def peak_rate(device: torch.device) -> tuple[float | None, str]:
    if device.type != "cuda":
        return None, "no peak table for CPUs"
    name = torch.cuda.get_device_name(device)
    for key, (tflops, source) in PEAK_BF16.items():
        if key in name:
            return tflops * 1e12, source
    return None, f"{name} is not in PEAK_BF16"


# ------------------------------------------------------------------------------------------------ results


class Results:
    """The json written after every row (a short GPU session keeps what it measured) and the markdown at the end."""

    def __init__(self, path: Path, args: argparse.Namespace) -> None:
        self.path, self.args = path, args
        self.started = time.monotonic()
        self.data: dict[str, Any] = {
            "provenance": provenance(),
            "device": device_info(torch.device(args.device)),
            "settings": {k: v for k, v in vars(args).items() if k != "out"},
            "train": [],
            "trainer": [],
            "generate": [],
            "split": {},
            "stalls": [],
            "notes": NOTES,
        }
        self.write()

    def over_budget(self) -> bool:
        return self.args.budget_s is not None and time.monotonic() - self.started > self.args.budget_s

    def add(self, section: str, row: dict, fn: Callable[[], dict] | None) -> dict:
        """Measure one row (`fn`'s fields merged in), recording an error or a budget skip instead of raising."""
        for field in ROW_FIELDS.get(section, ()):
            row.setdefault(field, None)
        if fn is not None and self.over_budget():
            row["status"] = f"skipped: over the --budget-s {self.args.budget_s} s"
        elif fn is not None:
            started = time.perf_counter()
            try:
                row.update(fn())
                row["status"] = row.get("status") or "ok"
            except Exception as error:  # noqa: BLE001 - one failure is one error row
                row["status"] = f"error: {type(error).__name__}: {str(error)[:300]}"
            row["seconds"] = round(time.perf_counter() - started, 2)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        self.data[section].append(row)
        self.write()
        print(
            json.dumps({section: {k: v for k, v in row.items() if not isinstance(v, (list, dict))}}),
            flush=True,
        )
        return row

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(self.data, indent=2, default=str) + "\n")


def device_info(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {"type": device.type}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info |= {
            "name": props.name,
            "memory_gib": round(props.total_memory / 2**30, 1),
            "cuda": torch.version.cuda,
        }
    info["peak_bf16_flops"], info["peak_source"] = peak_rate(device)
    return info


NOTES = [
    "step_ms: mean over --steps steps between two device synchronisations, after --warmup steps; on CPU the wall "
    "clock on a machine that may be shared (cpu_ms_per_step: process CPU time, less disturbed).",
    "target_tokens_per_s: non-padding target tokens of the measured batches / wall time.",
    "flops_per_step: torch.utils.flop_counter.FlopCounterMode over one forward + backward of the first batch "
    "(matmuls and attention; the optimizer and elementwise work are not counted); share_of_bf16_peak divides "
    "flops_per_step / step time by the chip's dense bf16 peak (PEAK_BF16, source in device.peak_source), also "
    "for the fp32 rows.",
    "raw loop: batches pre-collated on the device; the trainer section runs DeepNMTTrainer over the same "
    "token-budget batches (its own loader and collator), so trainer_over_raw includes the whole input pipeline.",
    "split: 'old' reproduces the pipeline before issue #48 in this run (LegacyTrainer, exact-length padding, "
    "budget on exact lengths); 'new' is the code as committed.",
]


# ------------------------------------------------------------------------------------------------ sections


def train_rows(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    batches = device_batches(corpus, args, device, args.warmup + args.steps)
    peak, _ = peak_rate(device)
    names = list(args.variants)
    references = ["marian-6-6"] if "marian-6-6" not in names and not args.no_references else []
    depth_refs = (
        []
        if args.no_references
        else sorted({"torch-pre-ln-{}-{}".format(*applied_depth(n, args)) for n in names})
    )
    base_times: dict[tuple[str, str], float] = {}
    for name in references + names + depth_refs:
        for precision in args.precisions:
            modes = ["eager"] + (
                list(args.compile_modes)
                if name in args.compile_variants or "all" in args.compile_variants
                else []
            )
            for mode in modes:
                row = {
                    "model": name,
                    "precision": precision,
                    "mode": mode,
                    "layers": list(applied_depth(name, args)),
                }

                def measure(name: str = name, precision: str = precision, mode: str = mode) -> dict:
                    if mode != "eager":
                        torch._dynamo.reset()  # a cold compile: no graph of an earlier row reused
                    model = build_model(name, args).to(device).train()
                    parameters = sum(p.numel() for p in model.parameters())
                    flops = (
                        step_flops(model, batches[0])
                        if precision == "fp32" or device.type == "cuda"
                        else None
                    )
                    callable_model = model
                    if mode == "compiled":  # the whole model in one graph (compile time grows with depth)
                        callable_model = torch.compile(model)
                    elif mode == "regions":  # `deep-nmt train --torch-compile` (training/compilation.py)
                        from deep_nmt_hf.training.compilation import compile_regions

                        compile_regions(model)
                    step = raw_stepper(callable_model, device, precision)
                    started = time.perf_counter()
                    step(batches[0])
                    sync(device)
                    first = time.perf_counter() - started
                    # compiled: every batch once before timing (each input form compiles once: mask or none)
                    warmup = args.warmup if mode == "eager" else len(batches)
                    out = time_steps(step, batches, warmup, args.steps, device)
                    out |= {
                        "parameters": parameters,
                        "first_step_s": round(first, 3),
                        "flops_per_step": flops,
                    }
                    if flops and peak:
                        out["share_of_bf16_peak"] = flops / (out["step_ms"] / 1000) / peak
                    return out

                done = results.add("train", row, measure)
                if done.get("step_ms"):
                    base_times[(name, precision, mode)] = done["step_ms"]
                    marian = base_times.get(("marian-6-6", precision, mode))
                    ref = base_times.get(
                        ("torch-pre-ln-{}-{}".format(*applied_depth(name, args)), precision, mode)
                    )
                    done["over_marian_6_6"] = done["step_ms"] / marian if marian else None
                    done["over_nn_transformer"] = done["step_ms"] / ref if ref else None
    # the nn.Transformer references run last: fill the ratios of the rows measured before them
    for row in results.data["train"]:
        if row.get("step_ms") and not row.get("over_nn_transformer"):
            enc, dec = row["layers"]
            ref = base_times.get((f"torch-pre-ln-{enc}-{dec}", row["precision"], row["mode"]))
            row["over_nn_transformer"] = row["step_ms"] / ref if ref else None
    results.write()


class TimingCallback:
    """Wall time at every optimizer step's end: one device sync after the warm-up steps and one after the last step,
    none between them. The last step's end is taken before the Trainer's end-of-training checkpoint, which is not a
    step's cost (the first GPU run counted it, and read 3× the raw loop)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from transformers import TrainerCallback

        class _Timing(TrainerCallback):
            def __init__(
                self, warmup: int, device: torch.device, clock: Callable[[], float] = time.perf_counter
            ) -> None:
                self.warmup, self.device, self.clock = warmup, device, clock
                self.begin = None
                self.ends: list[float] = []

            def on_train_begin(self, *a: Any, **k: Any) -> None:
                self.begin = self.clock()

            def on_step_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
                if state.global_step in (self.warmup, state.max_steps):
                    sync(self.device)
                self.ends.append(self.clock())

        return _Timing(*args, **kwargs)


def legacy_trainer_class() -> type:
    """DeepNMTTrainer as it was before issue #48: a device sync per micro-batch for the tokens seen (the
    Trainer's ``.item()``) and for each loss component (``float``), and the parameter count walked per
    micro-batch (the Trainer's `floating_point_ops`)."""
    from transformers import Trainer

    from deep_nmt_hf.training import DeepNMTTrainer
    from deep_nmt_hf.training.trainer import LOSS_COMPONENTS

    class LegacyTrainer(DeepNMTTrainer):
        def _track_num_input_tokens(self, inputs: dict) -> None:
            Trainer._track_num_input_tokens(self, inputs)

        def floating_point_ops(self, inputs: dict) -> int:
            return Trainer.floating_point_ops(self, inputs)

        def compute_loss(
            self, model: Any, inputs: dict, return_outputs: bool = False, num_items_in_batch=None
        ):
            loss, outputs = super().compute_loss(model, inputs, True, num_items_in_batch)
            if model.training and hasattr(outputs, "get"):
                for name in LOSS_COMPONENTS:
                    value = outputs.get(name)
                    if value is not None:
                        float(value.detach())  # the old per-micro-batch read
            return (loss, outputs) if return_outputs else loss

    return LegacyTrainer


def make_trainer(
    name: str, corpus: dict, args: argparse.Namespace, device: torch.device, precision: str, steps: int,
    staging: Path, old: bool = False, callbacks: list | None = None,
) -> Any:  # fmt: skip
    """A DeepNMTTrainer as `training.run` builds it (arguments, callbacks, collator, optimizer) over `corpus`;
    `old` builds the pre-#48 pipeline (LegacyTrainer, exact-length padding, no workers)."""
    import datasets

    from deep_nmt_hf.training import DeepNMTTrainer, TrainingOptions
    from deep_nmt_hf.training.arguments import training_arguments, training_callbacks
    from deep_nmt_hf.training.loader import training_collator
    from deep_nmt_hf.training.optimizers import optimizer_cls_and_kwargs

    options = TrainingOptions(
        output_dir=str(staging), data_source=str(staging), src_lang="en", tgt_lang="de", max_steps=steps,
        warmup_steps=4000, logging_steps=args.logging_steps, save_steps=10**6, disable_tqdm=True,
        max_tokens=args.max_tokens, seed=1,
    )  # fmt: skip
    if old:
        options.dataloader_workers = 0
    elif args.dataloader_workers is not None:
        options.dataloader_workers = args.dataloader_workers
    if hasattr(options, "precision"):  # the --precision option (another part of issue #48)
        options.precision = precision
    training_args = training_arguments(options, staging, False)
    if precision != "fp32" and not getattr(training_args, precision, False):
        training_args = dataclasses.replace(training_args, bf16=precision == "bf16", fp16=precision == "fp16")
    model = build_model(name, args)
    config = getattr(model, "config", None)
    _, guard_callbacks = training_callbacks(options, config, training_args)
    tokenizer = word_tokenizer(args.vocab)
    new_pad = bench_pad(args, device) if bench_pad(args, device) > 1 else None
    buckets = None if old else bench_buckets(args, device)
    trainer_class = legacy_trainer_class() if old else DeepNMTTrainer
    return trainer_class(
        model=model,
        args=training_args,
        train_dataset=datasets.Dataset.from_dict(corpus),
        processing_class=tokenizer,
        data_collator=training_collator(
            tokenizer, model, pad_to_multiple_of=None if old else new_pad, buckets=buckets
        ),
        callbacks=[*guard_callbacks, *(callbacks or [])],
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs("adam", 5e-4),
        max_tokens=args.max_tokens,
    )


def timed_trainer_steps(
    name: str, corpus: dict, args: argparse.Namespace, device: torch.device, precision: str,
    callbacks: list | None = None, clock: Callable[[], float] = time.perf_counter,
) -> tuple[float, list[float]]:  # fmt: skip
    """`deep-nmt train`'s steady seconds per step (the steps after the warm-up, up to the last step's end: the
    end-of-training checkpoint is left out) and the first steps' seconds."""
    with tempfile.TemporaryDirectory() as staging:
        timing = TimingCallback(args.warmup, device, clock)
        trainer = make_trainer(
            name, corpus, args, device, precision, args.warmup + args.steps, Path(staging),
            callbacks=[timing, *(callbacks or [])],
        )  # fmt: skip
        trainer.train()
    ends = timing.ends
    steady = (ends[-1] - ends[args.warmup - 1]) / args.steps
    first = [ends[0] - timing.begin] + [b - a for a, b in zip(ends, ends[1:], strict=False)][
        : args.warmup + 2
    ]
    return steady, first


def trainer_rows(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    batches = device_batches(corpus, args, device, args.warmup + args.steps)
    for name in args.trainer_variants:
        for precision in args.precisions:
            row = {"model": name, "precision": precision, "max_tokens": args.max_tokens}

            def measure(name: str = name, precision: str = precision) -> dict:
                steady, first = timed_trainer_steps(name, corpus, args, device, precision)
                raw = raw_stepper(build_model(name, args).to(device).train(), device, precision)
                raw_out = time_steps(raw, batches, args.warmup, args.steps, device)
                tokens = sum(int(b["_target_tokens"]) for b in batches[args.warmup :]) / args.steps
                exact = {}
                if bench_pad(args, device) > 1:  # what padding to a multiple costs or gains, raw loop
                    raw = raw_stepper(build_model(name, args).to(device).train(), device, precision)
                    exact_batches = device_batches(corpus, args, device, args.warmup + args.steps, pad=1)
                    exact_out = time_steps(raw, exact_batches, args.warmup, args.steps, device)
                    exact = {"raw_exact_lengths_target_tokens_per_s": exact_out["target_tokens_per_s"]}
                return exact | {
                    "trainer_step_ms": 1000 * steady,
                    "raw_step_ms": raw_out["step_ms"],
                    "trainer_over_raw": steady * 1000 / raw_out["step_ms"],
                    "raw_target_tokens_per_s": raw_out["target_tokens_per_s"],
                    "trainer_target_tokens_per_s_est": tokens / steady,
                    "first_steps_ms": [round(1000 * x, 1) for x in first],
                }

            results.add("trainer", row, measure)


def stall_statistics(step_ms: list[float], skip: int = 20) -> dict[str, Any]:
    """Issue #55's per-shape stall goal over one epoch's step times: after the first `skip` steps (all of them
    when there are fewer), no step slower than 2 × the median of those steps."""
    later = step_ms[skip:] if len(step_ms) > skip else step_ms
    median = statistics.median(later)
    slow = [t for t in later if t > 2 * median]
    return {
        "steps": len(step_ms),
        "median_ms": round(median, 2),
        "max_ms_after_first": round(max(later), 2),
        "steps_over_2x_median": len(slow),
        "no_stall": not slow,
        "first_steps_ms": [round(t, 1) for t in step_ms[:5]],
    }


def plan_settings(plan: str) -> tuple[int, tuple[int, ...] | None]:
    """(padding multiple, length buckets) of a stalls-section plan."""
    from deep_nmt_hf.data.batching import length_buckets

    return {"exact": (1, None), "pad8": (8, None), "buckets": (8, length_buckets(MAX_POSITIONS))}[plan]


def epoch_step_times(step: Callable[[dict], Any], batches: list[dict], device: torch.device) -> list[float]:
    """Each step of one pass over `batches`, timed between synchronisations (ms)."""
    times = []
    for batch in batches:
        sync(device)
        started = time.perf_counter()
        step(batch)
        sync(device)
        times.append(1000 * (time.perf_counter() - started))
    return times


class EpochTiming:
    """`TimingCallback` with a device sync after every one of the first `synced` steps (epoch 1: each step's own
    time, stalls included) and after the last; none in between (epoch 2: the steady throughput)."""

    def __new__(cls, synced: int, device: torch.device) -> Any:
        from transformers import TrainerCallback

        class _EpochTiming(TrainerCallback):
            def __init__(self) -> None:
                self.begin: float | None = None
                self.ends: list[float] = []

            def on_train_begin(self, *a: Any, **k: Any) -> None:
                sync(device)
                self.begin = time.perf_counter()

            def on_step_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
                if state.global_step <= synced or state.global_step == state.max_steps:
                    sync(device)
                self.ends.append(time.perf_counter())

        return _EpochTiming()


def stall_rows(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    """Issue #55 item 1, per padding plan (exact lengths, multiples of 8, length buckets) × cuDNN SDPA on / off ×
    precision: the raw loop and `deep-nmt train` over whole epochs of the corpus. Epoch 1 is timed step by step
    (synchronised): the stall statistic (no step > 2 × the median after the first 20); epoch 2 unsynchronised:
    target tokens/s after a full epoch of warm-up. The trainer runs the same plan through its own sampler,
    collator and loader (`--stall-epochs` epochs); its per-step times come from `TimingCallback`."""
    from deep_nmt_hf.data.batching import length_buckets  # noqa: F401  (the plan's buckets, recorded)

    name = args.stall_variant
    for precision in args.precisions:
        for plan in args.stall_plans:
            pad, buckets = plan_settings(plan)
            for cudnn in args.stall_cudnn:
                row = {"model": name, "precision": precision, "plan": plan, "cudnn_sdp": cudnn}

                def measure(
                    precision: str = precision, pad: int = pad, buckets: Any = buckets, cudnn: str = cudnn
                ):
                    torch.backends.cuda.enable_cudnn_sdp(cudnn == "on")
                    try:
                        epoch = device_batches(corpus, args, device, None, pad=pad, buckets=buckets)
                        tokens = sum(int(b["_target_tokens"]) for b in epoch)
                        shapes = {(tuple(b["input_ids"].shape), b["labels"].shape[1]) for b in epoch}
                        raw = raw_stepper(build_model(name, args).to(device).train(), device, precision)
                        first = epoch_step_times(raw, epoch, device)
                        sync(device)
                        started, cpu = time.perf_counter(), time.process_time()
                        for batch in epoch:
                            raw(batch)
                        sync(device)
                        raw_tps = tokens / (time.perf_counter() - started)
                        raw_cpu = 1000 * (time.process_time() - cpu) / tokens * 1000
                        trainer_args = argparse.Namespace(**{**vars(args), "pad": pad if pad > 1 else None})
                        if buckets is not None:
                            trainer_args.pad = "buckets"
                        steps = args.stall_epochs * len(epoch)
                        with tempfile.TemporaryDirectory() as staging:
                            timing = EpochTiming(len(epoch), device)
                            trainer = make_trainer(
                                name, corpus, trainer_args, device, precision, steps, Path(staging),
                                callbacks=[timing],
                            )  # fmt: skip
                            trainer.train()
                        ends = timing.ends
                        steps_ms = [1000 * (b - a) for a, b in zip([timing.begin, *ends], ends, strict=False)]
                        second = (ends[-1] - ends[len(epoch) - 1]) / (len(ends) - len(epoch))
                        trainer_tps = tokens / len(epoch) / second
                        return {
                            "batches_per_epoch": len(epoch),
                            "distinct_batch_shapes": len(shapes),
                            "buckets": list(buckets) if buckets else None,
                            "raw_epoch1": stall_statistics(first),
                            "trainer_epoch1": stall_statistics(steps_ms[: len(epoch)]),
                            "raw_target_tokens_per_s": round(raw_tps),
                            # process CPU time: on a shared CPU steadier than the wall clock
                            "raw_cpu_ms_per_1k_target_tokens": round(raw_cpu, 2),
                            "trainer_target_tokens_per_s": round(trainer_tps),
                            "trainer_over_raw_tokens_per_s": round(trainer_tps / raw_tps, 3),
                        }
                    finally:
                        torch.backends.cuda.enable_cudnn_sdp(args.cudnn_sdp == "on")

                results.add("stalls", row, measure)


def generate_rows(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    from deep_nmt_hf.model.caches import StaticCacheNotSupported

    sources = corpus["input_ids"][: args.generate_batch]
    longest = max(len(s) for s in sources)
    ids = torch.zeros(len(sources), longest, dtype=torch.long)
    for i, s in enumerate(sources):
        ids[i, : len(s)] = torch.tensor(s)
    ids, mask = ids.to(device), ids.ne(0).long().to(device)
    names = (["marian-6-6"] if "marian-6-6" not in args.variants else []) + list(args.variants)
    for name in names:
        compiled = name in args.compile_variants or "all" in args.compile_variants
        modes = ["eager"] + (["static+compiled"] if compiled else [])
        if compiled and MODELS.get(name, ("",))[0] == "admin":  # folded into MarianMTModel, then compiled
            modes.append("folded+static+compiled")
        for mode in modes:
            row = {"model": name, "mode": mode, "batch": len(sources), "num_beams": 4}

            def measure(name: str = name, mode: str = mode) -> dict:
                from deep_nmt_hf.training.compilation import compiled_decoding

                model = build_model(name, args).to(device).eval()
                settings = dict(
                    num_beams=4, max_new_tokens=args.generate_tokens, min_new_tokens=args.generate_tokens
                )
                if mode.startswith("folded"):
                    from deep_nmt_hf.publish.folding import fold_to_stock

                    model = fold_to_stock(model)[0].to(device).eval()
                if (
                    mode != "eager"
                ):  # `deep-nmt translate --compile`: static cache, the decoding steps compiled
                    compiled_decoding(model)
                try:
                    with torch.inference_mode():
                        model.generate(input_ids=ids, attention_mask=mask, **settings)  # warm-up / compile
                        sync(device)
                        started = time.perf_counter()
                        for _ in range(args.generate_repeats):
                            model.generate(input_ids=ids, attention_mask=mask, **settings)
                        sync(device)
                except StaticCacheNotSupported as refusal:
                    return {"status": f"refused: {str(refusal)[:200]}"}
                seconds = (time.perf_counter() - started) / args.generate_repeats
                return {"sentences_per_s": len(sources) / seconds, "ms_per_batch": 1000 * seconds}

            results.add("generate", row, measure)


def split_section(results: Results, corpus: dict, args: argparse.Namespace, device: torch.device) -> None:
    """The host work of a `deep-nmt train` step, old pipeline against new, measured side by side."""
    from deep_nmt_hf.data.batching import TokenBudgetBatchSampler
    from deep_nmt_hf.training.loader import training_collator

    split: dict[str, Any] = {"model": args.split_variant, "max_tokens": args.max_tokens, "precision": "fp32"}
    results.data["split"] = split
    lengths = [len(x) for x in corpus["input_ids"]], [len(x) for x in corpus["labels"]]
    tokenizer = word_tokenizer(args.vocab)
    model = build_model("base-6-6", argparse.Namespace(**{**vars(args), "quick": True}))

    def loader_part() -> dict:
        out = {}
        for side, pad in (("exact", 1), ("pad8", 8)):
            started = time.perf_counter()
            sampler = TokenBudgetBatchSampler(
                *lengths, max_tokens=args.max_tokens, seed=1, pad_to_multiple_of=pad
            )
            epoch = list(sampler)
            sampler_s = time.perf_counter() - started
            collator = training_collator(
                tokenizer, model, pad_to_multiple_of=None if pad == 1 else pad, buckets=None
            )
            shapes, padded, real = set(), 0, 0
            started = time.perf_counter()
            for indices in epoch[: args.split_collate_batches]:
                features = [
                    {k: corpus[k][i] for k in ("input_ids", "attention_mask", "labels")} for i in indices
                ]
                batch = collator(features)
                shapes.add((tuple(batch["input_ids"].shape), tuple(batch["labels"].shape)))
                padded += batch["labels"].numel()
                real += int(batch["labels"].ne(-100).sum())
            collate_s = time.perf_counter() - started
            counted = min(len(epoch), args.split_collate_batches)
            src_shapes = {(len(b), int(max(-(-lengths[0][i] // pad) * pad for i in b))) for b in epoch}
            tgt_lengths = {int(max(-(-lengths[1][i] // pad) * pad for i in b)) for b in epoch}
            out[side] = {
                "batches_per_epoch": len(epoch),
                "sampler_ms_per_batch": 1000 * sampler_s / len(epoch),
                "collate_ms_per_batch": 1000 * collate_s / counted,
                "distinct_batch_shapes_in_epoch": len(src_shapes),
                "distinct_target_lengths_in_epoch": len(tgt_lengths),
                "target_padding_share": 1 - real / padded,
            }
        return out

    def guarded(key: str, fn: Callable[[], Any]) -> None:
        if results.over_budget():
            split[key] = {"status": f"skipped: over the --budget-s {args.budget_s} s"}
        else:
            try:
                split[key] = fn()
            except Exception as error:  # noqa: BLE001
                split[key] = {"status": f"error: {type(error).__name__}: {str(error)[:300]}"}
        results.write()
        print(json.dumps({"split": {key: split[key]}}, default=str)[:2000], flush=True)

    guarded("loader", loader_part)
    guarded("trainer", lambda: split_trainer(corpus, args, device))


def split_trainer(corpus: dict, args: argparse.Namespace, device: torch.device) -> dict:
    """Old and new Trainer paths (and the raw loop) on the same model and data: syncs per non-logging step by site,
    operators per step, callback ms per step, and step CPU time; the sides alternate `args.split_rounds` times."""
    from torch.profiler import ProfilerActivity, profile
    from transformers import TrainerCallback

    steps = args.split_steps
    out: dict[str, Any] = {"steps": steps, "logging_steps": args.logging_steps}
    batches = device_batches(corpus, args, device, steps)

    class StepLabel(TrainerCallback):
        def __init__(self, counter: SyncCounter) -> None:
            self.counter = counter
            self.ends: list[float] = []
            self.cpu_ends: list[float] = []

        def on_step_begin(self, args: Any, state: Any, control: Any, **k: Any) -> None:
            self.counter.label = state.global_step + 1

        def on_step_end(self, args: Any, state: Any, control: Any, **k: Any) -> None:
            self.ends.append(time.perf_counter())
            self.cpu_ends.append(time.process_time())

    def run(side: str, profiled: bool) -> dict:
        counter = SyncCounter()
        label = StepLabel(counter)
        with tempfile.TemporaryDirectory() as staging:
            trainer = make_trainer(
                args.split_variant,
                corpus,
                args,
                device,
                "fp32",
                steps,
                Path(staging),
                old=side == "old",
                callbacks=[label],
            )
            handler = trainer.callback_handler
            original, spent = handler.call_event, [0.0]

            def timed_call(event: str, *a: Any, **k: Any) -> Any:
                if event in (
                    "on_init_end",
                    "on_train_begin",
                    "on_train_end",
                ):  # ADMIN profiles at train begin
                    return original(event, *a, **k)
                started = time.perf_counter()
                try:
                    return original(event, *a, **k)
                finally:
                    spent[0] += time.perf_counter() - started

            handler.call_event = timed_call
            with contextlib.ExitStack() as stack:
                prof = stack.enter_context(profile(activities=[ProfilerActivity.CPU])) if profiled else None
                stack.enter_context(counter)
                trainer.train()
        # steps 2 .. steps-1 log nothing (logging_first_step logs step 1, the end of training the last)
        quiet = [s for s in range(2, steps) if s % args.logging_steps]
        per_step = counter.per_label()
        result = {
            "syncs_per_quiet_step": statistics.mean(per_step.get(s, 0) for s in quiet) if quiet else None,
            "sync_sites_quiet_steps": counter.sites(quiet),
            "syncs_whole_run": len(counter.calls),
            "step_cpu_ms_median": 1000
            * statistics.median(b - a for a, b in zip(label.cpu_ends[1:], label.cpu_ends[2:], strict=False)),
            "step_wall_ms_median": 1000
            * statistics.median(b - a for a, b in zip(label.ends[1:], label.ends[2:], strict=False)),
            "callbacks_ms_per_step": 1000 * spent[0] / steps,
        }
        if prof is not None:
            events = prof.key_averages()
            result["aten_ops_per_step"] = sum(e.count for e in events if e.key.startswith("aten::")) / steps
        return result

    for side in ("old", "new"):
        out[side] = run(side, profiled=True)
    walls: dict[str, list[float]] = {"old": [], "new": [], "raw": []}
    cpus: dict[str, list[float]] = {"old": [], "new": [], "raw": []}
    raw_step = raw_stepper(build_model(args.split_variant, args).to(device).train(), device, "fp32")
    for _ in range(args.split_rounds):  # alternate the sides: a shared machine disturbs them alike
        for side in ("old", "new"):
            measured = run(side, profiled=False)
            walls[side].append(measured["step_wall_ms_median"])
            cpus[side].append(measured["step_cpu_ms_median"])
        raw_out = time_steps(raw_step, batches, 1, steps - 1, device)
        walls["raw"].append(raw_out["step_ms"])
        cpus["raw"].append(raw_out["cpu_ms_per_step"])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for batch in batches:
            raw_step(batch)
    raw_ops = sum(e.count for e in prof.key_averages() if e.key.startswith("aten::")) / len(batches)
    out["raw"] = {"aten_ops_per_step": raw_ops}
    for side in walls:
        out[side]["step_wall_ms_rounds"] = walls[side]
        out[side]["step_cpu_ms_rounds"] = cpus[side]
        out[side]["step_cpu_ms"] = statistics.median(cpus[side])
    for side in ("old", "new"):
        out[side]["cpu_over_raw"] = out[side]["step_cpu_ms"] / out["raw"]["step_cpu_ms"]
    return out


# ------------------------------------------------------------------------------------------------ report


def markdown(data: dict) -> str:
    lines = ["# GPU training bench (`bench/gpu_training.py`)", ""]
    dev = data["device"]
    lines.append(
        f"Device: {dev.get('name', dev['type'])}; bf16 peak: {dev.get('peak_bf16_flops')} ({dev.get('peak_source')})"
    )
    settings = data["settings"]
    lines += [
        f"Shapes: d_model {settings['d_model']}, heads {settings['heads']}, vocab {settings['vocab']}, "
        f"max_tokens {settings['max_tokens']}, steps {settings['steps']} after {settings['warmup']} warm-up"
        + (" (--quick: 2/1 layers)" if settings["quick"] else ""),
        "",
    ]
    split = data.get("split") or {}
    if split:
        lines += ["## Host-time split of a `deep-nmt train` step (old pipeline against new, one run)", ""]
        loader = split.get("loader", {})
        if "exact" in loader:
            keys = ["batches_per_epoch", "sampler_ms_per_batch", "collate_ms_per_batch",
                    "distinct_batch_shapes_in_epoch", "distinct_target_lengths_in_epoch", "target_padding_share"]  # fmt: skip
            lines += [
                markdown_table(
                    ["loader", "exact lengths", "padded to 8"],
                    [[k, loader["exact"][k], loader["pad8"][k]] for k in keys],
                ),
                "",
            ]
        trainer = split.get("trainer", {})
        if "old" in trainer:
            keys = [
                "syncs_per_quiet_step",
                "syncs_whole_run",
                "aten_ops_per_step",
                "callbacks_ms_per_step",
                "step_cpu_ms",
                "cpu_over_raw",
            ]
            body = [
                [k, trainer["old"].get(k), trainer["new"].get(k), trainer["raw"].get(k, "")] for k in keys
            ]
            lines += [
                f"Model {split.get('model')}, {trainer['steps']} steps, logging every {trainer['logging_steps']}:",
                "",
                markdown_table(["trainer step", "old", "new", "raw loop"], body),
                "",
                f"Sync sites summed over the quiet steps, old: `{trainer['old'].get('sync_sites_quiet_steps')}`; new: "
                f"`{trainer['new'].get('sync_sites_quiet_steps')}`",
                "",
            ]
        elif trainer:
            lines += [f"trainer split: {trainer}", ""]
    if data["train"]:
        lines += ["## Training step (raw loop)", ""]
        header = [
            "model",
            "precision",
            "mode",
            "step ms",
            "tgt tok/s",
            "peak MiB",
            "× Marian 6-6",
            "× nn.Transformer",
            "TFLOP/step",
            "bf16 peak share",
            "status",
        ]
        body = [
            [r["model"], r["precision"], r["mode"], r.get("step_ms"), r.get("target_tokens_per_s"), r.get("peak_memory_mib"),
             r.get("over_marian_6_6"), r.get("over_nn_transformer"),
             r["flops_per_step"] / 1e12 if r.get("flops_per_step") else None, r.get("share_of_bf16_peak"), r["status"]]
            for r in data["train"]
        ]  # fmt: skip
        lines += [markdown_table(header, body), ""]
    if data["trainer"]:
        lines += ["## `deep-nmt train` path against the raw loop", ""]
        header = ["model", "precision", "trainer ms", "raw ms", "trainer / raw", "first steps ms", "status"]
        body = [[r["model"], r["precision"], r.get("trainer_step_ms"), r.get("raw_step_ms"), r.get("trainer_over_raw"),
                 r.get("first_steps_ms"), r["status"]] for r in data["trainer"]]  # fmt: skip
        lines += [markdown_table(header, body), ""]
    if data.get("stalls"):
        lines += [
            "## Per-shape stalls: padding plans × cuDNN SDPA, whole epochs (issue #55)",
            "",
            "Epoch 1 step by step (synchronised): steps over 2 × the median after the first 20 (goal 0); tokens/s "
            "over epoch 2 (goal: trainer ≥ 0.9 × raw).",
            "",
        ]
        header = ["precision", "plan", "cuDNN SDPA", "shapes", "raw tok/s", "raw CPU ms / 1k tok", "trainer tok/s",
                  "trainer / raw",
                  "raw >2× median", "trainer >2× median", "trainer first ms", "status"]  # fmt: skip
        body = [
            [r["precision"], r["plan"], r["cudnn_sdp"], r.get("distinct_batch_shapes"),
             r.get("raw_target_tokens_per_s"), r.get("raw_cpu_ms_per_1k_target_tokens"),
             r.get("trainer_target_tokens_per_s"),
             r.get("trainer_over_raw_tokens_per_s"), (r.get("raw_epoch1") or {}).get("steps_over_2x_median"),
             (r.get("trainer_epoch1") or {}).get("steps_over_2x_median"),
             (r.get("trainer_epoch1") or {}).get("first_steps_ms"), r["status"]]
            for r in data["stalls"]
        ]  # fmt: skip
        lines += [f"Model {data['stalls'][0]['model']}:", "", markdown_table(header, body), ""]
    if data["generate"]:
        lines += ["## Beam-4 generate", ""]
        body = [
            [r["model"], r["mode"], r.get("batch"), r.get("sentences_per_s"), r["status"]]
            for r in data["generate"]
        ]
        lines += [markdown_table(["model", "mode", "batch", "sentences/s", "status"], body), ""]
    lines += ["## Notes", ""] + [f"- {note}" for note in data["notes"]]
    info = data["provenance"]
    lines += [
        "",
        f"Command: `{info['command']}`  ",
        f"Machine: {info['machine']['cores']} cores, {info['machine']['cpu']}  ",
        f"Versions: {', '.join(f'{k} {v}' for k, v in info['versions'].items())}  ",
        f"Date: {info['date']}",
    ]
    return "\n".join(lines) + "\n"


def plot(data: dict, path: Path) -> Path | None:
    rows = [r for r in data["train"] if r.get("step_ms") and r["mode"] == "eager"]
    if not rows:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    models = list(dict.fromkeys(r["model"] for r in rows))
    precisions = list(dict.fromkeys(r["precision"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6, len(models) * 0.9), 4))
    bar = 0.8 / len(precisions)
    for j, precision in enumerate(precisions):
        values = [
            next(
                (r["target_tokens_per_s"] for r in rows if r["model"] == m and r["precision"] == precision), 0
            )
            for m in models
        ]
        ax.bar([i + j * bar for i in range(len(models))], values, bar, label=precision)
    ax.set_xticks([i + bar * (len(precisions) - 1) / 2 for i in range(len(models))])
    ax.set_xticklabels(models, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("target tokens / s (raw loop, eager)")
    ax.set_title(
        f"{data['device'].get('name', data['device']['type'])}, d_model {data['settings']['d_model']}"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------------------ main


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
