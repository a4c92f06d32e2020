"""What the official `examples/pytorch/translation/run_translation.py` needs from our checkpoints, exercised the
way the script does it (the script itself is not part of this repository; examples/run_translation.md shows the
command lines).

The script: loads config, tokenizer and model with the Auto classes (`--trust_remote_code` passes
`trust_remote_code=True` to all three); resizes the embeddings when the tokenizer is larger; raises unless
`config.decoder_start_token_id` is set; raises if `config.max_position_embeddings < --max_source_length`
(default 1024) for models without `relative_attention_max_distance`; tokenizes sources with
`tokenizer(inputs, max_length=..., truncation=True)` and targets with `tokenizer(text_target=...)`; batches
with `DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)` (which calls
`model.prepare_decoder_input_ids_from_labels`); trains and predicts with `Seq2SeqTrainer` and
`predict_with_generate`; scores with `evaluate.load("sacrebleu")` and reads `result["score"]`.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import sacrebleu
import torch
from datasets import Dataset
from transformers import (
    AutoConfig,
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
)

from deep_nmt_hf import DLCLConfig, DLCLForConditionalGeneration
from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, demo_splits
from deep_nmt_hf.data.tokenization import train_tokenizer
from deep_nmt_hf.publish.folding import fold_directory
from deep_nmt_hf.training import build_config

SCRIPT_DEFAULT_MAX_SOURCE_LENGTH = 1024  # DataTrainingArguments.max_source_length in run_translation.py
DOC = Path(__file__).resolve().parents[2] / "examples" / "run_translation.md"
TINY = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4)
TINY |= dict(decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, dropout=0.0)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A custom checkpoint (post-LN base), a non-foldable custom one (DLCL) and the folded base, all with a
    tokenizer, as `deep-nmt train` saves them (config from `build_config` with its default lengths)."""
    root = tmp_path_factory.mktemp("ckpt")
    pairs = demo_splits(train=200, valid=8, test=8, seed=11)
    tokenizer = train_tokenizer([s for pair in pairs["train"] for s in pair], vocab_size=160, min_frequency=1)
    dirs = {}
    for name, config in (
        ("custom", build_config(tokenizer, **TINY)),
        ("dlcl", build_config(tokenizer, DLCLConfig, **TINY)),
    ):
        torch.manual_seed(0)
        model = AutoModelForSeq2SeqLM.from_config(config)
        assert isinstance(model, DLCLForConditionalGeneration) == (name == "dlcl")
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
        dirs[name] = root / name
    fold_directory(dirs["custom"], root / "folded")
    dirs["folded"] = root / "folded"
    return {"dirs": dirs, "pairs": pairs}


def _load_like_the_script(model_dir: Path, trust_remote_code: bool):
    config = AutoConfig.from_pretrained(model_dir, trust_remote_code=trust_remote_code)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, use_fast=True, trust_remote_code=trust_remote_code)
    model = AutoModelForSeq2SeqLM.from_pretrained(
        model_dir, config=config, trust_remote_code=trust_remote_code
    )
    return config, tokenizer, model


def _documented_max_source_lengths() -> list[int]:
    text = DOC.read_text(encoding="utf-8")
    return [int(v) for v in re.findall(r"--max_source_length (\d+)", text)]


@pytest.mark.parametrize("kind", ["custom", "dlcl", "folded"])
def test_config_fields_the_script_checks(kind: str, checkpoints) -> None:
    config, tokenizer, model = _load_like_the_script(
        checkpoints["dirs"][kind], trust_remote_code=kind != "folded"
    )
    assert model.config.decoder_start_token_id is not None
    assert model.config.decoder_start_token_id == tokenizer.pad_token_id  # Marian layout: start with pad
    assert hasattr(model.config, "max_position_embeddings")
    assert not hasattr(
        model.config, "relative_attention_max_distance"
    )  # so the script's length check applies
    positions = model.config.max_position_embeddings
    assert positions == 256  # build_config's default: max(256, max_source_length, max_target_length)
    assert positions < SCRIPT_DEFAULT_MAX_SOURCE_LENGTH  # the script's default would raise ...
    documented = _documented_max_source_lengths()
    assert documented and all(
        length <= positions for length in documented
    )  # ... the documented commands pass
    if kind == "folded":
        assert "auto_map" not in config.to_dict() and type(model).__name__ == "MarianMTModel"


