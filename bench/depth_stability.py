"""Depth stability of post-LN Transformers on Multi30k en→de: what ADMIN, DeepNorm, pre-LN and DLCL change.

A short loss curve at small width shows nothing (a stock post-LN model trains as well at 36 layers as at 6 over a
few hundred steps, and both stall alike at a too-high learning rate), so this script uses instruments that can see
the depth effect the papers describe at a size two shared CPU cores can afford:

  sweep          learning rate × encoder depth × method: N steps of Adam on fixed Multi30k batches; per method and
                 depth the largest learning rate that still trains, and the grid of final losses
                 (ADMIN paper, sec. 4: default post-LN loses its stable learning rate as depth grows, ADMIN keeps it).
  amplification  ‖F(x, W + δW) − F(x, W)‖ / ‖F(x, W)‖ at initialisation (after ADMIN profiling), F = encoder and
                 decoder outputs in eval mode, for a random perturbation of relative size ε of every weight matrix
                 and for the first Adam step, vs depth (Liu et al. 2020, "Understanding the difficulty of training
                 transformers", sec. 4: the post-LN output change grows with depth, ADMIN's stays small).
  gradnorms      per-layer gradient norms at initialisation at the deepest sweep depth and at the paper's width.
  dlcl           loss curves of a deep (20L+) post-norm encoder without / with DLCL, pre-norm, pre-norm + DLCL at the
                 same steps and learning rates (prenorm-dlcl paper, Table 1: post-norm 20L fails, DLCL trains). Read
                 from the sweep runs at the DLCL depth, which always run the whole learning-rate grid.
  paper-width    a 60L-12L model at the paper's width (d 512, ffn 2048, 8 heads), default post-LN vs ADMIN, for as
                 many steps as fit in a time budget each (both at once, one thread each), plus amplification and
                 per-layer gradient norms at that size.

Every training run uses the same Multi30k train batches in the same order (length-bucketed, then shuffled once with
a fixed seed), dropout 0.1, Adam(β = 0.9, 0.98), linear warmup then inverse-sqrt decay, no gradient clipping; model
seed 0 for every learning rate, so the learning rate is the only thing that changes along a row. ADMIN models are
profiled (deep_nmt_hf.training.admin_profiling.admin_profile) on the first train batch. "Trains" means: every loss and gradient
finite, no divergence, and the mean of the last 10 losses at least `margin` nats below the first loss. This is a
measurement instrument, not the library's training pipeline. Jobs go to a pool of worker processes (one torch
thread each).

    python -m bench.depth_stability             # full default run (≈ 30 min on 2 cores shared with others)
    python -m bench.depth_stability --quick     # smoke run (a few minutes)

Writes bench/results/depth_stability.{json,md} and bench/results/depth_stability_*.png
(--quick writes depth_stability_quick.* so that it never overwrites the full result).
"""

from __future__ import annotations

import argparse
import collections
import math
import multiprocessing
import random
import statistics
import time
from typing import Any

from bench.lib.common import (
    RESULTS,
    markdown_table,
    multi30k_pairs,
    multi30k_tokenizer,
    tokenized_batches,
    write_results,
)

NAME = "depth_stability"

# method -> (variant config class name in deep_nmt_hf, config overrides)
METHODS: dict[str, tuple[str, dict[str, Any]]] = {
    "post": ("DeepNMTConfig", {}),
    "admin": ("AdminConfig", {}),
    "deepnorm": ("DeepNormConfig", {}),
    "pre": ("DeepNMTConfig", {"layer_norm_position": "pre"}),
    "post_dlcl": ("DLCLConfig", {"layer_norm_position": "post"}),
    "pre_dlcl": ("DLCLConfig", {}),
}
LABELS = {
    "post": "post-LN (xavier)",
    "admin": "post-LN + ADMIN",
    "deepnorm": "post-LN + DeepNorm",
    "pre": "pre-LN",
    "post_dlcl": "post-LN + DLCL",
    "pre_dlcl": "pre-LN + DLCL",
}
STABILITY_METHODS = ("post", "admin", "deepnorm", "pre")
DLCL_METHODS = ("post", "post_dlcl", "pre", "pre_dlcl")
PAPER_METHODS = ("post", "admin")

