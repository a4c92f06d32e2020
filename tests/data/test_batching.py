"""Token-budget batches (fairseq --max-tokens): invariants, epochs from the seed, the DDP split, the Trainer."""

from __future__ import annotations

import datasets
import numpy as np
import pytest
import torch
from factories import EOS, PAD, VOCAB, tiny_model
from transformers import Seq2SeqTrainingArguments

from deep_nmt_hf.data.batching import LengthGroupedSampler, TokenBudgetBatchSampler, dataset_lengths
from deep_nmt_hf.training import DeepNMTTrainer


def lengths(count: int = 300, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(2, 40, count), rng.integers(2, 50, count)


def test_every_example_once_and_padded_size_within_budget() -> None:
    src, tgt = lengths()
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens=200, seed=3)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        flat = [i for batch in batches for i in batch]
        assert sorted(flat) == list(range(len(src)))
        for batch in batches:
            assert len(batch) * src[batch].max() <= 200 and len(batch) * tgt[batch].max() <= 200
        # greedy like fairseq: the batches are not needlessly small (mean padded size well above half)
        assert np.mean([len(b) * max(src[b].max(), tgt[b].max()) for b in batches]) > 150


def test_greedy_cut_by_hand_and_max_sentences() -> None:
    sampler = TokenBudgetBatchSampler([3, 3, 3, 5, 5], [4, 4, 4, 4, 9], max_tokens=12, shuffle=False)
    # sorted by (target, source): [0, 1, 2, 3] (tgt 4) then 4 (tgt 9); 3×4 = 12 fits, adding 3 (src 5): 4×5 > 12
    assert list(sampler) == [[0, 1, 2], [3], [4]]
    capped = TokenBudgetBatchSampler(
        [3, 3, 3, 5, 5], [4, 4, 4, 4, 9], max_tokens=12, max_sentences=2, shuffle=False
    )
    assert list(capped) == [[0, 1], [2, 3], [4]]  # 2 × 5 = 10 fits


def test_epochs_are_reproducible_from_the_seed_and_differ() -> None:
    src, tgt = lengths()
    a, b = (TokenBudgetBatchSampler(src, tgt, max_tokens=150, seed=5) for _ in range(2))
    a.set_epoch(2)
    b.set_epoch(2)
    assert list(a) == list(b)
    b.set_epoch(3)
    assert list(a) != list(b)
    other_seed = TokenBudgetBatchSampler(src, tgt, max_tokens=150, seed=6)
    other_seed.set_epoch(2)
    assert list(other_seed) != list(a)