@pytest.mark.parametrize("kind", ["custom", "dlcl", "folded"])
def test_resize_tokenize_collate_like_the_script(kind: str, checkpoints) -> None:
    _, tokenizer, model = _load_like_the_script(checkpoints["dirs"][kind], trust_remote_code=kind != "folded")
    old = model.get_input_embeddings().weight.shape[0]
    assert len(tokenizer) == old  # the script resizes only when the tokenizer is larger
    model.resize_token_embeddings(old + 8)
    assert model.get_input_embeddings().weight.shape[0] == old + 8
    assert model.get_output_embeddings().weight.shape[0] == old + 8
    assert model.config.vocab_size == old + 8
    model.resize_token_embeddings(old)

    pairs = checkpoints["pairs"]["valid"][:4]
    inputs = tokenizer([s for s, _ in pairs], max_length=128, padding=False, truncation=True)
    labels = tokenizer(text_target=[t for _, t in pairs], max_length=128, padding=False, truncation=True)
    assert all(ids[-1] == tokenizer.eos_token_id for ids in labels["input_ids"])
    features = [
        {"input_ids": i, "attention_mask": m, "labels": lab}
        for i, m, lab in zip(inputs["input_ids"], inputs["attention_mask"], labels["input_ids"], strict=True)
    ]
    batch = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)(features)
    assert "decoder_input_ids" in batch

    label_ids = batch["labels"]
    start = torch.full((label_ids.shape[0], 1), model.config.decoder_start_token_id)
    shifted = torch.cat([start, label_ids[:, :-1]], dim=1)
    shifted = shifted.masked_fill(shifted == -100, model.config.pad_token_id)
    assert torch.equal(model.prepare_decoder_input_ids_from_labels(labels=label_ids), shifted)
    assert torch.equal(batch["decoder_input_ids"], shifted)
    loss = model(**batch).loss
    assert torch.isfinite(loss)


def _metric_module_from_the_doc() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"```python\n(# sacrebleu/sacrebleu\.py\n.*?)```", text, flags=re.S)
    assert match, "examples/run_translation.md must hold the offline sacrebleu metric module"
    return match.group(1)


@pytest.mark.parametrize("kind", ["dlcl", "folded"])
def test_seq2seq_trainer_with_predict_with_generate_and_the_offline_metric(
    kind: str, checkpoints, tmp_path, monkeypatch
) -> None:
    import evaluate

    _, tokenizer, model = _load_like_the_script(checkpoints["dirs"][kind], trust_remote_code=kind != "folded")
    pairs = checkpoints["pairs"]["test"]

    def preprocess(examples):
        inputs = [ex[SRC_LANG] for ex in examples["translation"]]
        targets = [ex[TGT_LANG] for ex in examples["translation"]]
        model_inputs = tokenizer(inputs, max_length=128, truncation=True)
        model_inputs["labels"] = tokenizer(text_target=targets, max_length=128, truncation=True)["input_ids"]
        return model_inputs

    raw = Dataset.from_dict({"translation": [{SRC_LANG: s, TGT_LANG: t} for s, t in pairs]})
    dataset = raw.map(preprocess, batched=True, remove_columns=["translation"])

    # the offline route of examples/run_translation.md: a local ./sacrebleu/sacrebleu.py is found before the Hub
    (tmp_path / "sacrebleu").mkdir()
    (tmp_path / "sacrebleu" / "sacrebleu.py").write_text(_metric_module_from_the_doc())
    monkeypatch.chdir(tmp_path)
    metric = evaluate.load("sacrebleu", cache_dir=str(tmp_path / "cache"))

    def compute_metrics(eval_preds):
        preds, labels = eval_preds
        preds = np.where(preds != -100, preds, tokenizer.pad_token_id)
        labels = np.where(labels != -100, labels, tokenizer.pad_token_id)
        decoded = [p.strip() for p in tokenizer.batch_decode(preds, skip_special_tokens=True)]
        refs = [[r.strip()] for r in tokenizer.batch_decode(labels, skip_special_tokens=True)]
        result = metric.compute(predictions=decoded, references=refs)
        expected = sacrebleu.corpus_bleu(decoded, [[r[0] for r in refs]]).score
        assert result["score"] == pytest.approx(expected, abs=1e-9)
        return {"bleu": result["score"]}

    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        per_device_eval_batch_size=4,
        max_steps=1,
        predict_with_generate=True,
        generation_max_length=12,
        generation_num_beams=2,
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="no",
    )
    trainer = Seq2SeqTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100),
        compute_metrics=compute_metrics,
    )
    train_result = trainer.train()
    assert np.isfinite(train_result.training_loss)
    predicted = trainer.predict(dataset, metric_key_prefix="predict", max_length=12, num_beams=2)
    assert predicted.predictions.shape[0] == len(pairs)
    assert "predict_bleu" in predicted.metrics and predicted.metrics["predict_bleu"] >= 0
