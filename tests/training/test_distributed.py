"""Several processes on CPU (gloo) and gradient checkpointing.

The 2-process runs go through the real entry point: ``accelerate launch --config_file
examples/accelerate/<config> -m deep_nmt_hf.cli train ...`` in a subprocess, compared with one process
running the same `train` with the same global batch (2 × 4 = 8 pairs). The sampler is ``random`` (seeded, the
same permutation in every process; accelerate hands rank r the r-th per-device slice of each global batch),
so both runs see the same pairs in the same global batches. ``group_by_length`` forms its mega-batches from
the per-device batch size, so its order legitimately differs between 1 × 8 and 2 × 4.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from launching import STEPS, free_port, train_args, write_train_split
from safetensors.torch import load_file

from deep_nmt_hf import VARIANTS, cli, training
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG
from deep_nmt_hf.training import distributed, resolve_variant

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "examples" / "accelerate"
# ADMIN (profiled ω, broadcast from rank 0) + DLCL on both sides; dropout 0 so that the runs are comparable
MODEL_FLAGS = [
    "--variant", "admin", "--encoder-layer-aggregation", "dlcl", "--decoder-layer-aggregation", "dlcl",
    "--d-model", "32", "--encoder-layers", "2", "--decoder-layers", "2", "--heads", "4", "--ffn-dim", "64",
    "--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0",
]  # fmt: skip


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_train_split(tmp_path_factory.mktemp("ddp-data"))


def _train_args(data_dir: Path, out: Path, batch_size: int, *extra: str) -> list[str]:
    return train_args(data_dir, out, batch_size, MODEL_FLAGS, *extra)


def _launch(config: str, args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    command = [
        sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CONFIGS / config),
        "--main_process_port", str(free_port()), "-m", "deep_nmt_hf.cli", *args,
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


class _Recording(training.DeepNMTTrainer):
    last = None

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _Recording.last = self


@pytest.fixture(scope="module")
def one_process(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reference: one process, batch 8, through the CLI, with --gradient-checkpointing."""
    out = tmp_path_factory.mktemp("one") / "model"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training.run, "DeepNMTTrainer", _Recording)
        assert cli.main(_train_args(data_dir, out, 8, "--gradient-checkpointing")) == 0
    model = _Recording.last.model
    assert model.model.encoder.gradient_checkpointing and model.model.decoder.gradient_checkpointing
    return out


def _losses(out: Path) -> list[float]:
    record = json.loads((out / "metrics.json").read_text())
    return [entry["loss"] for entry in record["log_history"] if "loss" in entry]


