"""Tests for deep_nmt_hf.training: sacreBLEU metrics, Seq2SeqTrainer wiring, saving, translation."""

from __future__ import annotations

import json
import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import sacrebleu
import torch
from factories import SAVED_MODEL_FILES, TINY_SHAPE
from sacrebleu.metrics import BLEU, CHRF, TER
from torch import nn
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, EvalPrediction, TrainerControl

from deep_nmt_hf import training
from deep_nmt_hf.data import DataError, load_parallel, write_parallel_dir
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.data.tokenization import train_tokenizer
from deep_nmt_hf.model.configuration_deep_nmt import AdminConfig, DeepNMTConfig
from deep_nmt_hf.training import (
    DivergenceCallback,
    TrainingOptions,
    build_config,
    compute_translation_metrics,
    evaluate_model,
    make_compute_metrics,
    paired_bootstrap,
    resolve_variant,
    staged_output_dir,
    tokenize_dataset,
    train,
    translate,
)

TINY = dict(TINY_SHAPE)
HYPOTHESES = ["the cat sat on the mat .", "a dog runs in the park", "hello world", "it is raining today ."]
REFERENCES = ["the cat sat on a mat .", "the dog runs in the park", "hello , world", "today it rains ."]


# ------------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small synthetic sa -> sb corpus on disk (train / valid / test)."""
    directory = tmp_path_factory.mktemp("data")
    for split, pairs in demo_splits(train=400, valid=16, test=16, seed=7).items():
        write_parallel_dir(pairs, directory, split, SRC_LANG, TGT_LANG)
    return directory


@pytest.fixture(scope="module")
def tokenizer(data_dir: Path):
    pairs = load_parallel(data_dir, "train", SRC_LANG, TGT_LANG)["translation"]
    return train_tokenizer([pair[lang] for pair in pairs for lang in (SRC_LANG, TGT_LANG)], vocab_size=400)


class _RecordingTrainer(training.DeepNMTTrainer):
    """The real trainer (a Seq2SeqTrainer), remembering its instances so tests can inspect the wiring."""

    instances: list = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _RecordingTrainer.instances.append(self)


@pytest.fixture(scope="module")
def trained(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """One short training run of a tiny model; shared by the tests below."""
    output_dir = tmp_path_factory.mktemp("runs") / "tiny"
    options = TrainingOptions(
        output_dir=str(output_dir),
        data_source=data_dir,
        src_lang=SRC_LANG,
        tgt_lang=TGT_LANG,
        test_split="test",
        vocab_size=400,
        batch_size=16,
        learning_rate=3e-3,
        warmup_steps=5,
        max_steps=40,
        eval_steps=20,
        save_steps=20,
        logging_steps=5,
        max_eval_samples=8,
        num_beams=2,
        seed=0,
        disable_tqdm=True,
    )
    _RecordingTrainer.instances.clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(training.run, "DeepNMTTrainer", _RecordingTrainer)
        record = train(options, dict(TINY))
    return SimpleNamespace(
        record=record, output_dir=output_dir, options=options, trainer=_RecordingTrainer.instances[-1]
    )


# -------------------------------------------------------------------------------------------------- metrics
def test_metrics_identical_to_sacrebleu() -> None:
    result = compute_translation_metrics(HYPOTHESES, REFERENCES)
    assert result["bleu"] == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    assert result["chrf"] == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    assert result["ter"] == pytest.approx(sacrebleu.corpus_ter(HYPOTHESES, [REFERENCES]).score)
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF()), ("ter", TER())):
        metric.corpus_score(HYPOTHESES, [REFERENCES])
        assert result[f"{name}_signature"] == str(metric.get_signature())
        assert result[f"{name}_signature"].startswith("nrefs:1|")
    assert result["num_sentences"] == len(HYPOTHESES)
    assert 0 < result["bleu"] < 100
    assert compute_translation_metrics(REFERENCES, REFERENCES)["bleu"] == pytest.approx(100.0)


