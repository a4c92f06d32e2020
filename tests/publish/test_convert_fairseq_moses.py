"""`deep-nmt convert fairseq` of checkpoints preprocessed with Moses (`--tokenizer moses`), against fairseq.

The fixtures in tests/fixtures/fairseq/moses/ were written by fairseq 0.12.3.1 and sacremoses themselves
(tests/fixtures/make_converter_fixtures.py, `moses_references`): the project's synthetic corpus with punctuation,
quotes, apostrophes, hyphens, numbers and '&' added, Moses-tokenised by fairseq's own MosesTokenizer (English source,
French target: their apostrophe rules differ), subword-nmt codes and one dictionary learnt on it; two tiny post-LN
checkpoints whose options say `--tokenizer moses --bpe subword_nmt` (one `args`, one `cfg` with
`--moses-no-dash-splits --moses-no-escape`), and what fairseq's hub interface made of raw sentences: the Moses tokens,
the ids (`encode`) and the greedy translation's text (`translate`, detokenised).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch
from fairseq_reference import FIXTURES, MANIFEST, MAX_LEN_B, assert_refused, check_against_fairseq, reference

from deep_nmt_hf.cli import main
from deep_nmt_hf.model.modeling_deep_nmt import DeepNMTForConditionalGeneration
from deep_nmt_hf.publish.convert_fairseq import load_checkpoint
from deep_nmt_hf.publish.fairseq_tokenizer import unknown_to_unk

MOSES = FIXTURES / "moses"
NAMES = list(MANIFEST["moses"])  # moses_args, moses_nodash_noescape_cfg
CODES = MOSES / "bpecodes"


def convert(checkpoint: Path, out: Path, *extra: str) -> int:
    return main(["convert", "fairseq", str(checkpoint), str(out), "--bpe-codes", str(CODES), *extra])


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("moses")
    out = {name: root / name for name in NAMES}
    for name, path in out.items():
        assert convert(MOSES / f"{name}.pt", path) == 0
    return out


def text_of(name: str) -> dict:
    return reference(f"moses/{name}")["text"]


def translations(folder: Path, sentences: list[str]) -> list[str]:
    from transformers import pipeline

    translate = pipeline("translation", model=str(folder))
    return [translate(s, num_beams=1, max_new_tokens=MAX_LEN_B)[0]["translation_text"] for s in sentences]


def fairseq_ids(folder: Path, sentences: list[str]) -> list[list[int]]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    vocab_size = json.loads((folder / "config.json").read_text())["vocab_size"]
    return [
        unknown_to_unk(tokenizer(s, return_tensors="pt").input_ids, vocab_size)[0].tolist() for s in sentences
    ]


@pytest.mark.parametrize("name", NAMES)
def test_moses_checkpoint_scores_as_fairseq(name: str, converted: dict[str, Path]) -> None:
    """Log-probs within 1e-4, greedy identical, fairseq's beams rescoring to its scores, after save / load; the
    Moses options read from the checkpoint (args: the task's languages; cfg: the tokenizer section's flags)."""
    model = DeepNMTForConditionalGeneration.from_pretrained(converted[name]).eval()
    check_against_fairseq(model, reference(f"moses/{name}"))
    provenance = json.loads((converted[name] / "conversion.json").read_text())
    assert provenance["tokenizer"] == "fairseq dictionary ids + Moses (en → fr) + subword-nmt BPE"
    flags = MANIFEST["moses"][name]["flags"]
    assert provenance["moses"] == {
        "moses_source_lang": "en",
        "moses_target_lang": "fr",
        "moses_dash_splits": "--moses-no-dash-splits" not in flags,
        "moses_escape": "--moses-no-escape" not in flags,
    }


@pytest.mark.parametrize("name", NAMES)
def test_tokenizer_gives_fairseqs_moses_tokens_and_ids(name: str, converted: dict[str, Path]) -> None:
    """Raw text (quotes, apostrophes, hyphens, numbers, '&' and '<', ’ – …, runs of spaces and a tab) becomes
    fairseq's Moses tokens and its hub interface's `encode` ids."""
    from transformers import AutoTokenizer

    text = text_of(name)
    tokenizer = AutoTokenizer.from_pretrained(converted[name])
    assert [tokenizer.moses_tokenize(s) for s in text["sentences"]] == text["tokenized"]
    assert fairseq_ids(converted[name], text["sentences"]) == text["encoded"]
    assert any(s.split() != t.split() for s, t in zip(text["sentences"], text["tokenized"], strict=True))


@pytest.mark.parametrize("name", NAMES)
def test_pipeline_translates_raw_text_as_fairseqs_hub(name: str, converted: dict[str, Path]) -> None:
    """`pipeline("translation")` and `deep-nmt translate`'s batch path give fairseq's `translate()` text: BPE
    removed, then Moses-detokenised by the target language's rules (the fixture's outputs change under it)."""
    from transformers import AutoTokenizer

    from deep_nmt_hf.training.translation import translate as translate_batch

    text = text_of(name)
    assert translations(converted[name], text["sentences"]) == text["translations"]
    moved = [t != r for t, r in zip(text["translations"], text["tokenized_translations"], strict=True)]
    assert sum(moved) > 1  # Moses's detokeniser changed them: the check is not vacuous
    model = DeepNMTForConditionalGeneration.from_pretrained(converted[name])
    tokenizer = AutoTokenizer.from_pretrained(converted[name])
    got = translate_batch(model, tokenizer, text["sentences"], num_beams=1, max_new_tokens=MAX_LEN_B)
    assert got == text["translations"]


def test_text_target_is_tokenised_by_the_target_languages_rules(converted: dict[str, Path]) -> None:
    """Labels for fine-tuning (`text_target`) are Moses-tokenised as the training targets were: by the target
    language's rules (French: `L' tu`, where the English source side gives `L 'tu`)."""
    import sacremoses
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted["moses_args"])
    sentences = text_of("moses_args")["sentences"]
    french = sacremoses.MosesTokenizer(lang="fr")
    for sentence in sentences:
        tokens = french.tokenize(sentence, aggressive_dash_splits=True, return_str=True, escape=True).split()
        labels = tokenizer(text_target=sentence).input_ids
        assert labels == tokenizer(tokens, is_split_into_words=True).input_ids, sentence
    both = tokenizer(sentences[1], text_target=sentences[1])  # the source side keeps the source's rules
    assert both.input_ids == fairseq_ids(converted["moses_args"], sentences[1:2])[0] != both["labels"]


