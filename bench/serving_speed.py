"""Serving speed on a CPU: every variant's `generate` in float32 and int8, compiled decoding, stock Marian and
CTranslate2 float32 / int8 on the folded base, side by side in one process.

Shape (the default, issue-size): 6-6 layers, d_model 512, FFN 2048, a head per 32 dimensions, the Multi30k joint
BPE vocabulary of 8000, random weights (speed does not depend on training); one batch of --batch-size Multi30k
test sources, beam 4, every output forced to exactly --tokens new tokens (min_new_tokens = max_new_tokens;
CTranslate2 min_decoding_length) so that every side runs the same decoding steps.

Sides: `<variant> fp32` (Transformers `generate`), `<variant> int8` (publish/quantization.py `quantize_int8`: torchao
with the oneDNN int8 linear, every nn.Linear including the output projection), `<variant> compiled`
(`compiled_decoding`, --compiled variants only), `marian fp32` (the base folded into MarianMTModel), `ct2 float32` /
`ct2 int8` (the folded base exported with publish/export.py), and `<variant> int8 torchao-weight-only` for
--torchao-variants (torchao's own `Int8WeightOnlyConfig`). Rounds interleave every side (A B C ... A B C), one
untimed warm-up round, medians of --repeats. One thread; times are CPU seconds of the process
(`time.process_time`), which a shared machine disturbs far less than wall-clock time; ratios are what to read.

A second table times the linear maps of one beam-search decoding step (the decoder's layers and the output
projection at batch x beam rows) for each int8 method: oneDNN (ours), torchao's dynamic int8
(`Int8DynamicActivationInt8WeightConfig`, `torch._int_mm`) and weight-only (`Int8WeightOnlyConfig`).

    python -m bench.serving_speed --repeats 2 --gemm-repeats 3  # ~9 CPU-min (47 min wall at load 10, 2 cores)
    python -m bench.serving_speed --quick                        # smoke run: d_model 64, 2-2, a few sentences

Writes bench/results/serving_speed{,_quick}.{json,md,png}.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from bench.lib.common import (
    RESULTS,
    interleaved,
    markdown_table,
    model_from_fields,
    multi30k_pairs,
    multi30k_tokenizer,
    ratio,
    write_results,
)

NAME = "serving_speed"
VARIANTS = ("base", "admin", "deepnorm", "dsinit_matt", "dlcl", "shared_layers", "deep_decoder")
GOAL_INT8_SPEEDUP = 2.5  # CTranslate2 int8's ratio over HF generate (bench/results/ctranslate2_speed.md)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: d_model 64, 2-2 layers, 1 repeat")
    parser.add_argument("--layers", type=int, default=6, help="encoder and decoder layers")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam", type=int, default=4)
    parser.add_argument("--tokens", type=int, default=32, help="new tokens per hypothesis (forced)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (medians)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument(
        "--compiled", nargs="*", default=["base", "dsinit_matt"], help="variants also run compiled"
    )
    parser.add_argument(
        "--torchao-variants",
        nargs="*",
        default=["dsinit_matt"],
        help="variants also run with torchao's own Int8WeightOnlyConfig",
    )
    parser.add_argument("--gemm-repeats", type=int, default=5, help="rounds of the decoding-step GEMM table")
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.d_model, args.batch_size, args.tokens, args.repeats = 2, 64, 4, 8, 1
        args.compiled, args.gemm_repeats = [], 1
    return args


def build(variant: str, tokenizer: Any, args: argparse.Namespace) -> torch.nn.Module:
    """A random `variant` model of the bench's shape (`marian`: stock MarianMTModel), eval mode."""
    torch.manual_seed(0)
    fields = {"encoder_layers": args.layers, "decoder_layers": args.layers}
    return model_from_fields(variant, fields, tokenizer, args.d_model, max_length=128).eval()


def generate_side(model: torch.nn.Module, batch: dict, args: argparse.Namespace):
    """One `generate` of the batch: beam search forced to exactly `args.tokens` new tokens."""
    settings = dict(
        num_beams=args.beam,
        max_new_tokens=args.tokens,
        min_new_tokens=args.tokens,
        length_penalty=1.0,
        early_stopping=True,
        do_sample=False,
    )

    def run() -> torch.Tensor:
        with torch.inference_mode():
            return model.generate(**batch, **settings)

    return run