SETTINGS: dict[str, dict[str, Any]] = {
    "default": {
        "small_width": {"d_model": 64, "ffn": 256, "heads": 4},
        "paper_width": {"d_model": 512, "ffn": 2048, "heads": 8},
        "depths": [[6, 3], [24, 3]],  # [encoder, decoder]; the last one is the DLCL depth (20L+ encoder)
        "lrs": [2e-3, 6e-3, 2e-2],
        "steps": 60,
        "warmup": 6,
        "batch_size": 16,
        "train_batches": 200,
        "eval_pairs": 16,
        "amp_depths": [[6, 3], [12, 3], [24, 3], [48, 3]],
        "amp_repeats": 3,
        "paper_layers": [60, 12],
        "paper_seconds": 150,
        "paper_batch_size": 8,
        "paper_lr": 1e-3,
        "paper_amp_repeats": 1,
    },
    "quick": {
        "small_width": {"d_model": 32, "ffn": 64, "heads": 4},
        "paper_width": {"d_model": 128, "ffn": 512, "heads": 8},
        "depths": [[2, 2], [6, 2]],
        "lrs": [3e-3, 3e-2],
        "steps": 12,
        "warmup": 2,
        "batch_size": 8,
        "train_batches": 20,
        "eval_pairs": 8,
        "amp_depths": [[2, 2], [6, 2]],
        "amp_repeats": 2,
        "paper_layers": [8, 2],
        "paper_seconds": 8,
        "paper_batch_size": 4,
        "paper_lr": 1e-3,
        "paper_amp_repeats": 1,
    },
}

# ------------------------------------------------------------------------------------------------ worker side
_DATA: dict[str, Any] = {}


def _init_worker(data_spec: dict[str, Any]) -> None:
    """Runs once in every worker process: one torch thread, the tokenizer and the fixed batches."""
    import torch

    torch.set_num_threads(1)
    _DATA.update(load_data(data_spec))


def load_data(spec: dict[str, Any]) -> dict[str, Any]:
    """Train batches (first `train_batches * batch_size` Multi30k train pairs, bucketed by length, shuffled once),
    paper-width train batches (same pairs, `paper_batch_size`), and one eval batch (first `eval_pairs` val pairs)."""
    from deep_nmt_hf.data.tokenization import special_token_ids

    tokenizer = multi30k_tokenizer(spec["vocab_size"])
    pairs = multi30k_pairs("train", limit=spec["train_batches"] * spec["batch_size"])
    pairs = sorted(pairs, key=lambda p: (len(p[1].split()), len(p[0].split())))
    out: dict[str, Any] = {"ids": special_token_ids(tokenizer)}
    for key, size in (("train", spec["batch_size"]), ("paper_train", spec["paper_batch_size"])):
        batches = tokenized_batches(tokenizer, pairs, size, spec["max_length"])
        random.Random(spec["seed"]).shuffle(batches)
        out[key] = batches
    out["eval"] = tokenized_batches(
        tokenizer, multi30k_pairs("val", limit=spec["eval_pairs"]), spec["eval_pairs"], spec["max_length"]
    )[0]
    return out


def build_model(spec: dict[str, Any]):
    """A seeded model of `spec["method"]` built from the deep_nmt_hf variant config; ADMIN models are profiled on
    the first train batch of the run, as the library's Trainer callback does."""
    import torch

    import deep_nmt_hf
    from deep_nmt_hf.training.admin_profiling import admin_profile

    width = spec["width"]
    class_name, overrides = METHODS[spec["method"]]
    config = getattr(deep_nmt_hf, class_name)(
        d_model=width["d_model"],
        encoder_layers=spec["encoder_layers"],
        decoder_layers=spec["decoder_layers"],
        encoder_attention_heads=width["heads"],
        decoder_attention_heads=width["heads"],
        encoder_ffn_dim=width["ffn"],
        decoder_ffn_dim=width["ffn"],
        max_position_embeddings=256,
        dropout=spec["dropout"],
        **_DATA["ids"],
        **overrides,
    )
    torch.manual_seed(spec["seed"])
    model = getattr(deep_nmt_hf, class_name.replace("Config", "ForConditionalGeneration"))(config)
    if config.residual_scaling == "admin":
        admin_profile(model, _DATA[spec.get("batches", "train")][0], seed=spec["seed"])
    return model