def assert_same_training(reference: Path, other: Path) -> None:
    """Same logged losses (rel 1e-5) and the same final weights (rel 1e-5 of each tensor's max |value|).

    k_proj biases are left out of the weight check: their gradient is exactly zero in exact arithmetic
    (softmax is invariant to a per-query constant), so what Adam makes of them is normalised rounding noise
    (|value| < 1e-3 in both runs, checked)."""
    assert _losses(other) == pytest.approx(_losses(reference), rel=1e-5)
    assert len(_losses(reference)) == STEPS
    a, b = load_file(reference / "model.safetensors"), load_file(other / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        if name.endswith("k_proj.bias"):
            assert a[name].abs().max() < 1e-3 and b[name].abs().max() < 1e-3
            continue
        scale = a[name].abs().max().clamp_min(1e-12)
        assert ((a[name] - b[name]).abs().max() / scale).item() < 1e-5, name
    assert (reference / "tokenizer.json").read_text() == (other / "tokenizer.json").read_text()


@pytest.mark.slow
def test_ddp_two_processes_match_one_process_with_the_same_global_batch(
    data_dir: Path, one_process: Path, tmp_path: Path
) -> None:
    out = tmp_path / "ddp"
    _launch("cpu_ddp_2proc.yaml", _train_args(data_dir, out, 4), tmp_path)
    assert_same_training(one_process, out)
    record = json.loads((out / "metrics.json").read_text())
    assert record["hyperparameters"]["world_size"] == 2
    assert record["hyperparameters"]["global_batch_size"] == 8
    # the Trainer runs on CPU (no GPU here), so accelerate's state is DDP over gloo, which it calls MULTI_CPU
    assert record["hyperparameters"]["distributed_type"] == "MULTI_CPU"
    # rank 0 profiled ω on the first global batch and broadcast it: equal to the one-process profile
    omega = json.loads((out / "admin_omega.json").read_text())
    assert omega == json.loads((one_process / "admin_omega.json").read_text()) and omega["encoder"][-1] > 1.0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ddp"]  # no .partial, no per-rank leftovers


@pytest.mark.slow
def test_fsdp_config_on_a_cpu_only_machine_trains_as_ddp(
    data_dir: Path, one_process: Path, tmp_path: Path
) -> None:
    """What we found: accelerate 1.15 engages its FSDP plugin only on accelerator devices; on a CPU-only
    machine the FSDP config launches 2 gloo processes that train as plain DDP (MULTI_CPU), still exactly
    equivalent to one process. So the config and launch path are tested here; sharding that really happens on
    CPU is `train --fsdp` (deep_nmt_hf/training/sharding.py), tested in tests/training/test_sharding.py."""
    out = tmp_path / "fsdp"
    # 2 processes × 2 pairs × --update-freq 2: the same 8 pairs per step (accumulation under DDP)
    _launch("cpu_fsdp_2proc.yaml", _train_args(data_dir, out, 2, "--update-freq", "2"), tmp_path)
    record = json.loads((out / "metrics.json").read_text())
    assert record["hyperparameters"]["distributed_type"] == "MULTI_CPU"
    assert record["hyperparameters"]["world_size"] == 2
    assert_same_training(one_process, out)


def test_a_command_that_succeeds_ends_the_process_group_and_one_that_fails_leaves_it(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch's shutdown contract (deep_nmt_hf/training/distributed.py): a gloo group left to the interpreter's teardown
    can abort a finished rank (SIGABRT) and fail the launch. After a failure other ranks may still be in a
    collective, so the group is left to the launcher. One rank, an in-process gloo group."""
    # this process pretends to be a rank: undone after the test
    monkeypatch.setattr(distributed, "_ended_a_group", False)
    store = torch.distributed.FileStore(str(tmp_path / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        argv = ["data", "to-json", "--data-dir", str(data_dir), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG]  # fmt: skip
        assert cli.main([*argv, "--split", "missing", str(tmp_path / "missing.jsonl")]) == cli.EXIT_ERROR
        assert torch.distributed.is_initialized()
        assert cli.main([*argv, "--split", "train", str(tmp_path / "train.jsonl")]) == 0
        assert not torch.distributed.is_initialized()
    finally:
        distributed.end_process_group()
    assert distributed._ended_a_group  # so exit_if_a_rank ends this rank's process
    distributed.end_process_group()  # and without a group: nothing to do


def _race(mode: str, tmp_path: Path) -> list[subprocess.CompletedProcess]:
    """Both ranks of tests/gloo_exit_race.py in MODE; returns their finished processes."""
    worker = str(Path(__file__).resolve().parents[1] / "gloo_exit_race.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    store = str(tmp_path / f"store-{mode}")
    ranks = [
        subprocess.Popen([sys.executable, worker, str(rank), store, mode], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
        for rank in range(2)
    ]  # fmt: skip
    outputs = [process.communicate(timeout=300) for process in ranks]
    return [
        subprocess.CompletedProcess(p.args, p.returncode, *output)
        for p, output in zip(ranks, outputs, strict=True)
    ]


@pytest.mark.slow
def test_a_rank_that_ends_through_exit_if_a_rank_survives_gloos_teardown_race(tmp_path: Path) -> None:
    """The hazard, reproduced deterministically (tests/gloo_exit_race.py): a rank whose gloo worker thread still
    frees a finished collective when the interpreter finalises aborts (SIGABRT, exit -6) — what failed CI's FSDP
    launches. Ending through `exit_if_a_rank` instead exits with the given status, after the `atexit` handlers
    and with the buffered output written."""
    plain = _race("plain", tmp_path)
    assert plain[0].returncode == 0, plain[0].stderr[-2000:]
    assert plain[1].returncode == -signal.SIGABRT, (
        "the teardown race no longer aborts with this torch: deep_nmt_hf.training.distributed.exit_if_a_rank may be "
        f"unnecessary now (exit {plain[1].returncode}; {plain[1].stderr[-500:]})"
    )
    assert "terminate called without an active exception" in plain[1].stderr
    for rank, result in enumerate(_race("exit", tmp_path)):
        assert result.returncode == 7, result.stderr[-2000:]
        assert result.stdout == f"rank {rank}: buffered outputrank {rank}: atexit handler ran\n"


def test_exit_if_a_rank_returns_outside_a_process_group(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(code: int) -> None:
        raise AssertionError(f"os._exit({code}) outside a process group")

    monkeypatch.setattr(distributed.os, "_exit", refuse)  # never end the test process
    assert not torch.distributed.is_initialized() and not distributed._ended_a_group
    distributed.exit_if_a_rank(0)  # the caller exits as usual


# ------------------------------------------------------------------------------------ gradient checkpointing
def _variant_model(name: str) -> torch.nn.Module:
    config_class, model_class = resolve_variant(name)
    fields = dict(
        vocab_size=48, pad_token_id=47, eos_token_id=0, decoder_start_token_id=47, d_model=32,
        encoder_layers=3, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64, dropout=0.1,
    )  # fmt: skip
    torch.manual_seed(0)
    return model_class(config_class(**fields)).train()


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_gradient_checkpointing_gives_the_same_gradients_on_every_variant(name: str) -> None:
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(2, 46, (3, 7), generator=generator)
    ids[:, -1] = 0
    labels = torch.randint(2, 46, (3, 6), generator=generator)
    labels[:, -1] = 0
    grads = []
    for checkpointing in (False, True):
        model = _variant_model(name)
        if checkpointing:
            model.gradient_checkpointing_enable()
        torch.manual_seed(5)  # dropout (and drop-net) masks: recomputation replays the RNG state
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss
        loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for n in grads[0]:  # tolerance 1e-5 relative (atol 1e-7)
        torch.testing.assert_close(grads[1][n], grads[0][n], rtol=1e-5, atol=1e-7, msg=n)
