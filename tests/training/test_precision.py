"""Mixed precision (issue #48): the option and its flags, the recipes' precision and its CPU fallback, a bf16
training run on the CPU (autocast, ADMIN profiled in fp32, recorded), the divergence guard under fp16's loss
scaler, and losses computed in fp32 from low-precision inputs."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from factories import TINY_SHAPE
from transformers import TrainerControl

from deep_nmt_hf import training
from deep_nmt_hf.cli import build_parser, main
from deep_nmt_hf.cli.names import PRECISIONS as CLI_PRECISIONS
from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.model.collapse_losses import sentence_representation, symmetric_kl, token_cross_entropy
from deep_nmt_hf.publish.hub import render_model_card
from deep_nmt_hf.science.recipes import RECIPES, recipe_options, recipe_precision
from deep_nmt_hf.training import DivergenceCallback, TrainingOptions, train
from deep_nmt_hf.training.precision import (
    MIN_LOSS_SCALE,
    PRECISIONS,
    Hardware,
    choose_precision,
    resolve_precision,
    step_was_skipped,
)

BASE = dict(output_dir="out", data_source="data", src_lang="a", tgt_lang="b")
CPU = Hardware(cuda=False, bf16_gpu=False)
AMPERE = Hardware(cuda=True, bf16_gpu=True)
VOLTA = Hardware(cuda=True, bf16_gpu=False)


# ------------------------------------------------------------------------------------------ option and flags
def test_precision_option_is_validated_naming_field_value_and_choices() -> None:
    assert TrainingOptions(**BASE).precision is None  # the recipe's, else fp32
    with pytest.raises(ValueError, match=r"precision='fp8'; valid: fp32, bf16, fp16"):
        TrainingOptions(**BASE, precision="fp8")
    with pytest.raises(ValueError, match=r"precision='fp16' is not available with fsdp=True.*use bf16"):
        TrainingOptions(**BASE, precision="fp16", fsdp=True)
    assert CLI_PRECISIONS is PRECISIONS  # one table: `deep-nmt train --help` reads training/precision.py


def test_precision_flags_and_their_aliases_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    common = ["train", "--data-dir", "d", "--src-lang", "a", "--tgt-lang", "b", "--output-dir", "o"]
    parser = build_parser()
    assert parser.parse_args(common).precision is None
    assert parser.parse_args([*common, "--bf16"]).precision == "bf16"
    assert parser.parse_args([*common, "--fp16"]).precision == "fp16"
    assert parser.parse_args([*common, "--precision", "fp32"]).precision == "fp32"
    for clash in (["--bf16", "--fp16"], ["--precision", "fp32", "--bf16"], ["--fp16", "--precision", "fp16"]):
        with pytest.raises(SystemExit):
            parser.parse_args([*common, *clash])
        assert "not allowed with argument" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parser.parse_args([*common, "--precision", "fp8"])


# ------------------------------------------------------------------------------- hardware and the recipes
def test_explicit_fp16_without_cuda_is_an_error_naming_the_flag() -> None:
    with pytest.raises(
        ValueError, match=r"precision='fp16' \(--fp16 / --precision fp16\) needs a CUDA GPU"
    ) as err:
        choose_precision(TrainingOptions(**BASE, precision="fp16"), CPU)
    assert "valid here: fp32 (the default) or bf16" in str(err.value)
    assert choose_precision(TrainingOptions(**BASE, precision="bf16"), CPU) == ("bf16", None)  # CPU autocast
    with pytest.raises(ValueError, match=r"precision='bf16' .* needs a GPU with bfloat16.*valid here: fp16"):
        choose_precision(TrainingOptions(**BASE, precision="bf16"), VOLTA)
    assert choose_precision(TrainingOptions(**BASE, precision="fp16"), VOLTA) == ("fp16", None)
    assert choose_precision(TrainingOptions(**BASE), AMPERE) == ("fp32", None)  # no recipe: fp32


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error of a machine without CUDA")
def test_cli_fp16_on_cpu_fails_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_parallel_dir(demo_splits(train=8, valid=1, test=1)["train"], tmp_path / "data", "train", "sa", "sb")
    out = tmp_path / "out"
    argv = ["train", "--data-dir", str(tmp_path / "data"), "--src-lang", "sa", "--tgt-lang", "sb"]
    assert main([*argv, "--output-dir", str(out), "--fp16"]) == 2
    err = capsys.readouterr().err
    assert "error: precision='fp16' (--fp16 / --precision fp16) needs a CUDA GPU" in err
    assert "bf16 (--bf16 / --precision bf16" in err
    assert not out.exists() and not out.with_name("out.partial").exists()


def test_recipes_state_their_papers_precision_with_a_source() -> None:
    for name, recipe in RECIPES.items():
        assert recipe["precision"].value in PRECISIONS and recipe["precision"].source.strip(), name
        assert "precision" not in recipe_options(name)  # resolved by train, so an explicit value wins visibly
    assert recipe_precision("admin") == "fp16" and "--fp16" in RECIPES["admin"]["precision"].source
    assert recipe_precision("dsinit_matt") == "fp32"  # the paper: mixed precision for its big models only
    assert "big models" in RECIPES["dsinit_matt"]["precision"].source
    assert recipe_precision("marian") == "fp32"
    assert TrainingOptions.from_recipe("admin", **BASE).precision is None


def test_a_recipes_fp16_falls_back_without_cuda_with_a_message(caplog: pytest.LogCaptureFixture) -> None:
    options = TrainingOptions.from_recipe("admin", **BASE)
    with caplog.at_level(logging.WARNING, logger="deep_nmt_hf.training.precision"):
        resolved = resolve_precision(options, CPU)
    assert resolved.precision == "fp32"
    assert "recipe 'admin' trains in fp16, which needs a CUDA GPU" in caplog.text
    assert "this run trains in fp32 instead" in caplog.text and "--bf16" in caplog.text
    assert resolve_precision(options, AMPERE).precision == "fp16"  # on a GPU: the paper's
    fsdp = TrainingOptions.from_recipe("admin", **BASE, fsdp=True)
    assert choose_precision(fsdp, AMPERE)[0] == "bf16" and choose_precision(fsdp, VOLTA)[0] == "fp32"
    explicit = TrainingOptions.from_recipe("admin", **BASE, precision="bf16")
    assert resolve_precision(explicit, CPU).precision == "bf16"  # explicit wins over the recipe


def test_a_launchers_mixed_precision_is_honoured_and_contradicting_it_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")  # accelerate launch --mixed_precision bf16
    assert choose_precision(TrainingOptions(**BASE), AMPERE) == ("bf16", None)
    with pytest.raises(ValueError, match=r"precision='fp32' .* contradicts the launcher's mixed precision"):
        choose_precision(TrainingOptions(**BASE, precision="fp32"), AMPERE)


# ---------------------------------------------------------------------------- a bf16 run on the CPU, end to end
@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("precision-data")  # a train split only: no final scoring
    write_parallel_dir(
        demo_splits(train=64, valid=1, test=1, seed=5)["train"], directory, "train", SRC_LANG, TGT_LANG
    )
    return directory


def _admin_recipe_options(data_dir: Path, out: Path, **changes) -> TrainingOptions:
    return TrainingOptions.from_recipe(
        "admin",
        output_dir=str(out),
        data_source=data_dir,
        src_lang=SRC_LANG,
        tgt_lang=TGT_LANG,
        vocab_size=120,
        batch_size=8,
        max_tokens=None,
        warmup_steps=2,
        max_steps=2,
        save_strategy="steps",
        save_steps=100,
        average_last_checkpoints=None,
        logging_steps=1,
        num_beams=2,  # the recipe's length penalty needs a beam (GenerationConfig validation)
        seed=0,
        disable_tqdm=True,
        **changes,
    )


def _recording_forwards(monkeypatch: pytest.MonkeyPatch, seen: list[tuple[bool, torch.dtype]]) -> None:
    """Make `train`'s trainer record, for every forward of the output projection, whether CPU autocast was on
    and the dtype it computed in (the first forward is ADMIN's profiling pass, the rest are training steps)."""

    class Recording(training.DeepNMTTrainer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.model.lm_head.register_forward_hook(
                lambda module, inputs, output: seen.append((torch.is_autocast_enabled("cpu"), output.dtype))
            )

    monkeypatch.setattr(training.run, "DeepNMTTrainer", Recording)


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="the CPU run: bf16 autocast on the CPU, the recipe's fallback"
)
def test_bf16_run_on_cpu_autocasts_profiles_admin_in_fp32_and_records_it(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The admin recipe (fp16) on the CPU falls back to fp32; the same run with precision bf16 trains under
    autocast. ADMIN's ω must come out the same in both (same seed, same profiling batch): profiled in fp32 they
    agree to 1e-6 (relative); profiled under bf16 autocast they would differ by ~1e-3."""
    shape = dict(TINY_SHAPE, encoder_layers=6, decoder_layers=2)
    with caplog.at_level(logging.WARNING, logger="deep_nmt_hf.training.precision"):
        reference = train(_admin_recipe_options(data_dir, tmp_path / "fp32"), dict(shape))
    assert "recipe 'admin' trains in fp16, which needs a CUDA GPU" in caplog.text
    assert reference["hyperparameters"]["precision"] == "fp32"
    assert reference["recipe"]["settings"]["precision"] == {
        "value": "fp16",
        "source": RECIPES["admin"]["precision"].source,
        "used": "fp32",
    }

    seen: list[tuple[bool, torch.dtype]] = []
    _recording_forwards(monkeypatch, seen)
    record = train(_admin_recipe_options(data_dir, tmp_path / "bf16", precision="bf16"), dict(shape))
    assert seen[0] == (False, torch.float32)  # ADMIN's profiling pass: fp32 although the run is bf16
    assert seen[1:] and all(step == (True, torch.bfloat16) for step in seen[1:])  # the training forwards
    saved = json.loads((tmp_path / "bf16" / "metrics.json").read_text())
    assert saved["hyperparameters"]["precision"] == "bf16" and record["global_step"] == 2
    assert saved["recipe"]["settings"]["precision"]["used"] == "bf16"
    assert math.isfinite(saved["train"]["last_logged_loss"]) and "fp16_overflow_steps" not in saved["train"]

    profiled = {
        run: json.loads((tmp_path / run / "admin_omega.json").read_text()) for run in ("fp32", "bf16")
    }
    for side in ("encoder", "decoder"):
        assert profiled["bf16"][side] == pytest.approx(profiled["fp32"][side], rel=1e-6), side

    card = str(render_model_card(tmp_path / "bf16"))
    assert "| precision | bf16 mixed precision (autocast, fp32 weights) |" in card
    assert "| precision |" in str(render_model_card(tmp_path / "fp32"))


def test_admin_profiling_in_fp32_under_accelerates_autocast_wrapper(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same ω with and without accelerate's bf16 `prepare_model` (its autocast-wrapped forward, inside an
    enclosing bf16 autocast too), where profiling in bf16 (the wrapper left in place) moves ω by more than 1e-4
    (relative)."""
    import contextlib
    import copy

    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from factories import tiny_model
    from test_admin import profiling_batch

    from deep_nmt_hf.training import admin_profiling as admin

    model = tiny_model(seed=3, residual_scaling="admin", encoder_layers=8, decoder_layers=3, dropout=0.1)
    copies = [copy.deepcopy(model) for _ in range(2)]
    reference = admin.admin_profile(model, profiling_batch(), seed=5)
    AcceleratorState._reset_state(reset_partial_state=True)  # as TrainingArguments does before each Trainer
    wrapped, low = (Accelerator(mixed_precision="bf16", cpu=True).prepare_model(m) for m in copies)
    AcceleratorState._reset_state(reset_partial_state=True)  # leave no bf16 state to later tests
    wrapper = wrapped.__dict__["forward"]  # accelerate's autocast wrapper
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_wrapper = admin.admin_profile(wrapped, profiling_batch(), seed=5)
    assert wrapped.__dict__["forward"] is wrapper  # put back after the pass
    for side in reference:
        assert under_wrapper[side] == pytest.approx(reference[side], rel=1e-6), side
    with monkeypatch.context() as patch:  # the pass as it ran before: under accelerate's bf16 autocast
        patch.setattr(admin, "_in_fp32", lambda model, device: contextlib.nullcontext())
        in_bf16 = admin.admin_profile(low, profiling_batch(), seed=5)
    for side in reference:  # the bug this guards against is measurable
        assert max(abs(a / b - 1) for a, b in zip(in_bf16[side], reference[side], strict=True)) > 1e-4


# ------------------------------------------------------------------------- the guard under fp16's loss scaler
class FakeScaler:
    """The part of `torch.amp.GradScaler` the guard reads."""

    def __init__(self, scale: float) -> None:
        self.scale = scale

    def is_enabled(self) -> bool:
        return True

    def get_scale(self) -> float:
        return self.scale


def test_guard_counts_scaler_skipped_steps_as_overflows_not_divergence(
    caplog: pytest.LogCaptureFixture,
) -> None:
    accelerator = SimpleNamespace(scaler=FakeScaler(65536.0), optimizer_step_was_skipped=False)
    guard = DivergenceCallback(max_skipped=1)
    guard.watch(accelerator)
    control = TrainerControl()

    def step(number: int, loss: float, skipped: bool) -> bool:
        accelerator.optimizer_step_was_skipped = skipped
        zeroed = guard.observe(torch.tensor(loss))
        guard.on_step_end(None, SimpleNamespace(global_step=number), control)
        return zeroed

    assert not step(1, 2.0, skipped=False)
    with caplog.at_level(logging.WARNING, logger="deep_nmt_hf.training.divergence"):
        accelerator.scaler.scale = 32768.0
        assert not step(
            2, float("inf"), skipped=True
        )  # under a scaler no batch is zeroed: the step is skipped
        assert not step(3, 2.1, skipped=True)  # a gradient overflow with a finite loss
    guard.on_log(None, SimpleNamespace(global_step=3), control, logs={"loss": float("inf")})
    assert guard.overflow_steps == [2, 3] and guard.skipped == []  # overflows, not bad batches
    assert not control.should_training_stop and guard.diverged_at is None
    assert (
        "step 2: fp16 non-finite loss; the loss scaler skipped this update (loss scale now 32768"
        in caplog.text
    )
    assert not step(4, 1.9, skipped=False)
    assert not control.should_training_stop

    accelerator.scaler.scale = MIN_LOSS_SCALE / 2  # the scale keeps halving: the loss is exploding
    step(5, float("nan"), skipped=True)
    assert control.should_training_stop and guard.diverged_at[0] == 5
    assert (
        "fp16 loss scale collapsed to 5e-05 (< min_loss_scale 0.0001) after 3 overflow steps" in guard.reason
    )

    # without a loss scaler (fp32 / bf16) a non-finite loss is what it was: a bad batch
    fp32 = DivergenceCallback(max_skipped=1)
    fp32.watch(SimpleNamespace(scaler=None, optimizer_step_was_skipped=False))
    assert fp32.observe(torch.tensor(float("nan")))  # zero this batch's gradient
    fp32.on_step_end(None, SimpleNamespace(global_step=1), TrainerControl())
    assert fp32.skipped == [1] and fp32.overflow_steps == []
    assert step_was_skipped(SimpleNamespace(step_was_skipped=True))  # an AcceleratedOptimizer works too


# ----------------------------------------------------------------------------------- losses in fp32
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_losses_from_low_precision_inputs_equal_the_fp32_reference(dtype: torch.dtype) -> None:
    """Each loss, given bf16 / fp16 inputs, equals its fp32 computation from the same (rounded) values to 1e-6
    (relative); computed in the low precision itself it would be off by more than 1e-4."""
    generator = torch.Generator().manual_seed(0)
    logits = (torch.randn(4, 40, 500, generator=generator) * 4).to(dtype)
    # a second pass close to the first, as DDR's two dropout samples: a small KL, where low precision loses most
    other = (logits.float() + 0.1 * torch.randn(4, 40, 500, generator=generator)).to(dtype)
    labels = torch.randint(0, 500, (4, 40), generator=generator)
    labels[:, 30:] = -100
    states = (torch.randn(4, 300, 16, generator=generator) + 3).to(dtype)
    mask = labels.ne(-100)
    long_mask = torch.ones(4, 300, dtype=torch.bool)

    def rel(a: torch.Tensor, b: torch.Tensor) -> float:
        return float((a.float() - b.float()).abs().max() / b.float().abs().max())

    reference = token_cross_entropy(logits.float(), labels, 0.1)
    assert token_cross_entropy(logits, labels, 0.1).dtype == torch.float32
    assert rel(token_cross_entropy(logits, labels, 0.1), reference) < 1e-6
    low = torch.nn.functional.cross_entropy(logits.reshape(-1, 500), labels.reshape(-1), label_smoothing=0.1)
    assert rel(low, reference) > 1e-4  # what computing it in `dtype` would give

    reference = symmetric_kl(logits.float(), other.float(), mask)
    assert rel(symmetric_kl(logits, other, mask), reference) < 1e-6
    low_a, low_b = logits.log_softmax(-1), other.log_softmax(-1)
    low = (0.5 * (low_a.exp() * (low_a - low_b) + low_b.exp() * (low_b - low_a)).sum(-1))[mask].mean()
    assert rel(low, reference) > 1e-4

    reference = sentence_representation(states.float(), long_mask)
    assert rel(sentence_representation(states, long_mask), reference) < 1e-6
    low = (states * long_mask.to(dtype).unsqueeze(-1)).sum(1) / long_mask.to(dtype).unsqueeze(-1).sum(1)
    assert rel(low, reference) > 1e-4