def ct2_side(translator: Any, tokens: list[list[str]], args: argparse.Namespace):
    """One CTranslate2 `translate_batch` of the same sources, the same search (patience 1 = early_stopping)."""

    def run() -> Any:
        return translator.translate_batch(
            tokens,
            beam_size=args.beam,
            patience=1.0,
            length_penalty=1.0,
            max_decoding_length=args.tokens,
            min_decoding_length=args.tokens,
            max_batch_size=len(tokens),
        )

    return run


def step_linears(model: torch.nn.Module) -> list[torch.nn.Linear]:
    """The linear maps one decoding step runs: the decoder's (without the cached cross-attention keys / values)
    and the output projection."""
    names = ("encoder_attn.k_proj", "encoder_attn.v_proj")
    linears = [
        module
        for name, module in model.get_decoder().named_modules()
        if isinstance(module, torch.nn.Linear) and not name.endswith(names)
    ]
    return [*linears, model.get_output_embeddings()]


def gemm_table(model: torch.nn.Module, rows: int, repeats: int) -> dict[str, Any]:
    """float32 vs each int8 method on the linear maps of one decoding step at `rows` rows, interleaved, medians."""
    from torchao.quantization import quantize_

    from deep_nmt_hf.publish.quantization import METHODS, torchao_int8_config

    float32 = torch.nn.ModuleList(copy.deepcopy(m) for m in step_linears(model))
    sides = {"float32": float32}
    for method in METHODS:
        sides[method] = copy.deepcopy(float32)
        quantize_(sides[method], torchao_int8_config(method))
    torch.manual_seed(0)
    inputs = [torch.randn(rows, m.in_features) for m in float32]

    def runner(modules: torch.nn.ModuleList):
        def run() -> None:
            with torch.inference_mode():
                for module, x in zip(modules, inputs, strict=True):
                    module(x)

        return run

    timing = interleaved({n: runner(m) for n, m in sides.items()}, repeats, clock=time.process_time)
    base = timing["float32"]["median_s"]
    return {
        "linears": len(float32),
        "rows": rows,
        "sides": {
            n: {"median_s": t["median_s"], "speedup": ratio(base, t["median_s"])} for n, t in timing.items()
        },
    }


def plot(payload: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed = payload["speedup_vs_marian"]
    names = list(speed)
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(names) + 1.2))
    colours = ["tab:orange" if "int8" in n else "tab:green" if "ct2" in n else "tab:blue" for n in names]
    ax.barh(names[::-1], [speed[n] for n in names][::-1], color=colours[::-1])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xlabel("speed vs stock MarianMTModel fp32 generate (x, CPU seconds, medians)")
    ax.set_title(payload["title"], fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    import ctranslate2

    from deep_nmt_hf.publish.export import export_model
    from deep_nmt_hf.publish.quantization import quantize_int8, torchao_int8_config
    from deep_nmt_hf.training.compilation import compiled_decoding

    args = parse_args(argv)
    torch.set_num_threads(1)
    tokenizer = multi30k_tokenizer(8000)
    sources = [s for s, _ in multi30k_pairs("test_2016_flickr", limit=args.batch_size)]
    batch = dict(tokenizer(sources, padding=True, return_tensors="pt"))
    source_tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(sources)["input_ids"]]

    sides: dict[str, Any] = {}
    marian = build("marian", tokenizer, args)
    sides["marian fp32"] = generate_side(marian, batch, args)
    work = Path(tempfile.mkdtemp(prefix="serving_speed_"))
    base = build("base", tokenizer, args)
    translators = {}
    for quantization in ("float32", "int8"):
        export_model(base, tokenizer, work / f"ct2-{quantization}", quantization=quantization)
        translators[quantization] = ctranslate2.Translator(
            str(work / f"ct2-{quantization}"), device="cpu", compute_type="default", intra_threads=1
        )
        sides[f"ct2 {quantization}"] = ct2_side(translators[quantization], source_tokens, args)
    compile_s: dict[str, float] = {}
    gemms = None
    for variant in args.variants:
        print(f"building {variant}", file=sys.stderr)
        model = base if variant == "base" else build(variant, tokenizer, args)
        sides[f"{variant} fp32"] = generate_side(model, batch, args)
        sides[f"{variant} int8"] = generate_side(quantize_int8(copy.deepcopy(model)), batch, args)
        if variant in args.torchao_variants:
            from torchao.quantization import quantize_

            weight_only = copy.deepcopy(model)
            quantize_(weight_only, torchao_int8_config("torchao-weight-only"))
            sides[f"{variant} int8 torchao-weight-only"] = generate_side(weight_only, batch, args)
        if variant in args.compiled:
            compiled = compiled_decoding(copy.deepcopy(model))
            start = time.perf_counter()
            generate_side(compiled, batch, args)()  # compiles
            compile_s[variant] = round(time.perf_counter() - start, 1)
            sides[f"{variant} compiled"] = generate_side(compiled, batch, args)
        if variant == "dsinit_matt":
            rows = args.batch_size * args.beam
            gemms = gemm_table(model, rows, args.gemm_repeats)

    print(f"timing {len(sides)} sides, {args.repeats} rounds", file=sys.stderr)
    load_before = _load()
    timing = interleaved(sides, args.repeats, clock=time.process_time)
    load_after = _load()
    medians = {name: t["median_s"] for name, t in timing.items()}
    marian_s = medians["marian fp32"]
    int8_ratio = {v: ratio(medians[f"{v} fp32"], medians[f"{v} int8"]) for v in args.variants}
    title = (
        f"{args.layers}-{args.layers}, d_model {args.d_model}, vocab 8000, beam {args.beam}, batch "
        f"{args.batch_size}, {args.tokens} forced tokens, 1 thread"
    )
    payload = {
        "title": title,
        "args": vars(args),
        "median_s": medians,
        "times_s": {name: t["times_s"] for name, t in timing.items()},
        "speedup_vs_marian": {name: ratio(marian_s, s) for name, s in medians.items()},
        "int8_speedup_vs_own_fp32": int8_ratio,
        "compile_s": compile_s,
        "decoding_step_gemms": gemms,
        "load_average": {"before": load_before, "after": load_after},
    }
    name = f"{NAME}_quick" if args.quick else NAME
    write_results(name, payload, markdown(payload, args))
    plot(payload, RESULTS / f"{name}.png")
    print(markdown(payload, args))
    return 0


