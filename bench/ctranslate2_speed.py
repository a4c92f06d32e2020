"""CTranslate2 speed: Transformers `generate` vs CTranslate2 float32 vs CTranslate2 int8 on Multi30k sources.

Model: a post-LN deep_nmt_hf model (default 6-6 layers, d_model 256, 4 heads, FFN 1024, joint BPE 8000 of
Multi30k train), briefly trained on Multi30k en->de (--train-steps Adam steps, so that outputs are sentences that
end in </s> rather than random strings running to the length limit), folded into MarianMTModel and exported with
deep_nmt_hf.export.export_ctranslate2 (float32 and int8).

Decoding is the same search on all three sides: beam 4, length penalty 1, stop once 4 hypotheses are finished
(HF early_stopping=True = CT2 patience=1), at most --max-new-tokens tokens, batches of --batch-size sentences
sorted by source length (the same batches on every side), the same number of CPU threads. Timing: the three sides
interleaved (A B C A B C ...), one untimed warm-up round, medians over --repeats rounds. Output tokens/s counts
the generated tokens including </s>. Also reported: how many outputs equal HF's exactly, and BLEU vs references.

Issue #10's target: CT2 int8 >= 5x the sentences/s of HF generate.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import interleaved, markdown_table, multi30k_pairs, multi30k_tokenizer, ratio, write_results  # noqa: E402

NAME = "ctranslate2_speed"
TARGET_SPEEDUP = 5.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: tiny model, 64 sentences, 1 repeat")
    parser.add_argument("--layers", type=int, default=6, help="encoder and decoder layers")
    parser.add_argument("--d-model", type=int, default=256, help="model width")
    parser.add_argument(
        "--train-steps", type=int, default=300, help="Adam steps on Multi30k train (0: random)"
    )
    parser.add_argument("--sentences", type=int, default=1000, help="test_2016_flickr sources translated")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch (all sides)")
    parser.add_argument("--beam", type=int, default=4, help="beam size (all sides)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="output length limit (all sides)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (medians reported)")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads(), help="CPU threads, all sides")
    parser.add_argument("--no-write", action="store_true", help="print only; do not write bench/results")
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.d_model, args.train_steps = 2, 64, 20
        args.sentences, args.repeats = 64, 1
    return args


def train_model(args: argparse.Namespace, tokenizer, out: Path) -> dict:
    """Build the post-LN model, train it briefly (Adam, inverse-sqrt warmup), save it with its tokenizer."""
    from common import tokenized_batches

    from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration
    from deep_nmt_hf.training import build_config

    config = build_config(
        tokenizer,
        DeepNMTConfig,
        d_model=args.d_model,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=4 * args.d_model,
        decoder_ffn_dim=4 * args.d_model,
        layer_norm_position="post",
        dropout=0.1,
    )
    torch.manual_seed(0)
    model = DeepNMTForConditionalGeneration(config).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    warmup = max(1, args.train_steps // 4)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, (warmup / (step + 1)) ** 0.5)
    )
    losses = []
    start = time.perf_counter()
    if args.train_steps > 0:
        pairs = multi30k_pairs("train", limit=args.train_steps * 64)
        batches = tokenized_batches(tokenizer, pairs, batch_size=64, max_length=64)
        for step in range(args.train_steps):
            loss = model(**batches[step % len(batches)]).loss
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            losses.append(loss.item())
            if step % 50 == 0:
                print(f"  step {step}: loss {loss.item():.3f}", file=sys.stderr)
    model.eval().save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "train_steps": args.train_steps,
        "train_batch_size": 64,
        "train_seconds": round(time.perf_counter() - start, 1),
        "final_loss_mean_last_20": sum(losses[-20:]) / max(1, len(losses[-20:])) if losses else None,
        "parameters": sum(p.numel() for p in model.parameters()),
    }


def main(argv: list[str] | None = None) -> int:
    import ctranslate2
    import sacrebleu
    from transformers import AutoModelForSeq2SeqLM

    from deep_nmt_hf.export import export_ctranslate2
    from deep_nmt_hf.folding import fold_directory

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer = multi30k_tokenizer(8000)
    pairs = multi30k_pairs("test_2016_flickr", limit=args.sentences)
    sources = [s for s, _ in pairs]
    references = [t for _, t in pairs]

    work = Path(tempfile.mkdtemp(prefix="ct2_speed_"))
    print(f"training a {args.layers}-{args.layers} post-LN model, d_model {args.d_model}", file=sys.stderr)
    training = train_model(args, tokenizer, work / "trained")
    report = fold_directory(work / "trained", work / "folded")
    export_ctranslate2(work / "folded", work / "ct2-float32")
    export_ctranslate2(work / "folded", work / "ct2-int8", quantization="int8")

    hf_model = AutoModelForSeq2SeqLM.from_pretrained(work / "folded").eval()
    encoded = tokenizer(sources, truncation=True, max_length=128)["input_ids"]
    order = sorted(range(len(sources)), key=lambda i: len(encoded[i]), reverse=True)
    batches = [order[i : i + args.batch_size] for i in range(0, len(order), args.batch_size)]
    source_tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in encoded]
    outputs: dict[str, list[list[str]]] = {}

    def run_hf() -> None:
        result: list[list[str]] = [[] for _ in sources]
        with torch.inference_mode():
            for batch in batches:
                padded = tokenizer.pad({"input_ids": [encoded[i] for i in batch]}, return_tensors="pt")
                generated = hf_model.generate(
                    **padded,
                    num_beams=args.beam,
                    max_length=args.max_new_tokens + 1,
                    length_penalty=1.0,
                    early_stopping=True,
                    forced_eos_token_id=None,
                    do_sample=False,
                )
                for i, row in zip(batch, generated.tolist(), strict=True):
                    ids = [t for t in row[1:] if t != tokenizer.pad_token_id]
                    result[i] = tokenizer.convert_ids_to_tokens(ids)
        outputs["hf"] = result

    def ct2_runner(name: str):
        translator = ctranslate2.Translator(
            str(work / f"ct2-{name}"), device="cpu", compute_type="default", intra_threads=args.threads
        )

        def run() -> None:
            result: list[list[str]] = [[] for _ in sources]
            for batch in batches:
                translated = translator.translate_batch(
                    [source_tokens[i] for i in batch],
                    beam_size=args.beam,
                    patience=1.0,
                    length_penalty=1.0,
                    max_decoding_length=args.max_new_tokens,
                    min_decoding_length=0,
                    return_end_token=True,
                    max_batch_size=args.batch_size,
                )
                for i, hypothesis in zip(batch, translated, strict=True):
                    result[i] = hypothesis.hypotheses[0]
            outputs[f"ct2_{name}"] = result

        return run

    load_before = os.getloadavg()[0]
    sides = {"hf": run_hf, "ct2_float32": ct2_runner("float32"), "ct2_int8": ct2_runner("int8")}
    timings = interleaved(sides, repeats=args.repeats, warmup=1)
    load = {"load_avg_1min_before": load_before, "load_avg_1min_after": os.getloadavg()[0]}

    rows, results = [], {}
    hf_median = timings["hf"]["median_s"]
    for name in sides:
        tokens = sum(len(row) for row in outputs[name])
        texts = [
            tokenizer.convert_tokens_to_string([t for t in row if t != "</s>"]).strip()
            for row in outputs[name]
        ]
        bleu = sacrebleu.corpus_bleu(texts, [references]).score
        median = timings[name]["median_s"]
        results[name] = {
            **timings[name],
            "output_tokens": tokens,
            "tokens_per_s": tokens / median,
            "sentences_per_s": len(sources) / median,
            "speedup_vs_hf": ratio(hf_median, median),
            "identical_to_hf": sum(a == b for a, b in zip(outputs[name], outputs["hf"], strict=True)),
            "ended_with_eos": sum(row[-1:] == ["</s>"] for row in outputs[name]),
            "bleu": bleu,
        }
        rows.append(
            [
                name,
                round(median, 2),
                round(tokens / median, 1),
                round(len(sources) / median, 2),
                round(results[name]["speedup_vs_hf"], 2),
                f"{results[name]['identical_to_hf']}/{len(sources)}",
                round(bleu, 2),
            ]
        )
    speedup = results["ct2_int8"]["speedup_vs_hf"]
    verdict = "met" if speedup >= TARGET_SPEEDUP else "not met"
    payload = {
        "settings": {k: v for k, v in vars(args).items() if k != "no_write"},
        "model": {
            "layers": f"{args.layers}-{args.layers}",
            "d_model": args.d_model,
            "layer_norm_position": "post",
            "stock_class": report.stock_class,
            "fold_max_abs_logit_diff": report.max_abs_logit_diff,
            **training,
        },
        "machine_load": load,
        "data": {"split": "test_2016_flickr", "sentences": len(sources), "pair": "en-de"},
        "results": results,
        "issue_10_target": {
            "ct2_int8_speedup_at_least": TARGET_SPEEDUP,
            "measured": speedup,
            "verdict": verdict,
        },
    }
    trained_text = (
        f"trained {args.train_steps} Adam steps on Multi30k en-de (batch 64)"
        if args.train_steps
        else "random init (untrained: outputs rarely end before the length limit)"
    )
    ended = ", ".join(f"{name} {results[name]['ended_with_eos']}" for name in sides)
    markdown = (
        "# CTranslate2 vs Transformers generate (CPU)\n\n"
        f"{args.layers}-{args.layers} post-LN deep_nmt_hf model, d_model {args.d_model}, {trained_text}, "
        f"folded into {report.stock_class} and "
        f"exported to CTranslate2. {len(sources)} test_2016_flickr sources, beam {args.beam}, batch "
        f"{args.batch_size}, at most {args.max_new_tokens} new tokens, {args.threads} threads on every side; "
        f"sides interleaved, medians of {args.repeats} rounds after a warm-up.\n\n"
        + markdown_table(
            ["side", "median s", "output tok/s", "sent/s", "speedup vs HF", "identical to HF", "BLEU"], rows
        )
        + f"\n\nIssue #10 target (CT2 int8 >= {TARGET_SPEEDUP:g}x HF generate): **{verdict}** "
        f"(measured {speedup:.2f}x).\n\n"
        f"Outputs ending in </s> (of {len(sources)}): {ended}. 1-minute load average of the (shared) machine: "
        f"{load['load_avg_1min_before']:.1f} before, {load['load_avg_1min_after']:.1f} after the timing.\n"
    )
    print(markdown)
    if not args.no_write:
        print(f"wrote {write_results(NAME + ('_quick' if args.quick else ''), payload, markdown)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
