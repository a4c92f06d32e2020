"""How fast a machine trains the depth study's kind of model: one fixed probe, so that CPU-seconds measured on
different machines can be compared, summed and priced (bench/depth_multi30k.py, depth.pricing, depth.report).

The same study ran on machines whose CPU-seconds differ by more than 2× for the same epoch of the same row. Every
epoch a worker records carries `probe_ms`: the CPU-ms per training step of the probe on the worker's machine,
measured once per boot (`machine_probe`), and every cost the study reports is in seconds of the reference machine
(the one that trained the study's first 40 runs, whose epochs carry no probe): CPU-s × REFERENCE_PROBE_MS /
probe_ms (`reference_cpu_s`). On a shared 2-core machine single steps vary by ±20% and epochs by ±10%; the probe
is the median of 60 steps, good to about 10%: enough to undo a 2× difference between machines, not to rank rows
whose costs differ by less.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# the probe of the machine that trained the records whose epochs carry no `probe_ms` (the reference machine), not
# measured there (it was not handed on) but inferred by `infer_reference` from the rows trained on both it and a
# probed machine (the eleventh sitting's, probe 433.9 ms): dsinit-matt-18-6-low-dropout 192 ms, shared-18-6 181;
# their mean
REFERENCE_PROBE_MS = 186.0


def probe_ms(steps: int = 60, warmup: int = 3) -> float:
    """Median CPU-ms (process time, one torch thread) of one training step — forward, backward, AdamW update — of
    a fixed stock MarianMTModel 6-6 at the study's width (d 64, FFN 256, 2 heads, vocabulary 4000) on a fixed
    random batch of 48 sentence pairs of 32 tokens, as the study's 1536-token batches; `warmup` steps first."""
    import torch
    from transformers import MarianConfig, MarianMTModel

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        generator = torch.Generator().manual_seed(0)
        torch.manual_seed(0)
        config = MarianConfig(
            vocab_size=4000,
            d_model=64,
            encoder_layers=6,
            decoder_layers=6,
            encoder_ffn_dim=256,
            decoder_ffn_dim=256,
            encoder_attention_heads=2,
            decoder_attention_heads=2,
            max_position_embeddings=64,
            pad_token_id=0,
            eos_token_id=1,
            decoder_start_token_id=0,
        )
        model = MarianMTModel(config).train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        source = torch.randint(2, 4000, (48, 32), generator=generator)
        target = torch.randint(2, 4000, (48, 32), generator=generator)
        times = []
        for step in range(warmup + steps):
            start = time.process_time()
            loss = model(input_ids=source, labels=target).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if step >= warmup:
                times.append(1000 * (time.process_time() - start))
        return statistics.median(times)
    finally:
        torch.set_num_threads(threads)


def reference_cpu_s(cpu_s: float, entry: dict[str, Any]) -> float:
    """CPU-s measured in the epoch ENTRY, in the reference machine's seconds (unchanged where the entry carries no
    `probe_ms`: the reference machine trained it)."""
    probe = entry.get("probe_ms")
    return cpu_s * REFERENCE_PROBE_MS / probe if probe else cpu_s


def reference_rate(per_cpu_s: float, entry: dict[str, Any]) -> float:
    """A rate per CPU-s (tokens decoded, say) measured on the machine of the epoch ENTRY, per reference CPU-s."""
    probe = entry.get("probe_ms")
    return per_cpu_s * probe / REFERENCE_PROBE_MS if probe else per_cpu_s


def infer_reference(records: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Per row trained on both the reference machine (epochs without `probe_ms`) and probed machines: the
    reference machine's probe that makes their CPU-s per epoch agree, probe × reference rate / probed rate (the
    rate a mean over the row's epochs of each kind, training + validation decoding)."""
    out = {}
    for name, recs in records.items():
        entries = [e for r in recs for e in r.get("history") or [] if e.get("train_cpu_s") is not None]
        legacy = [measured_cpu_s(e) for e in entries if not e.get("probe_ms")]
        probed = [e for e in entries if e.get("probe_ms")]
        if legacy and probed:
            rate = statistics.fmean(measured_cpu_s(e) for e in probed)
            probe = statistics.fmean(e["probe_ms"] for e in probed)
            out[name] = probe * statistics.fmean(legacy) / rate
    return out


def measured_cpu_s(entry: dict[str, Any]) -> float:
    """The CPU-s of the epoch ENTRY as its machine measured them: training + validation decoding."""
    return entry["train_cpu_s"] + entry.get("valid_decode_cpu_s", 0.0)


def boot_id() -> str | None:
    """This boot's id (/proc/sys/kernel/random/boot_id), None where it cannot be read."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip() or None
    except OSError:
        return None


def machine_probe(cache: Path) -> float:
    """This machine's `probe_ms`, measured once per boot and kept in CACHE/machine-probe.json, so every run of a
    sitting is stamped with the same value (measured afresh where the boot cannot be told)."""
    path, here = cache / "machine-probe.json", boot_id()
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        saved = {}
    if here is not None and saved.get("boot_id") == here:
        return float(saved["probe_ms"])
    probe = round(probe_ms(), 1)
    if here is not None:
        from deep_nmt_hf.data.atomic import atomic_write

        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_write(path) as handle:
            handle.write(json.dumps({"boot_id": here, "probe_ms": probe}) + "\n")
    return probe


def boot_time() -> float | None:
    """When this machine booted (epoch seconds, from /proc/stat), None where that cannot be read."""
    try:
        lines = Path("/proc/stat").read_text().splitlines()
    except OSError:
        return None
    return next((float(line.split()[1]) for line in lines if line.startswith("btime ")), None)


def stamp_since_boot(
    history: Sequence[dict[str, Any]], written: Sequence[float | None], probe: float, booted: float | None
) -> list[dict[str, Any]]:
    """HISTORY with this boot's `probe` stamped on the epochs whose checkpoint was WRITTEN (mtime, None: no
    checkpoint) since this machine BOOTED: this machine trained them, so they carry its one probe (a resumed run's
    epochs from before the probe existed, or stamped by an earlier probe of this boot). The others keep theirs, or
    none: the reference machine trained them, or a machine not known."""
    out = []
    for entry, at in zip(history, written, strict=True):
        mine = booted is not None and at is not None and at >= booted
        out.append({**entry, "probe_ms": probe} if mine else dict(entry))
    return out


def machine_factor(probe: float) -> float:
    """How many of this machine's CPU-s one reference CPU-s takes, from this machine's PROBE."""
    return probe / REFERENCE_PROBE_MS


def describe(probe: float) -> str:
    """One line: this machine's PROBE against the reference machine's."""
    return (
        f"this machine's probe: {probe:.0f} CPU-ms per step, {machine_factor(probe):.2f}× the reference "
        f"machine's {REFERENCE_PROBE_MS:.0f}: its CPU-s count as {1 / machine_factor(probe):.2f} reference CPU-s"
    )
