"""Training that survives faults: resume equivalence, divergence guard, crash mid-save, bad data.

Faults are injected into the real `train` path: a callback that raises (a crash), a forward hook on the
output projection that makes the loss NaN or spike at a chosen step, and a `safetensors` writer that dies
half-way through a checkpoint.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import safetensors.torch
import torch
from factories import TINY_SHAPE
from safetensors.torch import load_file
from transformers import AutoModelForSeq2SeqLM, TrainerCallback
from transformers.trainer_utils import get_last_checkpoint

from deep_nmt_hf import cli, training
from deep_nmt_hf.data import write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.training import TrainingDivergedError, TrainingOptions, train

TINY = dict(TINY_SHAPE)
# ADMIN (profiled, trainable ω) with DLCL layer aggregation on both sides, with dropout: the resume test
# checks that ω, the DLCL weights, the optimizer / scheduler state and the dropout RNG all come back
ADMIN_DLCL = dict(
    TINY,
    encoder_layer_aggregation="dlcl",
    decoder_layer_aggregation="dlcl",
    dropout=0.1,
    attention_dropout=0.1,
)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("faults-data")
    # a train split only: no validation split, so no beam-search scoring at the end (keeps the tests fast)
    write_parallel_dir(
        demo_splits(train=96, valid=1, test=1, seed=3)["train"], directory, "train", SRC_LANG, TGT_LANG
    )
    return directory


def make_options(data_dir: Path, output_dir: Path, **changes) -> TrainingOptions:
    fields = dict(
        output_dir=str(output_dir),
        data_source=data_dir,
        src_lang=SRC_LANG,
        tgt_lang=TGT_LANG,
        vocab_size=200,
        batch_size=8,
        learning_rate=2e-3,
        warmup_steps=2,
        max_steps=6,
        save_steps=3,
        logging_steps=1,
        num_beams=1,
        max_eval_samples=4,
        seed=0,
        disable_tqdm=True,
    )
    fields.update(changes)
    return TrainingOptions(**fields)


def losses_by_step(record: dict) -> dict[int, float]:
    return {entry["step"]: entry["loss"] for entry in record["log_history"] if "loss" in entry}


def _trainer_with(monkeypatch: pytest.MonkeyPatch, setup) -> None:
    """Make `train` build its DeepNMTTrainer through `setup(trainer)` (to add a hook or a callback)."""

    class Patched(training.DeepNMTTrainer):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            setup(self)

    monkeypatch.setattr(training.run, "DeepNMTTrainer", Patched)  # the name `train` looks up


class _CrashAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs) -> None:
        if state.global_step == self.step:
            raise RuntimeError(f"injected crash at step {self.step}")


def _poison_logits(trainer, steps: set[int], how: str) -> None:
    """Forward hook on lm_head: at the given (1-based) optimizer steps, NaN or 50x logits in training."""

    def hook(module, inputs, output):
        if module.training and trainer.state.global_step + 1 in steps:
            return output * float("nan") if how == "nan" else output * 50.0
        return None

    trainer.model.lm_head.register_forward_hook(hook)


# ---------------------------------------------------------------------------------------------------- resume
def test_resume_after_a_crash_matches_the_uninterrupted_run(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    reference = train(make_options(data_dir, tmp_path / "ref", variant="admin"), dict(ADMIN_DLCL))

    out = tmp_path / "run"
    with monkeypatch.context() as patch:
        _trainer_with(patch, lambda trainer: trainer.add_callback(_CrashAt(4)))
        with pytest.raises(RuntimeError, match="injected crash at step 4"):
            train(make_options(data_dir, out, variant="admin"), dict(ADMIN_DLCL))
    partial = out.with_name("run.partial")
    assert not out.exists() and get_last_checkpoint(str(partial)).endswith("checkpoint-3")
    with pytest.raises(FileExistsError, match="--resume"):  # a partial run is never silently overwritten
        train(make_options(data_dir, out, variant="admin"), dict(ADMIN_DLCL))

    capfd.readouterr()
    resumed = train(make_options(data_dir, out, variant="admin", resume=True), dict(ADMIN_DLCL))
    assert "missing keys" not in capfd.readouterr().err  # the tied head is restored, not reported missing
    assert resumed["global_step"] == reference["global_step"] == 6
    want, got = losses_by_step(reference), losses_by_step(resumed)
    assert sorted(got) == sorted(want) == [1, 2, 3, 4, 5, 6]
    for step in want:  # tolerance: 1e-6 relative (same process, same kernels: in practice bitwise)
        assert got[step] == pytest.approx(want[step], rel=1e-6), step
    rates = {e["step"]: e["learning_rate"] for e in resumed["log_history"] if "learning_rate" in e}
    assert rates == {e["step"]: e["learning_rate"] for e in reference["log_history"] if "learning_rate" in e}

    a = load_file(tmp_path / "ref" / "model.safetensors")
    b = load_file(out / "model.safetensors")
    assert a.keys() == b.keys()
    assert any("omega" in name for name in a) and any("aggregation.weight" in name for name in a)
    for name in a:
        torch.testing.assert_close(b[name], a[name], rtol=1e-6, atol=1e-7, msg=name)
    omega = next(name for name in a if "omega" in name)
    assert not torch.equal(a[omega], torch.ones_like(a[omega]))  # ω was profiled (not the initial 1)
    assert not partial.exists()


# ------------------------------------------------------------------------------------------ divergence guard
def test_nan_loss_stops_naming_the_step_and_keeps_the_last_good_checkpoint(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "nan"
    _trainer_with(monkeypatch, lambda trainer: _poison_logits(trainer, {5}, "nan"))
    with pytest.raises(TrainingDivergedError, match=r"step 5: non-finite") as err:
        train(make_options(data_dir, out, max_steps=8, save_steps=2, logging_steps=4), dict(TINY))
    partial = out.with_name("nan.partial")
    assert "checkpoint-4" in str(err.value)
    assert not out.exists()
    assert sorted(p.name for p in partial.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    model = AutoModelForSeq2SeqLM.from_pretrained(partial / "checkpoint-4")
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_loss_spike_beyond_the_factor_stops(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "spike"
    _trainer_with(monkeypatch, lambda trainer: _poison_logits(trainer, {7}, "spike"))
    options = make_options(data_dir, out, max_steps=8, save_steps=4, divergence_factor=3.0)
    with pytest.raises(TrainingDivergedError, match=r"step 7: loss spike: .* > divergence_factor 3\.0"):
        train(options, dict(TINY))
    assert get_last_checkpoint(str(out.with_name("spike.partial"))).endswith("checkpoint-4")


def test_isolated_nan_batch_is_skipped_and_counted(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as patch:
        _trainer_with(patch, lambda trainer: _poison_logits(trainer, {3}, "nan"))
        record = train(make_options(data_dir, tmp_path / "skip", skip_nonfinite_batches=1), dict(TINY))
    assert record["global_step"] == 6
    saved = json.loads((tmp_path / "skip" / "metrics.json").read_text())
    assert saved["train"]["skipped_nonfinite_batches"] == 1 and saved["train"]["skipped_nonfinite_steps"] == [
        3
    ]
    assert all(math.isfinite(loss) for loss in losses_by_step(saved).values())
    weights = load_file(tmp_path / "skip" / "model.safetensors")
    assert all(torch.isfinite(t).all() for t in weights.values())

    # a second bad batch exceeds the budget of one: stop, naming the step
    with monkeypatch.context() as patch:
        _trainer_with(patch, lambda trainer: _poison_logits(trainer, {2, 4}, "nan"))
        with pytest.raises(TrainingDivergedError, match=r"step 4: non-finite .*after 1 skipped"):
            train(make_options(data_dir, tmp_path / "skip2", skip_nonfinite_batches=1), dict(TINY))


# -------------------------------------------------------------------------------------- interrupted writes
def test_crash_mid_checkpoint_save_leaves_no_valid_looking_checkpoint(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "crash"
    real_save = safetensors.torch.save_file
    calls = {"n": 0}

    def dying_save(tensors, filename, metadata=None):
        calls["n"] += 1
        if calls["n"] == 2:  # the second checkpoint (step 4): write half the file, then die
            real_save(tensors, filename, metadata=metadata)
            data = Path(filename).read_bytes()
            Path(filename).write_bytes(data[: len(data) // 2])
            raise OSError("injected crash while writing model.safetensors")
        return real_save(tensors, filename, metadata=metadata)

    import transformers.modeling_utils as modeling_utils

    with monkeypatch.context() as patch:
        patch.setattr(modeling_utils, "safe_save_file", dying_save)
        with pytest.raises(OSError, match="injected crash"):
            train(make_options(data_dir, out, save_steps=2), dict(TINY))
    partial = out.with_name("crash.partial")
    assert sorted(p.name for p in partial.glob("checkpoint-*")) == ["checkpoint-2"]
    half = partial / training.SAVING_DIR / "checkpoint-4"
    assert (half / "config.json").is_file() and (half / "model.safetensors").is_file()
    assert get_last_checkpoint(str(partial)).endswith("checkpoint-2")  # what --resume would pick
    with pytest.raises(Exception, match=r"(?i)safetensor|deserializ|header|incomplete") as err:
        AutoModelForSeq2SeqLM.from_pretrained(half)  # a half-written directory never loads
    assert not isinstance(err.value, AssertionError)

    record = train(make_options(data_dir, out, save_steps=2, resume=True), dict(TINY))
    assert record["global_step"] == 6
    assert not partial.exists() and (out / "model.safetensors").is_file()


# ----------------------------------------------------------------------------------------------- bad data
def _cli_args(data_dir: Path, out: Path, *extra: str) -> list[str]:
    return [
        "train", "--data-dir", str(data_dir), "--src-lang", SRC_LANG, "--tgt-lang", TGT_LANG,
        "--output-dir", str(out), "--vocab-size", "200", "--d-model", "32",
        "--encoder-layers", "2", "--decoder-layers", "2", "--heads", "4", "--ffn-dim", "64", "--dropout", "0",
        "--batch-size", "8", "--max-steps", "2", "--warmup-steps", "1", "--logging-steps", "1",
        "--num-beams", "1", "--max-eval-samples", "4", "--no-progress", *extra,
    ]  # fmt: skip


def test_undecodable_line_stops_before_training_naming_file_and_line(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    for path in data_dir.iterdir():
        (bad / path.name).write_bytes(path.read_bytes())
    lines = (bad / f"train.{SRC_LANG}").read_bytes().split(b"\n")
    lines[9] = b"caf\xe9 \xff broken"
    (bad / f"train.{SRC_LANG}").write_bytes(b"\n".join(lines))
    out = tmp_path / "out"
    assert cli.main(_cli_args(bad, out)) == cli.EXIT_ERROR
    message = capsys.readouterr().err
    assert f"train.{SRC_LANG}: line 10 is not valid UTF-8" in message
    assert not out.exists() and not out.with_name("out.partial").exists()


def test_empty_pairs_are_dropped_and_over_long_pairs_truncated_and_counted(
    data_dir: Path, tmp_path: Path
) -> None:
    pairs = demo_splits(train=40, valid=8, test=8, seed=5)
    train_pairs = list(pairs["train"])
    train_pairs[4] = (train_pairs[4][0], "")  # empty target
    train_pairs[11] = ("   ", train_pairs[11][1])  # blank source
    long_words = " ".join(train_pairs[0][0].split() * 60)
    train_pairs[20] = (long_words, train_pairs[20][1])  # far longer than --max-source-length 16
    data = tmp_path / "data"
    write_parallel_dir(train_pairs, data, "train", SRC_LANG, TGT_LANG)
    out = tmp_path / "out"
    assert cli.main(_cli_args(data, out, "--max-source-length", "16", "--max-target-length", "16")) == 0
    record = json.loads((out / "metrics.json").read_text())
    assert record["num_train_examples"] == 38
    assert record["data"]["train_pairs_read"] == 40
    assert record["data"]["train_pairs_dropped_empty"] == 2
    assert record["data"]["train_first_dropped_line"] == 5
    assert record["data"]["train_pairs_truncated"] >= 1
    assert math.isfinite(record["train"]["last_logged_loss"])


def test_tokenize_dataset_counts_truncation_and_matches_the_tokenizer(data_dir: Path) -> None:
    from deep_nmt_hf.data import load_parallel
    from deep_nmt_hf.data.tokenization import train_tokenizer
    from deep_nmt_hf.training import tokenize_dataset

    dataset = load_parallel(data_dir, "train", SRC_LANG, TGT_LANG).select(range(12))
    pairs = dataset["translation"]
    tokenizer = train_tokenizer([p[lang] for p in pairs for lang in (SRC_LANG, TGT_LANG)], vocab_size=200)
    stats: dict[str, int] = {}
    tokens = tokenize_dataset(dataset, tokenizer, SRC_LANG, TGT_LANG, 6, 5, stats=stats)
    expected = 0
    for pair, row in zip(pairs, tokens, strict=True):
        full_src = tokenizer(pair[SRC_LANG])["input_ids"]
        full_tgt = tokenizer(text_target=pair[TGT_LANG])["input_ids"]
        expected += len(full_src) > 6 or len(full_tgt) > 5
        assert row["input_ids"] == tokenizer(pair[SRC_LANG], truncation=True, max_length=6)["input_ids"]
        assert (
            row["labels"] == tokenizer(text_target=pair[TGT_LANG], truncation=True, max_length=5)["input_ids"]
        )
        assert row["input_ids"][-1] == row["labels"][-1] == tokenizer.eos_token_id
    assert stats["truncated_pairs"] == expected > 0
