"""`deep-nmt convert fairseq`: what it refuses in one line, and where it looks things up.

Each checkpoint here is a fixture fairseq wrote (tests/fixtures/fairseq/, make_converter_fixtures.py) with one thing
changed the way another fairseq run would have saved it: the options of `--no-cross-attention` and of pruned layers
(`--decoder-layers-to-keep`), a layout without a weight, no language pair (a plain `fairseq-train data-bin` run),
`--merge-src-tgt-embed`. The refused-options list is checked against fairseq's own option names
(tests/fixtures/fairseq/option_names.json, written from fairseq's argument parser by the same generator).
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
import torch
from fairseq_reference import FIXTURES, MAX_LEN_B, assert_refused, check_against_fairseq, reference

from deep_nmt_hf.cli import main
from deep_nmt_hf.model.modeling_deep_nmt import DeepNMTForConditionalGeneration
from deep_nmt_hf.publish.convert_fairseq import UNSUPPORTED_OPTIONS
from deep_nmt_hf.publish.fairseq_tokenizer import build_tokenizer


def load_raw(name: str) -> dict:
    with torch.serialization.safe_globals([argparse.Namespace]):
        return torch.load(FIXTURES / f"{name}.pt", weights_only=True)


def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def save_beside_dictionaries(raw: dict, folder: Path) -> Path:
    torch.save(raw, folder / "model.pt")
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(FIXTURES / name, folder / name)
    return folder / "model.pt"


def test_no_cross_attention_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    raw = load_raw("postln_shared_args")
    raw["args"].no_cross_attention = True  # fairseq's --no-cross-attention: no decoder.layers.N.encoder_attn*
    raw["model"] = {k: v for k, v in raw["model"].items() if ".encoder_attn" not in k}
    out = tmp_path / "out"
    code, err = run_cli(
        ["convert", "fairseq", str(save_beside_dictionaries(raw, tmp_path)), str(out)], capsys
    )
    assert_refused(code, err, out, "no_cross_attention=True")


@pytest.mark.parametrize(
    "weight", ["decoder.layers.1.encoder_attn.k_proj.weight", "encoder.layers.0.fc1.weight"]
)
def test_layout_without_a_needed_weight_is_refused_in_one_line(tmp_path: Path, capsys, weight: str) -> None:
    raw = load_raw("postln_shared_args")
    del raw["model"][weight]  # options say nothing: the weights tell
    out = tmp_path / "out"
    code, err = run_cli(
        ["convert", "fairseq", str(save_beside_dictionaries(raw, tmp_path)), str(out)], capsys
    )
    assert_refused(code, err, out, "model.pt", weight)


def test_pruned_layers_are_refused(tmp_path: Path, capsys) -> None:
    raw = load_raw("postln_shared_args")
    raw["args"].decoder_layers_to_keep = "1"  # fairseq prunes layer 0 as it loads this checkpoint
    out = tmp_path / "out"
    code, err = run_cli(
        ["convert", "fairseq", str(save_beside_dictionaries(raw, tmp_path)), str(out)], capsys
    )
    assert_refused(code, err, out, "decoder_layers_to_keep='1'")


def test_refused_options_are_fairseq_options() -> None:
    names = set(json.loads((FIXTURES / "option_names.json").read_text())["options"])
    assert {option for option, _ in UNSUPPORTED_OPTIONS} <= names


def test_dictionaries_without_a_language_pair_are_found(tmp_path: Path, capsys) -> None:
    raw = load_raw("postln_shared_args")
    raw["args"].source_lang = raw["args"].target_lang = None  # `fairseq-train data-bin`: the pair is inferred
    path = save_beside_dictionaries(raw, tmp_path)
    out = tmp_path / "out"
    assert main(["convert", "fairseq", str(path), str(out)]) == 0
    record = json.loads((out / "conversion.json").read_text())
    assert (record["source_dictionary"], record["target_dictionary"]) == ("dict.src.txt", "dict.tgt.txt")
    # no pair to infer among several dictionaries: still one line asking for the flags
    (tmp_path / "dict.tgt.txt").unlink()
    shutil.copy(FIXTURES / "dict.src.txt", tmp_path / "dict.other.txt")
    code, err = run_cli(["convert", "fairseq", str(path), str(tmp_path / "out2")], capsys)
    assert_refused(code, err, tmp_path / "out2", "--source-dict")


def test_language_pair_is_inferred_from_the_data_files(tmp_path: Path) -> None:
    raw = load_raw("postln_shared_args")
    raw["args"].source_lang = raw["args"].target_lang = None
    torch.save(raw, tmp_path / "model.pt")
    for lang in ("xx", "yy"):  # data_utils.infer_language_pair reads train.xx-yy.xx.bin's name
        shutil.copy(FIXTURES / "dict.src.txt", tmp_path / f"dict.{lang}.txt")
        (tmp_path / f"train.xx-yy.{lang}.bin").write_bytes(b"")
    out = tmp_path / "out"
    assert main(["convert", "fairseq", str(tmp_path / "model.pt"), str(out)]) == 0
    record = json.loads((out / "conversion.json").read_text())
    assert (record["source_dictionary"], record["target_dictionary"]) == ("dict.xx.txt", "dict.yy.txt")


def test_merged_embeddings_decode_with_the_merged_dictionary(tmp_path: Path) -> None:
    """--merge-src-tgt-embed: the source dictionary extended by the target symbols it lacks, in the target's order,
    is the embedding's and the decoding dictionary (fairseq's transformer_base.build_model). Made from the shared
    fixture by splitting its dictionary D into a source (D's first half) and a target (D's second half after some
    source symbols), whose merge is D again: fairseq's numbers for that fixture hold."""
    lines = (FIXTURES / "dict.src.txt").read_text(encoding="utf-8").splitlines()
    half = len(lines) // 2
    (tmp_path / "dict.src.txt").write_text("\n".join(lines[:half]) + "\n", encoding="utf-8")
    (tmp_path / "dict.tgt.txt").write_text("\n".join(lines[2:4] + lines[half:]) + "\n", encoding="utf-8")
    raw = load_raw("postln_shared_args")
    raw["args"].share_all_embeddings = False
    raw["args"].merge_src_tgt_embed = True
    torch.save(raw, tmp_path / "model.pt")
    out = tmp_path / "out"
    codes = FIXTURES / "bpecodes"
    assert main(["convert", "fairseq", str(tmp_path / "model.pt"), str(out), "--bpe-codes", str(codes)]) == 0
    model = DeepNMTForConditionalGeneration.from_pretrained(out)
    check_against_fairseq(model, reference("postln_shared_args"))
    record = json.loads((out / "conversion.json").read_text())
    assert record["merged_dictionary"] is True
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out)
    merged = build_tokenizer(
        ["<s>", "<pad>", "</s>", "<unk>"] + [line.rsplit(" ", 1)[0] for line in lines], codes
    )
    ids = list(range(4, len(lines) + 4))
    assert tokenizer.decode(ids) == merged.decode(ids)  # target ids read through the merged dictionary


