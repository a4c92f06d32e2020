"""Attention backends (issue #25): eager vs SDPA vs flex (and flash_attention_2 where installed), tokens per second.

Models, all at one width (default the paper's: d_model 512, 8 heads, FFN 2048), one vocabulary and random init
(speed does not depend on training): stock `MarianMTModel` 6-6, and our ADMIN (`AdminForConditionalGeneration`,
ω at its initial value) 6-6 and 36-6. Each model runs every backend through `set_attn_implementation`:
"eager", "sdpa", "flex_attention", plus "flash_attention_2" on CUDA when `is_flash_attn_2_available()`.

Inputs: one batch of --batch-size Multi30k test_2016_flickr pairs (joint BPE 8000 of Multi30k train) where
../shared/data/multi30k exists, else synthetic token ids of random lengths; right-padded as a real batch is
(--unpadded picks sources of one token length instead). Per model x backend:
  train      one training step's forward + backward (teacher forcing, `loss.backward()`, no optimizer step;
             dropout 0.1 as trained): target tokens (labels that are not padding) per second;
  generate   beam-4 `generate`, every hypothesis forced to exactly --new-tokens tokens
             (min_new_tokens = max_new_tokens), so every backend runs the same decoding steps: output tokens
             (batch x new tokens) per second;
  check      once per model, eval mode: the logits of every backend against eager's (max abs difference over
             the real target positions), how many generated sequences equal eager's, and, for SDPA, how many of
             the calls of one teacher-forced forward got no materialised mask and `is_causal=True` (torch takes
             its flash/causal fast path only then: the decoder's self-attention always, as no target mask is
             passed, the encoder and cross-attention only when the sources are unpadded).

Timing as the other benches: the sides (model x backend) interleaved in rounds (common.interleaved), one untimed
warm-up round first, medians of --repeats rounds. Flex compiles on first use (tens of seconds on CPU): that
happens in the check and the warm-up round, whose wall times are recorded, never in a timed round (the number of
graphs dynamo compiles during the timed rounds is recorded too, and should be 0). A backend that fails for a
phase (on CPU, torch's flex has no backward) is recorded with its error and left out of that phase's rounds.
Each timed call first sets its backend (`set_attn_implementation`, well under a millisecond).

Device: CUDA when available (or --device); there the clock is the wall clock with `torch.cuda.synchronize()`, and
the default dtype bfloat16 (flash attention needs half precision). On CPU: float32, --threads torch threads
(default 1), and with one thread the process CPU time (time.process_time), which a shared machine disturbs far
less than the wall clock. So a GPU run is the same command.

    python -m bench.attention_backends            # d 512, Marian 6-6, ADMIN 6-6 and 36-6, batch 32, 32 tokens
    python -m bench.attention_backends --quick    # smoke run: d 32, 2-2 / 2-2 / 4-2, batch 4, 4 tokens

Writes bench/results/attention_backends.{json,md} (--quick: attention_backends_quick.*).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch._dynamo

from bench.lib.common import (
    interleaved,
    markdown_table,
    multi30k_pairs,
    multi30k_tokenizer,
    ratio,
    shared_dir,
    tokenized_batches,
    write_results,
)

NAME = "attention_backends"
BACKENDS = ("eager", "sdpa", "flex_attention")
FLASH = "flash_attention_2"
Shape = tuple[int, int]


def shape(text: str) -> Shape:
    """'36-6' -> (36, 6): encoder and decoder layers."""
    encoder, decoder = text.split("-")
    return int(encoder), int(decoder)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: d 32, 2-2 / 2-2 / 4-2, batch 4")
    parser.add_argument("--d-model", type=int, default=512, help="width of every model")
    parser.add_argument("--heads", type=int, default=8, help="attention heads")
    parser.add_argument("--ffn", type=int, default=None, help="FFN width (default 4 x d_model)")
    parser.add_argument("--marian", type=shape, default=(6, 6), help="Marian layers, ENC-DEC")
    parser.add_argument("--admin", type=shape, nargs="+", default=[(6, 6), (36, 6)], help="ADMIN shapes")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch (train and generate)")
    parser.add_argument("--max-length", type=int, default=64, help="truncate sources and targets (tokens)")
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--new-tokens", type=int, default=32, help="every output's exact length")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (medians)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads on CPU")
    parser.add_argument("--device", default=None, help="default: cuda if available, else cpu")
    parser.add_argument(
        "--dtype",
        choices=("auto", "float32", "bfloat16", "float16"),
        default="auto",
        help="auto: bfloat16 on CUDA (float32 where bf16 is unsupported), float32 on CPU",
    )
    parser.add_argument(
        "--backends",
        nargs="+",
        default=None,
        help=f"default: {' '.join(BACKENDS)}, and {FLASH} on CUDA where installed",
    )
    parser.add_argument(
        "--unpadded", action="store_true", help="sources of one token length (no source padding)"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    args = parser.parse_args(argv)
    if args.quick:
        args.d_model, args.heads, args.marian, args.admin = 32, 4, (2, 2), [(2, 2), (4, 2)]
        args.batch_size, args.new_tokens, args.repeats = 4, 4, 1
    args.ffn = args.ffn or 4 * args.d_model
    return args


def result_name(args: argparse.Namespace) -> str:
    """`--quick` and `--unpadded` runs get their own files: they never overwrite the full results."""
    return NAME + ("_unpadded" if args.unpadded else "") + ("_quick" if args.quick else "")


def pick_device(args: argparse.Namespace) -> tuple[torch.device, torch.dtype, dict[str, Any]]:
    """The device, the dtype and what to record about them."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if args.dtype != "auto":
        dtype = getattr(torch, args.dtype)
    elif device.type == "cuda":
        dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    else:
        dtype = torch.float32
    info: dict[str, Any] = {"device": str(device), "dtype": str(dtype).removeprefix("torch.")}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["cuda"] = torch.version.cuda
    else:
        info["torch_threads"] = args.threads
    return device, dtype, info


