"""Length buckets (issue #55 item 1): on a GPU the training batches are padded to a small fixed set of lengths, so
an epoch has a few shapes; the loss and gradients are the unpadded batch's, the token budget holds for the padded
batch, and the CPU keeps exact lengths."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench import gpu_training
from bench.lib.gpu.models import build_model, synthetic_corpus, word_tokenizer
from deep_nmt_hf.data.batching import (
    BucketPadding,
    TokenBudgetBatchSampler,
    bucket_length,
    bucketed,
    length_buckets,
)
from deep_nmt_hf.training import loader


def test_buckets_are_few_and_waste_at_most_a_third() -> None:
    assert length_buckets(40) == (8, 16, 24, 32, 48)
    buckets = length_buckets(256)
    assert buckets == (8, 16, 24, 32, 48, 72, 112, 168, 256)
    for length in range(1, 257):
        padded = bucket_length(length, buckets)
        assert padded >= length and padded % 8 == 0
        assert length <= 8 or padded <= 1.5 * length + 8  # a third of the positions at most (+ the multiple)
    assert bucket_length(300, buckets) == 512  # past the last: a multiple of it
    lengths = np.arange(1, 600)
    assert bucketed(lengths, buckets).tolist() == [bucket_length(int(n), buckets) for n in lengths]
    with pytest.raises(ValueError, match="length_buckets"):
        BucketPadding(None, (16, 8), 0)


def test_bucketed_batches_give_the_exact_batches_loss_and_gradients() -> None:
    args = gpu_training.parse(["--quick"])
    corpus = synthetic_corpus(12, args.vocab, seed=3)
    tokenizer = word_tokenizer(args.vocab)
    model = build_model("admin-18-6", args).eval()
    features = [{k: corpus[k][i] for k in ("input_ids", "attention_mask", "labels")} for i in range(12)]
    results = []
    for buckets in (None, (8, 16, 24, 32, 48, 72)):
        batch = loader.training_collator(tokenizer, model, pad_to_multiple_of=None, buckets=buckets)(features)
        if buckets:
            for name in ("input_ids", "attention_mask", "labels", "decoder_input_ids"):
                assert batch[name].shape[1] in buckets, name
        model.zero_grad()
        loss = model(**batch).loss
        loss.backward()
        results.append((loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]))
    (loss_a, grads_a), (loss_b, grads_b) = results
    torch.testing.assert_close(loss_b, loss_a, rtol=1e-5, atol=1e-6)
    for a, b in zip(grads_a, grads_b, strict=True):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-6)


def test_the_budget_holds_for_bucketed_lengths_and_an_epoch_has_few_shapes() -> None:
    rng = np.random.default_rng(0)
    src, tgt = rng.integers(2, 120, 2000), rng.integers(2, 120, 2000)
    buckets = length_buckets(120)
    sampler = TokenBudgetBatchSampler(src, tgt, max_tokens=1024, seed=1, length_buckets=buckets)
    exact = TokenBudgetBatchSampler(src, tgt, max_tokens=1024, seed=1)
    shapes = set()
    for batch in sampler:
        longest = (
            bucket_length(int(src[batch].max()), buckets),
            bucket_length(int(tgt[batch].max()), buckets),
        )
        assert len(batch) * max(longest) <= 1024
        shapes.add(longest[1])
    exact_shapes = {int(tgt[batch].max()) for batch in exact}
    assert len(shapes) <= len(buckets) < len(exact_shapes)


def test_buckets_follow_the_device(monkeypatch) -> None:
    tokenizer = word_tokenizer(64)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not isinstance(loader.training_collator(tokenizer, None), BucketPadding)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    collator = loader.training_collator(tokenizer, None)
    assert isinstance(collator, BucketPadding) and collator.pad_to_multiple_of == 8
    assert collator.length_buckets == length_buckets(1024)
