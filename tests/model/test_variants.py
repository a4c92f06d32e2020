"""Every registered variant trains under the stock Seq2SeqTrainer: a few steps lower the loss."""

from __future__ import annotations

import pytest
import torch
from factories import PAD, TINY_SHAPE, VOCAB, padded_batch
from transformers import Seq2SeqTrainer, Seq2SeqTrainingArguments

import deep_nmt_hf

# the fields each variant needs beyond its defaults to be tiny and meaningful
VARIANT_FIELDS = {
    "shared_layers": {"encoder_layer_repeats": 2, "decoder_layer_repeats": 2},
    "deep_decoder": {"cross_attention_drop_layers": 1, "ddr_loss_weight": 0.5, "ald_loss_weight": 0.5},
}


class _Pairs(torch.utils.data.Dataset):
    """A fixed set of padded source / label rows (labels copy a permutation of the source)."""

    def __init__(self, rows: int = 16) -> None:
        self.ids, self.mask = padded_batch([7, 5, 6, 4] * (rows // 4), seed=3)
        labels = self.ids.flip(1).clone()
        self.labels = labels.masked_fill(labels == PAD, -100)

    def __len__(self) -> int:
        return self.ids.shape[0]

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "attention_mask": self.mask[i], "labels": self.labels[i]}


@pytest.mark.parametrize("variant", sorted(deep_nmt_hf.VARIANTS))
def test_seq2seq_trainer_steps_lower_the_loss(variant: str, tmp_path) -> None:
    config_class = deep_nmt_hf.VARIANTS[variant]
    lm_class = next(lm for config, _, lm in deep_nmt_hf.MODEL_TYPES if config is config_class)
    fields = dict(TINY_SHAPE, vocab_size=VOCAB, pad_token_id=PAD, decoder_start_token_id=PAD, eos_token_id=0)
    fields.update(unk_token_id=1, max_position_embeddings=32, **VARIANT_FIELDS.get(variant, {}))
    torch.manual_seed(0)
    model = lm_class(config_class(**fields))
    data = _Pairs()
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path), report_to="none", use_cpu=True, per_device_train_batch_size=16,
        learning_rate=3e-3, warmup_steps=0, max_steps=12, logging_steps=1, save_strategy="no",
        label_smoothing_factor=0.0, disable_tqdm=True, seed=0,
    )  # fmt: skip
    trainer = Seq2SeqTrainer(model=model, args=args, train_dataset=data)
    trainer.train()
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    assert len(losses) == 12 and all(torch.isfinite(torch.tensor(losses)))
    assert losses[-1] < 0.8 * losses[0], losses
