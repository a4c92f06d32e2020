"""The markdown table and the plot of a result file."""

from __future__ import annotations

from pathlib import Path

from ..common import markdown_table


def markdown(data: dict) -> str:
    lines = ["# GPU training bench (`bench/gpu_training.py`)", ""]
    dev = data["device"]
    lines.append(
        f"Device: {dev.get('name', dev['type'])}; bf16 peak: {dev.get('peak_bf16_flops')} ({dev.get('peak_source')})"
    )
    settings = data["settings"]
    lines += [
        f"Shapes: d_model {settings['d_model']}, heads {settings['heads']}, vocab {settings['vocab']}, "
        f"max_tokens {settings['max_tokens']}, steps {settings['steps']} after {settings['warmup']} warm-up"
        + (" (--quick: 2/1 layers)" if settings["quick"] else ""),
        "",
    ]
    split = data.get("split") or {}
    if split:
        lines += ["## Host-time split of a `deep-nmt train` step (old pipeline against new, one run)", ""]
        loader = split.get("loader", {})
        if "exact" in loader:
            keys = ["batches_per_epoch", "sampler_ms_per_batch", "collate_ms_per_batch",
                    "distinct_batch_shapes_in_epoch", "distinct_target_lengths_in_epoch", "target_padding_share"]  # fmt: skip
            lines += [
                markdown_table(
                    ["loader", "exact lengths", "padded to 8"],
                    [[k, loader["exact"][k], loader["pad8"][k]] for k in keys],
                ),
                "",
            ]
        trainer = split.get("trainer", {})
        if "old" in trainer:
            keys = [
                "syncs_per_quiet_step",
                "syncs_whole_run",
                "aten_ops_per_step",
                "callbacks_ms_per_step",
                "step_cpu_ms",
                "cpu_over_raw",
            ]
            body = [
                [k, trainer["old"].get(k), trainer["new"].get(k), trainer["raw"].get(k, "")] for k in keys
            ]
            lines += [
                f"Model {split.get('model')}, {trainer['steps']} steps, logging every {trainer['logging_steps']}:",
                "",
                markdown_table(["trainer step", "old", "new", "raw loop"], body),
                "",
                f"Sync sites summed over the quiet steps, old: `{trainer['old'].get('sync_sites_quiet_steps')}`; new: "
                f"`{trainer['new'].get('sync_sites_quiet_steps')}`",
                "",
            ]
        elif trainer:
            lines += [f"trainer split: {trainer}", ""]
    if data["train"]:
        lines += ["## Training step (raw loop)", ""]
        header = [
            "model",
            "precision",
            "mode",
            "step ms",
            "tgt tok/s",
            "peak MiB",
            "× Marian 6-6",
            "× nn.Transformer",
            "TFLOP/step",
            "bf16 peak share",
            "status",
        ]
        body = [
            [r["model"], r["precision"], r["mode"], r.get("step_ms"), r.get("target_tokens_per_s"), r.get("peak_memory_mib"),
             r.get("over_marian_6_6"), r.get("over_nn_transformer"),
             r["flops_per_step"] / 1e12 if r.get("flops_per_step") else None, r.get("share_of_bf16_peak"), r["status"]]
            for r in data["train"]
        ]  # fmt: skip
        lines += [markdown_table(header, body), ""]
    if data["trainer"]:
        lines += ["## `deep-nmt train` path against the raw loop", ""]
        header = ["model", "precision", "trainer ms", "raw ms", "trainer / raw", "first steps ms", "status"]
        body = [[r["model"], r["precision"], r.get("trainer_step_ms"), r.get("raw_step_ms"), r.get("trainer_over_raw"),
                 r.get("first_steps_ms"), r["status"]] for r in data["trainer"]]  # fmt: skip
        lines += [markdown_table(header, body), ""]
    if data.get("stalls"):
        lines += [
            "## Per-shape stalls: padding plans × cuDNN SDPA, whole epochs (issue #55)",
            "",
            "Epoch 1 step by step (synchronised): steps over 2 × the median after the first 20 (goal 0); tokens/s "
            "over epoch 2 (goal: trainer ≥ 0.9 × raw).",
            "",
        ]
        header = ["precision", "plan", "cuDNN SDPA", "shapes", "raw tok/s", "raw CPU ms / 1k tok", "trainer tok/s",
                  "trainer / raw",
                  "raw >2× median", "trainer >2× median", "trainer first ms", "status"]  # fmt: skip
        body = [
            [r["precision"], r["plan"], r["cudnn_sdp"], r.get("distinct_batch_shapes"),
             r.get("raw_target_tokens_per_s"), r.get("raw_cpu_ms_per_1k_target_tokens"),
             r.get("trainer_target_tokens_per_s"),
             r.get("trainer_over_raw_tokens_per_s"), (r.get("raw_epoch1") or {}).get("steps_over_2x_median"),
             (r.get("trainer_epoch1") or {}).get("steps_over_2x_median"),
             (r.get("trainer_epoch1") or {}).get("first_steps_ms"), r["status"]]
            for r in data["stalls"]
        ]  # fmt: skip
        lines += [f"Model {data['stalls'][0]['model']}:", "", markdown_table(header, body), ""]
    if data["generate"]:
        lines += ["## Beam-4 generate", ""]
        body = [
            [r["model"], r["mode"], r.get("batch"), r.get("sentences_per_s"), r["status"]]
            for r in data["generate"]
        ]
        lines += [markdown_table(["model", "mode", "batch", "sentences/s", "status"], body), ""]
    lines += ["## Notes", ""] + [f"- {note}" for note in data["notes"]]
    info = data["provenance"]
    lines += [
        "",
        f"Command: `{info['command']}`  ",
        f"Machine: {info['machine']['cores']} cores, {info['machine']['cpu']}  ",
        f"Versions: {', '.join(f'{k} {v}' for k, v in info['versions'].items())}  ",
        f"Date: {info['date']}",
    ]
    return "\n".join(lines) + "\n"


def plot(data: dict, path: Path) -> Path | None:
    rows = [r for r in data["train"] if r.get("step_ms") and r["mode"] == "eager"]
    if not rows:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    models = list(dict.fromkeys(r["model"] for r in rows))
    precisions = list(dict.fromkeys(r["precision"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(6, len(models) * 0.9), 4))
    bar = 0.8 / len(precisions)
    for j, precision in enumerate(precisions):
        values = [
            next(
                (r["target_tokens_per_s"] for r in rows if r["model"] == m and r["precision"] == precision), 0
            )
            for m in models
        ]
        ax.bar([i + j * bar for i in range(len(models))], values, bar, label=precision)
    ax.set_xticks([i + bar * (len(precisions) - 1) / 2 for i in range(len(models))])
    ax.set_xticklabels(models, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("target tokens / s (raw loop, eager)")
    ax.set_title(
        f"{data['device'].get('name', data['device']['type'])}, d_model {data['settings']['d_model']}"
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