def trains(losses: list[float], finite: bool, diverged: bool, margin: float, window: int = 10) -> bool:
    """Every loss finite, no divergence, and the mean of the last `window` losses below the first − margin."""
    if not finite or diverged or not losses:
        return False
    tail = losses[-window:]
    return sum(tail) / len(tail) < losses[0] - margin


def train_run(spec: dict[str, Any]) -> dict[str, Any]:
    """N steps of Adam with linear warmup then inverse-sqrt decay; stops early on a non-finite loss or gradient, on
    divergence (mean of the last 10 losses above the first loss + 0.5 after warmup) or when the time budget ends."""
    import torch

    model = build_model(spec)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=spec["lr"], betas=(0.9, 0.98), eps=1e-8)
    warmup = max(1, spec["warmup"])
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, math.sqrt(warmup / (s + 1)))
    )
    torch.manual_seed(spec["seed"] + 1)  # dropout masks: the same sequence for every run
    losses: list[float] = []
    grad_norms: list[float] = []
    finite, diverged, reason = True, False, "completed"
    start = time.perf_counter()
    batches = _DATA[spec.get("batches", "train")]
    budget = spec.get("seconds_budget")
    for step in range(spec["steps"]):
        loss = model(**batches[step % len(batches)]).loss
        if not torch.isfinite(loss):
            finite, reason = False, f"non-finite loss at step {step + 1}"
            break
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, float("inf")).item()  # measured only, not clipped
        losses.append(loss.item())
        grad_norms.append(norm)
        if not math.isfinite(norm):
            finite, reason = False, f"non-finite gradient at step {step + 1}"
            break
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        if step >= warmup + 10 and sum(losses[-10:]) / 10 > losses[0] + 0.5:
            diverged, reason = True, f"diverged (loss above first + 0.5) at step {step + 1}"
            break
        if budget and time.perf_counter() - start > budget:
            reason = f"time budget of {budget:.0f} s reached after {step + 1} steps"
            break
    return {
        "method": spec["method"],
        "encoder_layers": spec["encoder_layers"],
        "decoder_layers": spec["decoder_layers"],
        "lr": spec["lr"],
        "steps_done": len(losses),
        "seconds": round(time.perf_counter() - start, 2),
        "finite": finite,
        "diverged": diverged,
        "stop_reason": reason,
        "trains": trains(losses, finite, diverged, spec["margin"]),
        "final_loss": round(sum(losses[-10:]) / len(losses[-10:]), 4) if losses else None,
        "losses": [round(x, 4) for x in losses],
        "grad_norms": [round(x, 4) for x in grad_norms],
    }


def sweep_job(spec: dict[str, Any]) -> dict[str, Any]:
    """One (method, depth, learning rate) run; skipped when the script's overall time budget is used up."""
    if time.time() > spec["deadline"]:
        run = {k: spec[k] for k in ("method", "encoder_layers", "decoder_layers", "lr")}
        run.update(skipped="not run: the script's overall time budget was used up", trains=None)
    else:
        run = train_run(spec)
    return {"kind": "sweep", **run}


def _outputs(model, batch: dict[str, Any]) -> tuple[Any, Any]:
    """Encoder and decoder final hidden states (eval mode, no dropout) on one batch."""
    import torch

    with torch.no_grad():
        out = model.model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            decoder_input_ids=model.prepare_decoder_input_ids_from_labels(batch["labels"]),
        )
    return out.encoder_last_hidden_state, out.last_hidden_state


def _relative_change(new: tuple[Any, Any], old: tuple[Any, Any]) -> dict[str, float]:
    return {
        side: ((n - o).norm() / o.norm()).item()
        for side, n, o in zip(("encoder", "decoder"), new, old, strict=True)
    }


