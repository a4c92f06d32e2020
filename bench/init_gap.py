"""Why our post-LN 6-6 trails stock Marian 6-6 early in training on Multi30k: the initialisation.

The quality bench (bench/quality_multi30k.py) builds both models at the same shape and trains them with the same
recipe; stock `MarianMTModel` learned faster in the first epochs. The two differ in one more thing than the class:
our `init_method="xavier"` is fairseq's recipe (issue #14: Glorot-uniform linears with gain 1/√2 on attention
q/k/v, embeddings N(0, d^-1/2)) that the ADMIN, DLCL and shared-layers papers train with, while Marian draws every
weight from N(0, 0.02) (Transformers' `init_std`). Until issue #14 our "xavier" drew q/k/v with gain 1 (plain
Glorot per d×d matrix), which is *not* fairseq's; the `ours-xavier-gain1` side keeps that old default so that the
before/after is measured side by side. This script trains, on the same Multi30k batches with the same Adam
schedule and the same label-smoothed loss (collapse_losses.token_cross_entropy, ε = 0.1):

  marian             stock MarianMTModel (its own N(0, 0.02) init)
  ours-xavier        our post-LN model as the quality bench builds it (the default: fairseq's init)
  ours-xavier-gain1  the same, q/k/v re-drawn with Glorot gain 1 (our default before issue #14)
  ours-normal        the same model with init_method="normal" (deep_nmt_hf.model.initialization: every linear and
                     embedding weight from N(0, init_std = 0.02), biases and the padding row zero)
  ours-xavier-emb0.02  ours-xavier with only the word embeddings re-drawn from N(0, 0.02)
  ours-normal-embfs    ours-normal with only the word embeddings re-drawn from fairseq's N(0, d^-1/2)

If ours-normal tracks marian and ours-xavier does not, the gap is the initialisation, not the implementation; the
last two sides split it between the word embeddings (tied with the output projection) and the linear maps.

    python -m bench.init_gap            # d 64, 300 steps of batch 64 (~5 min on one core)
    python -m bench.init_gap --quick    # smoke run
"""

from __future__ import annotations

import argparse

import torch

from bench.lib.common import (
    markdown_table,
    multi30k_pairs,
    multi30k_tokenizer,
    tokenized_batches,
    write_results,
)
from bench.quality_multi30k import build_model

NAME = "init_gap"


@torch.no_grad()
def plain_glorot_qkv(model: torch.nn.Module) -> None:
    """Re-draw every attention q/k/v with Glorot gain 1: `init_method="xavier"` as it was before issue #14."""
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and name.rsplit(".", 1)[-1] in ("q_proj", "k_proj", "v_proj"):
            torch.nn.init.xavier_uniform_(module.weight)


@torch.no_grad()
def redraw_embeddings(model: torch.nn.Module, std: float) -> None:
    """Re-draw every word embedding (shared / tied with the output projection) from N(0, std), padding row zero."""
    for module in model.modules():
        if isinstance(module, torch.nn.Embedding):
            torch.nn.init.normal_(module.weight, std=std)
            if module.padding_idx is not None:
                module.weight[module.padding_idx].zero_()


def train_losses(model: torch.nn.Module, batches: list[dict], args: argparse.Namespace) -> list[float]:
    """Adam (0.9, 0.98), linear warmup then constant lr, clipping 1.0; the label-smoothed loss per step."""
    from deep_nmt_hf.model.collapse_losses import token_cross_entropy

    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, betas=(0.9, 0.98))
    losses = []
    model.train()
    for step in range(args.steps):
        for group in optimizer.param_groups:
            group["lr"] = args.learning_rate * min((step + 1) / args.warmup_steps, 1.0)
        batch = batches[step % len(batches)]
        loss = token_cross_entropy(model(**batch).logits, batch["labels"], 0.1)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        losses.append(loss.item())
    return losses


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: d 32, 20 steps (writes init_gap_quick.*)"
    )
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--steps", type=int, default=300, help="Adam steps per model")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=1e-3)
    parser.add_argument("--warmup-steps", type=int, default=100)
    parser.add_argument("--vocab-size", type=int, default=4000, help="joint BPE size (as the quality bench)")
    parser.add_argument("--window", type=int, default=20, help="steps averaged for the reported loss")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.quick:
        args.d_model, args.steps, args.warmup_steps, args.window = 32, 20, 5, 5
    torch.set_num_threads(1)
    tokenizer = multi30k_tokenizer(args.vocab_size)
    pairs = multi30k_pairs("train", limit=args.batch_size * args.steps)
    batches = tokenized_batches(tokenizer, pairs, args.batch_size, 64)

    sides = {
        "marian": "marian-6-6",
        "ours-xavier": "base-6-6",
        "ours-xavier-gain1": "base-6-6",
        "ours-normal": "base-6-6-normal",
        "ours-xavier-emb0.02": "base-6-6",
        "ours-normal-embfs": "base-6-6-normal",
    }
    curves: dict[str, list[float]] = {}
    for side, name in sides.items():
        torch.manual_seed(args.seed)
        model = build_model(name, tokenizer, args.d_model, 64)
        if side == "ours-xavier-gain1":
            plain_glorot_qkv(model)
        elif side == "ours-xavier-emb0.02":
            redraw_embeddings(model, 0.02)
        elif side == "ours-normal-embfs":
            redraw_embeddings(model, args.d_model**-0.5)
        curves[side] = train_losses(model, batches, args)
        print(f"{side}: last-{args.window} mean loss {sum(curves[side][-args.window :]) / args.window:.3f}")

    checkpoints = sorted({min(args.steps, s) for s in (args.steps // 4, args.steps // 2, args.steps)})
    rows = [
        [side]
        + [
            round(sum(c[max(0, s - args.window) : s]) / len(c[max(0, s - args.window) : s]), 3)
            for s in checkpoints
        ]
        for side, c in curves.items()
    ]
    final = {side: row[-1] for side, row in zip(curves, rows, strict=True)}
    markdown = (
        "# Our post-LN 6-6 vs stock Marian 6-6: the initialisation\n\n"
        f"d_model {args.d_model}, 6-6 post-LN, Multi30k en→de batches of {args.batch_size}, Adam (0.9, 0.98) lr "
        f"{args.learning_rate:g} after {args.warmup_steps} warmup steps, label-smoothed loss (ε 0.1) for every side; "
        f"loss = mean of the {args.window} steps before each point.\n\n"
        + markdown_table(["side"] + [f"loss @ step {s}" for s in checkpoints], rows)
        + f"\n\nGap to Marian at step {checkpoints[-1]}: "
        + ", ".join(f"{side} {final[side] - final['marian']:+.3f}" for side in curves if side != "marian")
        + ".\n"
    )
    print(markdown)
    write_results(
        NAME + ("_quick" if args.quick else ""), {"settings": vars(args), "losses": curves}, markdown
    )


if __name__ == "__main__":
    main()