def test_paired_bootstrap_tells_a_real_difference_from_chance() -> None:
    words = "a small dog runs across the green field while two children watch it".split()
    references = [" ".join(words[i % 5 : i % 5 + 7]) for i in range(60)]
    truncated = [" ".join(r.split()[:3]) for r in references]
    result = paired_bootstrap(truncated, references, references, n_samples=200)
    assert result["bleu"] == pytest.approx(100.0)
    assert result["baseline_bleu"] == pytest.approx(sacrebleu.corpus_bleu(truncated, [references]).score)
    assert result["delta"] > 50 and result["p_value"] < 0.01
    assert result["signature"].startswith("nrefs:1|bs:200|")
    # two systems, each right on half the sentences (even / odd): the same BLEU, no evidence either way
    evens = [r if i % 2 == 0 else t for i, (r, t) in enumerate(zip(references, truncated, strict=True))]
    odds = [r if i % 2 else t for i, (r, t) in enumerate(zip(references, truncated, strict=True))]
    tie = paired_bootstrap(evens, odds, references, n_samples=200)
    assert tie["delta"] == pytest.approx(0.0, abs=1e-9) and tie["p_value"] > 0.1
    with pytest.raises(ValueError, match="2 baseline and 3 system hypotheses, 3 references"):
        paired_bootstrap(references[:2], references[:3], references[:3])


def test_metrics_reject_mismatched_or_empty_lists() -> None:
    with pytest.raises(ValueError, match="3 hypotheses but 4 references"):
        compute_translation_metrics(HYPOTHESES[:3], REFERENCES)
    with pytest.raises(ValueError, match="empty"):
        compute_translation_metrics([], [])


def test_compute_metrics_decodes_generated_ids(tokenizer) -> None:
    sentences = ["vu no mevada .", "ta voru fatu bisodit dako ."]
    encoded = [tokenizer(text)["input_ids"] for text in sentences]
    width = max(map(len, encoded)) + 2
    # generated ids are padded with -100 between batches; the decoder start (pad) leads every row
    predictions = np.full((2, width), -100)
    labels = np.full((2, width), -100)
    for row, ids in enumerate(encoded):
        predictions[row, : len(ids) + 1] = [tokenizer.pad_token_id, *ids]
        labels[row, : len(ids)] = ids
    decoded_refs = make_compute_metrics(tokenizer)(EvalPrediction(predictions=predictions, label_ids=labels))
    assert decoded_refs["bleu"] == pytest.approx(100.0)
    assert decoded_refs["bleu_signature"].startswith("nrefs:1|")
    other_refs = ["something else entirely .", "nothing alike here ."]
    with_refs = make_compute_metrics(tokenizer, other_refs)(
        EvalPrediction(predictions=predictions, label_ids=labels)
    )
    assert with_refs["bleu"] == pytest.approx(sacrebleu.corpus_bleu(sentences, [other_refs]).score)


# ------------------------------------------------------------------------------------------- config and data
def test_build_config_takes_ids_from_tokenizer(tokenizer) -> None:
    config = build_config(tokenizer, max_source_length=300, max_target_length=64, **TINY)
    assert config.vocab_size == len(tokenizer)
    assert (
        config.pad_token_id == config.decoder_start_token_id == tokenizer.pad_token_id == len(tokenizer) - 1
    )
    assert (config.eos_token_id, config.unk_token_id) == (tokenizer.eos_token_id, tokenizer.unk_token_id)
    assert config.label_smoothing == pytest.approx(0.1)
    assert config.max_position_embeddings >= 300
    admin = build_config(
        tokenizer, AdminConfig, encoder_layers=3, **{k: v for k, v in TINY.items() if "layers" not in k}
    )
    assert isinstance(admin, AdminConfig) and admin.residual_scaling == "admin" and admin.encoder_layers == 3


