"""Training and beam-search throughput of every variant against stock MarianMTModel of identical shape.

Shapes: 6-6 at d512 (FFN 2048, 8 heads) and 18-6 at d256 (FFN 1024, 4 heads), vocabulary of the Multi30k joint
BPE tokenizer (8000). For each shape the models are measured in groups; every group holds the stock Marian
reference and runs its members interleaved (A B C A B C ...), medians over `--repeats` rounds:

* training: one forward + backward + Adam step on the same Multi30k batch (`--train-batch` sentences);
  tokens/s counts the batch's source + target tokens (no padding);
* generation: beam 4 on a batch of `--gen-batch` Multi30k sources, exactly `--new-tokens` new tokens per
  sentence (min = max new tokens, so an untrained model's early </s> does not shorten its run).

Times are CPU seconds of this process (`time.process_time`) with one torch thread, so that the numbers do not
depend on what else runs on a shared machine. Every ratio is to stock Marian measured in the same group.
Goals (issue #10) are checked; where one is missed, one training step (or generation) of the model is profiled
with torch.profiler and the top operators are written into the results.

    python -m bench.throughput            # both shapes
    python -m bench.throughput --quick    # smoke test: tiny shapes, 1 repeat
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from bench.lib.common import (
    RESULTS,
    interleaved,
    markdown_table,
    multi30k_pairs,
    multi30k_tokenizer,
    ops_table,
    profile_ops,
    ratio,
    write_results,
)

# model name -> (variant short name or "marian", extra config fields); depth fields are added per shape
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "marian": ("marian", {}),
    "base": ("base", {}),
    "admin": ("admin", {}),
    "deepnorm": ("deepnorm", {}),
    "dsinit_self": ("dsinit_matt", {"decoder_attention": "self"}),
    "dsinit_matt": ("dsinit_matt", {}),
    "base_pre": ("base", {"layer_norm_position": "pre"}),
    "dlcl": ("dlcl", {}),
    "shared_layers": ("shared_layers", {}),
    "deep_decoder": ("deep_decoder", {}),
}
GROUPS = [
    ["marian", "base", "admin", "deepnorm"],
    ["marian", "base_pre", "dlcl", "shared_layers"],
    ["marian", "dsinit_self", "dsinit_matt", "deep_decoder"],
]
SHAPES = {
    "6-6 d512": {"d_model": 512, "ffn": 2048, "heads": 8, "enc": 6, "dec": 6},
    "18-6 d256": {"d_model": 256, "ffn": 1024, "heads": 4, "enc": 18, "dec": 6},
}
QUICK_SHAPES = {
    "6-6 d32": {"d_model": 32, "ffn": 64, "heads": 2, "enc": 6, "dec": 6},
    "18-6 d32": {"d_model": 32, "ffn": 64, "heads": 2, "enc": 18, "dec": 6},
}
CTRANSLATE2_NOTE = (
    "CTranslate2 int8 ≥ 5× HF generate is measured by bench/ctranslate2_speed.py "
    "(results in [ctranslate2_speed.md](ctranslate2_speed.md))."
)


def depth_fields(variant: str, enc: int, dec: int) -> dict[str, Any]:
    """Encoder/decoder depth `enc`-`dec`; shared layers reach it with 3 unique layers per side, repeated."""
    if variant == "shared_layers":
        return {
            "encoder_layers": enc // 3 if enc % 3 == 0 else enc,
            "encoder_layer_repeats": 3 if enc % 3 == 0 else 1,
            "decoder_layers": dec // 2 if dec % 2 == 0 else dec,
            "decoder_layer_repeats": 2 if dec % 2 == 0 else 1,
        }
    if variant == "deep_decoder":
        return {"encoder_layers": enc, "decoder_layers": dec, "cross_attention_drop_layers": min(2, dec)}
    return {"encoder_layers": enc, "decoder_layers": dec}


def build(name: str, tokenizer, shape: dict[str, Any]):
    """Model `name` of MODELS at `shape`, with the generation config of our models (never emit pad)."""
    from transformers import MarianMTModel

    from deep_nmt_hf import VARIANTS
    from deep_nmt_hf.publish.folding import stock_config
    from deep_nmt_hf.training import build_config, resolve_variant
    from deep_nmt_hf.training.generation_settings import translation_generation_config

    variant, extra = MODELS[name]
    fields = {"d_model": shape["d_model"], "encoder_ffn_dim": shape["ffn"], "decoder_ffn_dim": shape["ffn"]}
    fields |= {"encoder_attention_heads": shape["heads"], "decoder_attention_heads": shape["heads"]}
    fields |= {"label_smoothing": 0.1, **depth_fields(variant, shape["enc"], shape["dec"]), **extra}
    if variant == "marian":
        ours = build_config(tokenizer, VARIANTS["base"], **fields)
        model = MarianMTModel(stock_config(ours))
        model.generation_config = translation_generation_config(ours)
    else:
        config_class, lm_class = resolve_variant(variant)
        model = lm_class(build_config(tokenizer, config_class, **fields))
        model.generation_config = translation_generation_config(model.config)  # as trained models save it
    if getattr(model.config, "residual_scaling", None) == "admin":
        model.config.admin_profiled = True  # ω at its initial value: profiling does not change the step cost
    return model


class Side:
    """One model with its optimizer, a training-step and a generation closure returning CPU seconds."""

    def __init__(self, model, train_batch: dict, gen_batch: dict, new_tokens: int) -> None:
        import torch

        self.model = model
        self.optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98))
        self.train_batch = train_batch
        self.gen_batch = gen_batch
        self.new_tokens = new_tokens

    def train_step(self) -> None:
        self.model.train()
        loss = self.model(**self.train_batch).loss
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def generate(self) -> None:
        import torch

        self.model.eval()
        with torch.inference_mode():
            self.model.generate(
                **self.gen_batch,
                num_beams=4,
                max_new_tokens=self.new_tokens,
                min_new_tokens=self.new_tokens,
                do_sample=False,
            )


def measure_shape(args: argparse.Namespace, shape_name: str, shape: dict, tokenizer) -> dict[str, Any]:
    import torch

    pairs = multi30k_pairs("train", limit=2000)
    train_pairs = pairs[: args.train_batch]
    enc = tokenizer(
        [s for s, _ in train_pairs],
        text_target=[t for _, t in train_pairs],
        padding=True,
        return_tensors="pt",
    )
    tokens = int(enc["attention_mask"].sum() + (enc["labels"] != tokenizer.pad_token_id).sum())
    enc["labels"] = enc["labels"].masked_fill(enc["labels"] == tokenizer.pad_token_id, -100)
    train_batch = dict(enc)
    gen_batch = dict(
        tokenizer([s for s, _ in pairs[100 : 100 + args.gen_batch]], padding=True, return_tensors="pt")
    )
    gen_tokens = args.gen_batch * args.new_tokens
    results: dict[str, Any] = {"train_tokens_per_batch": tokens, "generated_tokens_per_batch": gen_tokens}
    groups = []
    for group in GROUPS:
        torch.manual_seed(0)
        sides = {
            name: Side(build(name, tokenizer, shape), train_batch, gen_batch, args.new_tokens)
            for name in group
        }
        params = {name: int(side.model.num_parameters()) for name, side in sides.items()}
        print(f"[{shape_name}] group {group}: training", flush=True)
        train = interleaved(
            {n: s.train_step for n, s in sides.items()}, args.repeats, clock=time.process_time
        )
        print(f"[{shape_name}] group {group}: generation", flush=True)
        gen = interleaved({n: s.generate for n, s in sides.items()}, args.repeats, clock=time.process_time)
        rows = {}
        for name in group:
            rows[name] = {
                "parameters": params[name],
                "train_s": train[name],
                "generate_s": gen[name],
                "train_tokens_per_s": tokens / train[name]["median_s"],
                "generate_tokens_per_s": gen_tokens / gen[name]["median_s"],
                "train_vs_marian": ratio(train["marian"]["median_s"], train[name]["median_s"]),
                "generate_vs_marian": ratio(gen["marian"]["median_s"], gen[name]["median_s"]),
            }
        groups.append({"members": group, "models": rows})
        del sides
    results["groups"] = groups
    results["batches"] = (train_batch, gen_batch)
    return results


def check_goals(shape_result: dict[str, Any]) -> list[dict[str, Any]]:
    """Goal checks of issue #10 within one shape: (name, measured, target, met, what to profile)."""
    by_group = {}
    for group in shape_result["groups"]:
        for name, row in group["models"].items():
            by_group.setdefault(name, (row, group))
    goals = []

    def add(goal: str, value: float, target: float, model: str, kind: str) -> None:
        goals.append(
            {
                "goal": goal,
                "measured": value,
                "target": target,
                "met": value >= target,
                "profile": (model, kind),
            }
        )

    add("plain (base) training ≥ 1.0× stock", by_group["base"][0]["train_vs_marian"], 1.0, "base", "train")
    add("ADMIN training ≥ 1.0× stock", by_group["admin"][0]["train_vs_marian"], 1.0, "admin", "train")
    g1 = by_group["admin"][1]["models"]
    add(
        "ADMIN ω overhead ≤ 3% (ADMIN / base training speed ≥ 0.97)",
        ratio(g1["base"]["train_s"]["median_s"], g1["admin"]["train_s"]["median_s"]),
        0.97,
        "admin",
        "train",
    )
    g2 = by_group["dlcl"][1]["models"]
    add(
        "DLCL overhead ≤ 10% (DLCL / pre-norm base training speed ≥ 0.90)",
        ratio(g2["base_pre"]["train_s"]["median_s"], g2["dlcl"]["train_s"]["median_s"]),
        0.90,
        "dlcl",
        "train",
    )
    g3 = by_group["dsinit_matt"][1]["models"]
    add(
        "MAtt decoding ≥ 1.3× our self-attention decoder (same DS-Init model)",
        ratio(g3["dsinit_self"]["generate_s"]["median_s"], g3["dsinit_matt"]["generate_s"]["median_s"]),
        1.3,
        "dsinit_matt",
        "generate",
    )
    return goals


