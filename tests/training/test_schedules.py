"""How the authors ran their recipes (issue #26): gradient accumulation equals one big batch, epoch checkpoints and
their averaging, fairseq's batch order, the deep decoder's scaled drop depth, and every paper preset."""

from __future__ import annotations

import argparse
import shlex

import datasets
import pytest
import torch
from factories import EOS, PAD, VOCAB, tiny_model
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainingArguments

import deep_nmt_hf
from deep_nmt_hf.cli import build_parser
from deep_nmt_hf.cli.names import PAPER_PRESET_NAMES
from deep_nmt_hf.cli.schedule_flags import schedule_values
from deep_nmt_hf.data.batching import TokenBudgetBatchSampler
from deep_nmt_hf.model.configuration_deep_nmt import DeepDecoderConfig
from deep_nmt_hf.science.paper_presets import PRESETS, command, preset_values
from deep_nmt_hf.science.recipes import get_recipe
from deep_nmt_hf.training import DeepNMTTrainer
from deep_nmt_hf.training.averaging import (
    AveragingError,
    average_checkpoints,
    find_checkpoints,
    last_checkpoint,
)
from deep_nmt_hf.training.optimizers import optimizer_cls_and_kwargs


def _dataset(count: int = 24, seed: int = 0) -> datasets.Dataset:
    """Pairs of different lengths (so that a mean of batch means differs from the token mean)."""
    generator = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(count):
        src, tgt = 2 + (i * 5) % 9, 2 + (i * 7) % 11
        rows.append(
            {
                "input_ids": torch.randint(2, VOCAB - 2, (src,), generator=generator).tolist() + [EOS],
                "labels": torch.randint(2, VOCAB - 2, (tgt,), generator=generator).tolist() + [EOS],
            }
        )
    return datasets.Dataset.from_list(rows)


class _Tokenizer:
    pad_token_id = PAD
    padding_side = "right"

    def save_pretrained(self, *args, **kwargs) -> tuple:  # the Trainer saves its collator's tokenizer
        return ()

    def pad(self, features, **kwargs):  # what DataCollatorForSeq2Seq asks of a tokenizer
        width = max(len(f["input_ids"]) for f in features)
        ids = [f["input_ids"] + [PAD] * (width - len(f["input_ids"])) for f in features]
        mask = [[1] * len(f["input_ids"]) + [0] * (width - len(f["input_ids"])) for f in features]
        return {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}


def _one_step(tmp_path, batch_size: int, accumulate: int, max_tokens: int | None = None):
    """One SGD step (lr 0.1, no clipping, no dropout) of DeepNMTTrainer; returns (weights before, after, the
    micro-batches it saw)."""
    model = tiny_model(seed=1)
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    seen = []
    collator = DataCollatorForSeq2Seq(_Tokenizer(), model=model, label_pad_token_id=-100)

    def collate(features):
        batch = collator(features)
        seen.append({k: v.clone() for k, v in batch.items()})
        return batch

    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=batch_size,
        gradient_accumulation_steps=accumulate,
        learning_rate=0.1,
        lr_scheduler_type="constant",
        max_grad_norm=0.0,
        max_steps=1,
        train_sampling_strategy="sequential",
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
    )
    trainer = DeepNMTTrainer(
        model=model,
        args=args,
        train_dataset=_dataset(),
        data_collator=collate,
        optimizer_cls_and_kwargs=(torch.optim.SGD, {"lr": 0.1}),
        max_tokens=max_tokens,
    )
    trainer.train()
    after = {k: v.detach().clone() for k, v in trainer.model.named_parameters()}
    return before, after, seen[:accumulate]  # accelerate's loader fetches one batch ahead


def _token_mean_gradient(micro_batches) -> dict[str, torch.Tensor]:
    """∇ (Σ over all micro-batches of the token losses) / (their target tokens): fairseq's update."""
    model = tiny_model(seed=1).train()
    total = sum(int(b["labels"].ne(-100).sum()) for b in micro_batches)
    for batch in micro_batches:
        tokens = int(batch["labels"].ne(-100).sum())
        (model(**batch).loss * tokens / total).backward()
    return {k: p.grad for k, p in model.named_parameters() if p.grad is not None}


def _assert_update_is(before, after, gradient, lr=0.1) -> None:
    """Every parameter moved by lr × gradient; k_proj biases left out (their gradient is exactly zero in exact
    arithmetic: softmax is invariant to a per-query constant, so both sides are rounding noise below 1e-8)."""
    for name, grad in gradient.items():
        if name.endswith("k_proj.bias"):
            assert grad.abs().max() < 1e-7
            continue
        step = (before[name] - after[name]) / lr
        scale = grad.abs().max().clamp_min(1e-8)
        assert ((step - grad).abs().max() / scale).item() < 1e-4, name


