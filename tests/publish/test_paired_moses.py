"""Moses with two vocabularies (issue #56 items 2 and 4): a fairseq checkpoint converted with `--moses` and separate
dictionaries, and a zero model converted with `--moses en de`, translate raw text as the original preprocessing
did: sacremoses' tokenizer (the source language, fairseq's aggressive dash splits and escaping) before the source
vocabulary, the target language's detokenizer after the target vocabulary's decode (`PairedTokenizerFast` with
model/tokenization_moses.py's `MosesMixin`). Fixtures: tests/fixtures/fairseq_vocabularies (written by fairseq) and
tests/fixtures/zero/fuse_separate (written by zero)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from fresh_process import translate_folders_without_package
from sacremoses import MosesDetokenizer, MosesTokenizer
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedTokenizerFast, pipeline

from deep_nmt_hf import PairedTokenizerFast
from deep_nmt_hf.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
ZERO = FIXTURES / "zero" / "fuse_separate"
FAIRSEQ = FIXTURES / "fairseq_vocabularies"
MAX_NEW = 8
# punctuation, a dash and an ampersand: Moses splits, escapes (&amp;) and dash-splits (@-@) them
RAW = ["sa-ka, mirizo & fu.", 'de "pode" sa ka!']


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("paired_moses")
    argv = {
        "zero": ["convert", "zero", str(ZERO), str(root / "zero"), "--bpe-codes", str(ZERO / "bpe.codes")],
        "fairseq": ["convert", "fairseq", str(FAIRSEQ / "postln_two_dictionaries.pt"), str(root / "fairseq")],
    }
    argv["zero"] += ["--moses", "en", "de"]
    argv["fairseq"] += ["--bpe-codes", str(FAIRSEQ / "bpecodes"), "--moses"]
    for args in argv.values():
        assert main(args) == 0
    return {name: root / name for name in argv}


def languages(folder: Path) -> tuple[str, str]:
    moses = json.loads((folder / "conversion.json").read_text())["moses"]
    return moses["moses_source_lang"], moses["moses_target_lang"]


def moses_tokenized(folder: Path, sentence: str) -> str:
    """fairseq's MosesTokenizer.encode (moses_tokenizer.py:40-46) with its defaults."""
    return MosesTokenizer(lang=languages(folder)[0]).tokenize(
        sentence, aggressive_dash_splits=True, return_str=True, escape=True
    )


def expected(folder: Path, sentence: str) -> tuple[list[int], str]:
    """(the source vocabulary's ids of the Moses-tokenised sentence, generate's greedy translation decoded by the
    target vocabulary and Moses-detokenised with the target language)."""
    source = PreTrainedTokenizerFast.from_pretrained(folder)
    target = PreTrainedTokenizerFast.from_pretrained(folder / "target_tokenizer")
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    ids = source(moses_tokenized(folder, sentence)).input_ids
    feed = [i if i < model.config.vocab_size else source.unk_token_id for i in ids]
    with torch.no_grad():
        generated = model.generate(torch.tensor([feed]), num_beams=1, max_new_tokens=MAX_NEW)[0]
    text = target.decode(generated, skip_special_tokens=True)
    return ids, MosesDetokenizer(lang=languages(folder)[1]).detokenize(text.split())


@pytest.mark.parametrize("name", ["zero", "fairseq"])
def test_moses_around_two_vocabularies(name: str, converted: dict[str, Path]) -> None:
    folder = converted[name]
    # zero: the languages given; fairseq: the task's (fairseq's moses_tokenizer.py defaults to them)
    assert languages(folder) == (("en", "de") if name == "zero" else ("src", "tgt"))
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert type(tokenizer) is PairedTokenizerFast and tokenizer.moses_enabled()
    source = PreTrainedTokenizerFast.from_pretrained(folder)
    target = PreTrainedTokenizerFast.from_pretrained(folder / "target_tokenizer")
    translate = pipeline("translation", model=str(folder), trust_remote_code=True)
    for sentence in RAW:
        ids, text = expected(folder, sentence)
        assert tokenizer(sentence).input_ids == ids != source(sentence).input_ids  # Moses changed the ids
        assert translate(sentence, num_beams=1, max_new_tokens=MAX_NEW)[0]["translation_text"] == text
    target_ids = target("sa &amp; fu @-@ ka .").input_ids
    detok = MosesDetokenizer(lang=languages(folder)[1])
    decoded = detok.detokenize(target.decode(target_ids).split())
    assert tokenizer.decode(target_ids) == decoded and tokenizer.batch_decode([target_ids]) == [decoded]
    # text_target: the target language's Moses rules before the target vocabulary
    tokenized = MosesTokenizer(lang=languages(folder)[1]).tokenize(
        RAW[0], aggressive_dash_splits=True, return_str=True, escape=True
    )
    assert tokenizer(text_target=RAW[0]).input_ids == target(tokenized).input_ids != target(RAW[0]).input_ids


def test_round_trip_keeps_the_moses_options(converted: dict[str, Path], tmp_path: Path) -> None:
    folder = converted["zero"]
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    tokenizer.save_pretrained(tmp_path)
    shipped = {"tokenization_paired.py", "tokenization_moses.py", "tokenization_bpe01.py"}
    assert {p.name for p in tmp_path.glob("*.py")} == shipped
    again = AutoTokenizer.from_pretrained(tmp_path, trust_remote_code=True)
    assert again.moses_options() == tokenizer.moses_options()
    assert again.moses_options()["moses_target_lang"] == "de"
    assert again(RAW).input_ids == tokenizer(RAW).input_ids == [expected(folder, s)[0] for s in RAW]


def test_moses_no_escape(tmp_path: Path) -> None:
    out = tmp_path / "zero"
    args = ["convert", "zero", str(ZERO), str(out), "--bpe-codes", str(ZERO / "bpe.codes")]
    assert main([*args, "--moses", "en", "de", "--moses-no-escape"]) == 0
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.moses_tokenize("sa & fu") == "sa & fu"
    assert main([*args[:3], str(tmp_path / "other"), "--moses", "en", "x-1"]) == 2
    assert not (tmp_path / "other").exists()


@pytest.mark.slow
def test_a_fresh_process_without_the_package_translates_the_same(
    converted: dict[str, Path], tmp_path: Path
) -> None:
    fresh = translate_folders_without_package(converted, dict.fromkeys(converted, RAW), MAX_NEW, tmp_path)
    for name, folder in converted.items():
        wanted = [expected(folder, s) for s in RAW]
        assert fresh[name]["class"] == "PairedTokenizerFast"
        assert fresh[name]["ids"] == [ids for ids, _ in wanted]
        assert fresh[name]["texts"] == [text for _, text in wanted]