def plot(shapes: dict[str, Any], path: Path) -> None:
    """Training and generation speed of every model as a multiple of stock Marian, one panel per shape."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(shapes), figsize=(6 * len(shapes), 4.5), squeeze=False)
    for ax, (shape_name, shape) in zip(axes[0], shapes.items(), strict=True):
        names, train, gen = [], [], []
        for group in shape["groups"]:
            for model, numbers in group["models"].items():
                if model != "marian":
                    names.append(model)
                    train.append(numbers["train_vs_marian"])
                    gen.append(numbers["generate_vs_marian"])
        y = range(len(names))
        ax.barh([i - 0.2 for i in y], train, height=0.4, label="training")
        ax.barh([i + 0.2 for i in y], gen, height=0.4, label="beam-4 generation")
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_yticks(list(y), names)
        ax.invert_yaxis()
        ax.set_xlabel("speed / stock Marian (same group, medians)")
        ax.set_title(shape_name)
    axes[0][0].legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="smoke test: d32 shapes, 1 repeat, small batches"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (after 1 warm-up round)")
    parser.add_argument("--train-batch", type=int, default=16, help="training batch (sentences)")
    parser.add_argument("--gen-batch", type=int, default=32, help="generation batch (sentences), beam 4")
    parser.add_argument("--new-tokens", type=int, default=16, help="tokens generated per sentence")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-profile", action="store_true", help="do not profile missed goals")
    args = parser.parse_args(argv)
    shapes = SHAPES
    if args.quick:
        shapes, args.repeats, args.train_batch, args.gen_batch, args.new_tokens = QUICK_SHAPES, 1, 4, 4, 4

    import torch

    torch.set_num_threads(args.threads)
    tokenizer = multi30k_tokenizer(8000)
    payload: dict[str, Any] = {"settings": vars(args), "shapes": {}}
    md = [
        "# Throughput: every variant against stock MarianMTModel of identical shape\n",
        f"CPU seconds of one process with {args.threads} torch thread(s); medians of {args.repeats} interleaved "
        f"rounds after one warm-up round. Training: forward + backward + Adam step on one Multi30k batch of "
        f"{args.train_batch} sentences (tokens = source + target, no padding). Generation: beam 4, batch "
        f"{args.gen_batch}, exactly {args.new_tokens} new tokens per sentence. Ratios are to stock Marian "
        "measured in the same interleaved group (groups: "
        + "; ".join(", ".join(g) for g in GROUPS)
        + "). `base_pre` is our plain pre-norm model, the reference for DLCL; `dsinit_self` is the DS-Init model "
        "with the self-attention decoder, the reference for MAtt; `deep_decoder` includes its CAD + DDR + ALD "
        "training losses (ALD runs a second forward pass).\n",
    ]
    for shape_name, shape in shapes.items():
        result = measure_shape(args, shape_name, shape, tokenizer)
        goals = check_goals(result)
        header = [
            "model",
            "group",
            "params (M)",
            "train tok/s",
            "train × Marian",
            "gen tok/s",
            "gen × Marian",
        ]
        rows = []
        for index, group in enumerate(result["groups"]):
            for name, row in group["models"].items():
                rows.append(
                    [
                        name,
                        index + 1,
                        round(row["parameters"] / 1e6, 1),
                        round(row["train_tokens_per_s"]),
                        round(row["train_vs_marian"], 3),
                        round(row["generate_tokens_per_s"]),
                        round(row["generate_vs_marian"], 3),
                    ]
                )
        md.append(f"\n## {shape_name}\n\n" + markdown_table(header, rows) + "\n")
        md.append(
            "\n"
            + markdown_table(
                ["goal", "measured", "target", "met"],
                [
                    [g["goal"], round(g["measured"], 3), g["target"], "yes" if g["met"] else "**no**"]
                    for g in goals
                ],
            )
            + "\n"
        )
        profiles = {}
        if not args.no_profile:
            reference = {"admin": "base", "dlcl": "base_pre", "dsinit_matt": "dsinit_self", "base": "marian"}
            for goal in goals:
                model, kind = goal["profile"]
                if goal["met"]:
                    continue
                for name in (model, reference[model]):
                    key = f"{name}:{kind}"
                    if key not in profiles:
                        side = Side(build(name, tokenizer, shape), *result["batches"], args.new_tokens)
                        run = side.train_step if kind == "train" else side.generate
                        run()  # warm-up
                        profiles[key] = ops_table(profile_ops(run))
                        del side
            for key, table in profiles.items():
                md.append(
                    f"\n<details><summary>profile {shape_name} {key}</summary>\n\n{table}\n\n</details>\n"
                )
        del result["batches"]
        payload["shapes"][shape_name] = {**result, "goals": goals, "profiles": profiles}
    md.append("\n" + CTRANSLATE2_NOTE + "\n")
    name = "throughput.quick" if args.quick else "throughput"
    image = f"{name}.png"
    plot(payload["shapes"], RESULTS / image)
    md.append(f"\n![training and generation speed of every variant as a multiple of stock Marian]({image})\n")
    write_results(name, payload, "".join(md))
    print("".join(md))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
