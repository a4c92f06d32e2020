"""Per-layer gradient norms at initialisation, xavier vs DS-Init (dsinit-merged-attention, Figure 1 and Table 1).

A 12-layer encoder / 12-layer decoder post-LN Transformer with the self-attention decoder (the paper's analysis
model), once with `init_method="xavier"` and once with `init_method="ds_init"` (α = 1), same seed, one forward and
backward pass of the label-smoothed (0.1) cross-entropy on one batch of real Multi30k en→de training sentences with
about 3k target tokens (the paper: "~3k target tokens at the beginning of training"). Dropout is off so that both
models see exactly the same computation apart from the initial weights.

Figure 1: the L2 norm of the gradient of all parameters of each layer, per layer, encoder and decoder.

Table 1 (eq. 10-14): every post-LN sublayer computes r = z + f(z) (RC) and o = LN(r). With δ_o, δ_r, δ_z the error
signals (gradients of the loss) at o, r and z,
    β_LN = ‖δ_r‖₂ / ‖δ_o‖₂      (what the LayerNorm does to the error signal; the paper: < 1)
    β_RC = ‖δ_z‖₂ / ‖δ_r‖₂      (what the residual connection + f do; the paper: > 1)
    β    = β_LN · β_RC = ‖δ_z‖₂ / ‖δ_o‖₂.
Reading: eq. 14 prints the two factors in the order ‖δ_z‖/‖δ_r‖ · ‖δ_r‖/‖δ_o‖ under the names β_LN · β_RC, but
the text (LN weakens: β_LN < 1; RC strengthens: β_RC > 1) and eqs. 12-13 (δ_r = ∂o/∂r δ_o, δ_z = (1 + ∂f/∂z) δ_r)
fix which factor belongs to which module; we follow the text. ‖·‖₂ is the norm of the whole gradient tensor of the
batch (all tokens), the ratio is taken per sublayer and averaged (arithmetic mean) over the 12 layers, per sublayer
type (encoder self-attention and FFN; decoder self-attention, cross-attention, FFN), as in Table 1. Var(r) is the
variance of r over the model dimension, averaged over the real (non-pad) tokens. z is the sublayer input, used by
nothing else in a post-LN stack, so its gradient is exactly δ_z.

    python -m bench.gradient_norms           # 12+12 layers, d 256 (~3-5 min on a loaded machine)
    python -m bench.gradient_norms --quick   # 4+4 layers, d 64, ~500 target tokens

Writes bench/results/gradient_norms.{json,md,png}.
"""

from __future__ import annotations

import argparse
import random
import statistics
from pathlib import Path
from typing import Any

from bench.lib.common import (
    RESULTS,
    markdown_table,
    multi30k_pairs,
    multi30k_tokenizer,
    tokenized_batches,
    write_results,
)

NAME = "gradient_norms"
METHODS = {"xavier": "xavier (Base)", "ds_init": "DS-Init (Ours)"}
PAPER_TABLE1 = {  # Table 1 of the paper: (side, sublayer) -> {"base": (β_LN, β_RC, β), "ours": (...)}
    ("encoder", "self"): {"base": (0.86, 1.22, 1.05), "ours": (0.96, 1.04, 1.02)},
    ("encoder", "ffn"): {"base": (0.84, 1.10, 0.93), "ours": (0.95, 1.02, 0.98)},
    ("decoder", "self"): {"base": (0.82, 1.21, 0.98), "ours": (0.95, 1.05, 1.10)},
    ("decoder", "cross"): {"base": (0.74, 1.00, 0.74), "ours": (0.94, 1.00, 0.95)},
    ("decoder", "ffn"): {"base": (0.84, 1.11, 0.93), "ours": (0.94, 1.02, 0.98)},
}


def result_name(args: argparse.Namespace) -> str:
    """`--quick` smoke runs write NAME_quick.* so that they never overwrite the full results."""
    return f"{NAME}_quick" if args.quick else NAME


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 4+4 layers, d 64, ~500 target tokens"
    )
    parser.add_argument("--layers", type=int, default=12, help="encoder and decoder layers")
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--ffn-dim", type=int, default=1024)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--target-tokens", type=int, default=3000, help="target tokens in the batch")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.quick:
        args.layers, args.d_model, args.ffn_dim, args.target_tokens = 4, 64, 128, 500
    return args