def _load() -> float:
    import os

    return round(os.getloadavg()[0], 1)


def markdown(payload: dict[str, Any], args: argparse.Namespace) -> str:
    medians, speed = payload["median_s"], payload["speedup_vs_marian"]
    rows = []
    for name, seconds in medians.items():
        variant = name.split()[0]
        own = medians.get(f"{variant} fp32")
        rows.append(
            [name, f"{seconds:.3g}", f"{speed[name]:.2f}", f"{ratio(own, seconds):.2f}" if own else ""]
        )
    table = markdown_table(["side", "median CPU s", "× Marian fp32", "× own fp32"], rows)
    goal = payload["int8_speedup_vs_own_fp32"]
    matt = "dsinit_matt int8"
    lines = [
        "# Serving speed on a CPU: fp32, int8, compiled, CTranslate2",
        "",
        f"{payload['title']}; random weights; one batch of Multi30k test sources. Every side interleaved in one "
        f"process, one warm-up round, medians of {args.repeats} rounds of CPU seconds (`time.process_time`). "
        f"The machine was shared (1-minute load average {payload['load_average']['before']} before, "
        f"{payload['load_average']['after']} after): read the ratios, not the seconds.",
        "",
        table,
        "",
        f"int8 over its own fp32 (goal ≥ {GOAL_INT8_SPEEDUP}×): "
        + ", ".join(f"{v} {r:.2f}×" for v, r in goal.items())
        + f" — **{'met' if all(r >= GOAL_INT8_SPEEDUP for r in goal.values()) else 'not met'}**.",
    ]
    if matt in medians:
        versus = ratio(medians["ct2 int8"], medians[matt])
        lines.append(
            f"MAtt int8 vs CTranslate2 int8 on the folded base: {versus:.2f}× its speed (goal ≥ 1) — "
            f"**{'met' if versus >= 1 else 'not met'}**."
        )
    if payload["compile_s"]:
        lines.append(
            "Compiling (`compiled_decoding`, first call): "
            + ", ".join(f"{v} {s} s" for v, s in payload["compile_s"].items())
            + " (wall clock)."
        )
    gemms = payload["decoding_step_gemms"]
    if gemms:
        lines += [
            "",
            f"## The linear maps of one decoding step ({gemms['linears']} of MAtt's decoder and the output "
            f"projection, {gemms['rows']} rows), per int8 method",
            "",
            markdown_table(
                ["method", "median CPU s", "× float32"],
                [[n, f"{s['median_s']:.3g}", f"{s['speedup']:.2f}"] for n, s in gemms["sides"].items()],
            ),
        ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