def test_build_config_errors_name_the_field(tokenizer) -> None:
    with pytest.raises(ValueError, match="layer_norm_position"):
        build_config(tokenizer, layer_norm_position="middle", **TINY)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        build_config(tokenizer, max_source_length=128, max_position_embeddings=64, **TINY)
    with pytest.raises(ValueError, match="pad_token_id"):
        build_config(tokenizer, pad_token_id=3, **TINY)


def test_resolve_variant() -> None:
    assert resolve_variant("deep_nmt")[0] is DeepNMTConfig
    assert resolve_variant("deep_nmt_admin")[0] is AdminConfig
    assert resolve_variant("admin")[0] is AdminConfig
    with pytest.raises(ValueError, match="deep_nmt") as err:
        resolve_variant("nonsense")
    assert "nonsense" in str(err.value)


def test_tokenize_dataset_truncates_and_keeps_eos(data_dir: Path, tokenizer) -> None:
    dataset = load_parallel(data_dir, "valid", SRC_LANG, TGT_LANG).select(range(6))
    full = tokenize_dataset(dataset, tokenizer, SRC_LANG, TGT_LANG, 128, 128)
    short = tokenize_dataset(dataset, tokenizer, SRC_LANG, TGT_LANG, 5, 4)
    assert set(short.column_names) == {"input_ids", "attention_mask", "labels", "src_len", "tgt_len"}
    for long_row, row in zip(full, short, strict=True):
        assert (row["src_len"], row["tgt_len"]) == (len(row["input_ids"]), len(row["labels"]))
        assert len(row["input_ids"]) == min(5, len(long_row["input_ids"]))
        assert len(row["labels"]) == min(4, len(long_row["labels"]))
        assert row["input_ids"][-1] == row["labels"][-1] == tokenizer.eos_token_id
        assert row["input_ids"][:-1] == long_row["input_ids"][: len(row["input_ids"]) - 1]


# ------------------------------------------------------------------------------------------------- training
def test_trainer_wiring(trained: SimpleNamespace) -> None:
    args = trained.trainer.args
    assert args.label_smoothing_factor == 0.0 and trained.trainer.label_smoother is None
    assert trained.trainer.model.config.label_smoothing == pytest.approx(0.1)
    assert str(args.lr_scheduler_type.value) == "inverse_sqrt" and args.warmup_steps == 5
    assert (args.adam_beta1, args.adam_beta2, args.weight_decay) == (0.9, 0.98, 0.0)
    assert args.train_sampling_strategy == "group_by_length"
    assert args.predict_with_generate and args.generation_num_beams == 2
    assert str(args.save_strategy.value) == "steps" and args.save_total_limit == 2
    assert args.report_to in ("none", [], ["none"])
    assert args.use_cpu == (not torch.cuda.is_available())
    # evaluation ran during training with beam search and sacreBLEU
    evals = [entry for entry in trained.record["log_history"] if "eval_bleu" in entry]
    assert [entry["step"] for entry in evals] == [20, 40]
    assert all(entry["eval_bleu_signature"].startswith("nrefs:1|") for entry in evals)


def test_training_lowers_the_loss(trained: SimpleNamespace) -> None:
    losses = [entry["loss"] for entry in trained.record["log_history"] if "loss" in entry]
    assert len(losses) >= 8 and all(math.isfinite(loss) for loss in losses)
    assert np.mean(losses[-2:]) < np.mean(losses[:2]) - 0.5
    assert trained.record["train"]["first_logged_loss"] == losses[0]
    assert trained.record["global_step"] == 40