def test_learned_positions_keep_each_sides_limit(tmp_path: Path) -> None:
    """--max-target-positions 20 beside --max-source-positions 64: the decoder's learned table has 20 + 2 rows, the
    encoder's 64 + 2; both are kept (the encoder's was cut to the shorter, refusing sources of 21+ tokens)."""
    raw = load_raw("postln_untied_learned_cfg")
    model_options = raw["cfg"]["model"]
    if isinstance(model_options, argparse.Namespace):
        model_options.max_target_positions = 20
    else:
        model_options["max_target_positions"] = 20
    raw["model"]["decoder.embed_positions.weight"] = raw["model"]["decoder.embed_positions.weight"][
        :22
    ].clone()
    encoder_table = raw["model"]["encoder.embed_positions.weight"]
    out = tmp_path / "out"
    assert main(["convert", "fairseq", str(save_beside_dictionaries(raw, tmp_path)), str(out)]) == 0
    model = DeepNMTForConditionalGeneration.from_pretrained(out)
    config = model.config
    assert (config.max_position_embeddings, config.decoder_max_position_embeddings) == (64, 20)
    assert torch.equal(model.model.encoder.embed_positions.weight, encoder_table)
    assert model.model.decoder.embed_positions.weight.shape[0] == 22
    check_against_fairseq(model, reference("postln_untied_learned_cfg"))
    # the decoder's limit bounds generation: the decoder start + up to 20 tokens, the last never read back, so the
    # decoder reads at most its 20 positions
    assert model.generation_config.max_length <= 20 + 1
    long_source = torch.tensor(
        [[5, 6, 7, 8] * 10 + [2]]
    )  # 41 tokens: past the decoder's 20, within the encoder's
    with torch.no_grad():
        model.generate(long_source, num_beams=1, max_new_tokens=4)


def test_merged_embeddings_as_fairseq_wrote_them(tmp_path: Path) -> None:
    """A `--merge-src-tgt-embed` checkpoint fairseq wrote (tests/fixtures/fairseq/tokenizers/merged/: the target's
    pieces mostly missing from the source's dictionary): fairseq's scores, its hub `encode` ids, and its greedy
    translations, which print target-only pieces through the merged dictionary."""
    from transformers import AutoTokenizer

    from deep_nmt_hf.publish.fairseq_tokenizer import unknown_to_unk

    folder = FIXTURES / "tokenizers" / "merged"
    refs = json.loads((folder / "merged_args.json").read_text())
    out = tmp_path / "out"
    argv = [
        "convert",
        "fairseq",
        str(folder / "merged_args.pt"),
        str(out),
        "--bpe-codes",
        str(FIXTURES / "bpecodes"),
    ]
    assert main(argv) == 0
    model = DeepNMTForConditionalGeneration.from_pretrained(out)
    check_against_fairseq(model, refs)
    tokenizer = AutoTokenizer.from_pretrained(out)
    text = refs["text"]
    assert any(t != t.lower() for t in text["translations"])  # target-only pieces printed
    for sentence, ids, expected in zip(text["sentences"], text["encoded"], text["translations"], strict=True):
        ours = unknown_to_unk(tokenizer(sentence, return_tensors="pt").input_ids[0], model.config.vocab_size)
        assert ours.tolist() == ids, sentence
        with torch.no_grad():
            greedy = model.generate(
                torch.tensor([ids]), num_beams=1, do_sample=False, max_new_tokens=MAX_LEN_B
            )
        assert tokenizer.decode(greedy[0], skip_special_tokens=True) == expected, sentence
