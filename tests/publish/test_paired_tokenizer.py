"""Two vocabularies, one tokenizer (issue #56 item 2): a model converted with separate source and target
vocabularies (`decoder_vocab_size`) translates raw text through ``pipeline("translation", model=DIR,
trust_remote_code=True)`` as its own generate + the target vocabulary's decode do, with the package and in a fresh
process without it. `PairedTokenizerFast` (model/tokenization_paired.py) encodes with the source vocabulary and
decodes with the target one; the fixtures are zero's (tests/fixtures/zero/fuse_separate: 30 and 29 entries in
different orders) and fairseq's (tests/fixtures/fairseq_vocabularies: 28 and 16 symbols, written by fairseq)."""

from __future__ import annotations

import io
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from fairseq_reference import needs_fsmt_fold
from fresh_process import translate_folders_without_package
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedTokenizerFast, pipeline

from deep_nmt_hf import PairedTokenizerFast
from deep_nmt_hf.cli import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
ZERO = FIXTURES / "zero" / "fuse_separate"
FAIRSEQ = FIXTURES / "fairseq_vocabularies"
MAX_NEW = 8


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("paired")
    argv = {
        "zero": ["convert", "zero", str(ZERO), str(root / "zero"), "--bpe-codes", str(ZERO / "bpe.codes")],
        "fairseq": ["convert", "fairseq", str(FAIRSEQ / "postln_two_dictionaries.pt"), str(root / "fairseq")],
    }
    argv["fairseq"] += ["--bpe-codes", str(FAIRSEQ / "bpecodes")]
    for args in argv.values():
        assert main(args) == 0
    return {name: root / name for name in argv}


def sides(folder: Path) -> tuple[PreTrainedTokenizerFast, PreTrainedTokenizerFast]:
    """The folder's two vocabularies as plain fast tokenizers: the source at the top, the target in its folder."""
    return PreTrainedTokenizerFast.from_pretrained(folder), PreTrainedTokenizerFast.from_pretrained(
        folder / "target_tokenizer"
    )


def raw_text(name: str, folder: Path) -> list[str]:
    if name == "zero":
        return json.loads((ZERO / "reference.json").read_text())["tokenizer"]["raw"]
    source, _ = sides(folder)  # fairseq's reference sources, as raw text
    reference = json.loads((FAIRSEQ / "postln_two_dictionaries.json").read_text())
    return [source.decode(ids, skip_special_tokens=True) for ids in reference["sources"]]


def expected_translations(folder: Path, raw: list[str], decode_with: str = "target") -> list[str]:
    """Greedy translations by the model's own generate on the source's ids, decoded by one side's vocabulary."""
    source, target = sides(folder)
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    out = []
    for sentence in raw:
        ids = [i if i < model.config.vocab_size else source.unk_token_id for i in source(sentence).input_ids]
        with torch.no_grad():
            generated = model.generate(torch.tensor([ids]), num_beams=1, max_new_tokens=MAX_NEW)[0]
        side = target if decode_with == "target" else source
        out.append(side.decode(generated, skip_special_tokens=True).strip())
    return out


