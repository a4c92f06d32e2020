"""`deep-nmt convert fairseq` with subword-nmt 0.1 codes (no `#version: 0.2` header): applied with 0.1's rules
(model/tokenization_bpe01.py), as fairseq applies them, alone, after Moses and with two vocabularies.

tests/fixtures/fairseq/tokenizers/bpecodes01.json was written by fairseq 0.12.3.1 and subword-nmt 0.3.8
(make_converter_fixtures.py `--only subword-nmt-01`): the headerless copies of the fixtures' codes (bpecodes01,
moses_bpecodes01), fairseq's SubwordNMTBPE pieces, and its hub interface on raw text (`encode` ids, greedy
`translate` text) for postln_shared_args, moses/moses_args (Moses, then BPE) and fairseq_vocabularies/
postln_two_dictionaries (two dictionaries). Comparisons are exact: ids, and greedy translations as text (the model
math is checked elsewhere to 1e-4; these fixtures' greedy argmaxes are far apart).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from fairseq_reference import FIXTURES, MAX_LEN_B, needs_fsmt_fold

from deep_nmt_hf.cli import main
from deep_nmt_hf.publish.fairseq_tokenizer import build_tokenizer, unknown_to_unk

TOKENIZERS = FIXTURES / "tokenizers"
TEXT = json.loads((TOKENIZERS / "bpecodes01.json").read_text(encoding="utf-8"))
CASES = {  # name: (checkpoint, codes, fairseq's hub on it)
    "shared": (FIXTURES / "postln_shared_args.pt", TOKENIZERS / "bpecodes01", TEXT),
    "moses": (FIXTURES / "moses" / "moses_args.pt", TOKENIZERS / "moses_bpecodes01", TEXT["moses"]),
    "two_dictionaries": (
        FIXTURES.parent / "fairseq_vocabularies" / "postln_two_dictionaries.pt",
        TOKENIZERS / "bpecodes01",
        TEXT["two_dictionaries"],
    ),
}


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bpe01")
    out = {}
    for name, (checkpoint, codes, _) in CASES.items():
        out[name] = root / name
        assert main(["convert", "fairseq", str(checkpoint), str(out[name]), "--bpe-codes", str(codes)]) == 0
    return out


def source_vocab_size(folder: Path) -> int:
    return json.loads((folder / "config.json").read_text())["vocab_size"]


def ids_under_02_rules() -> list[list[int]]:
    """The shared fixture's sentences under 0.2 rules (the same codes with the header: a merged BPE model)."""
    symbols = ["<s>", "<pad>", "</s>", "<unk>"]
    symbols += [line.split()[0] for line in (FIXTURES / "dict.src.txt").read_text().splitlines()]
    rules_02 = build_tokenizer(symbols, FIXTURES / "bpecodes")
    return [
        unknown_to_unk(rules_02(s, return_tensors="pt").input_ids[0], len(symbols)).tolist()
        for s in TEXT["sentences"]
    ]


@pytest.mark.parametrize("name", list(CASES))
def test_ids_and_greedy_translations_are_fairseqs(name: str, converted: dict[str, Path]) -> None:
    """fairseq's hub `encode` ids for every sentence (one-letter words, unseen characters, runs of spaces, a tab
    inside a word), its greedy `translate` text from the model's generate + the tokenizer's decode, through
    `pipeline("translation")` and through `deep-nmt translate`'s batch path."""
    from transformers import AutoTokenizer, pipeline

    from deep_nmt_hf.model.modeling_deep_nmt import DeepNMTForConditionalGeneration
    from deep_nmt_hf.training.translation import translate as translate_batch

    text = CASES[name][2]
    folder = converted[name]
    record = json.loads((folder / "conversion.json").read_text())
    assert record["tokenizer"].endswith("subword-nmt 0.1 BPE")
    assert record["bpe_codes"] == CASES[name][1].name
    tokenizer = AutoTokenizer.from_pretrained(folder)
    vocab_size = source_vocab_size(folder)
    for sentence, ids in zip(text["sentences"], text["encoded"], strict=True):
        ours = unknown_to_unk(tokenizer(sentence, return_tensors="pt").input_ids[0], vocab_size)
        assert ours.tolist() == ids, sentence
    if name == "shared":  # not vacuous: 0.2 rules give other ids than fairseq's for most sentences
        differ = [a != b for a, b in zip(ids_under_02_rules(), text["encoded"], strict=True)]
        assert sum(differ) > len(differ) // 2
    model = DeepNMTForConditionalGeneration.from_pretrained(folder)
    for ids, expected in zip(text["encoded"], text["translations"], strict=True):
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=MAX_LEN_B)
        assert tokenizer.decode(out[0], skip_special_tokens=True) == expected
    translate = pipeline("translation", model=str(folder))
    got = [
        translate(s, num_beams=1, max_new_tokens=MAX_LEN_B)[0]["translation_text"] for s in text["sentences"]
    ]
    assert got == text["translations"]
    batch = translate_batch(model, tokenizer, text["sentences"], num_beams=1, max_new_tokens=MAX_LEN_B)
    assert batch == text["translations"]