def make_batch(tokenizer: Any, target_tokens: int, seed: int) -> dict:
    """One batch of shuffled Multi30k train pairs holding at least `target_tokens` target tokens (with eos)."""
    pairs = multi30k_pairs("train")
    random.Random(seed).shuffle(pairs)
    chosen, count = [], 0
    for pair in pairs:
        chosen.append(pair)
        count += len(tokenizer(text_target=pair[1])["input_ids"])
        if count >= target_tokens:
            break
    return tokenized_batches(tokenizer, chosen, len(chosen))[0]


def measure(method: str, args: argparse.Namespace, tokenizer: Any, batch: dict) -> dict[str, Any]:
    import torch

    from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration

    config = DeepNMTConfig(
        vocab_size=len(tokenizer),
        d_model=args.d_model,
        encoder_layers=args.layers,
        decoder_layers=args.layers,
        encoder_ffn_dim=args.ffn_dim,
        decoder_ffn_dim=args.ffn_dim,
        encoder_attention_heads=args.heads,
        decoder_attention_heads=args.heads,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        unk_token_id=tokenizer.unk_token_id,
        layer_norm_position="post",
        init_method=method,
        ds_init_alpha=1.0,
        dropout=0.0,
        label_smoothing=0.1,
    )
    torch.manual_seed(args.seed)
    model = DeepNMTForConditionalGeneration(config).train()
    records: dict[tuple[str, int, str], dict[str, float]] = {}
    handles = []

    def watch(tensor: torch.Tensor, key: tuple[str, int, str], field: str) -> None:
        def hook(grad: torch.Tensor) -> None:
            records[key][field] = float(grad.float().norm())

        tensor.register_hook(hook)

    for side in ("encoder", "decoder"):
        stack = getattr(model.model, side)
        for layer_index, layer in enumerate(stack.layers):
            names = ("self", "ffn") if side == "encoder" else ("self", "cross", "ffn")
            subs = (
                (layer.self_attn, layer.ffn)
                if side == "encoder"
                else (layer.self_attn, layer.encoder_attn, layer.ffn)
            )
            for name, sub in zip(names, subs, strict=True):
                key = (side, layer_index + 1, name)
                records[key] = {}

                def pre_hook(module: Any, inputs: tuple, key: tuple = key) -> None:
                    watch(inputs[0], key, "z")

                def norm_hook(module: Any, inputs: tuple, output: torch.Tensor, key: tuple = key) -> None:
                    r = inputs[0]
                    watch(r, key, "r")
                    watch(output, key, "o")
                    real = batch["attention_mask"].bool() if key[0] == "encoder" else batch["labels"].ne(-100)
                    records[key]["var_r"] = float(r.detach().float().var(dim=-1, unbiased=False)[real].mean())

                handles.append(sub.register_forward_pre_hook(pre_hook))
                handles.append(sub.layer_norm.register_forward_hook(norm_hook))
    loss = model(**batch).loss
    loss.backward()
    for handle in handles:
        handle.remove()
    layer_norms: dict[str, list[float]] = {}
    for side in ("encoder", "decoder"):
        layer_norms[side] = [
            float(torch.cat([p.grad.flatten() for p in layer.parameters() if p.grad is not None]).norm())
            for layer in getattr(model.model, side).layers
        ]
    per_sublayer = []
    for (side, layer_number, name), rec in records.items():
        per_sublayer.append(
            {
                "side": side,
                "layer": layer_number,
                "sublayer": name,
                "var_r": rec["var_r"],
                "beta_ln": rec["r"] / rec["o"],
                "beta_rc": rec["z"] / rec["r"],
                "beta": rec["z"] / rec["o"],
            }
        )
    table1 = {}
    for key in PAPER_TABLE1:
        rows = [row for row in per_sublayer if (row["side"], row["sublayer"]) == key]
        table1[f"{key[0]}/{key[1]}"] = {
            field: statistics.mean(row[field] for row in rows)
            for field in ("var_r", "beta_ln", "beta_rc", "beta")
        }
    return {
        "loss": float(loss.detach()),
        "layer_grad_norms": layer_norms,
        "per_sublayer": per_sublayer,
        "table1": table1,
    }


