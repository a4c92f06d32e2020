"""Assisted (speculative) greedy decoding of a deep 36-6 model with shallow drafts: speed-up and acceptance.

`model.generate(..., assistant_model=draft)` lets a cheap draft propose tokens that the deep model verifies in one
forward pass; the output is the deep model's own greedy output (checked here sentence by sentence). Whether it is
faster depends on how cheap a draft step is against a target step and on how many draft tokens are accepted, so
the models are trained (briefly) on the synthetic demo corpus (deep_nmt_hf/data/synthetic.py) and the bench reports
both the time ratio and the acceptance.

Models (pre-LN, d_model 64 by default, one joint BPE tokenizer):
    target     36-6   trained `--steps` steps
    draft 6-6         trained `--steps` steps from scratch (the issue's "6-6 draft": same decoder depth)
    draft 6-1         trained `--steps` steps from scratch (shallow encoder and a 1-layer decoder)
    self 36-1         a shallow copy of the target: its embeddings, 36-layer encoder and first decoder layer
                      (+ final LayerNorm and output layer), then `--copy-steps` steps training the decoder only

Timing: one thread, batch 1 (Transformers' assisted decoding takes one sentence at a time), greedy, the same
`--sentences` test sentences per side; the sides run interleaved (plain greedy, then each draft, per round) and
each side's time is the median over `--repeats` rounds of CPU seconds (time.process_time), so the ratios hold on
a busy machine. Acceptance: the deep model's forward calls and the draft's forward calls are counted.

    OMP_NUM_THREADS=1 python -m bench.assisted_decoding            # ~20 CPU-minutes on one core (the recorded run)
Results: bench/results/assisted_decoding.md and .json.
"""

from __future__ import annotations

import argparse
import copy
import functools
import time
from typing import Any

from bench.lib.common import interleaved, markdown_table, ratio, tokenized_batches, write_results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--d-model", type=int, default=64)
    parser.add_argument("--train-pairs", type=int, default=12000)
    parser.add_argument("--steps", type=int, default=300, help="training steps of the target and the drafts")
    parser.add_argument(
        "--copy-steps", type=int, default=150, help="decoder-only steps of the 36-1 self copy"
    )
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument(
        "--sentences", type=int, default=25, help="test sentences translated per side and round"
    )
    parser.add_argument("--max-new-tokens", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="assisted_decoding", help="result file name in bench/results")
    return parser.parse_args(argv)


def build(tokenizer, encoder_layers: int, decoder_layers: int, d_model: int):
    import torch

    from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration

    config = DeepNMTConfig(
        vocab_size=len(tokenizer),
        d_model=d_model,
        encoder_layers=encoder_layers,
        decoder_layers=decoder_layers,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=4 * d_model,
        decoder_ffn_dim=4 * d_model,
        layer_norm_position="pre",
        dropout=0.1,
        max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        unk_token_id=tokenizer.unk_token_id,
    )
    torch.manual_seed(0)
    return DeepNMTForConditionalGeneration(config)