def backends_for(args: argparse.Namespace, device: torch.device) -> list[str]:
    """The requested backends, or the default ones plus flash_attention_2 on CUDA where it is installed."""
    if args.backends:
        return list(args.backends)
    from transformers.utils import is_flash_attn_2_available

    extra = [FLASH] if device.type == "cuda" and is_flash_attn_2_available() else []
    return [*BACKENDS, *extra]


def make_clock(device: torch.device, threads: int) -> tuple[Callable[[], float], str]:
    """Wall clock after `cuda.synchronize()` on GPU; process CPU time on CPU with one thread; else wall clock."""
    if device.type == "cuda":

        def clock() -> float:
            torch.cuda.synchronize(device)
            return time.perf_counter()

        return clock, "wall-clock seconds, torch.cuda.synchronize() before every reading"
    if threads == 1:
        return time.process_time, "process CPU seconds (time.process_time), one torch thread"
    return time.perf_counter, f"wall-clock seconds, {threads} torch threads"


def multi30k_batch(args: argparse.Namespace) -> tuple[dict[str, int], dict[str, torch.Tensor], str]:
    """Special ids, one tokenized batch of Multi30k test pairs (labels -100 on padding) and its description."""
    from deep_nmt_hf.data.tokenization import special_token_ids

    tokenizer = multi30k_tokenizer(8000)
    pairs = multi30k_pairs("test_2016_flickr")
    what = f"the first {args.batch_size} Multi30k test_2016_flickr pairs (en-de)"
    if args.unpadded:  # the most frequent source length that has a full batch
        lengths = [len(ids) for ids in tokenizer([s for s, _ in pairs])["input_ids"]]
        common = Counter(n for n in lengths if n <= args.max_length).most_common()
        length = next(n for n, count in common if count >= args.batch_size)
        pairs = [p for p, n in zip(pairs, lengths, strict=True) if n == length]
        what = f"{args.batch_size} Multi30k test_2016_flickr pairs whose sources have {length} tokens"
    batch = tokenized_batches(tokenizer, pairs[: args.batch_size], args.batch_size, args.max_length)[0]
    return special_token_ids(tokenizer), batch, what + " (joint BPE 8000 of Multi30k train)"