def test_accumulated_micro_batches_give_the_token_mean_update_of_their_union(tmp_path) -> None:
    """update_freq 2 × 4 pairs moves the weights by the gradient of the token mean over all 8 pairs, i.e. one batch
    of the 8 (rel 1e-4 of each tensor's largest gradient); a mean of the two batch means would differ (checked)."""
    before, accumulated, micro = _one_step(tmp_path, 4, 2)
    assert len(micro) == 2
    reference = _token_mean_gradient(micro)
    _assert_update_is(before, accumulated, reference)
    tokens = [int(b["labels"].ne(-100).sum()) for b in micro]
    assert tokens[0] != tokens[1]  # unequal micro-batches: the token weighting matters
    mean_of_means = _token_mean_gradient([micro[0]])
    other = _token_mean_gradient([micro[1]])
    name = "model.shared.weight"
    naive = (mean_of_means[name] + other[name]) / 2
    assert (naive - reference[name]).abs().max() > 1e-3 * reference[name].abs().max()


def test_accumulation_works_with_token_budget_batches(tmp_path) -> None:
    before, after, micro = _one_step(tmp_path, 4, 3, max_tokens=40)
    assert len(micro) == 3
    assert all(b["input_ids"].numel() <= 40 for b in micro)
    _assert_update_is(before, after, _token_mean_gradient(micro))


def test_epoch_checkpoints_carry_their_epoch_and_are_averaged(tmp_path) -> None:
    model = tiny_model(seed=2)
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        per_device_train_batch_size=8,
        num_train_epochs=3,
        gradient_accumulation_steps=1,
        save_strategy="epoch",
        report_to="none",
        use_cpu=True,
        disable_tqdm=True,
        train_sampling_strategy="sequential",
    )
    collator = DataCollatorForSeq2Seq(_Tokenizer(), model=model, label_pad_token_id=-100)
    trainer = DeepNMTTrainer(
        model=model,
        args=args,
        train_dataset=_dataset(16),
        data_collator=collator,
        optimizer_cls_and_kwargs=optimizer_cls_and_kwargs("adam", 1e-3, (0.9, 0.98), 1e-8),
    )
    trainer.train()
    names = [p.name for p in find_checkpoints(tmp_path, epochs_only=True)]
    assert names == ["checkpoint-2-epoch1", "checkpoint-4-epoch2", "checkpoint-6-epoch3"]
    assert last_checkpoint(tmp_path).name == "checkpoint-6-epoch3"  # what --resume continues from
    out = average_checkpoints(tmp_path, 2, epochs=True)
    assert out.name == "averaged-last-2-epochs"
    averaged = deep_nmt_hf.DeepNMTForConditionalGeneration.from_pretrained(out)
    from deep_nmt_hf.training.averaging import load_weights

    two = [load_weights(tmp_path / n) for n in names[1:]]
    key = "model.shared.weight"
    assert torch.allclose(averaged.state_dict()[key], (two[0][key] + two[1][key]) / 2, atol=1e-6)
    with pytest.raises(AveragingError, match="--last-epochs 4 needs at least 4"):
        average_checkpoints(tmp_path, 4, tmp_path / "x", epochs=True)
    assert build_parser().parse_args(["average", str(tmp_path), "--last-epochs", "2"]).last_epochs == 2


def test_batches_follow_fairseq_order_and_size_multiple() -> None:
    """fairseq orders by source, ties by target, and cuts a full batch to a multiple of 8 (the rest carried on)."""
    src, tgt = [5, 3, 3, 4], [2, 9, 1, 1]
    ordered = TokenBudgetBatchSampler(src, tgt, max_tokens=100, shuffle=False)
    assert list(ordered) == [[2, 1, 3, 0]]  # source 3 (targets 1, 9), then 4, then 5
    lengths = [4] * 20
    cut = TokenBudgetBatchSampler(lengths, max_tokens=44, shuffle=False)  # 11 fit: 8 kept, 3 carried
    assert [len(b) for b in cut] == [8, 8, 4]
    plain = TokenBudgetBatchSampler(lengths, max_tokens=44, shuffle=False, required_batch_size_multiple=1)
    assert [len(b) for b in plain] == [11, 9]
    with pytest.raises(ValueError, match="required_batch_size_multiple=0"):
        TokenBudgetBatchSampler(lengths, max_tokens=44, required_batch_size_multiple=0)