def train(model, batches: list[dict], steps: int, lr: float, parameters=None) -> float:
    """AdamW with linear warmup (10 %) and decay; returns the mean loss of the last 50 steps."""
    import torch

    params = list(parameters if parameters is not None else model.parameters())
    optimizer = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.98), weight_decay=0.0)
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (steps - s) / max(1, steps - warmup)))
    )
    model.train()
    losses = []
    for step in range(steps):
        loss = model(**batches[step % len(batches)]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if step % 200 == 0:
            print(f"  step {step}: loss {loss.item():.3f}", flush=True)
    model.eval()
    return sum(losses[-50:]) / len(losses[-50:])


def self_copy(target, decoder_layers: int):
    """The target with only its first `decoder_layers` decoder layers (embeddings, encoder, final LayerNorm and
    output layer shared by value); the copy's encoder and embeddings are frozen."""
    from deep_nmt_hf import DeepNMTForConditionalGeneration

    config = copy.deepcopy(target.config)
    config.decoder_layers = decoder_layers
    draft = DeepNMTForConditionalGeneration(config)
    state = {k: v for k, v in target.state_dict().items() if k in draft.state_dict()}
    draft.load_state_dict(state)
    for name, param in draft.named_parameters():
        param.requires_grad = name.startswith("model.decoder.")
    return draft


class Counter:
    """Counts forward calls of a model (wraps `forward` of the instance)."""

    def __init__(self, model) -> None:
        self.calls = 0
        original = model.forward

        @functools.wraps(original)  # generate inspects the forward signature
        def counted(*args: Any, **kwargs: Any):
            self.calls += 1
            return original(*args, **kwargs)

        model.forward = counted


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    import torch

    from deep_nmt_hf.data.synthetic import demo_splits
    from deep_nmt_hf.data.tokenization import train_tokenizer

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    splits = demo_splits(train=args.train_pairs, valid=10, test=args.sentences, seed=1234)
    texts = [s for pair in splits["train"] for s in pair]
    tokenizer = train_tokenizer(texts, vocab_size=1000, model_max_length=128)
    batches = tokenized_batches(tokenizer, splits["train"], args.batch, max_length=64)

    shapes = {"target 36-6": (36, 6), "draft 6-6": (6, 6), "draft 6-1": (6, 1)}
    models, losses, train_cpu = {}, {}, {}
    for name, (enc, dec) in shapes.items():
        print(f"training {name} for {args.steps} steps", flush=True)
        start = time.process_time()
        models[name] = build(tokenizer, enc, dec, args.d_model)
        losses[name] = train(models[name], batches, args.steps, args.lr)
        train_cpu[name] = time.process_time() - start
    target = models.pop("target 36-6")
    print(f"self copy 36-1: {args.copy_steps} decoder-only steps", flush=True)
    start = time.process_time()
    copy_model = self_copy(target, 1)
    trainable = [p for p in copy_model.parameters() if p.requires_grad]
    losses["self 36-1"] = train(copy_model, batches, args.copy_steps, args.lr, trainable)
    train_cpu["self 36-1"] = time.process_time() - start
    models["self 36-1"] = copy_model

    sources = [
        tokenizer(src, return_tensors="pt")["input_ids"] for src, _ in splits["test"][: args.sentences]
    ]
    settings = dict(do_sample=False, num_beams=1, max_new_tokens=args.max_new_tokens)
    reference = []
    with torch.inference_mode():
        for ids in sources:
            reference.append(target.generate(input_ids=ids, **settings))
    generated_tokens = sum(int(out.shape[1]) - 1 for out in reference)

    target_counter = Counter(target)
    draft_counters = {name: Counter(model) for name, model in models.items()}
    identical: dict[str, bool] = {}
    counts: dict[str, dict[str, int]] = {}

    def side(draft_name: str | None):
        def run() -> None:
            before_target = target_counter.calls
            before_draft = draft_counters[draft_name].calls if draft_name else 0
            same = True
            with torch.inference_mode():
                for ids, expected in zip(sources, reference, strict=True):
                    extra = {"assistant_model": models[draft_name]} if draft_name else {}
                    out = target.generate(input_ids=ids, **settings, **extra)
                    same &= out.shape == expected.shape and bool(torch.equal(out, expected))
            key = draft_name or "greedy"
            identical[key] = identical.get(key, True) and same
            counts[key] = {
                "target_forwards": target_counter.calls - before_target,
                "draft_forwards": (draft_counters[draft_name].calls - before_draft) if draft_name else 0,
            }

        return run

    sides = {"greedy": side(None), **{name: side(name) for name in models}}
    timing = interleaved(sides, repeats=args.repeats, warmup=1, clock=time.process_time)
    base = timing["greedy"]["median_s"]
    rows, records = [], []
    for name in sides:
        c = counts[name]
        per_target = generated_tokens / c["target_forwards"]
        record = {
            "side": name,
            "median_cpu_s": timing[name]["median_s"],
            "times_s": timing[name]["times_s"],
            "speedup_vs_greedy": ratio(base, timing[name]["median_s"]),
            "new_tokens_per_target_forward": per_target,
            "target_forwards": c["target_forwards"],
            "draft_forwards": c["draft_forwards"],
            "identical_to_greedy": identical[name],
            "final_train_loss": losses.get(name),
        }
        if name != "greedy":
            # every verification pass yields the accepted draft tokens plus one token of the target's own
            accepted = generated_tokens - c["target_forwards"]
            record["draft_tokens_accepted_share"] = accepted / max(1, c["draft_forwards"])
        records.append(record)
        rows.append(
            [
                name,
                round(timing[name]["median_s"], 3),
                f"{record['speedup_vs_greedy']:.2f}x",
                round(per_target, 2),
                f"{record.get('draft_tokens_accepted_share', float('nan')):.0%}" if name != "greedy" else "",
                "yes" if identical[name] else "NO",
            ]
        )
    table = markdown_table(
        [
            "side",
            "median CPU s",
            "speed-up",
            "new tokens per 36-6 forward",
            "draft tokens accepted",
            "= greedy",
        ],
        rows,
    )
    loss_table = markdown_table(
        ["model", "final train loss (mean of last 50 steps)", "training CPU s"],
        [[name, round(losses[name], 3), round(train_cpu[name], 1)] for name in losses],
    )
    markdown = (
        "# Assisted greedy decoding of a 36-6 model (bench/assisted_decoding.py)\n\n"
        f"{args.sentences} synthetic test sentences, batch 1, greedy, at most {args.max_new_tokens} new tokens "
        f"({generated_tokens} generated in all), one thread, sides interleaved, median CPU seconds of "
        f"{args.repeats} rounds. Pre-LN models at d_model {args.d_model}, trained {args.steps} steps "
        f"(batch {args.batch}) on {args.train_pairs} synthetic pairs; the self copy trained its one decoder "
        f"layer {args.copy_steps} steps.\n\n"
        f"{table}\n\n"
        "'draft tokens accepted' = accepted draft tokens (generated tokens minus 36-6 forwards: each verification "
        "pass adds one token of the 36-6 model's own) / draft forwards (one per proposed token; the draft's "
        "encoder pass is not a forward call).\n\n"
        f"{loss_table}\n"
    )
    payload = {"args": vars(args), "generated_tokens": generated_tokens, "sides": records, "losses": losses}
    path = write_results(args.name, payload, markdown)
    print(markdown)
    print(f"wrote {path}")
    return payload


if __name__ == "__main__":
    main()