def synthetic_batch(args: argparse.Namespace) -> tuple[dict[str, int], dict[str, torch.Tensor], str]:
    """Random token ids (vocabulary 8000, eos 0, unk 1, pad last), lengths 8-30 (sources: one length if
    --unpadded), right-padded."""
    vocab, eos, pad = 8000, 0, 7999
    generator = torch.Generator().manual_seed(0)

    def rows(lengths: list[int], fill: int) -> torch.Tensor:
        out = torch.full((len(lengths), max(lengths)), fill, dtype=torch.long)
        for row, length in enumerate(lengths):
            out[row, : length - 1] = torch.randint(2, vocab - 1, (length - 1,), generator=generator)
            out[row, length - 1] = eos
        return out

    def lengths() -> list[int]:
        return torch.randint(8, 31, (args.batch_size,), generator=generator).tolist()

    sources = rows([20] * args.batch_size if args.unpadded else lengths(), pad)
    batch = {"input_ids": sources, "attention_mask": (sources != pad).long(), "labels": rows(lengths(), -100)}
    ids = dict(
        eos_token_id=eos, unk_token_id=1, pad_token_id=pad, decoder_start_token_id=pad, vocab_size=vocab
    )
    return ids, batch, f"{args.batch_size} synthetic sentences (random ids, lengths 8-30; Multi30k absent)"


def build_models(
    args: argparse.Namespace, ids: dict[str, int], device: torch.device, dtype: torch.dtype
) -> dict[str, torch.nn.Module]:
    """Stock Marian and the ADMIN shapes, one width, random init (seed 0 each)."""
    from transformers import MarianMTModel

    from deep_nmt_hf import AdminConfig, AdminForConditionalGeneration, DeepNMTConfig
    from deep_nmt_hf.publish.folding import stock_config

    fields = dict(ids, d_model=args.d_model, encoder_ffn_dim=args.ffn, decoder_ffn_dim=args.ffn)
    fields |= dict(encoder_attention_heads=args.heads, decoder_attention_heads=args.heads)
    fields |= dict(layer_norm_position="post", dropout=0.1, attention_dropout=0.0)
    fields |= dict(max_position_embeddings=max(256, args.max_length, args.new_tokens + 2))

    def layers(pair: Shape) -> dict[str, int]:
        return {"encoder_layers": pair[0], "decoder_layers": pair[1]}

    torch.manual_seed(0)
    marian = MarianMTModel(stock_config(DeepNMTConfig(**fields, **layers(args.marian))))
    models = {f"Marian {args.marian[0]}-{args.marian[1]}": marian}
    for pair in args.admin:
        torch.manual_seed(0)
        models[f"ADMIN {pair[0]}-{pair[1]}"] = AdminForConditionalGeneration(
            AdminConfig(**fields, **layers(pair))
        )
    return {name: model.to(device=device, dtype=dtype) for name, model in models.items()}


def train_step(model: torch.nn.Module, backend: str, batch: dict[str, torch.Tensor]) -> None:
    """One forward + backward with teacher forcing (no optimizer step)."""
    model.set_attn_implementation(backend)
    model.zero_grad(set_to_none=True)
    model(**batch).loss.backward()


def generate_fixed(
    model: torch.nn.Module, backend: str, batch: dict[str, torch.Tensor], beams: int, length: int
) -> torch.Tensor:
    """Beam search forced to exactly `length` new tokens."""
    model.set_attn_implementation(backend)
    with torch.inference_mode():
        return model.generate(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            num_beams=beams,
            min_new_tokens=length,
            max_new_tokens=length,
            early_stopping=False,
            do_sample=False,
        )


@contextlib.contextmanager
def sdpa_calls() -> Iterator[list[tuple[bool, bool]]]:
    """Record (materialised mask given, is_causal) of every torch SDPA call made inside the block."""
    calls: list[tuple[bool, bool]] = []
    original = torch.nn.functional.scaled_dot_product_attention

    def spy(*args: Any, **kwargs: Any) -> torch.Tensor:
        calls.append((kwargs.get("attn_mask") is not None, bool(kwargs.get("is_causal", False))))
        return original(*args, **kwargs)

    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        yield calls
    finally:
        torch.nn.functional.scaled_dot_product_attention = original


def error_text(error: Exception) -> str:
    """The first line of an exception, shortened."""
    lines = str(error).strip().splitlines() or [""]
    return f"{type(error).__name__}: {lines[0][:200]}"


