"""The launch files in examples/accelerate/ name only what today's accelerate and deep_nmt_hf have (issue #48 item 6).

`accelerate launch` rejects an unknown top-level key (`ClusterConfig.from_yaml_file`) but copies every key of a
nested `fsdp_config` / `deepspeed_config` onto its arguments unchecked, so a misspelt `fsdp_auto_wrap_polcy` would
be ignored silently. `config_problems` checks both levels against accelerate's own classes and parser, the values
against accelerate's choices and the wrapped class names against deep_nmt_hf's modules, and then runs each config
through accelerate's launch preparation (`_validate_launch_command`, the launcher's environment) and, for FSDP,
builds `FullyShardedDataParallelPlugin` from that environment as a launched process does. The SLURM script is
checked with `bash -n` and its dry run, with fake SLURM_* variables (with and without `scontrol`)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from factories import TINY_SHAPE, VOCAB
from transformers import AutoModelForSeq2SeqLM

import deep_nmt_hf

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "examples" / "accelerate"
SLURM = CONFIGS / "slurm_multinode.sh"
YAMLS = sorted(CONFIGS.glob("*.yaml"))
# where accelerate's launcher puts a nested key: fsdp_config.x -> --fsdp_x (commands/launch.py)
PREFIX = {"fsdp_config": "fsdp_", "fp8_config": "fp8_", "dynamo_config": "dynamo_"}


def launch_options() -> set[str]:
    from accelerate.commands.launch import launch_command_parser

    return {action.dest for action in launch_command_parser()._actions}


def launched_environment(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment `accelerate launch --config_file PATH` gives the processes it starts (no process started)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    for name in list(os.environ):
        if name.startswith(("ACCELERATE_", "FSDP_")):
            monkeypatch.delenv(name)
    args = launch_command_parser().parse_args(
        ["--config_file", str(path), "--main_process_port", "0", "x.py"]
    )
    args, defaults, _ = _validate_launch_command(args)
    if args.use_deepspeed:
        args.deepspeed_fields_from_accelerate_config = ",".join(defaults.deepspeed_config)
        return prepare_deepspeed_cmd_env(args)[1]
    return prepare_multi_gpu_env(args)


def config_problems(path: Path) -> list[str]:
    """Everything in one accelerate config that today's accelerate or deep_nmt_hf does not have."""
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.utils import DeepSpeedPlugin, DistributedType, PrecisionType
    from accelerate.utils.constants import FSDP_AUTO_WRAP_POLICY, FSDP_STATE_DICT_TYPE

    from deep_nmt_hf.model import modeling_deep_nmt

    raw = yaml.safe_load(path.read_text())
    problems = []
    fields = {f.name for f in dataclasses.fields(ClusterConfig)}
    problems += [f"unknown key {key!r}" for key in raw if key not in fields]
    try:
        ClusterConfig.from_yaml_file(str(path))
    except (ValueError, TypeError) as error:
        problems.append(f"ClusterConfig refuses it: {error}")
    if raw.get("distributed_type") not in {t.value for t in DistributedType}:
        problems.append(f"distributed_type {raw.get('distributed_type')!r}")
    if str(raw.get("mixed_precision", "no")) not in {p.value for p in PrecisionType}:
        problems.append(f"mixed_precision {raw.get('mixed_precision')!r}")
    if raw.get("rdzv_backend", "static") not in {"static", "c10d", "etcd", "etcd-v2"}:
        problems.append(f"rdzv_backend {raw.get('rdzv_backend')!r}")
    options = launch_options()
    for section, prefix in PREFIX.items():
        for key in raw.get(section) or {}:
            option = key if key.startswith(prefix) else prefix + key
            if option not in options:
                problems.append(f"{section}.{key}: accelerate launch has no --{option}")
    fsdp = raw.get("fsdp_config") or {}
    if fsdp:
        if fsdp.get("fsdp_version") not in (1, 2):
            problems.append(f"fsdp_version {fsdp.get('fsdp_version')!r} (1 or 2)")
        if fsdp.get("fsdp_auto_wrap_policy") not in (None, *FSDP_AUTO_WRAP_POLICY):
            problems.append(f"fsdp_auto_wrap_policy {fsdp['fsdp_auto_wrap_policy']!r}")
        if fsdp.get("fsdp_state_dict_type") not in (None, *FSDP_STATE_DICT_TYPE):
            problems.append(f"fsdp_state_dict_type {fsdp['fsdp_state_dict_type']!r}")
        wrapped = str(fsdp.get("fsdp_transformer_layer_cls_to_wrap") or "")
        no_split = set(modeling_deep_nmt.DeepNMTPreTrainedModel._no_split_modules)
        for name in filter(None, (n.strip() for n in wrapped.split(","))):
            if not isinstance(getattr(modeling_deep_nmt, name, None), type) or name not in no_split:
                problems.append(
                    f"fsdp_transformer_layer_cls_to_wrap names {name!r}: not a layer class of ours"
                )
    deepspeed = raw.get("deepspeed_config") or {}
    plugin_fields = {f.name for f in dataclasses.fields(DeepSpeedPlugin)}
    for key, value in deepspeed.items():
        if key not in plugin_fields and key not in {"deepspeed_config_file", "deepspeed_multinode_launcher"}:
            problems.append(f"deepspeed_config.{key}: DeepSpeedPlugin has no such field")
        if key == "zero_stage" and value not in (0, 1, 2, 3):
            problems.append(f"zero_stage {value!r}")
        if key.startswith("offload_") and key.endswith("_device") and value not in ("none", "cpu", "nvme"):
            problems.append(f"{key} {value!r}")
    return problems


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.name)
def test_each_config_names_only_what_accelerate_and_deep_nmt_have(path: Path) -> None:
    assert config_problems(path) == []