def test_decode_joins_pieces_as_fairseq(converted: dict[str, Path]) -> None:
    """Decoding fairseq's ids gives fairseq's `decode` text: `(" ".join(pieces) + " ").replace("@@ ", "")
    .rstrip()` of the dictionary's symbols (fairseq/data/encoders/subword_nmt_bpe.py), here for every sentence
    whose pieces the dictionary all holds, the sentence with its whitespace runs made one space."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted["shared"])
    known = [(s, ids) for s, ids in zip(TEXT["sentences"], TEXT["encoded"], strict=True) if 3 not in ids]
    assert known
    for sentence, ids in known:
        assert tokenizer.decode(ids, skip_special_tokens=True) == " ".join(sentence.split())
    assert tokenizer.decode([TEXT["encoded"][0][0]]) == "ka"  # a lone non-final piece: `ka@@ ` → `ka`


def test_save_and_reload_keeps_the_codes(converted: dict[str, Path], tmp_path: Path) -> None:
    """The codes travel as the tokenizer's `subword_nmt_01.codes` file: saved again elsewhere (the original folder gone), the
    tokenizer loads by name with the package imported and gives the same ids; a text target gets the same pieces."""
    from transformers import AutoTokenizer

    from deep_nmt_hf import FairseqBPE01Tokenizer

    shutil.copytree(converted["shared"], tmp_path / "first")
    first = AutoTokenizer.from_pretrained(tmp_path / "first")
    assert type(first) is FairseqBPE01Tokenizer
    codes = (TOKENIZERS / "bpecodes01").read_bytes()
    assert (tmp_path / "first" / "subword_nmt_01.codes").read_bytes() == codes
    first.save_pretrained(tmp_path / "second")
    assert (tmp_path / "second" / "subword_nmt_01.codes").read_bytes() == codes
    shutil.rmtree(tmp_path / "first")
    second = AutoTokenizer.from_pretrained(tmp_path / "second")
    vocab_size = source_vocab_size(converted["shared"])
    for sentence, ids in zip(TEXT["sentences"], TEXT["encoded"], strict=True):
        assert unknown_to_unk(second(sentence, return_tensors="pt").input_ids[0], vocab_size).tolist() == ids
        assert second(text_target=sentence).input_ids == second(sentence).input_ids


@needs_fsmt_fold
def test_folded_model_keeps_the_01_tokenizer(converted: dict[str, Path], tmp_path: Path) -> None:
    """`deep-nmt fold` into FSMT writes the tokenizer with its class file and codes: the folded folder's tokenizer
    gives fairseq's ids and decodes as the converted one. (Its translations are not compared here: the fold's own
    check bounds the logits, and this random model has near-ties that the folded model may break otherwise.)"""
    from transformers import AutoTokenizer

    assert main(["fold", str(converted["shared"]), str(tmp_path / "fsmt")]) == 0
    written = {p.name for p in (tmp_path / "fsmt").iterdir()}
    assert {"tokenization_bpe01.py", "subword_nmt_01.codes"} <= written
    folded = AutoTokenizer.from_pretrained(tmp_path / "fsmt")
    converted_tokenizer = AutoTokenizer.from_pretrained(converted["shared"])
    vocab_size = source_vocab_size(converted["shared"])
    for sentence, ids in zip(TEXT["sentences"], TEXT["encoded"], strict=True):
        assert unknown_to_unk(folded(sentence, return_tensors="pt").input_ids[0], vocab_size).tolist() == ids
        assert folded.decode(ids, skip_special_tokens=True) == converted_tokenizer.decode(
            ids, skip_special_tokens=True
        )


@needs_fsmt_fold
def test_folded_two_vocabulary_model_translates_as_fairseq(
    converted: dict[str, Path], tmp_path: Path
) -> None:
    """Folded into FSMT, whose config's `vocab_size` is the TARGET's (`src_vocab_size` the source's): the pipeline
    maps only source ids past the source vocabulary to `<unk>` (model/translation_pipeline.py `source_vocab_size`),
    so raw text still translates as fairseq's hub, there and through `deep-nmt translate`'s batch path."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, pipeline

    from deep_nmt_hf.training.translation import translate as translate_batch

    text = CASES["two_dictionaries"][2]
    assert main(["fold", str(converted["two_dictionaries"]), str(tmp_path / "fsmt")]) == 0
    model = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "fsmt")
    assert model.config.vocab_size < model.config.src_vocab_size  # the case: target smaller than source
    translate = pipeline("translation", model=str(tmp_path / "fsmt"))
    got = [
        translate(s, num_beams=1, max_new_tokens=MAX_LEN_B)[0]["translation_text"] for s in text["sentences"]
    ]
    assert got == text["translations"]
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "fsmt")
    batch = translate_batch(model, tokenizer, text["sentences"], num_beams=1, max_new_tokens=MAX_LEN_B)
    assert batch == text["translations"]


