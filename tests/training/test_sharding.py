"""FSDP2 sharded training (deep_nmt_hf/training/sharding.py) with 2 gloo processes on CPU.

One ``torchrun --nproc_per_node 2 -m deep_nmt_hf.cli train --fsdp`` run (batch 4 per process) against one
process with batch 8 on the same global batches (``--train-sampling random``: the same permutation in every
process, rank r takes the r-th slice of each global batch). ADMIN (per-dimension ω, profiled under FSDP) so that
ω's sharding, its profiling and the fold of the saved model are all exercised.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from launching import STEPS, free_port, train_args, write_train_split
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, MarianMTModel

from deep_nmt_hf import VARIANTS, AdminForConditionalGeneration, cli, training
from deep_nmt_hf.publish.folding import fold_directory

MODEL_FLAGS = [
    "--variant", "admin", "--d-model", "32", "--encoder-layers", "2", "--decoder-layers", "2", "--heads", "4",
    "--ffn-dim", "64", "--dropout", "0", "--attention-dropout", "0", "--activation-dropout", "0",
]  # fmt: skip


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_train_split(tmp_path_factory.mktemp("fsdp-data"))


def _train_args(data_dir: Path, out: Path, batch_size: int, *extra: str) -> list[str]:
    return train_args(data_dir, out, batch_size, MODEL_FLAGS, *extra)


@pytest.fixture(scope="module")
def one_process(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("one") / "model"
    assert cli.main(_train_args(data_dir, out, 8)) == 0
    return out


def _torchrun(args: list[str], cwd: Path) -> str:
    """`deep-nmt ARGS` in 2 processes under torchrun; returns stderr."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
        "-m", "deep_nmt_hf.cli", *args,
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stderr