def amplification(model, spec: dict[str, Any]) -> dict[str, Any]:
    """Output change at initialisation (Liu et al. 2020, sec. 4): (a) every weight matrix of the layers (not the
    embedding) moved by a random direction of relative Frobenius size ε, median over repeats; (b) one Adam step
    (lr `adam_lr`, computed on the first train batch in eval mode, i.e. a step of size ≈ lr per entry)."""
    import torch

    batch = _DATA["eval"]
    model.eval()
    base = _outputs(model, batch)
    matrices = [(n, p) for n, p in model.named_parameters() if p.dim() >= 2 and "shared" not in n]
    saved = {n: p.detach().clone() for n, p in matrices}
    generator = torch.Generator().manual_seed(spec["seed"] + 7)
    random_changes = []
    for _ in range(spec["amp_repeats"]):
        with torch.no_grad():
            for n, p in matrices:
                direction = torch.randn(p.shape, generator=generator)
                p.add_(direction * (spec["epsilon"] * saved[n].norm() / direction.norm()))
        random_changes.append(_relative_change(_outputs(model, batch), base))
        with torch.no_grad():
            for n, p in matrices:
                p.copy_(saved[n])
    optimizer = torch.optim.Adam(model.parameters(), lr=spec["adam_lr"], betas=(0.9, 0.98))
    train_batch = _DATA[spec.get("batches", "train")][0]
    model(**train_batch).loss.backward()
    optimizer.step()
    adam_change = _relative_change(_outputs(model, batch), base)
    return {
        "random": {s: statistics.median(c[s] for c in random_changes) for s in ("encoder", "decoder")},
        "random_all": random_changes,
        "adam_step": adam_change,
    }


def layer_grad_norms(model, spec: dict[str, Any]) -> dict[str, list[float]]:
    """‖∂L/∂θ_l‖ of every encoder and decoder layer (all its parameters) at initialisation, one train batch,
    training mode with fixed dropout masks."""
    import torch

    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(spec["seed"] + 1)
    model(**_DATA[spec.get("batches", "train")][0]).loss.backward()
    out = {}
    for side in ("encoder", "decoder"):
        norms = []
        for layer in getattr(model.model, side).layers:
            grads = [p.grad.norm() ** 2 for p in layer.parameters() if p.grad is not None]
            norms.append(torch.stack(grads).sum().sqrt().item())
        out[side] = norms
    model.zero_grad(set_to_none=True)
    return out


def probe_job(spec: dict[str, Any]) -> dict[str, Any]:
    """Amplification (and, when asked, per-layer gradient norms) of one freshly initialised model."""
    start = time.perf_counter()
    result: dict[str, Any] = {k: spec[k] for k in ("method", "encoder_layers", "decoder_layers")}
    result["kind"], result["scale"] = "probe", spec["scale"]
    model = build_model(spec)
    if spec["gradnorms"]:
        result["grad_norms"] = layer_grad_norms(model, spec)  # leaves the weights untouched
    result["amplification"] = amplification(model, spec)
    result["seconds"] = round(time.perf_counter() - start, 2)
    return result


def paper_job(spec: dict[str, Any]) -> dict[str, Any]:
    run = train_run(spec)
    return {"kind": "paper_train", **run}


def run_job(spec: dict[str, Any]) -> dict[str, Any]:
    return {"sweep": sweep_job, "probe": probe_job, "paper_train": paper_job}[spec["kind"]](spec)


# ------------------------------------------------------------------------------------------------ main side
def unigram_entropy(batches: list[dict]) -> float:
    """Entropy (nats) of the target-token distribution: the loss of the best context-free predictor."""
    counts = collections.Counter(t for b in batches for t in b["labels"][b["labels"] != -100].tolist())
    total = sum(counts.values())
    return -sum(c / total * math.log(c / total) for c in counts.values())