def test_deep_decoder_drop_depth_scales_with_the_decoder() -> None:
    assert DeepDecoderConfig.from_preset("27L-27L").cross_attention_drop_layers == 21  # sec. 4.3's best
    assert DeepDecoderConfig().cross_attention_drop_layers == 12  # 15 layers
    assert DeepDecoderConfig(cross_attention_drop_layers=2).cross_attention_drop_layers == 2  # explicit wins


def _namespace(**given) -> argparse.Namespace:
    fields = dict(recipe=None, preset=None, gradient_accumulation_steps=None, save_strategy=None, epochs=None)
    fields |= dict(admin_profile_positions=None, admin_profile_tokens=None, average_last_epochs=None)
    return argparse.Namespace(**{**fields, "average_last_checkpoints": None, **given})


def test_schedule_flags_and_their_errors() -> None:
    recipe, options, _ = schedule_values(
        _namespace(preset="dlcl-30-6-wmt16-en-de", gradient_accumulation_steps=4)
    )
    assert recipe == "dlcl" and options["preset"] == "30L-6L" and options["gradient_accumulation_steps"] == 4
    assert options["num_train_epochs"] == 20  # the preset's, since --epochs was not given
    _, options, _ = schedule_values(_namespace(average_last_epochs=3))
    assert (options["save_strategy"], options["average_last_checkpoints"]) == ("epoch", 3)
    with pytest.raises(ValueError, match="--average-last-epochs needs --save-strategy epoch"):
        schedule_values(_namespace(average_last_epochs=3, save_strategy="steps"))
    with pytest.raises(ValueError, match="gradient_accumulation_steps=0"):
        deep_nmt_hf.training.TrainingOptions(output_dir="o", data_source="d", src_lang="a", tgt_lang="b",
                                             gradient_accumulation_steps=0)  # fmt: skip


@pytest.mark.parametrize("name", PAPER_PRESET_NAMES)
def test_every_paper_preset_builds_and_trains_one_step_at_reduced_width(name: str) -> None:
    """The paper's depth at d_model 16: the preset's config and recipe build, one optimizer step (ADMIN profiled
    first) gives a finite loss; its command parses with `deep-nmt train`'s parser and names every value."""
    from deep_nmt_hf.training.admin_profiling import admin_profile

    assert tuple(PRESETS) == PAPER_PRESET_NAMES  # the light launcher's table
    recipe, options, config_fields = preset_values(name)
    config_class = deep_nmt_hf.VARIANTS[options["variant"]]
    narrow = dict(d_model=16, encoder_ffn_dim=16, decoder_ffn_dim=16, encoder_attention_heads=2)
    narrow |= dict(decoder_attention_heads=2, vocab_size=VOCAB, pad_token_id=PAD, eos_token_id=EOS)
    narrow |= dict(decoder_start_token_id=PAD, max_position_embeddings=32)
    recipe_config = {
        k: s.value for k, s in get_recipe(recipe).items() if k in ("dropout", "attention_dropout")
    }
    config = config_class.from_preset(options["preset"], **{**recipe_config, **config_fields, **narrow})
    torch.manual_seed(0)
    model = next(lm for c, _, lm in deep_nmt_hf.MODEL_TYPES if c is config_class)(config)
    batch = {
        "input_ids": torch.tensor([[5, 6, 7, EOS], [8, 9, EOS, PAD]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        "labels": torch.tensor([[10, 11, EOS], [12, EOS, -100]]),
    }
    if config.residual_scaling == "admin":
        admin_profile(model, batch)
    settings = {k: s.value for k, s in get_recipe(recipe).items()}
    cls, kwargs = optimizer_cls_and_kwargs(
        settings["optimizer"],
        1e-3,
        (settings["adam_beta1"], settings["adam_beta2"]),
        settings["adam_epsilon"],
    )
    optimizer = cls(model.parameters(), **kwargs)
    model.train()
    loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    assert torch.isfinite(loss)
    assert config.encoder_layers == config_class.PRESETS[options["preset"]].get(
        "encoder_layers", config_class.DEFAULTS["encoder_layers"]
    )
    text = command(name)
    launch, evaluate = text.split("\n")[0], text.splitlines()[-1]
    assert launch.startswith("accelerate launch --multi_gpu --num_processes")
    words = shlex.split(text.replace("\\\n", " ").splitlines()[0])
    train_args = words[words.index("train") :]
    args = build_parser().parse_args(train_args)
    assert args.preset == name and args.max_tokens and args.gradient_accumulation_steps
    assert (args.epochs or args.max_steps > 0) and (args.average_last_epochs or args.average_last_checkpoints)
    assert evaluate.startswith("deep-nmt evaluate out/" + name)