def test_folded_moses_model_translates_as_fairseq(converted: dict[str, Path], tmp_path: Path) -> None:
    """`deep-nmt fold` into FSMT keeps the Moses tokenizer (its file and auto_map travel with it)."""
    assert main(["fold", str(converted["moses_args"]), str(tmp_path / "fsmt")]) == 0
    assert (tmp_path / "fsmt" / "tokenization_moses.py").is_file()
    text = text_of("moses_args")
    assert translations(tmp_path / "fsmt", text["sentences"]) == text["translations"]


@pytest.mark.slow
def test_moses_tokenizer_loads_as_remote_code_without_the_package(
    converted: dict[str, Path], tmp_path: Path
) -> None:
    """The tokenizer class ships in the folder: `trust_remote_code=True` alone (no deep_nmt_hf) gives fairseq's ids
    and detokenised text."""
    from fresh_process import run_without_package

    shutil.copytree(converted["moses_args"], tmp_path / "model")
    text = text_of("moses_args")
    code = f"""
    import json
    from transformers import AutoTokenizer
    tokenizer = AutoTokenizer.from_pretrained("model", trust_remote_code=True)
    sentences = {text["sentences"]!r}
    ids = [tokenizer(s).input_ids for s in sentences]
    print(json.dumps({{"class": type(tokenizer).__name__, "ids": ids, "decoded": tokenizer.decode(ids[3])}}))
    """
    got = run_without_package(code, tmp_path)
    assert got["class"] == "FairseqMosesTokenizer"
    vocab_size = json.loads((tmp_path / "model" / "config.json").read_text())["vocab_size"]
    assert [[3 if i >= vocab_size else i for i in ids] for ids in got["ids"]] == text["encoded"]
    assert got["decoded"].startswith('Sem toli "pani fatus"')  # &quot; unescaped, quotes re-attached


