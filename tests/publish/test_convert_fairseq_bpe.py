"""`deep-nmt convert fairseq` and the BPEs fairseq ships beyond subword-nmt 0.2 and sentencepiece: fastBPE and GPT-2's
byte-level BPE reproduced, the others refused by name before anything is written (subword-nmt 0.1 codes:
test_convert_fairseq_bpe01.py).

tests/fixtures/fairseq/tokenizers/ was written by fairseq 0.12.3.1 (make_converter_fixtures.py `--only tokenizers`):
fastBPE codes (bpecodes in fastBPE's `A B COUNT` format) with fairseq's hub interface on the postln_shared_args
checkpoint; a `--bpe gpt2` checkpoint over a tiny encoder.json / vocab.bpe learnt by the generator on our synthetic
text, its dictionary of GPT-2 ids counted by fairseq. Each
comparison is of token ids (exact) and of greedy translations (text, exact: the model math is checked elsewhere to
1e-4 and greedy argmaxes of these fixtures are far apart).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
import torch
from fairseq_reference import FIXTURES, MAX_LEN_B, assert_refused

from deep_nmt_hf.cli import main
from deep_nmt_hf.model.modeling_deep_nmt import DeepNMTForConditionalGeneration
from deep_nmt_hf.publish.fairseq_tokenizer import unknown_to_unk

TOKENIZERS = FIXTURES / "tokenizers"
GPT2 = TOKENIZERS / "gpt2"


def load_raw(path: Path) -> dict:
    with torch.serialization.safe_globals([argparse.Namespace]):
        return torch.load(path, weights_only=True)


def with_bpe(name: str, folder: Path) -> Path:
    """postln_shared_args.pt as a run with `--bpe NAME` would have saved it, beside its dictionaries."""
    raw = load_raw(FIXTURES / "postln_shared_args.pt")
    raw["args"].bpe = name
    torch.save(raw, folder / "model.pt")
    for dictionary in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(FIXTURES / dictionary, folder / dictionary)
    return folder / "model.pt"


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def assert_reproduces(folder: Path, text: dict, vocab_size: int) -> None:
    """fairseq's hub `encode` ids, and its greedy `translate` text: exactly from the tokenizer's decode of the
    model's greedy output, and through `pipeline("translation")`, which strips the ends of what it prints (fairseq
    strips them for subword-nmt and sentencepiece, not for GPT-2's byte-level BPE, whose pieces carry their
    spaces)."""
    from transformers import AutoTokenizer, pipeline

    tokenizer = AutoTokenizer.from_pretrained(folder)
    for sentence, ids in zip(text["sentences"], text["encoded"], strict=True):
        ours = unknown_to_unk(tokenizer(sentence, return_tensors="pt").input_ids[0], vocab_size)
        assert ours.tolist() == ids, sentence
    model = DeepNMTForConditionalGeneration.from_pretrained(folder)
    translate = pipeline("translation", model=str(folder))
    for sentence, ids, expected in zip(text["sentences"], text["encoded"], text["translations"], strict=True):
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=MAX_LEN_B)
        assert tokenizer.decode(out[0], skip_special_tokens=True) == expected, sentence
        got = translate(sentence, num_beams=1, max_new_tokens=MAX_LEN_B)[0]["translation_text"]
        assert got == expected.strip(), sentence


def test_fastbpe_codes_reproduce_fairseq(tmp_path: Path) -> None:
    text = json.loads((TOKENIZERS / "fastbpe.json").read_text())
    out = tmp_path / "out"
    argv = ["convert", "fairseq", str(with_bpe("fastbpe", tmp_path)), str(out)]
    assert main(argv + ["--bpe-codes", str(TOKENIZERS / "fastbpe.codes")]) == 0
    record = json.loads((out / "conversion.json").read_text())
    assert record["tokenizer"] == "fairseq dictionary ids + fastBPE BPE"
    assert_reproduces(out, text, vocab_size=28)


def test_fastbpe_codes_for_a_subword_nmt_checkpoint_are_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["convert", "fairseq", str(with_bpe("subword_nmt", tmp_path)), str(out)]
    code, err = run_cli(argv + ["--bpe-codes", str(TOKENIZERS / "fastbpe.codes")], capsys)
    assert_refused(code, err, out, "fastBPE", "bpe='subword_nmt'")


@pytest.mark.parametrize(
    "name", ["hf_byte_bpe", "bytes", "byte_bpe", "bert", "characters", "my_user_dir_bpe"]
)
def test_bpe_the_tokenizer_cannot_reproduce_is_refused_by_name(tmp_path: Path, capsys, name: str) -> None:
    out = tmp_path / "out"
    code, err = run_cli(["convert", "fairseq", str(with_bpe(name, tmp_path)), str(out)], capsys)
    assert_refused(code, err, out, f"bpe={name!r}", "cannot reproduce")


def test_gpt2_byte_level_bpe_reproduces_fairseq(tmp_path: Path) -> None:
    text = json.loads((GPT2 / "gpt2_args.json").read_text(encoding="utf-8"))
    assert any(3 in ids for ids in text["encoded"])  # the fixture exercises GPT-2 ids the dictionary lacks
    out = tmp_path / "out"
    argv = ["convert", "fairseq", str(GPT2 / "gpt2_args.pt"), str(out)]
    assert main(argv + ["--gpt2-bpe", str(GPT2 / "encoder.json"), str(GPT2 / "vocab.bpe")]) == 0
    record = json.loads((out / "conversion.json").read_text())
    assert record["tokenizer"] == "fairseq dictionary ids + GPT-2 byte-level BPE"
    vocab_size = 4 + len((GPT2 / "dict.src.txt").read_text().splitlines())
    assert_reproduces(out, text, vocab_size)


def test_gpt2_checkpoint_without_its_files_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, err = run_cli(["convert", "fairseq", str(GPT2 / "gpt2_args.pt"), str(out)], capsys)
    assert_refused(code, err, out, "bpe='gpt2'", "--gpt2-bpe")
