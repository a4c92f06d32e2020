"""Phase `generate`: beam-4 generation, eager and with a static cache + torch.compile."""

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