def edited_checkpoint(tmp_path: Path, name: str = "moses_args", **options: object) -> Path:
    """The fixture checkpoint with its args changed, and its dictionaries beside it."""
    with torch.serialization.safe_globals([argparse.Namespace]):
        raw = torch.load(MOSES / f"{name}.pt", weights_only=True)
    for key, value in options.items():
        setattr(raw["args"], key, value)
    torch.save(raw, tmp_path / "model.pt")
    for lang in MANIFEST["moses"][name]["langs"]:
        shutil.copy(MOSES / f"dict.{lang}.txt", tmp_path / f"dict.{lang}.txt")
    return tmp_path / "model.pt"


def test_moses_flag_adds_moses_where_the_options_name_none(tmp_path: Path) -> None:
    """Text Moses-tokenised before fairseq-preprocess (no --tokenizer in the args): `--moses` adds it, with the
    checkpoint's languages; without it the tokenizer takes tokenised text, as before."""
    checkpoint = edited_checkpoint(tmp_path, tokenizer=None)
    text = text_of("moses_args")
    assert convert(checkpoint, tmp_path / "plain") == 0
    assert json.loads((tmp_path / "plain" / "conversion.json").read_text())["moses"] is None
    assert fairseq_ids(tmp_path / "plain", text["sentences"]) != text["encoded"]
    assert convert(checkpoint, tmp_path / "moses", "--moses") == 0
    assert fairseq_ids(tmp_path / "moses", text["sentences"]) == text["encoded"]
    assert translations(tmp_path / "moses", text["sentences"]) == text["translations"]


def test_fairseq_09_moses_languages_are_read(tmp_path: Path) -> None:
    """fairseq ≤ 0.9 stored Moses's languages as moses_source_lang / moses_target_lang (defaulting to the task's)."""
    checkpoint = load_checkpoint(edited_checkpoint(tmp_path, moses_source_lang="de", moses_target_lang=None))
    assert checkpoint.tokenizer["name"] == "moses"
    assert (checkpoint.tokenizer["moses_source_lang"], checkpoint.tokenizer["moses_target_lang"]) == (
        "de",
        "fr",
    )


@pytest.mark.parametrize("tokenizer", ["nltk", "my_user_dir_tokenizer"])
def test_tokenizer_we_cannot_reproduce_is_refused(tokenizer: str, tmp_path: Path, capsys) -> None:
    """fairseq's `nltk` tokenizer (nltk's word_tokenize) or one from a --user-dir: no tokenizer here could split raw
    text as fairseq did, so nothing is written (`moses` and `space` are reproduced)."""
    checkpoint = edited_checkpoint(tmp_path, tokenizer=tokenizer)
    out = tmp_path / "out"
    code = convert(checkpoint, out)
    assert_refused(code, capsys.readouterr().err, out, f"tokenizer={tokenizer!r}", "moses, space")


def test_missing_sacremoses_is_named(converted: dict[str, Path], tmp_path: Path, capsys, monkeypatch) -> None:
    """Without sacremoses a Moses checkpoint is refused (one line naming the package, nothing written), and a
    converted folder's tokenizer does not load (an ImportError naming it), as stock FSMT's."""
    from transformers import AutoTokenizer

    monkeypatch.setitem(sys.modules, "sacremoses", None)  # `import sacremoses` raises ImportError
    out = tmp_path / "out"
    code = convert(MOSES / "moses_args.pt", out)
    assert_refused(code, capsys.readouterr().err, out, "pip install sacremoses")
    with pytest.raises(ImportError, match="pip install sacremoses"):
        AutoTokenizer.from_pretrained(converted["moses_args"])