def make_jobs(cfg: dict[str, Any], base: dict[str, Any]) -> list[dict[str, Any]]:
    """Paper-width training first (both at once), then the paper-width probes, then the sweep runs ordered by
    learning rate, highest first (the informative end, should the time budget cut the sweep short), then the
    small-width probes."""
    small = {**base, "width": cfg["small_width"], "batches": "train"}
    paper_layers = dict(zip(("encoder_layers", "decoder_layers"), cfg["paper_layers"], strict=True))
    paper = {**base, "width": cfg["paper_width"], "batches": "paper_train", **paper_layers}
    jobs: list[dict[str, Any]] = []
    for method in PAPER_METHODS:
        jobs.append(
            {
                **paper,
                "kind": "paper_train",
                "method": method,
                "lr": cfg["paper_lr"],
                "steps": 10_000,
                "seconds_budget": cfg["paper_seconds"],
            }
        )
    for method in PAPER_METHODS:
        jobs.append(
            {
                **paper,
                "kind": "probe",
                "scale": "paper",
                "method": method,
                "gradnorms": True,
                "amp_repeats": cfg["paper_amp_repeats"],
            }
        )
    dlcl_depth = cfg["depths"][-1]
    sweep = []
    for lr in sorted(cfg["lrs"], reverse=True):
        for enc, dec in cfg["depths"]:
            methods = list(STABILITY_METHODS)
            if [enc, dec] == dlcl_depth:
                methods += [m for m in DLCL_METHODS if m not in methods]
            for method in methods:
                sweep.append(
                    {
                        **small,
                        "kind": "sweep",
                        "method": method,
                        "encoder_layers": enc,
                        "decoder_layers": dec,
                        "lr": lr,
                    }
                )
    jobs += sweep
    deepest = max(cfg["amp_depths"], key=lambda d: d[0])
    probes = []
    for enc, dec in cfg["amp_depths"]:
        for method in STABILITY_METHODS:
            probes.append(
                {
                    **small,
                    "kind": "probe",
                    "scale": "small",
                    "method": method,
                    "encoder_layers": enc,
                    "decoder_layers": dec,
                    "gradnorms": [enc, dec] == deepest,
                }
            )
    jobs += sorted(probes, key=lambda j: -j["encoder_layers"])
    return jobs


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, name: str) -> str:
    """Save a figure as RESULTS/name via a temp sibling and a rename (never a half-written file)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    tmp = path.with_suffix(".tmp.png")
    fig.tight_layout()
    fig.savefig(tmp, dpi=110)
    tmp.replace(path)
    return str(path.relative_to(RESULTS.parents[1]))


def max_stable_lr(runs: list[dict[str, Any]]) -> float | None:
    ok = [r["lr"] for r in runs if r.get("trains")]
    return max(ok) if ok else None


def plot_all(result: dict[str, Any], prefix: str) -> dict[str, str]:
    plt = _pyplot()
    plots = {}
    sweep, lrs = result["sweep"], result["settings"]["lrs"]
    depths = result["settings"]["depths"]

    # 1. largest trainable lr vs depth, and final loss vs lr at each depth
    fig, axes = plt.subplots(1, 1 + len(depths), figsize=(5 * (1 + len(depths)), 4))
    for method in STABILITY_METHODS:
        xs, ys = [], []
        for enc, dec in depths:
            lr = max_stable_lr(sweep.get(f"{method}/{enc}-{dec}", []))
            xs.append(enc)
            ys.append(lr if lr else float("nan"))
        axes[0].plot(xs, ys, marker="o", label=LABELS[method])
    axes[0].set(xscale="log", yscale="log", xlabel="encoder layers", ylabel="largest lr that trains")
    axes[0].set_title("stable learning rate vs depth")
    axes[0].legend(fontsize=8)
    for ax, (enc, dec) in zip(axes[1:], depths, strict=True):
        for key, runs in sweep.items():
            if not key.endswith(f"/{enc}-{dec}"):
                continue
            done = [r for r in runs if r.get("final_loss") is not None]
            ax.plot(
                [r["lr"] for r in done],
                [r["final_loss"] for r in done],
                marker="o",
                label=LABELS[key.split("/")[0]],
            )
        ax.axhline(result["unigram_entropy"], color="grey", ls=":", label="unigram entropy")
        ax.set(xscale="log", xlabel="peak learning rate", ylabel="mean loss, last 10 steps")
        ax.set_title(f"{enc}L-{dec}L, {result['settings']['steps']} steps")
        ax.legend(fontsize=7)
    plots["sweep"] = _save(fig, f"{prefix}_sweep.png")
    plt.close(fig)

    # 2. DLCL loss curves at the DLCL depth, one panel per lr
    enc, dec = depths[-1]
    fig, axes = plt.subplots(1, len(lrs), figsize=(4.2 * len(lrs), 3.8), squeeze=False)
    for ax, lr in zip(axes[0], lrs, strict=True):
        for method in DLCL_METHODS:
            for r in sweep.get(f"{method}/{enc}-{dec}", []):
                if r["lr"] == lr and r.get("losses"):
                    ax.plot(range(1, len(r["losses"]) + 1), r["losses"], label=LABELS[method])
        ax.set(xlabel="step", ylabel="train loss", title=f"{enc}L-{dec}L, lr {lr:g}")
        ax.legend(fontsize=7)
    plots["dlcl"] = _save(fig, f"{prefix}_dlcl.png")
    plt.close(fig)

    # 3. amplification vs depth
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, kind in zip(axes, ("random", "adam_step"), strict=True):
        for method in STABILITY_METHODS:
            points = sorted(
                (p["encoder_layers"], p["amplification"][kind]["decoder"])
                for p in result["probes"]
                if p["scale"] == "small" and p["method"] == method
            )
            ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=LABELS[method])
        for method in PAPER_METHODS:
            for p in result["probes"]:
                if p["scale"] == "paper" and p["method"] == method:
                    ax.scatter(
                        [p["encoder_layers"]],
                        [p["amplification"][kind]["decoder"]],
                        marker="*",
                        s=120,
                        label=f"{LABELS[method]}, paper width",
                    )
        what = (
            f"random δW, ‖δW‖/‖W‖ = {result['settings']['epsilon']:g}"
            if kind == "random"
            else f"first Adam step, lr {result['settings']['adam_lr']:g}"
        )
        ax.set(xlabel="encoder layers", ylabel="‖ΔF‖/‖F‖ (decoder output)", yscale="log", title=what)
        ax.legend(fontsize=7)
    plots["amplification"] = _save(fig, f"{prefix}_amplification.png")
    plt.close(fig)

    # 4. per-layer gradient norms at init (deepest small depth and paper width)
    with_grads = [p for p in result["probes"] if "grad_norms" in p]
    scales = sorted({p["scale"] for p in with_grads})
    fig, axes = plt.subplots(len(scales), 2, figsize=(10, 3.6 * len(scales)), squeeze=False)
    for row, scale in zip(axes, scales, strict=True):
        for p in with_grads:
            if p["scale"] != scale:
                continue
            for ax, side in zip(row, ("encoder", "decoder"), strict=True):
                norms = p["grad_norms"][side]
                ax.plot(range(1, len(norms) + 1), norms, marker=".", label=LABELS[p["method"]])
                ax.set(
                    yscale="log",
                    xlabel=f"{side} layer",
                    ylabel="‖∂L/∂θ_layer‖",
                    title=f"{side}, {p['encoder_layers']}L-{p['decoder_layers']}L ({scale} width), at init",
                )
        for ax in row:
            ax.legend(fontsize=7)
    plots["gradnorms"] = _save(fig, f"{prefix}_gradnorms.png")
    plt.close(fig)

    # 5. paper-width loss curves
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in result["paper_train"]:
        ax.plot(range(1, len(run["losses"]) + 1), run["losses"], marker=".", label=LABELS[run["method"]])
    enc, dec = result["settings"]["paper_layers"]
    ax.set(xlabel="step", ylabel="train loss", title=f"{enc}L-{dec}L at the paper's width")
    ax.legend(fontsize=8)
    plots["paper_width"] = _save(fig, f"{prefix}_paper_width.png")
    plt.close(fig)
    return plots


def summarise(result: dict[str, Any]) -> str:
    s = result["settings"]
    sweep, lrs = result["sweep"], s["lrs"]
    lines = [
        "# Depth stability on Multi30k en→de (ADMIN, DeepNorm, pre-LN, DLCL)",
        "",
        f"Small width: d {s['small_width']['d_model']}, ffn {s['small_width']['ffn']}, "
        f"{s['small_width']['heads']} heads; batch {s['batch_size']} sentence pairs, {s['steps']} steps, warmup "
        f"{s['warmup']}, dropout {s['dropout']}, BPE {s['vocab_size']}. 'Trains' = finite, not diverged, mean of the "
        f"last 10 losses ≥ {s['margin']} nats below the first loss. Unigram entropy of the targets: "
        f"{result['unigram_entropy']:.2f} nats. Wall clock: {result['wall_seconds'] / 60:.1f} min.",
        "",
        "## Sweep: mean loss of the last 10 steps (✗ = does not train, – = not run)",
        "",
    ]
    rows = []
    for key, runs in sweep.items():
        method, depth = key.split("/")
        cells = []
        for lr in lrs:
            run = next((r for r in runs if r["lr"] == lr), None)
            if run is None or run.get("skipped"):
                cells.append("–")
            elif run.get("final_loss") is None:
                cells.append("✗ nan")
            else:
                cells.append(f"{run['final_loss']:.2f}" + ("" if run["trains"] else " ✗"))
        best = max_stable_lr(runs)
        rows.append([LABELS[method], depth, *cells, f"{best:g}" if best else "none"])
    lines.append(markdown_table(["method", "enc-dec", *[f"lr {lr:g}" for lr in lrs], "largest lr"], rows))
    lines += ["", "## Amplification at initialisation (relative change of the decoder / encoder output)", ""]
    rows = []
    for p in sorted(result["probes"], key=lambda p: (p["scale"], p["method"], p["encoder_layers"])):
        a = p["amplification"]
        rows.append(
            [
                LABELS[p["method"]],
                f"{p['encoder_layers']}-{p['decoder_layers']}",
                p["scale"],
                f"{a['random']['decoder']:.3g} / {a['random']['encoder']:.3g}",
                f"{a['adam_step']['decoder']:.3g} / {a['adam_step']['encoder']:.3g}",
            ]
        )
    lines.append(
        markdown_table(
            [
                "method",
                "enc-dec",
                "width",
                f"random δW (ε {s['epsilon']:g}) dec / enc",
                f"one Adam step (lr {s['adam_lr']:g}) dec / enc",
            ],
            rows,
        )
    )
    lines += ["", "## Per-layer gradient norms at initialisation (first / last layer)", ""]
    rows = []
    for p in result["probes"]:
        if "grad_norms" not in p:
            continue
        g = p["grad_norms"]
        rows.append(
            [
                LABELS[p["method"]],
                f"{p['encoder_layers']}-{p['decoder_layers']}",
                p["scale"],
                f"{g['encoder'][0]:.3g} / {g['encoder'][-1]:.3g}",
                f"{g['decoder'][0]:.3g} / {g['decoder'][-1]:.3g}",
            ]
        )
    lines.append(markdown_table(["method", "enc-dec", "width", "encoder", "decoder"], rows))
    enc, dec = s["paper_layers"]
    lines += ["", f"## {enc}L-{dec}L at the paper's width, {s['paper_seconds']} s each (both at once)", ""]
    rows = [
        [
            LABELS[r["method"]],
            r["steps_done"],
            r["losses"][0] if r["losses"] else "–",
            r["final_loss"] if r["final_loss"] is not None else "–",
            r["stop_reason"],
        ]
        for r in result["paper_train"]
    ]
    lines.append(markdown_table(["method", "steps", "first loss", "mean last 10", "stop"], rows))
    lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in result["plots"].values())]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="tiny smoke run (writes depth_stability_quick.*)"
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes, one torch thread each")
    parser.add_argument(
        "--budget-minutes",
        type=float,
        default=None,
        help="overall budget: sweep runs not started after 80%% of it are skipped (default 30, --quick 5)",
    )
    parser.add_argument(
        "--paper-seconds", type=float, default=None, help="training seconds per paper-width run"
    )
    args = parser.parse_args(argv)
    mode = "quick" if args.quick else "default"
    cfg = dict(SETTINGS[mode])
    if args.paper_seconds is not None:
        cfg["paper_seconds"] = args.paper_seconds
    budget = args.budget_minutes if args.budget_minutes is not None else (5.0 if args.quick else 30.0)
    start = time.time()
    data_spec = {
        "vocab_size": 4000,
        "train_batches": cfg["train_batches"],
        "batch_size": cfg["batch_size"],
        "paper_batch_size": cfg["paper_batch_size"],
        "eval_pairs": cfg["eval_pairs"],
        "max_length": 64,
        "seed": 0,
    }
    base = {
        "seed": 0,
        "dropout": 0.1,
        "lrs": cfg["lrs"],
        "steps": cfg["steps"],
        "warmup": cfg["warmup"],
        "margin": 1.5 if not args.quick else 0.1,
        "epsilon": 0.01,
        "adam_lr": 1e-3,
        "amp_repeats": cfg["amp_repeats"],
        "deadline": start + 60 * budget * 0.8,
    }
    jobs = make_jobs(cfg, base)
    _init_worker(data_spec)  # the main process needs the batches too (entropy) and caches the tokenizer first
    entropy = unigram_entropy(_DATA["train"])
    print(f"{len(jobs)} jobs on {args.workers} workers", flush=True)
    outputs: list[dict[str, Any]] = []
    context = multiprocessing.get_context("fork")
    with context.Pool(args.workers, initializer=_init_worker, initargs=(data_spec,)) as pool:
        for out in pool.imap_unordered(run_job, jobs):
            outputs.append(out)
            elapsed = (time.time() - start) / 60
            if out["kind"] == "sweep":
                desc = (
                    f"{out['method']} {out['encoder_layers']}-{out['decoder_layers']} lr {out['lr']:g}: "
                    + (out.get("skipped") or f"{out['final_loss']} {'trains' if out['trains'] else 'fails'}")
                )
            elif out["kind"] == "probe":
                desc = f"probe {out['method']} {out['encoder_layers']}-{out['decoder_layers']} {out['scale']}"
            else:
                desc = f"paper {out['method']}: {out['steps_done']} steps, final {out['final_loss']}"
            print(f"[{elapsed:5.1f} min] {desc}", flush=True)
    sweep: dict[str, list[dict[str, Any]]] = {}
    for out in outputs:
        if out["kind"] == "sweep":
            run = {k: v for k, v in out.items() if k != "kind"}
            sweep.setdefault(f"{out['method']}/{out['encoder_layers']}-{out['decoder_layers']}", []).append(
                run
            )
    for runs in sweep.values():
        runs.sort(key=lambda r: r["lr"])
    order = {m: i for i, m in enumerate(METHODS)}
    sweep = dict(
        sorted(
            sweep.items(), key=lambda kv: (int(kv[0].split("/")[1].split("-")[0]), order[kv[0].split("/")[0]])
        )
    )
    result: dict[str, Any] = {
        "mode": mode,
        "settings": {
            **cfg,
            **{k: base[k] for k in ("dropout", "margin", "epsilon", "adam_lr")},
            "vocab_size": 4000,
        },
        "unigram_entropy": entropy,
        "max_stable_lr": {key: max_stable_lr(runs) for key, runs in sweep.items()},
        "sweep": sweep,
        "probes": [o for o in outputs if o["kind"] == "probe"],
        "paper_train": sorted((o for o in outputs if o["kind"] == "paper_train"), key=lambda o: o["method"]),
    }
    prefix = NAME if mode == "default" else f"{NAME}_quick"
    result["plots"] = plot_all(result, prefix)
    result["wall_seconds"] = round(time.time() - start, 1)
    path = write_results(prefix, result, summarise(result))
    print(f"wrote {path} in {result['wall_seconds'] / 60:.1f} min")


if __name__ == "__main__":
    main()