def translate_command(folder: Path, raw: list[str], monkeypatch, capsys) -> list[str]:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(("\n".join(raw) + "\n").encode())))
    assert main(["translate", str(folder), "--num-beams", "1", "--max-new-tokens", str(MAX_NEW)]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.mark.parametrize("name", ["zero", "fairseq"])
def test_pipeline_translates_raw_text_as_generate_and_the_target_vocabulary(
    name: str, converted: dict[str, Path], monkeypatch, capsys
) -> None:
    folder = converted[name]
    raw = raw_text(name, folder)
    translate = pipeline("translation", model=str(folder), trust_remote_code=True)
    texts = [
        r[0]["translation_text"] for r in (translate(s, num_beams=1, max_new_tokens=MAX_NEW) for s in raw)
    ]
    expected = expected_translations(folder, raw)
    assert texts == expected and all(texts)
    assert translate_command(folder, raw, monkeypatch, capsys) == texts
    if name == "zero":  # zero's vocabularies differ in order: the source's decode would give other words
        assert texts != expected_translations(folder, raw, decode_with="source")
        # a folder of the first layout (source_tokenizer/ + target_tokenizer/, nothing at the top) translates alike
        old = folder.parent / "zero_first_layout"
        shutil.copytree(folder, old)
        (old / "source_tokenizer").mkdir()
        for file in ("tokenizer.json", "tokenizer_config.json"):
            (old / file).rename(old / "source_tokenizer" / file)
        assert translate_command(old, raw, monkeypatch, capsys) == texts


@pytest.mark.parametrize("name", ["zero", "fairseq"])
def test_encodes_with_the_source_and_decodes_with_the_target(name: str, converted: dict[str, Path]) -> None:
    folder = converted[name]
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    source, target = sides(folder)
    assert type(tokenizer).__name__ == "PairedTokenizerFast" and len(tokenizer) == len(source)
    # with the package imported its own class loads, no remote code needed (deep_nmt_hf/__init__.py)
    assert type(AutoTokenizer.from_pretrained(folder)) is PairedTokenizerFast
    for sentence in raw_text(name, folder):
        assert tokenizer(sentence).input_ids == source(sentence).input_ids
    if name == "zero":  # zero's own ids of subword-nmt's segmentation (<unk> = 1 past the model's vocabulary)
        reference = json.loads((ZERO / "reference.json").read_text())["tokenizer"]
        ours = [[i if i < 30 else 1 for i in tokenizer(s).input_ids] for s in reference["raw"]]
        assert ours == reference["ids"]
    ids = list(range(3, min(len(source), len(target))))
    assert tokenizer.convert_ids_to_tokens(ids) == target.convert_ids_to_tokens(ids)
    assert target.convert_ids_to_tokens(ids) != source.convert_ids_to_tokens(ids)  # the check can tell
    assert tokenizer.decode(ids) == target.decode(ids) != source.decode(ids)
    assert tokenizer.batch_decode([ids, ids[:3]]) == target.batch_decode([ids, ids[:3]])
    words = [w for w in target.convert_ids_to_tokens(ids) if w.isalpha()]
    encoded = tokenizer("a", text_target=" ".join(words))
    assert encoded["labels"] == target(" ".join(words)).input_ids != source(" ".join(words)).input_ids
    assert tokenizer(text_target=words[0]).input_ids == target(words[0]).input_ids


def test_save_and_load_round_trip(converted: dict[str, Path], tmp_path: Path) -> None:
    folder = converted["zero"]
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    tokenizer.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["auto_map"]["AutoTokenizer"] == [None, "tokenization_paired.PairedTokenizerFast"]
    assert (tmp_path / "tokenization_paired.py").is_file() and (tmp_path / "target_tokenizer").is_dir()
    again = AutoTokenizer.from_pretrained(tmp_path, trust_remote_code=True)
    raw = raw_text("zero", folder)
    assert again(raw).input_ids == tokenizer(raw).input_ids
    ids = list(range(len(again.target_tokenizer)))
    assert again.decode(ids) == tokenizer.decode(ids) and len(again.target_tokenizer) != len(again)


@pytest.mark.slow
def test_a_fresh_process_without_the_package_translates_the_same(
    converted: dict[str, Path], tmp_path: Path
) -> None:
    raw = {name: raw_text(name, folder) for name, folder in converted.items()}
    fresh = translate_folders_without_package(converted, raw, MAX_NEW, tmp_path)
    for name, folder in converted.items():
        source, _ = sides(folder)
        assert fresh[name]["class"] == "PairedTokenizerFast"
        assert fresh[name]["ids"] == source(raw[name]).input_ids
        assert fresh[name]["texts"] == expected_translations(folder, raw[name])


@needs_fsmt_fold
def test_a_fold_keeps_the_paired_tokenizer(converted: dict[str, Path], tmp_path: Path) -> None:
    """`deep-nmt fold` of the two-dictionary fairseq model (into FSMT) carries both vocabularies: the stock model
    translates raw text through the pipeline as the converted one does."""
    from deep_nmt_hf.publish.folding import fold_directory

    folder = converted["fairseq"]
    fold_directory(folder, tmp_path / "folded")
    assert (tmp_path / "folded" / "target_tokenizer").is_dir()
    raw = raw_text("fairseq", folder)
    texts = {}
    for name, where in (("converted", folder), ("folded", tmp_path / "folded")):
        translate = pipeline("translation", model=str(where), trust_remote_code=True)
        texts[name] = [translate(s, num_beams=1, max_new_tokens=MAX_NEW)[0]["translation_text"] for s in raw]
    assert type(translate.model).__name__ == "FSMTForConditionalGeneration"
    assert texts["folded"] == texts["converted"] == expected_translations(folder, raw)