def test_output_dir_is_complete_and_loads(trained: SimpleNamespace) -> None:
    out = trained.output_dir
    for name in SAVED_MODEL_FILES:
        assert (out / name).is_file(), name
    assert not list(out.glob("checkpoint-*"))
    assert not out.with_name(out.name + ".partial").exists()
    assert_carries_the_translation_pipeline(out)
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert model.config.label_smoothing == pytest.approx(0.1) and model.config.use_cache
    assert model.generation_config.num_beams == 2
    sources = [
        pair[SRC_LANG]
        for pair in load_parallel(trained.options.data_source, "test", SRC_LANG, TGT_LANG)["translation"]
    ]
    outputs = translate(model, tokenizer, sources[:5], num_beams=2, batch_size=2)
    assert len(outputs) == 5 and all(isinstance(text, str) for text in outputs)
    assert any(outputs)


def assert_carries_the_translation_pipeline(directory: Path) -> None:
    """pipeline_shipping.py: translation_pipeline.py beside the model and its custom_pipelines entry."""
    assert (directory / "translation_pipeline.py").is_file()
    config = json.loads((directory / "config.json").read_text())
    assert config["custom_pipelines"]["translation"]["impl"] == "translation_pipeline.TranslationPipeline"


def test_trainer_saves_and_checkpoints_carry_the_translation_pipeline(
    trained: SimpleNamespace, tmp_path
) -> None:
    trained.trainer.save_model(
        str(tmp_path / "saved")
    )  # Trainer._save: what every checkpoint-* is written by
    assert_carries_the_translation_pipeline(tmp_path / "saved")


def test_metrics_json_is_card_ready(trained: SimpleNamespace) -> None:
    saved = json.loads((trained.output_dir / "metrics.json").read_text())
    assert saved["eval_split"] == "test" and saved["num_sentences"] == 16
    for name in ("bleu", "chrf", "ter"):
        assert isinstance(saved[name], float)
        assert saved[f"{name}_signature"].startswith("nrefs:1|")
        assert saved["metrics"]["valid"][f"{name}_signature"].startswith("nrefs:1|")
    assert (saved["src_lang"], saved["tgt_lang"]) == (SRC_LANG, TGT_LANG)
    assert saved["data_source"] == str(trained.options.data_source)
    assert saved["valid_split"] == "valid"  # found automatically
    assert saved["hyperparameters"]["learning_rate"] == 3e-3 and saved["hyperparameters"]["adam_betas"] == [
        0.9,
        0.98,
    ]
    model = AutoModelForSeq2SeqLM.from_pretrained(trained.output_dir)
    assert saved["model"]["num_parameters"] == model.num_parameters()
    assert saved["model"]["config"]["d_model"] == 32
    assert saved["train"]["train_runtime"] > 0 and saved["train"]["train_source_tokens_per_second"] > 0
    assert saved["versions"]["transformers"] and saved["versions"]["sacrebleu"] == sacrebleu.__version__
    assert saved["date"][:2] == "20"
    assert saved == json.loads(json.dumps(trained.record, default=str))


def test_evaluate_model_scores_a_split(trained: SimpleNamespace) -> None:
    result = evaluate_model(
        trained.output_dir,
        trained.options.data_source,
        "test",
        SRC_LANG,
        TGT_LANG,
        num_beams=2,
        batch_size=16,  # the batches of the final scoring in train (eval batch size = batch size 16)
        progress=False,
    )
    saved = json.loads((trained.output_dir / "metrics.json").read_text())
    assert result["num_sentences"] == 16
    # same model, beam, batches and sentences as the final scoring at the end of train
    assert result["bleu"] == pytest.approx(saved["bleu"])
    assert result["ter_signature"].startswith("nrefs:1|")
    with pytest.raises(DataError, match="nosuch"):
        evaluate_model(trained.output_dir, trained.options.data_source, "nosuch", SRC_LANG, TGT_LANG)


