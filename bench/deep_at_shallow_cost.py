"""Deep model at shallow cost (issue #25): ADMIN 60L-12L served by CTranslate2 int8 vs stock Marian 6-6 in HF.

Sides, all at one width (default d_model 512, 8 heads, FFN 2048: the paper's) and one vocabulary (the joint BPE
8000 of Multi30k train), randomly initialised: every output is forced to exactly --max-new-tokens tokens (HF
min_new_tokens = max, CT2 min_decoding_length = max), so every side runs the same decoding steps whatever its
weights.
  * hf marian 6-6: stock MarianMTModel in Transformers `generate` (the baseline);
  * ct2 marian 6-6: the same model in CTranslate2 int8 (the two runtimes' speed ratio at equal work);
  * ct2 admin 60-12 (AdminConfig's default shape, its "60L-12L" preset) and ct2 admin 36-6 (--deep): ADMIN with
    ω profiled on 8 sentence pairs (admin_profile, the paper's procedure), folded into MarianMTModel
    (deep_nmt_hf.publish.folding, checked numerically) and exported to CTranslate2 int8 (deep_nmt_hf.publish.export).
CTranslate2 picks its CPU instruction set itself (CT2_VERBOSE=1 logs it); every CT2 side runs once with that
choice ("auto") and once per --force-isa (CT2_FORCE_CPU_ISA). The variable is read at process start, so each ISA's
CT2 sides live in their own child process, which loads its models once, decodes on request and reports the CPU
seconds (time.process_time) of the decode. Its GEMMs run in oneDNN, which picks its own ISA whatever CT2's;
both are recorded.

Decoding as bench/ctranslate2_speed.py (its hf_translate / ct2_translate): beam 4, length penalty 1, batches of
--batch-size test_2016_flickr sources sorted by length (the same batches on every side), one thread a side
(torch.set_num_threads(1); CT2 intra_threads=1, inter_threads=1). Timing: rounds of HF, then the auto-ISA CT2
sides, then each forced ISA's (common.interleaved), one untimed warm-up round, medians of --repeats rounds of CPU
seconds, which a shared machine disturbs far less than wall time (the HF side: this process's; a CT2 side: what
its child measured).

Aim (issue #25): the ADMIN 60L-12L in CT2 int8 serves at least 1.5x the sentences/s of HF Marian 6-6. Why it
holds or not: work per sentence, in multiply-accumulates of the linear maps (encoder layers x source tokens,
decoder layers x steps x beam, the output projection), and the CT2/HF speed ratio measured at equal work (Marian
6-6 on both runtimes): a deep side's predicted speedup is that ratio x Marian's work / its work.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from bench.ctranslate2_speed import ct2_backend, ct2_translate, hf_translate, length_batches
from bench.lib.common import (
    RESULTS,
    interleaved,
    markdown_table,
    module_command,
    multi30k_pairs,
    multi30k_tokenizer,
    ratio,
    shared_dir,
    tokenized_batches,
    write_results,
)

NAME = "deep_at_shallow_cost"
AIM_SPEEDUP = 1.5
REPLY = "DEEP_AT_SHALLOW_COST "  # prefix of the child's reply lines on its stdout
Shape = tuple[int, int]


def shape(text: str) -> Shape:
    """'60-12' -> (60, 12): encoder and decoder layers."""
    encoder, decoder = text.split("-")
    return int(encoder), int(decoder)


def label(layers: Shape) -> str:
    return f"{layers[0]}-{layers[1]}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: d 64, 2-2 vs 6-2 / 4-1, 16 sentences"
    )
    parser.add_argument("--d-model", type=int, default=512, help="width of every side")
    parser.add_argument("--heads", type=int, default=8, help="attention heads")
    parser.add_argument("--ffn", type=int, default=None, help="FFN width (default 4 x d_model)")
    parser.add_argument("--marian", type=shape, default=(6, 6), help="Marian layers, ENC-DEC")
    parser.add_argument(
        "--deep",
        type=shape,
        nargs="+",
        default=[(60, 12), (36, 6)],
        help="ADMIN shapes; the first is the aim's",
    )
    parser.add_argument("--sentences", type=int, default=96, help="test_2016_flickr sources translated")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch (all sides)")
    parser.add_argument("--beam", type=int, default=4, help="beam size (all sides)")
    parser.add_argument("--max-new-tokens", type=int, default=32, help="every output's exact length")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (medians reported)")
    parser.add_argument(
        "--force-isa", nargs="*", default=["AVX512"], help="CT2_FORCE_CPU_ISA values measured besides auto"
    )
    parser.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # internal: serve one ISA's CT2 sides
    args = parser.parse_args(argv)
    if args.quick:
        args.d_model, args.heads, args.marian, args.deep = 64, 4, (2, 2), [(6, 2), (4, 1)]
        args.sentences, args.batch_size, args.max_new_tokens, args.repeats = 16, 8, 8, 1
    args.ffn = args.ffn or 4 * args.d_model
    return args


def source_pairs(count: int) -> tuple[Any, list[tuple[str, str]], str]:
    """The tokenizer, `count` (source, reference) pairs and their name: Multi30k test_2016_flickr, or the
    synthetic demo corpus where ../shared/data/multi30k is absent."""
    if (shared_dir() / "data" / "multi30k").is_dir():
        pairs = multi30k_pairs("test_2016_flickr", limit=count)
        return multi30k_tokenizer(8000), pairs, "Multi30k test_2016_flickr (en-de)"
    from deep_nmt_hf.data.synthetic import generate_pairs
    from deep_nmt_hf.data.tokenization import train_tokenizer

    corpus = generate_pairs(5000, seed=0)
    tokenizer = train_tokenizer([text for pair in corpus for text in pair], vocab_size=8000)
    return tokenizer, generate_pairs(count, seed=1), "the synthetic demo corpus (Multi30k absent)"


def build_sides(
    args: argparse.Namespace, tokenizer, profile_pairs: Sequence[tuple[str, str]], work: Path
) -> tuple[torch.nn.Module, dict[str, Path], dict[str, dict[str, Any]]]:
    """HF Marian, the CT2 int8 model directories (name -> path) and what each model is."""
    from transformers import MarianMTModel

    from deep_nmt_hf import AdminConfig, AdminForConditionalGeneration, DeepNMTConfig
    from deep_nmt_hf.publish.export import export_ctranslate2
    from deep_nmt_hf.publish.folding import fold_to_stock, stock_config
    from deep_nmt_hf.training import build_config
    from deep_nmt_hf.training.admin_profiling import admin_profile

    width = dict(d_model=args.d_model, encoder_ffn_dim=args.ffn, decoder_ffn_dim=args.ffn)
    width |= dict(encoder_attention_heads=args.heads, decoder_attention_heads=args.heads)
    width |= dict(layer_norm_position="post", max_position_embeddings=max(256, args.max_new_tokens + 2))

    def save_and_export(model: torch.nn.Module, name: str) -> Path:
        model.save_pretrained(work / name)
        tokenizer.save_pretrained(work / name)
        return export_ctranslate2(work / name, work / f"ct2-{name}", quantization="int8")

    torch.manual_seed(0)
    marian_config = build_config(tokenizer, DeepNMTConfig, **width, **layer_fields(args.marian))
    marian = MarianMTModel(stock_config(marian_config)).eval()
    name = f"marian {label(args.marian)}"
    ct2_dirs = {name: save_and_export(marian, name.replace(" ", "-"))}
    info = {name: {"class": "MarianMTModel", "parameters": parameters(marian)}}
    profile_batch = tokenized_batches(tokenizer, profile_pairs, batch_size=len(profile_pairs))[0]
    for layers in args.deep:
        name = f"admin {label(layers)}"
        print(f"building, profiling and folding ADMIN {label(layers)}", file=sys.stderr)
        torch.manual_seed(0)
        model = AdminForConditionalGeneration(
            build_config(tokenizer, AdminConfig, **width, **layer_fields(layers))
        )
        omegas = admin_profile(model, profile_batch)
        stock, report = fold_to_stock(model.eval())
        del model
        ct2_dirs[name] = save_and_export(stock, name.replace(" ", "-"))
        info[name] = {
            "class": f"AdminForConditionalGeneration folded into {report.stock_class}",
            "parameters": parameters(stock),
            "omega_max": {side: max(values) for side, values in omegas.items() if values},
            "fold_max_abs_logit_diff": report.max_abs_logit_diff,
        }
        del stock
    for name, path in ct2_dirs.items():
        info[name]["ct2_int8_bytes"] = sum(f.stat().st_size for f in path.iterdir())
    return marian, ct2_dirs, info


def layer_fields(layers: Shape) -> dict[str, int]:
    return {"encoder_layers": layers[0], "decoder_layers": layers[1]}


def parameters(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def serve(job_path: Path) -> int:
    """Child: load every CT2 model of the job with one thread, then decode each model named on stdin and reply
    with its CPU seconds and outputs. CT2_FORCE_CPU_ISA, if any, was set by the parent before this started."""
    import ctranslate2

    job = json.loads(job_path.read_text())
    translators = {
        name: ctranslate2.Translator(path, device="cpu", intra_threads=1, inter_threads=1)
        for name, path in job["models"].items()
    }
    print(REPLY + json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        translator = translators[line.strip()]
        start = time.process_time()
        outputs = ct2_translate(translator, job["source_tokens"], job["batches"], **job["search"])
        seconds = time.process_time() - start
        print(REPLY + json.dumps({"seconds": seconds, "outputs": outputs}), flush=True)
    return 0


class IsaChild:
    """A child process serving every CT2 side with one ISA setting (None: CT2's own choice)."""

    def __init__(self, isa: str | None, job: Path, log: Path) -> None:
        self.isa, self.log = isa, log
        env = {**os.environ, "CT2_VERBOSE": "1", "OMP_NUM_THREADS": "1"}
        env.pop("CT2_FORCE_CPU_ISA", None)
        if isa:
            env["CT2_FORCE_CPU_ISA"] = isa
        with log.open("w") as stderr:
            self.process = subprocess.Popen(
                module_command("bench.deep_at_shallow_cost", "--child", str(job)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
            )
        self.cpu_s = 0.0  # the CPU seconds of every decode so far, as the child measured them
        self.outputs: dict[str, list[list[str]]] = {}
        self.error = None if self.reply() else self.log_tail()

    def reply(self) -> dict[str, Any] | None:
        """The child's next reply, or None if it ended."""
        while line := self.process.stdout.readline():
            if line.startswith(REPLY):
                return json.loads(line[len(REPLY) :])
        return None

    def log_tail(self) -> str:
        lines = [line for line in self.log.read_text().splitlines() if line.strip()]
        return lines[-1] if lines else f"exit code {self.process.wait()}"

    def runner(self, model: str) -> Callable[[], None]:
        def run() -> None:
            self.process.stdin.write(model + "\n")
            self.process.stdin.flush()
            answer = self.reply()
            if answer is None:
                raise RuntimeError(f"the CT2 child ({self.isa or 'auto'}) ended: {self.log_tail()}")
            self.cpu_s += answer["seconds"]
            self.outputs[model] = answer["outputs"]

        return run

    def selected_isa(self) -> str:
        """The ISA the child's CTranslate2 logged at load ('- Selected ISA: AVX2')."""
        for line in self.log.read_text().splitlines():
            if "Selected ISA:" in line:
                return line.split("Selected ISA:", 1)[1].strip()
        return "unknown"

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=120)


def work_per_sentence(
    layers: Shape, d: int, ffn: int, vocab: int, source_tokens: float, steps: int, beam: int
) -> dict[str, float]:
    """Multiply-accumulates of the linear maps one sentence costs: encoder layers x source tokens x (q, k, v, o,
    FFN); per decoder layer the cross-attention keys/values once per source token and beam, then per step and
    beam self-attention (4 d²), cross-attention q and o (2 d²) and the FFN; the output projection per step and
    beam. Attention scores (d x length per token) are left out: under 1% at these lengths."""
    encoder_layers, decoder_layers = layers
    encoder = encoder_layers * source_tokens * (4 * d * d + 2 * d * ffn)
    cross_kv = decoder_layers * source_tokens * beam * 2 * d * d
    decoder = steps * beam * (decoder_layers * (6 * d * d + 2 * d * ffn) + d * vocab)
    return {
        "encoder_layer_tokens": encoder_layers * source_tokens,
        "decoder_layer_steps": decoder_layers * steps * beam,
        "gmac": (encoder + cross_kv + decoder) / 1e9,
        "encoder_share": encoder / (encoder + cross_kv + decoder),
    }


def earlier_measurement() -> str:
    """The CT2 int8 / HF ratio of bench/results/ctranslate2_speed.json, in one sentence (or '')."""
    path = RESULTS / "ctranslate2_speed.json"
    if not path.exists():
        return ""
    data = json.loads(path.read_text())
    settings, speedup = data["settings"], data["results"]["ct2_int8"]["speedup_vs_hf"]
    return (
        f" The earlier measurement (results/ctranslate2_speed.md: a post-LN {settings['layers']}-"
        f"{settings['layers']} at d {settings['d_model']}, beam {settings['beam']}, "
        f"{settings['max_new_tokens']} tokens, {settings['threads']} thread{'s' * (settings['threads'] > 1)}) "
        f"found CT2 int8 {speedup:.2f}× HF."
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return serve(args.child)
    with tempfile.TemporaryDirectory(prefix="deep_at_shallow_cost_") as work:  # GBs at full size
        return measure(args, Path(work))


def measure(args: argparse.Namespace, work: Path) -> int:
    """Build the sides in `work`, time them, write the report."""
    torch.set_num_threads(1)
    tokenizer, pairs, data_name = source_pairs(args.sentences)
    sources = [source for source, _ in pairs]
    encoded = tokenizer(sources, truncation=True, max_length=128)["input_ids"]
    batches = length_batches(encoded, args.batch_size)
    source_tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in encoded]
    search = dict(beam=args.beam, max_new_tokens=args.max_new_tokens, min_new_tokens=args.max_new_tokens)

    hf_model, ct2_dirs, models = build_sides(args, tokenizer, pairs[:8], work)
    job = work / "job.json"
    job.write_text(
        json.dumps(
            {
                "models": {name: str(path) for name, path in ct2_dirs.items()},
                "source_tokens": source_tokens,
                "batches": batches,
                "search": search,
            }
        )
    )
    children: list[IsaChild] = []
    unavailable: dict[str, str] = {}
    for isa in [None, *args.force_isa]:
        child = IsaChild(isa, job, work / f"ct2-{isa or 'auto'}.log")
        if child.error:
            unavailable[isa or "auto"] = child.error
        else:
            children.append(child)
    if "auto" in unavailable:
        raise SystemExit(f"error: CTranslate2 does not run here: {unavailable['auto']}")
    marian_name = f"marian {label(args.marian)}"
    hf_name = f"hf {marian_name}"
    outputs: dict[str, list[list[str]]] = {}

    def run_hf() -> None:
        outputs[hf_name] = hf_translate(hf_model, tokenizer, encoded, batches, **search)

    sides: dict[str, Callable[[], None]] = {hf_name: run_hf}
    isa_of: dict[str, tuple[IsaChild, str]] = {}  # side -> (child, model)
    for child in children:
        for model in ct2_dirs:
            side = f"ct2 {model} [{child.isa or 'auto'}]"
            sides[side], isa_of[side] = child.runner(model), (child, model)
    load_before = os.getloadavg()[0]

    def clock() -> float:
        """CPU seconds: this process's (the HF side) plus the decodes the children have reported."""
        return time.process_time() + sum(child.cpu_s for child in children)

    timings = interleaved(sides, repeats=args.repeats, warmup=1, clock=clock)
    load = {"load_avg_1min_before": load_before, "load_avg_1min_after": os.getloadavg()[0]}
    for child in children:
        child.close()
    for side, (child, model) in isa_of.items():
        outputs[side] = child.outputs[model]
    backend = {
        isa or "auto": ct2_backend(ct2_dirs[next(iter(ct2_dirs))], {"CT2_FORCE_CPU_ISA": isa} if isa else {})
        for isa in [None, *args.force_isa]
    }

    mean_source = sum(len(ids) for ids in encoded) / len(encoded)
    shapes = {marian_name: args.marian} | {f"admin {label(s)}": s for s in args.deep}
    work_of = {
        name: work_per_sentence(
            layers, args.d_model, args.ffn, len(tokenizer), mean_source, args.max_new_tokens, args.beam
        )
        for name, layers in shapes.items()
    }
    hf_median = timings[hf_name]["median_s"]
    results: dict[str, dict[str, Any]] = {}
    for side in sides:
        child, model = isa_of.get(side, (None, marian_name))
        auto_side = f"ct2 {model} [auto]"
        results[side] = {
            **timings[side],
            "sentences_per_s": len(sources) / timings[side]["median_s"],
            "speedup_vs_hf": ratio(hf_median, timings[side]["median_s"]),
            "output_tokens": sum(len(row) for row in outputs[side]),
            "ct2_isa": child.selected_isa() if child else None,
            "identical_to_auto_isa": (
                sum(a == b for a, b in zip(outputs[side], outputs[auto_side], strict=True))
                if child and child.isa and auto_side in outputs
                else None
            ),
        }
    analysis: dict[str, dict[str, Any]] = {}
    for side, (child, model) in isa_of.items():
        per_work = results[f"ct2 {marian_name} [{child.isa or 'auto'}]"]["speedup_vs_hf"]
        work_ratio = work_of[model]["gmac"] / work_of[marian_name]["gmac"]
        analysis[side] = {
            "work_vs_marian": work_ratio,
            "ct2_vs_hf_at_equal_work": per_work,
            "predicted_speedup": per_work / work_ratio,
            "measured_speedup": results[side]["speedup_vs_hf"],
        }
    aim_model = f"admin {label(args.deep[0])}"
    aim = {side: results[side]["speedup_vs_hf"] for side, (_, model) in isa_of.items() if model == aim_model}
    met = [side for side, speedup in aim.items() if speedup >= AIM_SPEEDUP]
    auto_aim = f"ct2 {aim_model} [auto]"
    if auto_aim in met:
        verdict = "met"
    elif met:
        verdict = "met only with a forced ISA (" + ", ".join(met) + ")"
    else:
        verdict = "not met"
    needed = AIM_SPEEDUP * work_of[aim_model]["gmac"] / work_of[marian_name]["gmac"]

    payload = {
        "settings": {k: v for k, v in vars(args).items() if k not in ("no_write", "child")},
        "models": models,
        "data": {
            "source": data_name,
            "sentences": len(sources),
            "mean_source_tokens": mean_source,
            "vocab_size": len(tokenizer),
        },
        "machine_load": load,
        "results": results,
        "work_per_sentence": work_of,
        "analysis": analysis,
        "ct2_backend": backend,
        "unavailable_isas": unavailable,
        "aim": {
            "side": aim_model,
            "speedup_at_least": AIM_SPEEDUP,
            "measured": aim,
            "verdict": verdict,
            "needed_ct2_vs_hf_at_equal_work": needed,
        },
    }
    markdown = report(args, payload, hf_name, marian_name, len(sources))
    print(markdown)
    if not args.no_write:
        print(f"wrote {write_results(NAME + ('_quick' if args.quick else ''), payload, markdown)}")
    return 0


def report(args: argparse.Namespace, payload: dict[str, Any], hf_name: str, marian: str, count: int) -> str:
    """The markdown of a run."""
    results, models, work_of = payload["results"], payload["models"], payload["work_per_sentence"]
    aim, analysis, load = payload["aim"], payload["analysis"], payload["machine_load"]
    rows = [
        [
            side,
            result["ct2_isa"] or "-",
            result["median_s"],
            result["sentences_per_s"],
            result["speedup_vs_hf"],
            "-" if result["identical_to_auto_isa"] is None else f"{result['identical_to_auto_isa']}/{count}",
        ]
        for side, result in results.items()
    ]
    work_rows = [
        [
            name,
            f"{models[name]['parameters'] / 1e6:.1f} M",
            round(w["encoder_layer_tokens"]),
            w["decoder_layer_steps"],
            round(w["gmac"], 2),
            f"{w['encoder_share']:.0%}",
            round(w["gmac"] / work_of[marian]["gmac"], 2),
        ]
        for name, w in work_of.items()
    ]
    why_rows = [
        [
            side,
            round(a["work_vs_marian"], 2),
            round(a["ct2_vs_hf_at_equal_work"], 2),
            round(a["predicted_speedup"], 2),
            round(a["measured_speedup"], 2),
        ]
        for side, a in analysis.items()
        if not side.startswith(f"ct2 {marian} ")
    ]
    folds = ", ".join(
        f"{name}: max |Δlogits| {m['fold_max_abs_logit_diff']:.1e}, largest ω "
        + " / ".join(f"{v:.2f}" for v in m["omega_max"].values())
        for name, m in models.items()
        if "fold_max_abs_logit_diff" in m
    )
    isa_text = "\n".join(
        f"- {isa}: " + "; ".join(f"`{line}`" for line in lines)
        for isa, lines in payload["ct2_backend"].items()
    )
    unavailable = "".join(
        f"\n- {isa} could not be measured: `{error}`" for isa, error in payload["unavailable_isas"].items()
    )
    measured = ", ".join(f"{side} {speedup:.2f}×" for side, speedup in aim["measured"].items())
    return (
        "# Deep model at shallow cost: ADMIN in CTranslate2 int8 vs Marian in Transformers generate (CPU)\n\n"
        f"Every side at d_model {args.d_model}, {args.heads} heads, FFN {args.ffn}, joint BPE vocabulary of "
        f"{payload['data']['vocab_size']}, random init. {count} sources of {payload['data']['source']} "
        f"(mean {payload['data']['mean_source_tokens']:.1f} tokens with </s>), beam {args.beam}, batch "
        f"{args.batch_size}, every output forced to exactly {args.max_new_tokens} tokens, one thread a side; "
        f"sides interleaved in rounds, medians of {args.repeats} rounds of CPU seconds after a warm-up. ADMIN: ω "
        f"profiled on 8 pairs, folded into MarianMTModel ({folds}), exported to CTranslate2 int8. "
        "[ISA]: the instruction set CTranslate2 used (auto: its own choice; otherwise forced with "
        "CT2_FORCE_CPU_ISA).\n\n"
        + markdown_table(
            ["side", "CT2 ISA", "median CPU s", "sent/s", f"speedup vs {hf_name}", "identical to auto ISA"],
            rows,
        )
        + f"\n\nAim (issue #25, {aim['side']} in CT2 int8 ≥ {AIM_SPEEDUP:g}× {hf_name}): **{aim['verdict']}** "
        f"({measured}).\n\n"
        f"1-minute load average of the machine: {load['load_avg_1min_before']:.1f} before, "
        f"{load['load_avg_1min_after']:.1f} after the timing.\n\n"
        "## Why: work per sentence and the runtimes' speed at equal work\n\n"
        "Multiply-accumulates of the linear maps per sentence (encoder: layers × source tokens; decoder: layers × "
        f"steps × beam, plus the output projection over the vocabulary):\n\n"
        + markdown_table(
            [
                "model",
                "parameters",
                "enc layers × src tokens",
                "dec layers × steps × beam",
                "GMAC",
                "encoder share",
                f"work vs {marian}",
            ],
            work_rows,
        )
        + f"\n\nCT2 int8 on {marian} against HF on the same model is the two runtimes' speed ratio at equal work; a "
        "deep side's predicted speedup is that ratio divided by its work relative to Marian's (it assumes both "
        "runtimes' speed per MAC does not change with the shape; the encoder's large batched GEMMs run faster per "
        "MAC than the decoder's per-step ones, so an encoder-heavy model beats the prediction a little).\n\n"
        + markdown_table(
            ["side", "work vs Marian", "CT2/HF at equal work", "predicted speedup", "measured"], why_rows
        )
        + f"\n\nTo serve {aim['side']} at {AIM_SPEEDUP:g}× HF Marian, CT2 must run {aim['needed_ct2_vs_hf_at_equal_work']:.2f}× "
        "faster than HF at equal work." + earlier_measurement() + "\n\n"
        "## Instruction sets\n\n"
        "What CTranslate2 (CT2_VERBOSE=1) and oneDNN, which runs its GEMMs (ONEDNN_VERBOSE=1), report per ISA "
        "setting; CT2_FORCE_CPU_ISA sets CTranslate2's own kernels only, oneDNN picks its ISA itself:\n\n"
        + isa_text
        + unavailable
        + "\n"
    )


if __name__ == "__main__":
    raise SystemExit(main())