def check(
    models: dict[str, torch.nn.Module], backends: list[str], batch: dict[str, torch.Tensor]
) -> dict[str, dict[str, dict[str, Any]]]:
    """Eval-mode logits of every backend against eager's on the real target positions; SDPA's calls; wall time
    of each backend's forward (flex compiles here)."""
    real = batch["labels"] != -100
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name, model in models.items():
        model.eval()
        results[name] = {}
        reference = None
        for backend in backends:
            row: dict[str, Any] = {}
            model.set_attn_implementation(backend)
            start = time.perf_counter()
            try:
                with torch.no_grad(), sdpa_calls() as calls:
                    logits = model(**batch).logits.float()
            except Exception as error:  # noqa: BLE001 - a backend that fails is a result
                row["error"] = error_text(error)
                results[name][backend] = row
                continue
            row["forward_wall_s"] = time.perf_counter() - start
            if backend == "eager":
                reference = logits
            if reference is not None:
                row["max_abs_logit_diff"] = (logits - reference)[real].abs().max().item()
            if backend == "sdpa":
                row["sdpa_calls"] = len(calls)
                row["sdpa_calls_without_mask"] = sum(not masked for masked, _ in calls)
                row["sdpa_calls_is_causal"] = sum(causal for _, causal in calls)
            results[name][backend] = row
            print(f"  check {name} {backend}: {row}", file=sys.stderr)
    return results


def warm_up(sides: dict[str, Callable[[], Any]]) -> tuple[dict[str, Any], dict[str, float], dict[str, str]]:
    """Call every side once (the warm-up round: flex compiles here): outputs, wall seconds, and the error of each
    side that failed."""
    outputs, seconds, errors = {}, {}, {}
    for side, run in sides.items():
        start = time.perf_counter()
        try:
            outputs[side] = run()
        except Exception as error:  # noqa: BLE001 - a backend that fails is a result
            errors[side] = error_text(error)
            print(f"  {side}: fails: {errors[side]}", file=sys.stderr)
            continue
        seconds[side] = time.perf_counter() - start
        print(f"  {side}: warm-up {seconds[side]:.1f} s", file=sys.stderr)
    return outputs, seconds, errors


def graphs_compiled() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


def measure(
    phase: str, sides: dict[str, Callable[[], Any]], repeats: int, clock: Callable[[], float]
) -> dict[str, Any]:
    """Warm-up round, then the timed interleaved rounds of the sides that did not fail."""
    print(f"{phase}: warm-up round", file=sys.stderr)
    outputs, warmup_s, errors = warm_up(sides)
    working = {side: run for side, run in sides.items() if side not in errors}
    before = graphs_compiled()
    print(f"{phase}: {repeats} timed rounds of {len(working)} sides", file=sys.stderr)
    timing = interleaved(working, repeats=repeats, warmup=0, clock=clock)
    return {
        "timing": timing,
        "warmup_wall_s": warmup_s,
        "errors": errors,
        "graphs_compiled_in_timed_rounds": graphs_compiled() - before,
        "outputs": outputs,
    }


def side(model: str, backend: str) -> str:
    return f"{model} / {backend}"


def cell(value: float | None, digits: str = ".0f") -> str:
    return "-" if value is None else format(value, digits)


