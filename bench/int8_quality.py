"""Does int8 keep the BLEU of Multi30k-trained models of every variant?

The depth study's committed models (bench/results/depth_multi30k/e30/*/seed1.averaged.safetensors: d_model 64,
trained 30 epochs on Multi30k en->de, bench/lib/study_weights.py) translate test_2016_flickr in float32 and after
`deep_nmt_hf.quantize_int8` (every nn.Linear to int8 through oneDNN, the output projection included), with the
model's own generation config (the recipe's beam and length penalty). Reported: corpus BLEU of both, the
difference (goal: |int8 - fp32| <= 0.3), and how many of the 1000 sentences come out identical. One thread.

    python -m bench.int8_quality                     # 7 models x 2 sides (~10 CPU-min)
    python -m bench.int8_quality --only admin-18-6   # one model

Writes bench/results/int8_quality.{json,md}.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from typing import Any

from bench.lib.common import RESULTS, markdown_table, multi30k_pairs, multi30k_tokenizer, write_results

NAME = "int8_quality"
MAX_DELTA = 0.3
# one committed model of each variant (seed 1): the study's row name -> the variant it trains
ROWS = {
    "post-6-6": "base",
    "admin-18-6": "admin",
    "deepnorm-18-6": "deepnorm",
    "dsinit-matt-18-6": "dsinit_matt",
    "dlcl-18-6": "dlcl",
    "shared-18-6": "shared_layers",
    "deep-decoder-6-12": "deep_decoder",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="+", choices=list(ROWS), help="these rows only")
    parser.add_argument("--sentences", type=int, default=1000, help="test_2016_flickr sentences")
    return parser.parse_args(argv)


def score_row(name: str, sentences: int) -> dict[str, Any]:
    """fp32 and int8 test BLEU of NAME's committed seed-1 model."""
    import json

    import numpy as np
    import torch

    from bench.lib.study_weights import load_weights, tokenizer_digest
    from deep_nmt_hf import quantize_int8
    from deep_nmt_hf.science.significance import bleu_from_statistics, bleu_statistics
    from deep_nmt_hf.training import translate

    folder = RESULTS / "depth_multi30k" / "e30" / name
    record = json.loads((folder / "seed1.json").read_text())
    tokenizer = multi30k_tokenizer(record["settings"]["vocab_size"])
    model = load_weights(folder / "seed1.averaged.safetensors", tokenizer_sha256=tokenizer_digest(tokenizer))
    model = model.float().eval()
    pairs = multi30k_pairs("test_2016_flickr", limit=sentences)
    sources, references = [s for s, _ in pairs], [t for _, t in pairs]
    sides = {"fp32": model, "int8": quantize_int8(copy.deepcopy(model))}
    result: dict[str, Any] = {"name": name, "variant": ROWS[name], "sentences": len(pairs)}
    outputs = {}
    for side, side_model in sides.items():
        start = time.process_time()
        with torch.inference_mode():
            outputs[side] = translate(
                side_model, tokenizer, sources, num_beams=record["options"]["num_beams"], batch_size=64
            )
        statistics = np.sum(bleu_statistics(outputs[side], references), axis=0)
        result[f"{side}_bleu"] = float(bleu_from_statistics(statistics))
        result[f"{side}_cpu_s"] = round(time.process_time() - start, 1)
    result["delta"] = result["int8_bleu"] - result["fp32_bleu"]
    result["identical"] = sum(a == b for a, b in zip(outputs["fp32"], outputs["int8"], strict=True))
    result["within_goal"] = abs(result["delta"]) <= MAX_DELTA
    print(result, file=sys.stderr)
    return result


def markdown(rows: list[dict[str, Any]]) -> str:
    table = markdown_table(
        ["model", "variant", "fp32 BLEU", "int8 BLEU", "int8 - fp32", "identical sentences", "fp32 / int8 CPU s"],
        [
            [r["name"], r["variant"], f"{r['fp32_bleu']:.2f}", f"{r['int8_bleu']:.2f}", f"{r['delta']:+.2f}",
             f"{r['identical']}/{r['sentences']}", f"{r['fp32_cpu_s']} / {r['int8_cpu_s']}"]
            for r in rows
        ],
    )  # fmt: skip
    met = all(r["within_goal"] for r in rows)
    worst = max(abs(r["delta"]) for r in rows)
    return (
        "# int8 quality: Multi30k-trained models, fp32 vs int8\n\n"
        "The depth study's committed models (d_model 64, 30 epochs of Multi30k en->de, seed 1) translate "
        "test_2016_flickr with their own generation config, in float32 and after `quantize_int8` (oneDNN int8, "
        "every linear layer). CPU seconds on a shared machine: indicative only (small models, so int8's "
        "per-call quantization weighs more than at d_model 512).\n\n"
        f"{table}\n\nGoal |int8 - fp32| <= {MAX_DELTA} BLEU: **{'met' if met else 'not met'}** (largest "
        f"difference {worst:.2f}).\n"
    )


def main(argv: list[str] | None = None) -> int:
    import torch

    args = parse_args(argv)
    torch.set_num_threads(1)
    rows = [score_row(name, args.sentences) for name in (args.only or ROWS)]
    text = markdown(rows)
    print(text)
    if not args.only:
        write_results(NAME, {"rows": rows, "max_delta": MAX_DELTA}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
