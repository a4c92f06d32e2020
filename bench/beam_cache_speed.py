"""Beam-search speed of every variant's `generate` with our cache slots vs Transformers' generic ones, beside stock
Marian.

Our decoders swap the generic slots `generate` creates for ones that do no wasted work (model/caches.py): the
cross-attention keys and values are not gathered at each beam step (their rows are equal within a sentence's
beams: `BeamConstantLayer`), the self-attention cache grows in place instead of concatenating a copy of the prefix
(`GrowingLayer`), and MAtt's running-average slot gathers only its last entry (`RunningAverageLayer`). This script
measures, side by side in one process (interleaved rounds, medians of process CPU seconds with one thread):

  marian     stock MarianMTModel built from our base config (the folded base; Transformers' own caches)
  <variant>  every deep_nmt_hf variant at the same shape, with our cache slots (what `generate` does)
  generic    the same model with Transformers' generic slots (`DynamicLayer` everywhere, MAtt's slot concatenating
             and gathered in full): what our decoders did before

Shape (issue 65): 6 encoder and 6 decoder layer applications (shared layers: 3 unique layers applied twice), d_model
512, 8 heads, FFN 2048, the Multi30k joint BPE vocabulary (8000), beam 4, batch 32 Multi30k test sources, every
hypothesis forced to exactly 32 new tokens, random weights (speed does not depend on training).

    python -m bench.beam_cache_speed            # full shape (~25 min on a loaded machine)
    python -m bench.beam_cache_speed --quick    # smoke run (d 64, 2 variants, ~1 min)

Writes bench/results/beam_cache_speed.{json,md} (`--quick`: beam_cache_speed_quick.*). Absolute times on a shared,
loaded machine mean little; the ratios, measured in the same rounds, are the result.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from collections.abc import Iterator
from typing import Any

from bench.lib.common import (
    interleaved,
    markdown_table,
    model_from_fields,
    multi30k_pairs,
    multi30k_tokenizer,
    ops_table,
    profile_ops,
    ratio,
    write_results,
)

NAME = "beam_cache_speed"
VARIANT_FIELDS = {  # 6 + 6 layer applications for every variant
    "shared_layers": {
        "encoder_layer_repeats": 2,
        "decoder_layer_repeats": 2,
        "encoder_layers": 3,
        "decoder_layers": 3,
    },
}
GOAL_VS_MARIAN = 1.15
GOAL_MATT_VS_SELF = 1.3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: d 64, base and MAtt only")
    parser.add_argument("--variants", nargs="+", default=None, help="default: every variant")
    parser.add_argument("--d-model", type=int, default=512)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--length", type=int, default=32, help="new tokens per hypothesis")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (medians)")
    parser.add_argument("--no-profile", action="store_true", help="skip the torch.profiler tables")
    args = parser.parse_args(argv)
    if args.quick:
        args.d_model, args.batch_size, args.length, args.repeats = 64, 8, 8, 1
        args.variants = args.variants or ["base", "dsinit_matt"]
    return args


@contextlib.contextmanager
def generic_cache_layers() -> Iterator[None]:
    """Decoders run with Transformers' generic cache layers, as before our slots: no slot swap (`fit_slots`), and
    MAtt's slot a `DynamicLayer` that concatenates and is gathered in full on every beam step."""
    from transformers.cache_utils import DynamicLayer

    from deep_nmt_hf.model import caches

    class ConcatenatingRunningAverage(DynamicLayer):
        def append(self, sums: Any, counts: Any, heads: int) -> None:
            caches.append_prefixes(self, sums, counts, heads)

        def previous(self) -> Any:
            if self.get_seq_length() == 0:
                return None
            return self.keys[:, :, -1].flatten(1), self.values[:, 0, -1, :1]

    saved = caches.fit_slots, caches.RunningAverageLayer
    caches.fit_slots = lambda *args, **kwargs: None
    caches.RunningAverageLayer = ConcatenatingRunningAverage
    try:
        yield
    finally:
        caches.fit_slots, caches.RunningAverageLayer = saved