@pytest.mark.parametrize(
    "mutation, expected",
    [
        (lambda c: c["fsdp_config"].update(fsdp_auto_wrap_polcy=c["fsdp_config"].pop("fsdp_auto_wrap_policy")),
         "fsdp_config.fsdp_auto_wrap_polcy: accelerate launch has no --fsdp_auto_wrap_polcy"),
        (lambda c: c.update(num_proceses=c.pop("num_processes")), "unknown key 'num_proceses'"),
        (lambda c: c["fsdp_config"].update(fsdp_transformer_layer_cls_to_wrap="DeepNMTEncoderLayer,T5Block"),
         "names 'T5Block'"),
        (lambda c: c["fsdp_config"].update(fsdp_version=3), "fsdp_version 3"),
        (lambda c: c.update(mixed_precision="bfloat16"), "mixed_precision 'bfloat16'"),
    ],
    ids=["misspelt-fsdp-key", "misspelt-top-key", "unknown-class", "fsdp-version", "precision"],
)  # fmt: skip
def test_the_checker_catches_a_mutated_copy(mutation, expected, tmp_path: Path) -> None:
    config = yaml.safe_load((CONFIGS / "fsdp.yaml").read_text())
    mutation(config)
    copy = tmp_path / "fsdp.yaml"
    copy.write_text(yaml.safe_dump(config))
    assert any(expected in problem for problem in config_problems(copy)), config_problems(copy)


def test_a_misspelt_deepspeed_key_is_caught(tmp_path: Path) -> None:
    config = yaml.safe_load((CONFIGS / "deepspeed_zero3.yaml").read_text())
    config["deepspeed_config"]["zero3_save_16bit_modle"] = config["deepspeed_config"].pop(
        "zero3_save_16bit_model"
    )
    copy = tmp_path / "zero3.yaml"
    copy.write_text(yaml.safe_dump(config))
    assert any("zero3_save_16bit_modle" in p for p in config_problems(copy))


@pytest.mark.parametrize("path", YAMLS, ids=lambda p: p.name)
def test_each_config_goes_through_accelerates_launch_preparation(path: Path, monkeypatch) -> None:
    """What `accelerate launch` hands its processes; for FSDP the plugin a launched process builds from it."""
    raw = yaml.safe_load(path.read_text())
    env = launched_environment(path, monkeypatch)
    assert env["ACCELERATE_MIXED_PRECISION"] == str(raw.get("mixed_precision", "no"))
    if raw["distributed_type"] == "DEEPSPEED":
        stage = raw["deepspeed_config"]["zero_stage"]
        assert env["ACCELERATE_USE_DEEPSPEED"] == "true" and env["ACCELERATE_DEEPSPEED_ZERO_STAGE"] == str(
            stage
        )
    if raw["distributed_type"] == "FSDP":
        from accelerate.utils import FullyShardedDataParallelPlugin
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        for name, value in env.items():
            monkeypatch.setenv(name, value)
        plugin = FullyShardedDataParallelPlugin()
        assert plugin.fsdp_version == 2 and plugin.reshard_after_forward is True
        assert plugin.auto_wrap_policy is transformer_auto_wrap_policy
        # no class names in the yaml: accelerate wraps the model's own _no_split_modules, which name the decoder
        # layer class of its kind (MAtt builds MergedAttentionDecoderLayer); every variant must resolve
        assert plugin.transformer_cls_names_to_wrap is None
        for variant in sorted(deep_nmt_hf.VARIANTS):
            config = deep_nmt_hf.VARIANTS[variant](vocab_size=VOCAB, max_position_embeddings=64, **TINY_SHAPE)
            plugin.set_auto_wrap_policy(AutoModelForSeq2SeqLM.from_config(config))