def plot(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(6, 6.5))
    for ax, side in zip(axes, ("encoder", "decoder"), strict=True):
        for method, style in (("xavier", "o-"), ("ds_init", "s--")):
            norms = results[method]["layer_grad_norms"][side]
            ax.plot(range(1, len(norms) + 1), norms, style, label=METHODS[method])
        ax.set_title(f"{side} layers")
        ax.set_xlabel("layer (1 = bottom)")
        ax.set_ylabel("gradient norm")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.suptitle("Per-layer gradient norm at initialisation (Multi30k batch)")
    fig.tight_layout()
    tmp = path.with_suffix(".tmp.png")
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    import torch

    torch.set_num_threads(args.threads)
    tokenizer = multi30k_tokenizer()
    batch = make_batch(tokenizer, args.target_tokens, args.seed)
    tokens = int(batch["labels"].ne(-100).sum())
    print(f"batch: {batch['input_ids'].shape[0]} sentences, {tokens} target tokens")
    results = {}
    for method in METHODS:
        results[method] = measure(method, args, tokenizer, batch)
        print(f"{method}: loss {results[method]['loss']:.3f}")
        for side, norms in results[method]["layer_grad_norms"].items():
            print(f"  {side}: " + " ".join(f"{n:.3g}" for n in norms))
    plot(results, RESULTS / f"{result_name(args)}.png")

    def bottom_top(method: str, side: str) -> float:
        norms = results[method]["layer_grad_norms"][side]
        return norms[0] / norms[-1]

    grad_rows = [
        [layer + 1]
        + [
            f"{results[m]['layer_grad_norms'][side][layer]:.3g}"
            for side in ("encoder", "decoder")
            for m in METHODS
        ]
        for layer in range(args.layers)
    ]
    table_rows = []
    for key, paper in PAPER_TABLE1.items():
        name = f"{key[0]}/{key[1]}"
        for method, paper_key in (("xavier", "base"), ("ds_init", "ours")):
            ours = results[method]["table1"][name]
            table_rows.append(
                [
                    name,
                    METHODS[method],
                    ours["var_r"],
                    f"{ours['beta_ln']:.2f} ({paper[paper_key][0]:.2f})",
                    f"{ours['beta_rc']:.2f} ({paper[paper_key][1]:.2f})",
                    f"{ours['beta']:.2f} ({paper[paper_key][2]:.2f})",
                ]
            )
    markdown = (
        f"# Gradient norms at initialisation: xavier vs DS-Init ({args.layers}+{args.layers} layers, post-LN, "
        f"d {args.d_model}, ffn {args.ffn_dim})\n\n"
        f"One Multi30k en→de train batch: {batch['input_ids'].shape[0]} sentences, {tokens} target tokens; "
        "dropout 0, label smoothing 0.1, seed "
        f"{args.seed}.\n\n## Per-layer gradient norm (paper Figure 1)\n\n"
        + markdown_table(
            ["layer", "enc xavier", "enc DS-Init", "dec xavier", "dec DS-Init"],
            grad_rows,
        )
        + "\n\nBottom / top layer gradient-norm ratio: "
        + ", ".join(
            f"{side} {METHODS[m]} {bottom_top(m, side):.2f}"
            for side in ("encoder", "decoder")
            for m in METHODS
        )
        + "\n\n## Error-signal ratios (paper Table 1; paper's values in parentheses)\n\n"
        + markdown_table(["sublayer", "init", "Var(r)", "β_LN", "β_RC", "β"], table_rows)
        + "\n\nβ_LN = ‖δ_r‖/‖δ_o‖, β_RC = ‖δ_z‖/‖δ_r‖, β = ‖δ_z‖/‖δ_o‖ per sublayer (r = z + f(z), o = LN(r)), "
        "averaged over the layers (see the script's docstring for this reading of eq. 14).\n"
    )
    payload = {
        "settings": vars(args),
        "batch": {"sentences": int(batch["input_ids"].shape[0]), "target_tokens": tokens},
        "paper_table1": {f"{k[0]}/{k[1]}": v for k, v in PAPER_TABLE1.items()},
        "results": results,
    }
    print(write_results(result_name(args), payload, markdown))


if __name__ == "__main__":
    main()