def generate_fixed(model: Any, batch: dict, args: argparse.Namespace, generic: bool = False) -> Any:
    """Beam search forced to exactly `args.length` new tokens (max_length counts the decoder start token)."""
    import torch

    context = generic_cache_layers() if generic else contextlib.nullcontext()
    with torch.inference_mode(), context:
        return model.generate(
            **batch,
            num_beams=args.beams,
            min_new_tokens=args.length,
            max_length=args.length + 1,
            early_stopping=False,
            output_scores=True,
            return_dict_in_generate=True,
        )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    from deep_nmt_hf import VARIANTS

    torch.set_num_threads(1)
    variants = args.variants or sorted(VARIANTS)
    tokenizer = multi30k_tokenizer()
    sources = [s for s, _ in multi30k_pairs("test_2016_flickr", limit=args.batch_size)]
    batch = dict(tokenizer(sources, padding=True, return_tensors="pt"))
    models = {}
    for name in ["marian", *variants]:
        torch.manual_seed(0)
        fields = {"encoder_layers": 6, "decoder_layers": 6, **VARIANT_FIELDS.get(name, {})}
        models[name] = model_from_fields(name, fields, tokenizer, args.d_model, 128).eval()

    # our slots change no token and no score: checked on these very models before timing
    agreement = {}
    for name in variants:
        ours, generic = (generate_fixed(models[name], batch, args, generic=g) for g in (False, True))
        assert ours.sequences.shape[1] == args.length + 1
        assert torch.equal(ours.sequences, generic.sequences), name
        difference = max(
            (a - b).abs().nan_to_num(0.0).max().item()
            for a, b in zip(ours.scores, generic.scores, strict=True)
        )
        agreement[name] = difference
        print(f"{name}: tokens equal, largest score difference {difference:.2e}")

    sides = {"marian": lambda: generate_fixed(models["marian"], batch, args)}
    for name in variants:
        sides[name] = lambda m=models[name]: generate_fixed(m, batch, args)
        sides[f"{name} (generic)"] = lambda m=models[name]: generate_fixed(m, batch, args, generic=True)
    timing = interleaved(sides, repeats=args.repeats, clock=time.process_time)
    marian_s = timing["marian"]["median_s"]
    rows, results = [], {}
    for name in variants:
        ours_s, generic_s = timing[name]["median_s"], timing[f"{name} (generic)"]["median_s"]
        results[name] = {
            "ours_s": ours_s,
            "generic_s": generic_s,
            "vs_marian": ratio(marian_s, ours_s),
            "generic_vs_marian": ratio(marian_s, generic_s),
            "ours_vs_generic": ratio(generic_s, ours_s),
            "max_score_difference": agreement[name],
        }
        rows.append(
            [
                name,
                round(generic_s, 2),
                round(ours_s, 2),
                f"{results[name]['ours_vs_generic']:.2f}×",
                f"{results[name]['generic_vs_marian']:.2f}×",
                f"{results[name]['vs_marian']:.2f}×",
                f"{agreement[name]:.1e}",
            ]
        )
    matt = {}
    if "base" in results and "dsinit_matt" in results:
        matt = {
            "ours": ratio(results["base"]["ours_s"], results["dsinit_matt"]["ours_s"]),
            "generic": ratio(results["base"]["generic_s"], results["dsinit_matt"]["generic_s"]),
        }
    profiles = {}
    if not args.no_profile:
        for name in [v for v in ("base", "dsinit_matt") if v in variants]:
            for generic in (True, False):
                key = f"{name} ({'generic' if generic else 'ours'})"
                profiles[key] = profile_ops(
                    lambda m=models[name], g=generic: generate_fixed(m, batch, args, g)
                )

    shape = (
        f"d_model {args.d_model}, 6+6 layer applications, vocabulary {len(tokenizer)}, beam {args.beams}, batch "
        f"{args.batch_size}, {args.length} forced new tokens, random weights, 1 thread"
    )
    markdown = [
        "# Beam search without wasted cache work: our cache slots vs Transformers' generic ones\n",
        f"Shape: {shape}. `generate` CPU seconds (process time), medians of {args.repeats} interleaved rounds; "
        f"stock MarianMTModel (folded base) {marian_s:.2f} s. The machine is shared and loaded: absolute seconds "
        "mean little, the ratios (same rounds) are the result. Score difference: largest |ours - generic| over "
        "every step's finite scores (tokens equal).\n",
        markdown_table(
            [
                "variant",
                "generic slots, s",
                "our slots, s",
                "ours / generic",
                "generic vs Marian",
                f"ours vs Marian (goal ≥ {GOAL_VS_MARIAN})",
                "score difference",
            ],
            rows,
        ),
    ]
    if matt:
        markdown.append(
            f"\nMAtt vs the self-attention decoder (base): {matt['ours']:.2f}× with our slots (goal ≥ "
            f"{GOAL_MATT_VS_SELF}), {matt['generic']:.2f}× with the generic ones.\n"
        )
    for key, profile in profiles.items():
        markdown.append(f"\n## torch.profiler, one call: {key}\n\n{ops_table(profile)}\n")
    payload = {
        "shape": shape,
        "args": vars(args),
        "timing": timing,
        "results": results,
        "matt_vs_self": matt,
        "profiles": profiles,
    }
    path = write_results(f"{NAME}_quick" if args.quick else NAME, payload, "\n".join(markdown))
    print("\n".join(markdown))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