@pytest.fixture(scope="module")
def fsdp_run(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """2 processes × batch 4 with --fsdp (and --gradient-checkpointing inside the FSDP units) through torchrun;
    returns the output dir and the launch's stderr."""
    cwd = tmp_path_factory.mktemp("fsdp")
    out = cwd / "model"
    stderr = _torchrun(
        _train_args(data_dir, out, 4, "--fsdp", "--keep-checkpoints", "--gradient-checkpointing"), cwd
    )
    assert sorted(p.name for p in cwd.iterdir()) == ["model"]  # no .partial, no per-rank leftovers
    return out, stderr


def _record(out: Path) -> dict:
    return json.loads((out / "metrics.json").read_text())


def _losses(out: Path) -> list[float]:
    return [entry["loss"] for entry in _record(out)["log_history"] if "loss" in entry]


@pytest.mark.slow
def test_each_rank_holds_a_different_half_of_every_parameter(fsdp_run: tuple[Path, str]) -> None:
    out, _ = fsdp_run
    sharding = _record(out)["sharding"]
    assert sharding["strategy"] == "fsdp2" and sharding["world_size"] == 2
    assert sharding["units"] == 2 + 2 + 1  # one per encoder / decoder layer, plus the root
    full = load_file(out / "model.safetensors")
    assert sharding["parameters"] == AdminForConditionalGeneration.from_pretrained(out).num_parameters()
    local = sharding["local_parameters"]
    assert sum(local) == sharding["parameters"] and all(0.45 < n / sum(local) < 0.55 for n in local)
    for name, (rank0, rank1) in sharding["local_shapes"].items():
        shape = list(full[name].shape)  # Shard(0): the ranks split dim 0, ceil(n / 2) rows first
        assert rank0[0] == -(-shape[0] // 2) and rank0[0] + rank1[0] == shape[0], name
        assert rank0[1:] == rank1[1:] == shape[1:], name
    assert sharding["checksums"] == pytest.approx(
        [
            sum(float(full[n][: s[0][0]].double().sum()) for n, s in sharding["local_shapes"].items()),
            sum(float(full[n][s[0][0] :].double().sum()) for n, s in sharding["local_shapes"].items()),
        ],
        rel=1e-9,
        abs=1e-9,
    )  # what each rank held at the end is the first / second half of the saved full weights


@pytest.mark.slow
def test_fsdp_trains_like_one_process_and_saves_a_full_model(
    fsdp_run: tuple[Path, str], one_process: Path
) -> None:
    out, stderr = fsdp_run
    # the same global batches: the same losses and weights up to float rounding (rel 1e-5)
    assert len(_losses(out)) == STEPS
    assert _losses(out) == pytest.approx(_losses(one_process), rel=1e-5)
    a, b = load_file(one_process / "model.safetensors"), load_file(out / "model.safetensors")
    assert a.keys() == b.keys()
    for name in a:
        if name.endswith("k_proj.bias"):  # zero gradient in exact arithmetic: Adam normalises rounding noise
            assert a[name].abs().max() < 1e-3 and b[name].abs().max() < 1e-3
            continue
        scale = a[name].abs().max().clamp_min(1e-12)
        assert ((a[name] - b[name]).abs().max() / scale).item() < 1e-5, name
    # ADMIN ω profiled under FSDP (every rank ran the forward): identical on both ranks and to one process
    logged = re.findall(r"ADMIN ω profiled: (\{.*\})", stderr)
    assert len(logged) == 2 and logged[0] == logged[1]
    omega = json.loads((out / "admin_omega.json").read_text())
    assert omega == json.loads(logged[0]) and omega["encoder"][-1] > 1.0
    reference = json.loads((one_process / "admin_omega.json").read_text())
    for side in ("encoder", "decoder"):
        assert omega[side] == pytest.approx(reference[side], rel=1e-6)
    # the final model and a mid-run checkpoint load with from_pretrained in this (single) process
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["AdminForConditionalGeneration"]
    assert not list(out.glob("_fsdp*.py"))  # torch's FSDP class is not saved as the model's custom code
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert isinstance(model, AdminForConditionalGeneration)
    checkpoint = AutoModelForSeq2SeqLM.from_pretrained(out / f"checkpoint-{STEPS}")
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(checkpoint.state_dict()[name], tensor, rtol=0, atol=0, msg=name)
    assert (out / "checkpoint-2" / "model.safetensors").is_file()


@pytest.mark.slow
def test_an_fsdp_run_resumes_from_its_checkpoint(
    data_dir: Path, fsdp_run: tuple[Path, str], tmp_path: Path
) -> None:
    """Resume from checkpoint-2 of the FSDP run (full model + full optimizer state + RNG, copied into a fresh
    staging dir): steps 3 and 4 and the final weights equal the uninterrupted run's (rel 1e-5)."""
    out, _ = fsdp_run
    resumed = tmp_path / "model"
    shutil.copytree(out / "checkpoint-2", tmp_path / "model.partial" / "checkpoint-2")
    _torchrun(_train_args(data_dir, resumed, 4, "--fsdp", "--gradient-checkpointing", "--resume"), tmp_path)
    record = _record(resumed)
    assert record["global_step"] == STEPS
    steps = {e["step"]: e["loss"] for e in record["log_history"] if "loss" in e}
    want = {e["step"]: e["loss"] for e in _record(out)["log_history"] if "loss" in e}
    assert sorted(steps) == [
        1,
        2,
        3,
        4,
    ]  # 1-2 from the checkpoint's trainer state, 3-4 trained after resuming
    assert [steps[3], steps[4]] == pytest.approx([want[3], want[4]], rel=1e-5)
    a, b = load_file(out / "model.safetensors"), load_file(resumed / "model.safetensors")
    for name in a:
        if not name.endswith("k_proj.bias"):
            scale = a[name].abs().max().clamp_min(1e-12)
            assert ((a[name] - b[name]).abs().max() / scale).item() < 1e-5, name


@pytest.mark.slow
def test_the_fsdp_trained_model_folds_into_marian(fsdp_run: tuple[Path, str], tmp_path: Path) -> None:
    out, _ = fsdp_run
    report = fold_directory(out, tmp_path / "folded")  # checks logits (1e-4) and beam outputs itself
    folded = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "folded")
    assert isinstance(folded, MarianMTModel)
    assert report.max_abs_logit_diff < 1e-4 and report.beam_outputs_identical
    assert report.stock_class == "MarianMTModel"


@pytest.mark.slow
def test_fsdp_gives_the_full_batch_gradient_on_every_variant(tmp_path: Path) -> None:
    """Shared layers (a unit gathered at each application), DLCL weights in the root unit, MAtt, CAD, ...:
    the sharded gradient of half a batch per rank equals one unsharded model's on the whole batch (rel 1e-5)."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(free_port()),
        str(Path(__file__).resolve().parents[1] / "fsdp_gradients.py"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    worst = json.loads(result.stdout.strip().splitlines()[-1])
    assert sorted(worst) == sorted(VARIANTS)
    assert all(value < 1e-5 for value in worst.values()), worst


def test_fsdp_option_errors(tmp_path: Path) -> None:
    common = dict(output_dir=str(tmp_path / "out"), data_source=tmp_path, src_lang="sa", tgt_lang="sb")
    with pytest.raises(ValueError, match="skip_nonfinite_batches=2 is not available with fsdp=True"):
        training.TrainingOptions(**common, fsdp=True, skip_nonfinite_batches=2)
    with pytest.raises(ValueError, match="launch with torchrun or accelerate launch"):
        training.train(training.TrainingOptions(**common, fsdp=True))
    assert not (tmp_path / "out").exists()