def test_two_vocabularies_decode_with_the_target_and_apply_bpe_to_targets(converted: dict[str, Path]) -> None:
    """PairedTokenizerFast with 0.1 codes: the source side's ids are fairseq's (above), labels (`text_target`) get
    the same 0.1 pieces looked up in the target dictionary, and decoding uses the target one."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    from deep_nmt_hf import PairedTokenizerFast

    folder = converted["two_dictionaries"]
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert type(tokenizer) is PairedTokenizerFast and tokenizer.bpe01_enabled()
    target = PreTrainedTokenizerFast.from_pretrained(folder / "target_tokenizer")
    sentence = TEXT["sentences"][0]
    labels = tokenizer(sentence, text_target=sentence)["labels"]
    assert labels == target(tokenizer.bpe01_encode(sentence)).input_ids
    assert tokenizer.decode(labels) == target.decode(labels)


def test_bad_codes_line_is_refused_before_anything_is_written(tmp_path: Path, capsys) -> None:
    from fairseq_reference import assert_refused

    codes = tmp_path / "codes"
    codes.write_text("k a\nf u</w>\nthree fields here\n", encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        ["convert", "fairseq", str(FIXTURES / "postln_shared_args.pt"), str(out), "--bpe-codes", str(codes)]
    )
    assert_refused(code, capsys.readouterr().err, out, "codes:3", "'A B'")


@pytest.mark.slow
def test_loads_as_remote_code_without_the_package(converted: dict[str, Path], tmp_path: Path) -> None:
    """The tokenizer class and its codes ship in the folder: `trust_remote_code=True` alone (no deep_nmt_hf) gives
    fairseq's ids and its decoded text, after Moses too."""
    from fresh_process import run_without_package
    from transformers import AutoTokenizer

    for name in ("shared", "moses"):
        shutil.copytree(converted[name], tmp_path / name)
    code = f"""
    import json
    from transformers import AutoTokenizer
    out = {{}}
    for name, sentences in {{"shared": {TEXT["sentences"]!r}, "moses": {TEXT["moses"]["sentences"]!r}}}.items():
        tokenizer = AutoTokenizer.from_pretrained(name, trust_remote_code=True)
        ids = [tokenizer(s).input_ids for s in sentences]
        decoded = [tokenizer.decode(i, skip_special_tokens=True) for i in ids]
        out[name] = {{"class": type(tokenizer).__name__, "ids": ids, "decoded": decoded}}
    print(json.dumps(out))
    """
    got = run_without_package(code, tmp_path)
    for name, text in (("shared", TEXT), ("moses", TEXT["moses"])):
        assert got[name]["class"] == "FairseqBPE01Tokenizer"
        vocab_size = source_vocab_size(converted[name])
        assert [[3 if i >= vocab_size else i for i in ids] for ids in got[name]["ids"]] == text["encoded"]
        here = AutoTokenizer.from_pretrained(converted[name])
        assert got[name]["decoded"] == [here.decode(i, skip_special_tokens=True) for i in got[name]["ids"]]
    assert got["shared"]["decoded"][4] == "de minumi"  # fairseq's decode of its own ids (no <unk> among them)
    # then Moses's French detokeniser (a space before "?")
    assert got["moses"]["decoded"][6] == "kwe ela no boset ?"