def report(
    args: argparse.Namespace,
    models: dict[str, torch.nn.Module],
    backends: list[str],
    checks: dict[str, dict[str, dict[str, Any]]],
    train: dict[str, Any],
    generate: dict[str, Any],
    context: dict[str, Any],
) -> tuple[str, dict[str, Any]]:
    """The markdown report and the per-side numbers."""
    rows, numbers, failures = [], {}, []
    for name in models:
        eager_train = train["tokens_per_s"].get(side(name, "eager"))
        eager_gen = generate["tokens_per_s"].get(side(name, "eager"))
        for backend in backends:
            key = side(name, backend)
            checked = checks[name].get(backend, {})
            train_tps = train["tokens_per_s"].get(key)
            gen_tps = generate["tokens_per_s"].get(key)
            same = generate["same_as_eager"].get(key)
            diff = checked.get("max_abs_logit_diff")
            for phase, source in (("check", checked), ("train", train), ("generate", generate)):
                error = source.get("error") if phase == "check" else source["errors"].get(key)
                if error:
                    failures.append(f"- {key}, {phase}: `{error}`")
            warm = [train["warmup_wall_s"].get(key), generate["warmup_wall_s"].get(key)]
            rows.append(
                [
                    name,
                    backend,
                    "fails"
                    if "error" in checked
                    else "reference"
                    if backend == "eager"
                    else cell(diff, ".1e"),
                    "fails" if key in train["errors"] else cell(train_tps),
                    cell(ratio(train_tps, eager_train) if train_tps and eager_train else None, ".2f"),
                    "fails" if key in generate["errors"] else cell(gen_tps),
                    cell(ratio(gen_tps, eager_gen) if gen_tps and eager_gen else None, ".2f"),
                    "-" if same is None else f"{same}/{args.batch_size}",
                    " / ".join(cell(w, ".1f") for w in warm),
                ]
            )
            numbers[key] = {
                "train_tokens_per_s": train_tps,
                "generate_tokens_per_s": gen_tps,
                "train_vs_eager": ratio(train_tps, eager_train) if train_tps and eager_train else None,
                "generate_vs_eager": ratio(gen_tps, eager_gen) if gen_tps and eager_gen else None,
                "max_abs_logit_diff_vs_eager": diff,
                "generated_rows_equal_to_eager": same,
                "warmup_wall_s": {"train": warm[0], "generate": warm[1]},
            }
    sdpa_rows = [
        [
            name,
            c["sdpa"].get("sdpa_calls"),
            c["sdpa"].get("sdpa_calls_without_mask"),
            c["sdpa"].get("sdpa_calls_is_causal"),
        ]
        for name, c in checks.items()
        if "sdpa" in c and "sdpa_calls" in c["sdpa"]
    ]
    device = context["device"]
    where = device.get("gpu", f"CPU, {args.threads} torch thread(s)")
    shapes = ", ".join(models)
    markdown = (
        f"# Attention backends: {', '.join(backends)} ({where})\n\n"
        f"{shapes} at d_model {args.d_model}, {args.heads} heads, FFN {args.ffn}, vocabulary "
        f"{context['vocab_size']}, random init (ADMIN's ω at its initial value), {device['dtype']} on "
        f"{device['device']}. Batch: {context['inputs']}; source padding {context['source_padding']:.0%}, "
        f"target padding {context['target_padding']:.0%} of the padded positions. Train: one forward + backward "
        f"(teacher forcing, dropout 0.1, no optimizer step), {context['train_tokens']} target tokens. Generate: "
        f"beam {args.beams}, exactly {args.new_tokens} new tokens per sentence (min_new_tokens = max_new_tokens), "
        f"{args.batch_size * args.new_tokens} output tokens. Sides interleaved (every model x backend once a "
        f"round), one untimed warm-up round, medians of {args.repeats} rounds of {context['time_measure']}.\n\n"
        + markdown_table(
            [
                "model",
                "backend",
                "max abs Δlogit vs eager",
                "train tok/s",
                "train × eager",
                "generate tok/s",
                "generate × eager",
                "generated = eager",
                "warm-up wall s (train / generate)",
            ],
            rows,
        )
        + '\n\nΔlogit: eval mode, the same batch, over the real target positions. "generated = eager": '
        "sequences identical to eager's (on a random-init model beam choices are near ties, so float-rounding "
        "differences can flip a few). Warm-up: the untimed first call of each side, wall clock; flex compiles "
        f"there (and in the check's forward: {context['flex_check_s']}), never in a timed round: graphs dynamo "
        f"compiled during the timed rounds: train {train['graphs_compiled_in_timed_rounds']}, generate "
        f"{generate['graphs_compiled_in_timed_rounds']}. 1-minute load average of the machine: "
        f"{context['load_average_1min']['before']:.1f} before, {context['load_average_1min']['after']:.1f} after.\n"
    )
    if failures:
        markdown += "\nFailures (each left out of that phase's rounds):\n\n" + "\n".join(failures) + "\n"
    if sdpa_rows:
        markdown += (
            "\n## What SDPA receives (one forward of the benchmark batch)\n\n"
            + markdown_table(
                ["model", "SDPA calls", "without a materialised mask", "is_causal=True"], sdpa_rows
            )
            + "\n\nThe masks come from `transformers.masking_utils`: with no padding a call gets no mask and the "
            "decoder's self-attention `is_causal=True`, so torch may take its flash (causal) fast path; a padded "
            "source gives the encoder's and the cross-attention's calls a materialised mask. Here the decoder gets "
            "no target mask (labels only, as in training), so its self-attention always takes the fast path; "
            "`--unpadded` picks sources of one length to show the unpadded case.\n"
        )
    if device["device"] == "cpu":
        markdown += (
            "\nOn CPU, flex attention runs as a torch.compile'd C++ kernel; it is designed for GPUs. The numbers "
            "above are what was measured here, failures included. On a CUDA machine the same command measures the "
            "GPU (bfloat16 by default, wall clock after synchronize) and adds flash_attention_2 where it is "
            "installed.\n"
        )
    return markdown, numbers


