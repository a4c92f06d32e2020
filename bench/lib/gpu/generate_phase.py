"""Phase `generate`: beam-4 generation, eager and with a static cache + torch.compile; with
`--generate-precisions`, also eager in bf16 / fp16 (the model cast) and int8 (publish/quantization.py: oneDNN on a
CPU, torchao's dynamic int8 on CUDA; a row says "refused" where torchao is missing or cannot serve)."""

from __future__ import annotations

import argparse
import time

import torch

from .models import MODELS, build_model
from .results import Results
from .steps import sync


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
        precisions = [p for p in getattr(args, "generate_precisions", ["fp32"]) if p != "fp32"]
        modes = ["eager"] + [f"eager {p}" for p in precisions] + (["static+compiled"] if compiled else [])
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
                if mode.endswith(("bf16", "fp16")):
                    model = model.to({"bf16": torch.bfloat16, "fp16": torch.float16}[mode[-4:]])
                elif mode.endswith("int8"):
                    from deep_nmt_hf.publish.quantization import Int8Unavailable, quantize_int8

                    method = "onednn" if device.type == "cpu" else "torchao-dynamic"
                    try:
                        quantize_int8(model, method=method)
                    except Int8Unavailable as refusal:
                        return {"status": f"refused: {refusal}"}
                    except Exception as error:  # torchao on this device: recorded, the other rows go on
                        return {"status": f"failed: {type(error).__name__}: {str(error)[:200]}"}
                elif (
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
