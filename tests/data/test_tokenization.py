"""Tests for deep_nmt_hf.data.tokenization: Marian special-token layout, round trips, errors."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from deep_nmt_hf.data.tokenization import (
    EOS_TOKEN,
    PAD_TOKEN,
    UNK_TOKEN,
    check_special_token_layout,
    save_tokenizer,
    special_token_ids,
    train_tokenizer,
)

SOURCE_WORDS = (
    "the a one cat dog bird runs sits sleeps on under near red green small big old house tree".split()
)
TARGET_WORDS = (
    "der die das eine Katze Hund Vogel läuft sitzt schläft auf unter neben rot grün klein groß".split()
)


def make_corpus(n: int = 300, seed: int = 0) -> tuple[list[str], list[str]]:
    """A tiny synthetic parallel corpus built from the word lists above."""
    rng = random.Random(seed)
    src = [" ".join(rng.choice(SOURCE_WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]
    tgt = [" ".join(rng.choice(TARGET_WORDS) for _ in range(rng.randint(3, 9))) for _ in range(n)]
    return src, tgt


@pytest.fixture(scope="module")
def corpus() -> tuple[list[str], list[str]]:
    return make_corpus()


@pytest.fixture(scope="module")
def tokenizer(corpus: tuple[list[str], list[str]]) -> PreTrainedTokenizerFast:
    src, tgt = corpus
    return train_tokenizer(src + tgt, vocab_size=120, min_frequency=2, model_max_length=64)


def test_special_token_layout(tokenizer: PreTrainedTokenizerFast) -> None:
    size = len(tokenizer)
    assert size == 120
    assert tokenizer.convert_tokens_to_ids(EOS_TOKEN) == 0
    assert tokenizer.convert_tokens_to_ids(UNK_TOKEN) == 1
    assert tokenizer.convert_tokens_to_ids(PAD_TOKEN) == size - 1
    assert tokenizer.eos_token == EOS_TOKEN and tokenizer.unk_token == UNK_TOKEN
    assert tokenizer.pad_token == PAD_TOKEN
    assert tokenizer.bos_token is None
    assert tokenizer.padding_side == "right"
    assert tokenizer.model_max_length == 64
    assert special_token_ids(tokenizer) == {
        "eos_token_id": 0,
        "unk_token_id": 1,
        "pad_token_id": size - 1,
        "decoder_start_token_id": size - 1,
        "vocab_size": size,
    }
    check_special_token_layout(tokenizer)


def test_eos_appended_to_source_and_target(tokenizer: PreTrainedTokenizerFast) -> None:
    enc = tokenizer(["the cat sits"], text_target=["die Katze sitzt"])
    assert enc["input_ids"][0][-1] == 0
    assert enc["labels"][0][-1] == 0
    # exactly one eos each, no BOS in front
    assert enc["input_ids"][0].count(0) == 1 and enc["labels"][0].count(0) == 1
    assert enc["input_ids"][0][0] != len(tokenizer) - 1
    pair = tokenizer("the cat", "a dog")["input_ids"]
    assert pair.count(0) == 2 and pair[-1] == 0


def test_batch_padding_uses_last_id(tokenizer: PreTrainedTokenizerFast) -> None:
    pad = len(tokenizer) - 1
    enc = tokenizer(["the cat", "the big old dog sleeps under the green tree"], padding=True)
    short, long = enc["input_ids"]
    assert len(short) == len(long)
    n_real = sum(enc["attention_mask"][0])
    assert short[n_real - 1] == 0  # eos before the padding
    assert short[n_real:] == [pad] * (len(short) - n_real)
    assert pad not in long


def test_decode_round_trip(tokenizer: PreTrainedTokenizerFast, corpus: tuple[list[str], list[str]]) -> None:
    src, tgt = corpus
    sentences = src[:20] + tgt[:20] + ["groß grün Vogel", "near the old house"]
    for sentence in sentences:
        ids = tokenizer(sentence)["input_ids"]
        assert 1 not in ids, f"unexpected <unk> in {sentence!r}"
        assert tokenizer.decode(ids, skip_special_tokens=True) == sentence
    batch = tokenizer(sentences, padding=True)["input_ids"]
    assert tokenizer.batch_decode(batch, skip_special_tokens=True) == sentences


def test_nfkc_normalisation(tokenizer: PreTrainedTokenizerFast) -> None:
    # full-width letters are NFKC-equivalent to ASCII ones
    assert tokenizer("ｃａｔ")["input_ids"] == tokenizer("cat")["input_ids"]


def test_save_and_autotokenizer_reload(tokenizer: PreTrainedTokenizerFast, tmp_path) -> None:
    save_tokenizer(tokenizer, tmp_path / "tok")
    reloaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    sentences = ["the cat sits on the mat", "die Katze schläft", "a dog"]
    targets = ["der Hund", "ein Vogel läuft", "das Haus"]
    before = tokenizer(sentences, text_target=targets, padding=True)
    after = reloaded(sentences, text_target=targets, padding=True)
    assert before["input_ids"] == after["input_ids"]
    assert before["labels"] == after["labels"]
    assert before["attention_mask"] == after["attention_mask"]
    assert reloaded.batch_decode(after["input_ids"], skip_special_tokens=True) == tokenizer.batch_decode(
        before["input_ids"], skip_special_tokens=True
    )
    assert special_token_ids(reloaded) == special_token_ids(tokenizer)
    assert reloaded.padding_side == "right" and reloaded.model_max_length == 64


@pytest.mark.parametrize("texts", [[], ["", "   ", "\n"]])
def test_empty_texts_raise(texts: list[str]) -> None:
    with pytest.raises(ValueError, match="empty"):
        train_tokenizer(texts, vocab_size=100)


def test_single_string_rejected() -> None:
    with pytest.raises(TypeError, match="single string"):
        train_tokenizer("the cat sits", vocab_size=100)


@pytest.mark.parametrize("vocab_size", [0, 3, 10])
def test_too_small_vocab_raises(vocab_size: int) -> None:
    src, tgt = make_corpus(50)
    with pytest.raises(ValueError, match=f"vocab_size={vocab_size} is too small"):
        train_tokenizer(src + tgt, vocab_size=vocab_size)


def test_alphabet_sized_vocab_is_accepted() -> None:
    texts = ["ab ba", "ab ab"] * 5
    # alphabet: a, b, ▁  -> 2 trained specials + 3 characters + <pad>
    tok = train_tokenizer(texts, vocab_size=6)
    assert len(tok) == 6
    check_special_token_layout(tok)
    with pytest.raises(ValueError, match="need vocab_size >= 6"):
        train_tokenizer(texts, vocab_size=5)


def _wrap(tokenizer: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=EOS_TOKEN, unk_token=UNK_TOKEN, pad_token=PAD_TOKEN
    )


def _raw_tokenizer(special_tokens: list[str]) -> Tokenizer:
    raw = Tokenizer(models.BPE(unk_token=UNK_TOKEN))
    raw.pre_tokenizer = pre_tokenizers.Metaspace()
    raw.decoder = decoders.Metaspace()
    trainer = trainers.BpeTrainer(vocab_size=60, special_tokens=special_tokens, show_progress=False)
    raw.train_from_iterator(make_corpus(50)[0], trainer=trainer)
    return raw


def test_check_layout_rejects_pad_first() -> None:
    wrong = _wrap(_raw_tokenizer([PAD_TOKEN, EOS_TOKEN, UNK_TOKEN]))
    with pytest.raises(ValueError) as info:
        check_special_token_layout(wrong)
    message = str(info.value)
    assert "eos_token_id=1 but must be 0" in message
    assert "unk_token_id=2 but must be 1" in message
    assert "pad_token_id=0 but must be" in message
    with pytest.raises(ValueError, match="Marian special-token layout"):
        special_token_ids(wrong)


def test_check_layout_rejects_missing_pad() -> None:
    raw = _raw_tokenizer([EOS_TOKEN, UNK_TOKEN])
    wrong = PreTrainedTokenizerFast(tokenizer_object=raw, eos_token=EOS_TOKEN, unk_token=UNK_TOKEN)
    with pytest.raises(ValueError, match="pad_token_id is not set"):
        check_special_token_layout(wrong)


def test_check_layout_rejects_token_added_after_pad() -> None:
    raw = _raw_tokenizer([EOS_TOKEN, UNK_TOKEN])
    raw.add_special_tokens([PAD_TOKEN, "<extra>"])
    with pytest.raises(ValueError, match="pad_token_id=.* but must be"):
        check_special_token_layout(_wrap(raw))