def padding_share(mask: torch.Tensor) -> float:
    return 1.0 - mask.float().mean().item()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    device, dtype, device_info = pick_device(args)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    torch._dynamo.config.recompile_limit = 64  # every model's flex shapes compile once; no eager fallback
    clock, time_measure = make_clock(device, args.threads)
    backends = backends_for(args, device)
    have_multi30k = (shared_dir() / "data" / "multi30k").is_dir()
    ids, batch, inputs = multi30k_batch(args) if have_multi30k else synthetic_batch(args)
    batch = {key: value.to(device) for key, value in batch.items()}
    models = build_models(args, ids, device, dtype)
    train_tokens = int((batch["labels"] != -100).sum())
    print(f"models {list(models)}, backends {backends}, {device_info}", file=sys.stderr)
    load_before = os.getloadavg()[0]

    print("check: logits of every backend against eager's", file=sys.stderr)
    checks = check(models, backends, batch)

    for model in models.values():
        model.train()
    train = measure(
        "train",
        {
            side(name, backend): (lambda m=model, b=backend: train_step(m, b, batch))
            for name, model in models.items()
            for backend in backends
        },
        args.repeats,
        clock,
    )
    train["tokens_per_s"] = {s: train_tokens / t["median_s"] for s, t in train["timing"].items()}
    train.pop("outputs")
    for model in models.values():
        model.zero_grad(set_to_none=True)
        model.eval()

    generate = measure(
        "generate",
        {
            side(name, backend): (
                lambda m=model, b=backend: generate_fixed(m, b, batch, args.beams, args.new_tokens)
            )
            for name, model in models.items()
            for backend in backends
        },
        args.repeats,
        clock,
    )
    outputs = generate.pop("outputs")
    for key, sequences in outputs.items():  # the forced length holds on every side
        assert sequences.shape[1] == args.new_tokens + 1, (key, tuple(sequences.shape))
    generate["tokens_per_s"] = {
        s: args.batch_size * args.new_tokens / t["median_s"] for s, t in generate["timing"].items()
    }
    generate["same_as_eager"] = {}
    for name in models:
        eager = outputs.get(side(name, "eager"))
        for backend in backends:
            key = side(name, backend)
            if eager is not None and key in outputs:
                same = (outputs[key] == eager).all(dim=1).sum().item()
                generate["same_as_eager"][key] = int(same)

    flex_check = [
        checks[name]["flex_attention"]["forward_wall_s"]
        for name in models
        if "forward_wall_s" in checks[name].get("flex_attention", {})
    ]
    context = {
        "device": device_info,
        "inputs": inputs,
        "vocab_size": ids["vocab_size"],
        "source_padding": padding_share(batch["attention_mask"]),
        "target_padding": padding_share(batch["labels"] != -100),
        "train_tokens": train_tokens,
        "time_measure": time_measure,
        "load_average_1min": {"before": load_before, "after": os.getloadavg()[0]},
        "flex_check_s": (
            "first model " + ", then ".join(f"{s:.1f}" for s in flex_check) + " s wall"
            if flex_check
            else "no flex forward ran"
        ),
    }
    markdown, numbers = report(args, models, backends, checks, train, generate, context)
    print(markdown)
    if args.no_write:
        return
    payload = {
        "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(args).items()},
        "backends": backends,
        "context": context,
        "parameters": {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()},
        "results": numbers,
        "checks": checks,
        "train": train,
        "generate": generate,
    }
    print(write_results(result_name(args), payload, markdown), file=sys.stderr)


if __name__ == "__main__":
    main()
