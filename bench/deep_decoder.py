"""Deep decoders with and without cross-attention drop (CAD) + collapse-reducing training (DDR + ALD) on Multi30k.

deep-decoder-cad-crt (sec. 3-4) reports that a Transformer whose decoder is as deep as its encoder (15-15 on WMT14)
collapses into an unconditional language model (BLEU ≈ 0.5) unless the lowest decoder layers drop their
cross-attention (CAD) and training adds the DDR and ALD losses (CRT). This script trains two models of the same
shape on Multi30k en→de for the same number of steps on the same batches:

  plain      DeepDecoderConfig with cross_attention_drop_layers = 0 and both extra losses off
  cad_crt    DeepDecoderConfig defaults: L_dr = 2 lowest decoder layers without cross-attention (p_net = 1),
             ddr_loss_weight = ald_loss_weight = 1, p_ALD = 0.3, τ = 0.1

and reports for each: sacreBLEU (with signature, beam 4) on a subset of test_2016_flickr, and source sensitivity
with teacher forcing on the same subset: the target-token distributions P(y_t | y_<t, X) with the real source X and
with every real source token replaced by <unk> (special tokens kept), compared by the mean KL(P_X ‖ P_unk) per
target token and the fraction of target positions whose argmax changes. A collapsed decoder does not care about the
source: KL ≈ 0 and few changed tokens. Also the teacher-forced cross-entropy with the real and the <unk> source.

Both models use the variant's pre-LN default, label smoothing 0.1, dropout 0.1, Adam (0.9, 0.98) with inverse-sqrt
warmup; model seed 0 for both; batches of Multi30k train in one fixed shuffled order. The CAD + CRT model costs about
four forward passes per step (DDR adds a decoder pass, ALD two full passes), so it takes ~3× the wall-clock.

    python -m bench.deep_decoder                 # 15-15 at d 128, 1200 steps each (hours on a shared 2-core box)
    python -m bench.deep_decoder --quick         # smoke run (4-4, 20 steps)
    # the two arms as two processes side by side, then the result files from both:
    python -m bench.deep_decoder --layers 6 --batch-size 32 --steps 60 --warmup 20 --lr 2e-3 \
        --test-sentences 100 --arm plain            # and the same with --arm cad_crt, then with --report

Writes bench/results/deep_decoder.{json,md,png}.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path
from typing import Any

from bench.lib.common import (
    CACHE,
    RESULTS,
    markdown_table,
    multi30k_pairs,
    multi30k_tokenizer,
    tokenized_batches,
    write_results,
)

NAME = "deep_decoder"
TEST_SPLIT = "test_2016_flickr"
ARMS = ("plain", "cad_crt")
ARM_CACHE = CACHE / NAME


def result_name(args: argparse.Namespace) -> str:
    """`--quick` smoke runs write NAME_quick.* so that they never overwrite the full results."""
    return f"{NAME}_quick" if args.quick else NAME


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 4-4 layers, 20 steps, 32 test sentences"
    )
    parser.add_argument("--layers", type=int, default=15, help="encoder and decoder layers (default 15)")
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--ffn-dim", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--steps", type=int, default=1200, help="training steps of each model")
    parser.add_argument("--batch-size", type=int, default=64, help="sentence pairs per step")
    parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--test-sentences", type=int, default=300, help="test_2016_flickr subset for BLEU")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1: the machine is shared)")
    parser.add_argument(
        "--arm",
        choices=ARMS,
        help="train and score only this model and keep its result in bench/.cache (run the two arms as two "
        "processes side by side), then `--report` writes the result files from both",
    )
    parser.add_argument("--report", action="store_true", help="write the result files from the cached arms")
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.steps, args.test_sentences, args.warmup = 4, 20, 32, 5
    return args


def build_config(args: argparse.Namespace, tokenizer: Any, cad_crt: bool):
    from deep_nmt_hf import DeepDecoderConfig

    shape = {
        "encoder_layers": args.layers,
        "decoder_layers": args.layers,
        "d_model": args.d_model,
        "encoder_ffn_dim": args.ffn_dim,
        "decoder_ffn_dim": args.ffn_dim,
        "encoder_attention_heads": args.heads,
        "decoder_attention_heads": args.heads,
        "vocab_size": len(tokenizer),
        "pad_token_id": tokenizer.pad_token_id,
        "eos_token_id": tokenizer.eos_token_id,
        "unk_token_id": tokenizer.unk_token_id,
        "decoder_start_token_id": tokenizer.pad_token_id,
        "max_position_embeddings": 256,
        "label_smoothing": 0.1,
        "dropout": 0.1,
    }
    if not cad_crt:
        shape |= {"cross_attention_drop_layers": 0, "ddr_loss_weight": 0.0, "ald_loss_weight": 0.0}
    return DeepDecoderConfig(**shape)


def train_model(config: Any, batches: list[dict], args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    import torch

    from deep_nmt_hf import DeepDecoderForConditionalGeneration
    from deep_nmt_hf.training import ADAM_BETAS

    torch.manual_seed(0)
    model = DeepDecoderForConditionalGeneration(config)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, betas=ADAM_BETAS)

    def schedule(step: int) -> float:  # inverse-sqrt with linear warmup (Vaswani et al. 2017)
        step += 1
        return min(step / args.warmup, math.sqrt(args.warmup / step))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    model.train()
    log: list[dict[str, float]] = []
    start = time.perf_counter()
    for step in range(args.steps):
        batch = batches[step % len(batches)]
        out = model(**batch)
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer.step()
        scheduler.step()
        row = {"step": step + 1, "loss": float(out.loss.detach())}
        for name in ("nll_loss", "ddr_loss", "ald_loss"):
            value = getattr(out, name, None)
            if value is not None:
                row[name] = float(value)
        log.append(row)
        if (step + 1) % max(1, args.steps // 10) == 0:
            print(
                f"  step {step + 1}/{args.steps} loss {row['loss']:.3f} ({time.perf_counter() - start:.0f}s)"
            )
    return model, {"train_seconds": time.perf_counter() - start, "log": log}


def source_sensitivity(model: Any, tokenizer: Any, pairs: list[tuple[str, str]]) -> dict[str, float]:
    """Teacher-forced comparison of P(y_t | y_<t, X) with the real source and with an all-<unk> source."""
    import torch

    config = model.config
    model.eval()
    special = torch.tensor([config.eos_token_id, config.pad_token_id])
    kl_sum = changed = tokens = 0.0
    nll_real = nll_unk = 0.0
    with torch.inference_mode():
        for batch in tokenized_batches(tokenizer, pairs, 50):
            unk_ids = batch["input_ids"].masked_fill(
                ~torch.isin(batch["input_ids"], special), config.unk_token_id
            )
            real = model(**batch).logits.float().log_softmax(-1)
            unk = model(**{**batch, "input_ids": unk_ids}).logits.float().log_softmax(-1)
            mask = batch["labels"].ne(-100)
            labels = batch["labels"].clamp(min=0)
            kl = (real.exp() * (real - unk)).sum(-1)
            kl_sum += float(kl[mask].sum())
            changed += float((real.argmax(-1) != unk.argmax(-1))[mask].sum())
            nll_real -= float(real.gather(-1, labels.unsqueeze(-1)).squeeze(-1)[mask].sum())
            nll_unk -= float(unk.gather(-1, labels.unsqueeze(-1)).squeeze(-1)[mask].sum())
            tokens += float(mask.sum())
    return {
        "mean_kl_real_vs_unk": kl_sum / tokens,
        "changed_argmax_fraction": changed / tokens,
        "nll_real_source": nll_real / tokens,
        "nll_unk_source": nll_unk / tokens,
        "target_tokens": int(tokens),
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name, result in results.items():
        log = result["training"]["log"]
        key = "nll_loss" if "nll_loss" in log[0] else "loss"
        window = max(1, len(log) // 50)
        values = [row[key] for row in log]
        smooth = [
            sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
            for i in range(len(values))
        ]
        ax.plot([row["step"] for row in log], smooth, label=f"{name} (BLEU {result['metrics']['bleu']:.1f})")
    ax.set_xlabel("step")
    ax.set_ylabel("training cross-entropy (label-smoothed)")
    ax.set_title("Deep decoder on Multi30k en→de")
    ax.legend()
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    from deep_nmt_hf.training import compute_translation_metrics, translate

    torch.set_num_threads(args.threads)
    tokenizer = multi30k_tokenizer(args.vocab_size)
    train_pairs = multi30k_pairs("train")
    random.Random(0).shuffle(train_pairs)
    train_pairs = train_pairs[: args.steps * args.batch_size]
    batches = tokenized_batches(tokenizer, train_pairs, args.batch_size)
    test_pairs = multi30k_pairs(TEST_SPLIT, limit=args.test_sentences)
    results: dict[str, Any] = {}
    for name in ARMS if args.arm is None else (args.arm,):
        if args.report:
            break
        config = build_config(args, tokenizer, name == "cad_crt")
        print(f"{name}: training {args.layers}-{args.layers} d{args.d_model} for {args.steps} steps")
        model, training = train_model(config, batches, args)
        start = time.perf_counter()
        hypotheses = translate(model, tokenizer, [s for s, _ in test_pairs], num_beams=4, batch_size=50)
        metrics = compute_translation_metrics(hypotheses, [t for _, t in test_pairs])
        metrics["translate_seconds"] = time.perf_counter() - start
        sensitivity = source_sensitivity(model, tokenizer, test_pairs)
        print(f"  BLEU {metrics['bleu']:.2f}  sensitivity {sensitivity}")
        results[name] = {
            "config": {
                k: getattr(config, k)
                for k in (
                    "encoder_layers",
                    "decoder_layers",
                    "d_model",
                    "encoder_ffn_dim",
                    "layer_norm_position",
                    "cross_attention_drop_layers",
                    "cross_attention_drop_rate",
                    "ddr_loss_weight",
                    "ald_loss_weight",
                    "ald_max_ratio",
                    "ald_temperature",
                    "label_smoothing",
                )
            },
            "parameters": sum(p.numel() for p in model.parameters()),
            "training": training,
            "final_loss_mean_last_50": sum(r.get("nll_loss", r["loss"]) for r in training["log"][-50:])
            / len(training["log"][-50:]),
            "metrics": metrics,
            "source_sensitivity": sensitivity,
            "examples": [
                {"source": s, "reference": t, "hypothesis": h}
                for (s, t), h in list(zip(test_pairs, hypotheses, strict=True))[:3]
            ],
            "settings": vars(args),
        }
        if args.arm is not None:
            ARM_CACHE.mkdir(parents=True, exist_ok=True)
            tmp = ARM_CACHE / f"{result_name(args)}-{name}.json.tmp"
            tmp.write_text(json.dumps(results[name], default=str))
            tmp.replace(ARM_CACHE / f"{result_name(args)}-{name}.json")
            return
    if args.report:
        results = {
            name: json.loads((ARM_CACHE / f"{result_name(args)}-{name}.json").read_text()) for name in ARMS
        }
        if results["plain"]["settings"] != {**results["cad_crt"]["settings"], "arm": "plain"}:
            raise SystemExit("error: the cached arms were run with different settings; rerun both")
        for key in ("layers", "d_model", "ffn_dim", "steps", "batch_size", "test_sentences"):
            setattr(args, key, results["plain"]["settings"][key])
        test_pairs = test_pairs[: args.test_sentences]
    header = [
        "model",
        "params",
        "train CE (last 50)",
        "BLEU",
        "chrF",
        "KL(real‖unk)",
        "changed argmax",
        "CE real src",
        "CE unk src",
        "train s",
    ]
    rows = [
        [
            name,
            f"{r['parameters'] / 1e6:.2f}M",
            r["final_loss_mean_last_50"],
            r["metrics"]["bleu"],
            r["metrics"]["chrf"],
            r["source_sensitivity"]["mean_kl_real_vs_unk"],
            f"{100 * r['source_sensitivity']['changed_argmax_fraction']:.1f}%",
            r["source_sensitivity"]["nll_real_source"],
            r["source_sensitivity"]["nll_unk_source"],
            f"{r['training']['train_seconds']:.0f}",
        ]
        for name, r in results.items()
    ]
    markdown = (
        f"# Deep decoder: plain vs CAD + CRT ({args.layers}-{args.layers}, d {args.d_model}, ffn {args.ffn_dim}, "
        f"{args.steps} steps × {args.batch_size} sentences)\n\n"
        + markdown_table(header, rows)
        + f"\n\nBLEU: sacreBLEU on the first {len(test_pairs)} sentences of {TEST_SPLIT}, beam 4 "
        f"(`{results['plain']['metrics']['bleu_signature']}`). Source sensitivity: teacher-forced on the same "
        "sentences, real source vs every real source token replaced by <unk>; CE is the unsmoothed per-token "
        "cross-entropy of the reference.\n"
    )
    plot(results, RESULTS / f"{result_name(args)}.png")
    payload = {"settings": vars(args), "test_split": TEST_SPLIT, "results": results}
    print(write_results(result_name(args), payload, markdown))


if __name__ == "__main__":
    main()