# ------------------------------------------------------------------------------------------------ translate
class _EchoModel(nn.Module):
    """A stand-in for a seq2seq model whose `generate` returns its input: translation = the source."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))
        self.config = SimpleNamespace(max_position_embeddings=64)
        # a stock model's generation config: no per-sentence limit of its own, an </s> for translate's default one
        self.generation_config = SimpleNamespace(max_length=64, eos_token_id=2)
        self.batch_widths: list[int] = []

    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, **kwargs) -> torch.Tensor:
        self.batch_widths.append(int(attention_mask.sum(1).max()))
        return input_ids


def test_translate_restores_input_order(tokenizer) -> None:
    words = "ta voru fatu bisodit dako vu no mevada pidebo gilo genu vi vosala".split()
    sentences = [" ".join(words[: 1 + (i * 7) % len(words)]) for i in range(11)]
    sentences[4] = ""
    sentences[8] = "   "
    model = _EchoModel()
    outputs = translate(model, tokenizer, sentences, num_beams=1, batch_size=3)
    expected = [
        tokenizer.decode(tokenizer(s)["input_ids"], skip_special_tokens=True).strip() if s.strip() else ""
        for s in sentences
    ]
    assert outputs == expected
    assert outputs[4] == outputs[8] == "" and outputs[0] == sentences[0]
    assert len(model.batch_widths) == 3  # 9 non-blank sentences in batches of 3
    assert model.batch_widths == sorted(model.batch_widths, reverse=True)  # longest batch first


def test_translate_real_model_matches_unbatched(trained: SimpleNamespace) -> None:
    model = AutoModelForSeq2SeqLM.from_pretrained(trained.output_dir)
    tokenizer = AutoTokenizer.from_pretrained(trained.output_dir)
    pairs = load_parallel(trained.options.data_source, "valid", SRC_LANG, TGT_LANG)["translation"]
    sources = [pair[SRC_LANG] for pair in pairs][:6]
    # a fixed length bound: the automatic one depends on the longest source of the batch
    batched = translate(model, tokenizer, sources, num_beams=1, batch_size=4, max_new_tokens=12)
    single = [translate(model, tokenizer, [text], num_beams=1, max_new_tokens=12)[0] for text in sources]
    assert batched == single


# ------------------------------------------------------------------------------------------ output handling
def test_staged_output_dir_is_all_or_nothing(tmp_path: Path) -> None:
    target = tmp_path / "model"
    with pytest.raises(RuntimeError, match="boom"):
        with staged_output_dir(target) as staging:
            (staging / "config.json").write_text("{}")
            raise RuntimeError("boom")
    assert not target.exists() and not list(tmp_path.iterdir())
    with staged_output_dir(target) as staging:
        (staging / "config.json").write_text("{}")
        assert not target.exists()
    assert (target / "config.json").read_text() == "{}" and sorted(p.name for p in tmp_path.iterdir()) == [
        "model"
    ]
    with pytest.raises(FileExistsError, match="--overwrite"), staged_output_dir(target):
        pass
    with staged_output_dir(target, overwrite=True) as staging:
        (staging / "new.txt").write_text("x")
    assert sorted(p.name for p in target.iterdir()) == ["new.txt"]


def test_train_refuses_existing_output_before_any_work(data_dir: Path, tmp_path: Path) -> None:
    existing = tmp_path / "out"
    existing.mkdir()
    (existing / "keep.txt").write_text("mine")
    options = TrainingOptions(
        output_dir=str(existing), data_source=data_dir, src_lang=SRC_LANG, tgt_lang=TGT_LANG, max_steps=1
    )
    with pytest.raises(FileExistsError, match="not empty"):
        train(options, dict(TINY))
    assert [p.name for p in existing.iterdir()] == ["keep.txt"]


def test_train_bad_split_writes_nothing(data_dir: Path, tmp_path: Path) -> None:
    options = TrainingOptions(
        output_dir=str(tmp_path / "out"), data_source=data_dir, src_lang=SRC_LANG, tgt_lang=TGT_LANG,
        train_split="nosuch", max_steps=1,
    )  # fmt: skip
    with pytest.raises(DataError, match="nosuch"):
        train(options, dict(TINY))
    assert not list(tmp_path.iterdir())


def test_options_validate() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        TrainingOptions(output_dir="x", data_source="y", src_lang="a", tgt_lang="b", batch_size=0)
    with pytest.raises(ValueError, match="max_steps"):
        TrainingOptions(output_dir="x", data_source="y", src_lang="a", tgt_lang="b", num_train_epochs=0)


def test_divergence_callback_stops_on_nan() -> None:
    callback = DivergenceCallback()
    control = TrainerControl()
    state = SimpleNamespace(global_step=7)
    callback.on_log(None, state, control, logs={"loss": 2.5})
    assert not control.should_training_stop and callback.diverged_at is None
    callback.on_log(None, state, control, logs={"loss": float("nan")})
    assert control.should_training_stop and callback.diverged_at[0] == 7


def test_trainer_logs_the_loss_components_of_a_deep_decoder_model(data_dir: Path, tmp_path: Path) -> None:
    options = TrainingOptions(
        output_dir=str(tmp_path / "dd"), data_source=data_dir, src_lang=SRC_LANG, tgt_lang=TGT_LANG,
        variant="deep_decoder", vocab_size=400, batch_size=8, learning_rate=1e-3, warmup_steps=1, max_steps=4,
        logging_steps=2, num_beams=1, seed=0, disable_tqdm=True, score_valid=False, max_eval_samples=4,
    )  # fmt: skip
    overrides = dict(
        TINY, cross_attention_drop_layers=1, ddr_loss_weight=1.0, ald_loss_weight=0.5, dropout=0.1
    )
    record = train(options, overrides)
    logged = [entry for entry in record["log_history"] if "loss" in entry and "nll_loss" in entry]
    assert [entry["step"] for entry in logged] == [1, 2, 4]  # logging_first_step, then every 2 steps
    for entry in logged:
        assert entry["ddr_loss"] > 0 and entry["ald_loss"] > 0 and entry["nll_loss"] > 0
        # the total is the label-smoothed CE plus the weighted extra terms, so it exceeds the CE alone
        assert entry["loss"] > entry["nll_loss"]


def test_train_variant_admin_profiles_by_itself(data_dir: Path, tmp_path: Path) -> None:
    options = TrainingOptions(
        output_dir=str(tmp_path / "admin"), data_source=data_dir, src_lang=SRC_LANG, tgt_lang=TGT_LANG,
        variant="admin", vocab_size=400, batch_size=8, learning_rate=1e-3, warmup_steps=1, max_steps=2,
        num_beams=1, seed=0, disable_tqdm=True, score_valid=False, max_eval_samples=4,
    )  # fmt: skip
    train(options, dict(TINY, encoder_layers=4, decoder_layers=2))
    out = tmp_path / "admin"
    omegas = json.loads((out / "admin_omega.json").read_text())
    assert (out / "admin_omega.png").stat().st_size > 0
    assert omegas["encoder"][0] == 1.0 and omegas["decoder"][0] == 1.0  # the embedding-reading sublayers
    assert all(value > 1.0 for value in omegas["encoder"][1:])  # ω grows along the residual stream
    model = AutoModelForSeq2SeqLM.from_pretrained(out)
    assert model.config.residual_scaling == "admin" and model.config.admin_profiled


def test_ctrl_c_keeps_checkpoints_and_leaves_saying_so_to_the_command(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The KeyboardInterrupt goes on; `deep-nmt` says where the partial run is, in one line (cli/interrupt.py):
    a log line here too printed a second "interrupted" line."""
    target = tmp_path / "run"
    with caplog.at_level("WARNING"), pytest.raises(KeyboardInterrupt), staged_output_dir(target) as staging:
        (staging / "checkpoint-2").mkdir()
        raise KeyboardInterrupt
    assert "interrupted" not in caplog.text and "run failed" not in caplog.text
    assert (tmp_path / "run.partial" / "checkpoint-2").is_dir()
