"""The per-sentence length limit ``max_len_a · source length + max_len_b`` (model/length_limit.py): fairseq's
forced ``</s>``, applied by the model's own `generate`, `deep-nmt translate`, `pipeline("translation")` and a
`trust_remote_code` load, so that a sentence translates the same alone and in any batch."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest
import torch
from factories import EOS, PAD, padded_batch, variant_model
from fresh_process import generate_with_remote_code
from transformers import pipeline

import deep_nmt_hf
from deep_nmt_hf.cli import main
from deep_nmt_hf.data.synthetic import generate_pairs
from deep_nmt_hf.data.tokenization import special_token_ids, train_tokenizer
from deep_nmt_hf.model.length_limit import SourceLengthLimitLogitsProcessor, source_length_limits
from deep_nmt_hf.training.translation import translate

LIMIT = {"max_len_a": 1.0, "max_len_b": 2}  # binds on tiny random models, which seldom say </s>


def _limited(model):
    """`model` with LIMIT in its generation config (`GenerationConfig.update` skips fields it does not know)."""
    for key, value in LIMIT.items():
        setattr(model.generation_config, key, value)
    return model


def test_the_limit_is_fairseqs_integer_part() -> None:
    lengths = torch.tensor([1, 4, 7])
    assert source_length_limits(lengths, 1.5, 3).tolist() == [4, 9, 13]  # int(a · n + b)
    assert source_length_limits(lengths, 0.0, 200, cap=63).tolist() == [63, 63, 63]


def test_processor_leaves_only_eos_with_its_log_prob_once_a_sentence_reaches_its_limit() -> None:
    """Two sentences × two beams (Transformers' row order), limits 1 and 3: after one generated token the first
    sentence's rows may only end, </s> keeping its log-prob (fairseq bans the other tokens, it does not set
    </s> to 0); the second's rows are untouched."""
    processor = SourceLengthLimitLogitsProcessor(torch.tensor([1, 3]), eos_token_id=2)
    scores = torch.log_softmax(torch.randn(4, 6, generator=torch.Generator().manual_seed(0)), dim=-1)
    assert torch.equal(processor(torch.zeros(4, 1, dtype=torch.long), scores.clone()), scores)  # prompt only
    out = processor(torch.zeros(4, 2, dtype=torch.long), scores.clone())
    assert torch.equal(out[2:], scores[2:])
    assert torch.equal(out[:2, 2], scores[:2, 2])
    assert torch.isneginf(out[:2, [0, 1, 3, 4, 5]]).all()


def _batched_and_alone(
    model, lengths: list[int], **generate_kwargs
) -> tuple[list[list[int]], list[list[int]]]:
    ids, mask = padded_batch(lengths, seed=5)
    batched = model.generate(input_ids=ids, attention_mask=mask, **generate_kwargs)
    together = [[t for t in row.tolist() if t != PAD] for row in batched]
    alone = []
    for row, n in enumerate(lengths):
        out = model.generate(input_ids=ids[row : row + 1, :n], **generate_kwargs)
        alone.append([t for t in out[0].tolist() if t != PAD])
    return together, alone


@pytest.mark.parametrize("variant", list(deep_nmt_hf.VARIANTS))
def test_every_variant_stops_each_sentence_at_its_own_limit_alone_and_in_a_batch(variant: str) -> None:
    """Beam 4 with the limit in the generation config: each hypothesis holds at most int(n + 2) tokens and then
    </s> (n: the source's tokens with its </s>), the limit binds for some sentence, and a sentence's output is
    the same alone and beside longer ones."""
    model = _limited(variant_model(variant, seed=2))
    lengths = [9, 2, 5, 3]
    together, alone = _batched_and_alone(model, lengths, num_beams=4)
    assert together == alone
    generated = [len(row) for row in together]  # the decoder start is <pad> here, dropped with the padding
    assert all(g <= n + 2 + 1 for g, n in zip(generated, lengths, strict=True))
    assert any(
        g == n + 2 + 1 and row[-1] == EOS for g, n, row in zip(generated, lengths, together, strict=True)
    )


def test_a_call_sets_or_lifts_the_limit() -> None:
    model = variant_model("base", seed=2)
    ids, mask = padded_batch([3], seed=5)
    limited = model.generate(input_ids=ids, attention_mask=mask, num_beams=2, **LIMIT)
    assert limited.shape[1] <= 1 + 3 + 2 + 1
    _limited(model)
    free = model.generate(input_ids=ids, attention_mask=mask, num_beams=2, max_len_a=None, max_len_b=None)
    assert free.shape[1] == 1 + 20  # Transformers' own default: 20 new tokens


# ------------------------------------------------------------------------------------------ through every door
@pytest.fixture(scope="module")
def tokenizer():
    pairs = generate_pairs(300, seed=5)
    return train_tokenizer([s for pair in pairs for s in pair], vocab_size=200, min_frequency=1)


def _model_for(tokenizer, variant: str, seed: int = 1):
    ids = special_token_ids(tokenizer)
    return variant_model(variant, seed=seed, **ids)


LINES = [
    "kol nuto vugat sabe miro kol nuto vugat sabe miro kol .",
    "kol .",
    "nuto vugat sabe .",
    "miro .",
]


@pytest.mark.parametrize("variant", list(deep_nmt_hf.VARIANTS))
def test_translate_gives_each_sentence_its_own_limit(variant: str, tokenizer) -> None:
    """`deep-nmt translate`'s function without a generation-config limit: 2 × source + 10 per sentence, so each
    line translates alone as in the batch (before: 2 × the batch's longest + 10, and a short line beside a long
    one ran on)."""
    model = _model_for(tokenizer, variant)
    together = translate(model, tokenizer, LINES, num_beams=4)
    assert together == [translate(model, tokenizer, [line], num_beams=4)[0] for line in LINES]


def test_deep_nmt_translate_and_the_pipeline_apply_the_saved_limit(
    tmp_path: Path, tokenizer, monkeypatch, capsys
) -> None:
    model = _limited(_model_for(tokenizer, "base"))
    model.generation_config.num_beams = 4
    model.save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "model")
    direct = []
    for line in LINES:
        out = model.generate(**tokenizer([line], return_tensors="pt"))
        assert out.shape[1] <= len(tokenizer(line)["input_ids"]) + 2 + 2
        direct.append(tokenizer.decode(out[0], skip_special_tokens=True).strip())

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join(LINES).encode() + b"\n")))
    assert main(["translate", str(tmp_path / "model"), "--num-beams", "4"]) == 0
    assert capsys.readouterr().out.splitlines() == direct

    translator = pipeline("translation", model=str(tmp_path / "model"))
    assert [translator(line)[0]["translation_text"].strip() for line in LINES] == direct


@pytest.mark.slow
def test_remote_code_applies_the_limit_without_the_package(tmp_path: Path) -> None:
    model = _limited(variant_model("admin", seed=2))
    ids, mask = padded_batch([7, 2, 4], seed=5)
    batch = {"input_ids": ids, "attention_mask": mask}
    direct = model.generate(**batch, num_beams=4)
    name, remote = generate_with_remote_code(model, batch, tmp_path, num_beams=4)
    assert remote == direct.tolist()
    assert direct.shape[1] == 1 + 7 + 2 + 1  # the longest sentence's limit, then </s>
