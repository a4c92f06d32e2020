"""`deep-nmt convert fairseq --sentencepiece-model`: a checkpoint preprocessed with sentencepiece, against fairseq.

The fixtures were written by fairseq 0.12.3.1 and sentencepiece themselves (tests/fixtures/make_converter_fixtures.py,
`spm_references`): two tiny sentencepiece models (unigram, BPE) learnt on the project's synthetic corpus with a
custom normalisation table (upper case → lower case, the ideographic space and the full-width "!" → ASCII),
fairseq dictionaries counting the pieces of part of that corpus (so some pieces are missing: fairseq reads them as
<unk>), a tiny post-LN checkpoint whose args say `--bpe sentencepiece`, and what fairseq's hub interface
(`bpe="sentencepiece"`) made of raw sentences: the pieces, the ids, the greedy translation's text.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
import torch
from fairseq_reference import FIXTURES, MANIFEST, MAX_LEN_B, assert_refused, check_against_fairseq, reference

from deep_nmt_hf.cli import main
from deep_nmt_hf.model.modeling_deep_nmt import DeepNMTForConditionalGeneration
from deep_nmt_hf.publish.convert_fairseq import read_dictionary
from deep_nmt_hf.publish.fairseq_tokenizer import build_tokenizer, unknown_to_unk

SPM = MANIFEST["sentencepiece"]
NAME = "spm_unigram_args"
CHECKPOINT = FIXTURES / f"{NAME}.pt"
SPM_MODEL = FIXTURES / SPM[NAME]["sentencepiece_model"]


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("spm") / "converted"
    assert (
        main(["convert", "fairseq", str(CHECKPOINT), str(out), "--sentencepiece-model", str(SPM_MODEL)]) == 0
    )
    return out


def test_sentencepiece_checkpoint_scores_as_fairseq(converted: Path) -> None:
    """Log-probs within 1e-4, greedy identical, fairseq's beams rescoring to its scores, after save / load."""
    model = DeepNMTForConditionalGeneration.from_pretrained(converted).eval()
    check_against_fairseq(model, reference(NAME))
    provenance = json.loads((converted / "conversion.json").read_text())
    assert provenance["sentencepiece_model"] == SPM_MODEL.name
    assert provenance["tokenizer"] == "fairseq dictionary ids + sentencepiece"


def test_tokenizer_gives_fairseqs_pieces_and_ids(converted: Path) -> None:
    """Raw text (upper case, the ideographic space, tabs, runs of spaces, unknown characters, pieces the dictionary
    lacks) becomes fairseq's `▁` pieces and dictionary ids, `</s>` appended."""
    from transformers import AutoTokenizer

    text = reference(NAME)["text"]
    tokenizer = AutoTokenizer.from_pretrained(converted)
    vocab_size = json.loads((converted / "config.json").read_text())["vocab_size"]
    assert 3 in [i for ids in text["encoded"] for i in ids]  # the fixture holds fairseq's <unk>
    for sentence, pieces, ids in zip(text["sentences"], text["pieces"], text["encoded"], strict=True):
        encoded = tokenizer(sentence, return_tensors="pt").input_ids
        assert unknown_to_unk(encoded, vocab_size)[0].tolist() == ids, sentence
        tokens = tokenizer.convert_ids_to_tokens(encoded[0].tolist())
        # the pieces themselves: fairseq's, but for those it reads as <unk>
        known = [(p, t) for p, t, i in zip([*pieces, "</s>"], tokens, ids, strict=True) if i != 3]
        assert all(p == t for p, t in known), known


def test_pipeline_translates_raw_text_as_fairseqs_hub(converted: Path) -> None:
    """`pipeline("translation")` and `deep-nmt translate`'s batch path give fairseq's detokenised text."""
    from transformers import AutoTokenizer, pipeline

    from deep_nmt_hf.training.translation import translate as translate_batch

    text = reference(NAME)["text"]
    translate = pipeline("translation", model=str(converted))
    got = [
        translate(s, num_beams=1, max_new_tokens=MAX_LEN_B)[0]["translation_text"] for s in text["sentences"]
    ]
    assert got == text["translations"]
    assert any(" " in t for t in got) and any(
        not p.startswith("▁") for p in text["translation_pieces"][0].split()
    )
    model = DeepNMTForConditionalGeneration.from_pretrained(converted)
    tokenizer = AutoTokenizer.from_pretrained(converted)
    assert (
        translate_batch(model, tokenizer, text["sentences"], num_beams=1, max_new_tokens=MAX_LEN_B)
        == (text["translations"])
    )


def test_sentencepiece_bpe_model_gives_fairseqs_ids() -> None:
    """A sentencepiece BPE model (merges from its piece scores): fairseq's SentencepieceBPE + encode_line ids."""
    spec = SPM["spm_bpe"]
    symbols = read_dictionary(FIXTURES / spec["dictionary"])
    tokenizer = build_tokenizer(symbols, None, FIXTURES / spec["sentencepiece_model"])
    text = reference("spm_bpe")
    for sentence, ids in zip(text["sentences"], text["encoded"], strict=True):
        encoded = tokenizer(sentence, return_tensors="pt").input_ids
        assert unknown_to_unk(encoded, len(symbols))[0].tolist() == ids, sentence


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ([], ["bpe='sentencepiece'", "--sentencepiece-model"]),
        (["--bpe-codes", str(FIXTURES / "bpecodes")], ["not subword-nmt", "instead of --bpe-codes"]),
        (["--sentencepiece-model", str(FIXTURES / "missing.model")], ["missing.model does not exist"]),
        (["--sentencepiece-model", str(FIXTURES / "dict.sa.txt")], ["dict.sa.txt is not a sentencepiece"]),
    ],
)
def test_sentencepiece_checkpoint_without_its_model_is_refused(
    extra: list[str], words: list[str], tmp_path: Path, capsys
) -> None:
    """The checkpoint's args name sentencepiece: without a usable .model no tokenizer could split raw text as
    fairseq did, so nothing is written."""
    out = tmp_path / "out"
    code = main(["convert", "fairseq", str(CHECKPOINT), str(out), *extra])
    assert_refused(code, capsys.readouterr().err, out, *words)


def test_sentencepiece_dictionary_without_bpe_option_converts_without_a_tokenizer(tmp_path: Path) -> None:
    """sentencepiece applied before fairseq-preprocess (no --bpe in the args): the `▁` pieces in the dictionary say
    so; without --sentencepiece-model the model converts, with no tokenizer and the reason in conversion.json."""
    with torch.serialization.safe_globals([argparse.Namespace]):
        raw = torch.load(CHECKPOINT, weights_only=True)
    raw["args"].bpe = None
    torch.save(raw, tmp_path / "model.pt")
    for side in SPM[NAME]["langs"]:
        shutil.copy(FIXTURES / f"dict.{side}.txt", tmp_path / f"dict.{side}.txt")
    assert main(["convert", "fairseq", str(tmp_path / "model.pt"), str(tmp_path / "out")]) == 0
    provenance = json.loads((tmp_path / "out" / "conversion.json").read_text())
    assert provenance["tokenizer"].startswith("none: the dictionary holds sentencepiece pieces")
    assert not (tmp_path / "out" / "tokenizer.json").exists()