def slurm_dry_run(env: dict[str, str], *args: str, path: str | None = None) -> dict[str, str]:
    base = {"PATH": path or os.environ["PATH"], "HOME": os.environ.get("HOME", "/tmp"), "DRY_RUN": "1"}
    result = subprocess.run(
        ["bash", str(SLURM), *args], env=base | env, capture_output=True, text=True, timeout=60, check=True
    )
    lines = dict(line.split(": ", 1) for line in result.stdout.splitlines())
    return {key.split()[0]: value for key, value in lines.items()}  # hosts, rendezvous, step, node


@pytest.mark.slow
def test_slurm_script_is_valid_bash() -> None:
    subprocess.run(["bash", "-n", str(SLURM)], check=True, timeout=30)
    assert os.access(SLURM, os.X_OK)


FAKE_SLURM = {
    "SLURM_JOB_NODELIST": "gpu-a[07-08,10],login2",
    "SLURM_NNODES": "4",
    "SLURM_NODEID": "2",
    "SLURM_GPUS_ON_NODE": "8",
    "SLURM_JOB_ID": "4242",
}


@pytest.mark.slow
def test_slurm_dry_run_builds_the_torchrun_rendezvous_without_scontrol(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with bash but no scontrol: the script's own host-list parser
    bin_dir.mkdir()
    (bin_dir / "bash").symlink_to(shutil.which("bash"))
    out = slurm_dry_run(FAKE_SLURM, "--data-dir", "my data", "--bf16", path=str(bin_dir))
    assert out["hosts"] == "gpu-a07 gpu-a08 gpu-a10 login2"
    assert out["rendezvous"] == "MASTER_ADDR=gpu-a07 MASTER_PORT=29500 NNODES=4 GPUS_PER_NODE=8"
    expected = (
        "torchrun --nnodes 4 --nproc_per_node 8 --rdzv_id 4242 --rdzv_backend c10d --rdzv_endpoint "
        "gpu-a07:29500 -m deep_nmt_hf.cli train --data-dir my\\ data --bf16"
    )
    assert out["node"].strip() == expected
    assert out["step"].startswith("srun --nodes 4 --ntasks-per-node 1 --kill-on-bad-exit=1 bash -c ")


@pytest.mark.slow
def test_slurm_dry_run_uses_scontrol_and_the_accelerate_launcher(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    scontrol = bin_dir / "scontrol"  # a stand-in that expands the list as SLURM would
    scontrol.write_text("#!/bin/sh\n[ \"$1 $2\" = 'show hostnames' ] && printf 'n17\\nn18\\n'\n")
    scontrol.chmod(0o755)
    env = FAKE_SLURM | {"SLURM_JOB_NODELIST": "n[17-18]", "SLURM_NNODES": "2", "SLURM_NODEID": "1",
                        "LAUNCHER": "accelerate", "MASTER_PORT": "29611"}  # fmt: skip
    out = slurm_dry_run(env, "--variant", "dlcl", path=f"{bin_dir}:{os.environ['PATH']}")
    assert out["hosts"] == "n17 n18"
    assert out["node"].strip() == (
        "accelerate launch --config_file examples/accelerate/ddp_multinode.yaml --num_machines 2 "
        "--num_processes 16 --machine_rank 1 --main_process_ip n17 --main_process_port 29611 "
        "-m deep_nmt_hf.cli train --variant dlcl"
    )
    assert "--machine_rank\\ \\$SLURM_NODEID" in out["step"]  # read on each node, not here


@pytest.mark.slow
def test_slurm_script_refuses_to_run_outside_an_allocation() -> None:
    result = subprocess.run(
        ["bash", str(SLURM)], env={"PATH": os.environ["PATH"]}, capture_output=True, text=True
    )
    assert result.returncode != 0 and "not in a SLURM allocation" in result.stderr