def test_ddp_split_two_replicas_each_rank_different_batches_covering_the_epoch() -> None:
    src, tgt = lengths(301)
    single = TokenBudgetBatchSampler(src, tgt, max_tokens=150, seed=1)
    ranks = [
        TokenBudgetBatchSampler(src, tgt, max_tokens=150, seed=1, num_replicas=2, rank=r) for r in (0, 1)
    ]
    for epoch in (0, 1):
        for sampler in (single, *ranks):
            sampler.set_epoch(epoch)
        full, r0, r1 = list(single), list(ranks[0]), list(ranks[1])
        assert len(r0) == len(r1) == len(ranks[0]) == -(-len(full) // 2)
        assert all(a != b for a, b in zip(r0, r1, strict=True))  # each step: different batches
        served = {tuple(b) for b in r0 + r1}
        assert served == {tuple(b) for b in full}  # together exactly the single-process epoch
        assert r0 == full[0::2] and r1 == (full + full[:1])[1::2][: len(r0)]


def test_errors_name_the_bad_value() -> None:
    with pytest.raises(ValueError, match="example 1 has 9 source"):
        TokenBudgetBatchSampler([3, 9], [3, 3], max_tokens=8)
    with pytest.raises(ValueError, match="max_tokens=0"):
        TokenBudgetBatchSampler([3], max_tokens=0)
    with pytest.raises(ValueError, match="rank=2"):
        TokenBudgetBatchSampler([3], max_tokens=8, num_replicas=2, rank=2)


@pytest.mark.parametrize(("count", "batch_size"), [(1, 1), (5, 64), (1000, 16), (12345, 8)])
def test_length_grouped_sampler_serves_transformers_order_index_for_index(
    count: int, batch_size: int
) -> None:
    from transformers.trainer_pt_utils import get_length_grouped_indices

    src, _ = lengths(count, seed=count)
    expected = get_length_grouped_indices(
        src.tolist(), batch_size, generator=torch.Generator().manual_seed(3)
    )
    sampler = LengthGroupedSampler(src, batch_size, generator=torch.Generator().manual_seed(3))
    served = list(sampler)
    assert served == expected and len(sampler) == count
    assert all(type(index) is int for index in served[:3])  # Python ints, as the DataLoader's fetchers expect
    assert src[served[0]] == src.max()  # the longest example first (an OOM shows at once)
    with pytest.raises(ValueError, match="batch_size=0"):
        LengthGroupedSampler(src, 0)


def test_dataset_lengths_from_arrow_columns_and_from_a_selection() -> None:
    dataset = datasets.Dataset.from_dict(
        {"input_ids": [[1, 2], [1, 2, 3, 4], [5]], "labels": [[1], [2, 3], [4, 5, 6]]}
    )
    src, tgt = dataset_lengths(dataset)
    assert src.tolist() == [2, 4, 1] and tgt.tolist() == [1, 2, 3]
    src, tgt = dataset_lengths(dataset.select([2, 0]))
    assert src.tolist() == [1, 2] and tgt.tolist() == [3, 1]


def test_dataset_lengths_of_a_preprocessed_split_come_from_its_length_columns(tmp_path) -> None:
    """The cached splits of the data path carry src_len / tgt_len: the sampler reads those, not token lists."""
    from deep_nmt_hf.data.synthetic import SRC_LANG, TGT_LANG, generate_pairs
    from deep_nmt_hf.data.tokenization import train_tokenizer
    from deep_nmt_hf.training import tokenize_dataset

    pairs = generate_pairs(200, seed=3)
    tokenizer = train_tokenizer([text for pair in pairs for text in pair], vocab_size=300)
    raw = datasets.Dataset.from_dict({"translation": [{SRC_LANG: s, TGT_LANG: t} for s, t in pairs]})
    split = tokenize_dataset(raw, tokenizer, SRC_LANG, TGT_LANG, 16, 16, cache_dir=tmp_path)
    assert {"src_len", "tgt_len"} <= set(split.column_names)
    src, tgt = dataset_lengths(split)
    assert src.tolist() == [len(row) for row in split["input_ids"]]
    assert tgt.tolist() == [len(row) for row in split["labels"]]
    assert max(src) <= 16 and max(tgt) <= 16
    src_some, tgt_some = dataset_lengths(split.select([5, 1]))  # an indices mapping: not the raw Arrow column
    assert src_some.tolist() == [src[5], src[1]] and tgt_some.tolist() == [tgt[5], tgt[1]]
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens=64, seed=0)
    for batch in sampler:
        assert len(batch) * max(src[batch]) <= 64 and len(batch) * max(tgt[batch]) <= 64


def test_trainer_with_max_tokens_and_gradient_accumulation(tmp_path) -> None:
    """Seq2SeqTrainer serves the sampler's batches (padded size within the budget, new order each epoch)."""
    rng = np.random.default_rng(0)
    rows = {"input_ids": [], "labels": []}
    for _ in range(40):
        rows["input_ids"].append(rng.integers(2, VOCAB - 1, int(rng.integers(2, 12))).tolist() + [EOS])
        rows["labels"].append(rng.integers(2, VOCAB - 1, int(rng.integers(2, 12))).tolist() + [EOS])
    dataset = datasets.Dataset.from_dict(rows)
    seen: list[list[int]] = []

    def collate(features: list[dict]) -> dict[str, torch.Tensor]:
        seen.append([len(f["input_ids"]) for f in features])
        width = max(len(f["input_ids"]) for f in features)
        target = max(len(f["labels"]) for f in features)
        assert len(features) * max(width, target) <= 48
        ids = torch.tensor([f["input_ids"] + [PAD] * (width - len(f["input_ids"])) for f in features])
        labels = torch.tensor([f["labels"] + [-100] * (target - len(f["labels"])) for f in features])
        return {"input_ids": ids, "attention_mask": ids.ne(PAD).long(), "labels": labels}

    model = tiny_model()
    args = Seq2SeqTrainingArguments(
        output_dir=str(tmp_path),
        num_train_epochs=2,
        gradient_accumulation_steps=2,
        learning_rate=1e-3,
        save_strategy="no",
        report_to="none",
        use_cpu=True,
        seed=4,
        disable_tqdm=True,
        remove_unused_columns=False,
    )
    trainer = DeepNMTTrainer(
        model=model, args=args, train_dataset=dataset, data_collator=collate, max_tokens=48
    )
    trainer.train()
    per_epoch = len(trainer.get_train_dataloader())
    assert len(seen) == 2 * per_epoch
    assert trainer.state.global_step == 2 * -(-per_epoch // 2)
    assert seen[:per_epoch] != seen[per_epoch:]  # epoch 1 has its own order (set_epoch reached the sampler)
    sampler = TokenBudgetBatchSampler(*dataset_lengths(dataset), max_tokens=48, seed=4)
    sampler.set_epoch(1)
    src = dataset_lengths(dataset)[0]
    assert seen[per_epoch:] == [src[b].tolist() for b in sampler]
