"""`deep-nmt fold / export / plot / data`: end to end through `cli.main`, their one-line errors, and their help."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import torch
from factories import TINY_SHAPE
from fresh_process import run_without_package
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

from deep_nmt_hf import DeepNMTConfig, DeepNMTForConditionalGeneration
from deep_nmt_hf.cli import build_parser, main
from deep_nmt_hf.data import load_parallel, read_jsonl, write_parallel_dir
from deep_nmt_hf.data.synthetic import generate_pairs
from deep_nmt_hf.data.tokenization import train_tokenizer
from deep_nmt_hf.model.residual import AdminOmega
from deep_nmt_hf.training import build_config

TINY = dict(TINY_SHAPE, max_position_embeddings=64)
SOURCES = [source for source, _ in generate_pairs(6, seed=5)]


@pytest.fixture(scope="module")
def tokenizer():
    pairs = generate_pairs(800, seed=1)
    return train_tokenizer([text for pair in pairs for text in pair], vocab_size=200, model_max_length=64)


def save_model(path: Path, tokenizer, seed: int = 0, **fields) -> Path:
    """A random tiny model of the given config fields, saved with the tokenizer (ADMIN ω set away from 1)."""
    config = build_config(
        tokenizer, DeepNMTConfig, max_source_length=64, max_target_length=64, **TINY | fields
    )
    torch.manual_seed(seed)
    model = DeepNMTForConditionalGeneration(config).eval()
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, AdminOmega):
                module.omega.copy_(0.5 + 2 * torch.rand(module.omega.shape, generator=generator))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()  # drop what the setup printed
    code = main([str(item) for item in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def beam_translations(model_dir: Path) -> list[str]:
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir).eval()
    tok = AutoTokenizer.from_pretrained(model_dir)
    batch = tok(SOURCES, padding=True, return_tensors="pt")
    with torch.no_grad():
        output = model.generate(**batch, num_beams=4, max_length=20)
    return tok.batch_decode(output, skip_special_tokens=True)


FRESH_TRANSLATE = """
import json, torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
model = AutoModelForSeq2SeqLM.from_pretrained("folded").eval()
tok = AutoTokenizer.from_pretrained("folded")
batch = tok(SOURCES, padding=True, return_tensors="pt")
with torch.no_grad():
    output = model.generate(**batch, num_beams=4, max_length=20)
print(json.dumps({"class": type(model).__name__, "texts": tok.batch_decode(output, skip_special_tokens=True)}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fields", "stock"),
    [({"residual_scaling": "admin"}, "MarianMTModel"), ({"layer_norm_position": "pre"}, "Pegasus")],
)
def test_fold_cli_writes_a_stock_model_that_translates_the_same(tmp_path, tokenizer, capsys, fields, stock):
    trained = save_model(tmp_path / "trained", tokenizer, seed=3, **fields)
    code, out, err = run(["fold", trained, tmp_path / "folded"], capsys)
    assert code == 0, err
    assert f"into {stock}" in out and "beam-4 outputs identical: yes" in out
    diff = float(out.split("max |Δlogits| = ")[1].split()[0])
    assert diff <= 1e-4
    assert not list((tmp_path / "folded").glob("*.py"))
    assert (tmp_path / "folded" / "generation_config.json").is_file()

    result = run_without_package(f"SOURCES = {SOURCES!r}\n" + FRESH_TRANSLATE, tmp_path)

    assert result["class"].startswith(stock)
    assert result["texts"] == beam_translations(trained)


@pytest.mark.parametrize(
    ("fields", "feature"),
    [
        (
            {"layer_norm_position": "pre", "encoder_layer_aggregation": "dlcl"},
            "encoder_layer_aggregation='dlcl'",
        ),
        ({"decoder_attention": "merged"}, "decoder_attention='merged'"),
    ],
)
def test_fold_cli_refuses_unfoldable_models_in_one_line(tmp_path, tokenizer, capsys, fields, feature):
    trained = save_model(tmp_path / "trained", tokenizer, **fields)
    code, out, err = run(["fold", trained, tmp_path / "folded"], capsys)
    assert code == 2 and out == ""
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [err.splitlines()[-1]]  # one error line, the last thing printed
    assert errors[0].startswith("error: cannot fold into a stock Transformers class") and feature in errors[0]
    assert not (tmp_path / "folded").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["trained"]


def test_fold_cli_errors_for_bad_paths(tmp_path, tokenizer, capsys):
    code, _, err = run(["fold", tmp_path / "missing", tmp_path / "out"], capsys)
    assert code == 2 and "missing: no such model directory" in err
    (tmp_path / "empty").mkdir()
    code, _, err = run(["fold", tmp_path / "empty", tmp_path / "out"], capsys)
    assert code == 2 and "no config.json" in err
    trained = save_model(tmp_path / "trained", tokenizer)
    (tmp_path / "taken").mkdir()
    code, _, err = run(["fold", trained, tmp_path / "taken"], capsys)
    assert code == 2 and "exists already" in err
    code, _, err = run(["fold", trained, tmp_path / "out", "--atol", "0"], capsys)
    assert code == 2 and "--atol 0.0: must be > 0" in err


def test_export_cli_converts_and_translates(tmp_path, tokenizer, capsys):
    ctranslate2 = pytest.importorskip("ctranslate2")
    trained = save_model(tmp_path / "trained", tokenizer, seed=4)
    code, out, err = run(
        ["export", trained, tmp_path / "ct2", "--to", "ctranslate2", "--quantization", "int8"], capsys
    )
    assert code == 0, err
    assert "CTranslate2 (int8)" in out and (tmp_path / "ct2" / "model.bin").is_file()
    translator = ctranslate2.Translator(str(tmp_path / "ct2"), intra_threads=1)  # tiny model
    tokens = [tokenizer.convert_ids_to_tokens(ids) for ids in tokenizer(SOURCES[:2])["input_ids"]]
    results = translator.translate_batch(tokens, beam_size=4, max_decoding_length=10)
    assert all(0 < len(r.hypotheses[0]) <= 10 and "<pad>" not in r.hypotheses[0] for r in results)
    # the export folder carries the tokenizer: a full translate needs nothing else
    from tokenizers import Tokenizer

    assert {"tokenizer.json", "tokenizer_config.json"} <= {p.name for p in (tmp_path / "ct2").iterdir()}
    ct2_tokenizer = Tokenizer.from_file(str(tmp_path / "ct2" / "tokenizer.json"))
    ct2_tokens = [encoding.tokens for encoding in ct2_tokenizer.encode_batch(SOURCES[:2])]
    assert ct2_tokens == tokens
    again = translator.translate_batch(ct2_tokens, beam_size=4, max_decoding_length=10)
    assert [r.hypotheses[0] for r in again] == [r.hypotheses[0] for r in results]

    code, _, err = run(["export", trained, tmp_path / "ct2b", "--quantization", "int3"], capsys)
    assert code == 2 and "--quantization int3: not one of float32, int8" in err
    code, _, err = run(["export", trained, tmp_path / "ct2"], capsys)
    assert code == 2 and "exists already" in err
    with pytest.raises(SystemExit):
        main(["export", str(trained), str(tmp_path / "x"), "--to", "onnx"])
    assert not (tmp_path / "ct2b").exists() and not (tmp_path / "x").exists()


def test_plot_cli_writes_pngs_and_names_models_without_the_feature(tmp_path, tokenizer, capsys):
    dlcl = save_model(
        tmp_path / "dlcl", tokenizer, layer_norm_position="pre", decoder_layer_aggregation="dlcl"
    )
    admin = save_model(tmp_path / "admin", tokenizer, residual_scaling="admin")

    code, out, err = run(["plot", "dlcl", dlcl, "--out", tmp_path / "plots" / "w.png"], capsys)
    assert code == 0, err
    assert (tmp_path / "plots" / "w.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, out, err = run(["plot", "omega", admin], capsys)
    assert code == 0, err
    assert (admin / "omega.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    encoder_line = next(line for line in out.splitlines() if line.startswith("encoder ω:"))
    assert len(encoder_line.split(":")[1].split()) == 4  # 2 layers x (self-attention, FFN)

    code, out, err = run(["plot", "dlcl", admin], capsys)
    assert code == 2 and err.splitlines()[-1].startswith(
        f"error: {admin}: the model has no DLCL layer aggregation"
    )
    code, out, err = run(["plot", "omega", dlcl], capsys)
    assert code == 2 and f"{dlcl}: not an ADMIN model (residual_scaling='none')" in err
    code, out, err = run(["plot", "omega", admin, "--out", tmp_path / "x.jpg"], capsys)
    assert code == 2 and "expected a .png" in err
    assert not (dlcl / "omega.png").exists() and not (admin / "dlcl.png").exists()


def test_data_to_json_round_trip_one_split_and_all(tmp_path, capsys):
    data = tmp_path / "data"
    splits = {"train": generate_pairs(30, seed=2), "valid": generate_pairs(7, seed=3)}
    for split, pairs in splits.items():
        write_parallel_dir(pairs, data, split, "sa", "sb")
    argv = ["data", "to-json", "--data-dir", data, "--src-lang", "sa", "--tgt-lang", "sb"]

    code, out, err = run([*argv, "--split", "train", tmp_path / "train.jsonl"], capsys)
    assert code == 0, err
    assert "train: 30 pairs" in out
    rows = [json.loads(line) for line in (tmp_path / "train.jsonl").read_text().splitlines()]
    assert rows == [{"translation": {"sa": s, "sb": t}} for s, t in splits["train"]]
    assert (
        read_jsonl(tmp_path / "train.jsonl", "sa", "sb")["translation"]
        == load_parallel(data, "train", "sa", "sb")["translation"]
    )

    code, out, err = run([*argv, "--all-splits", tmp_path / "json"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "json").iterdir()) == ["train.jsonl", "valid.jsonl"]
    valid = load_parallel(tmp_path / "json", "valid", "sa", "sb")["translation"]
    assert valid == [{"sa": s, "sb": t} for s, t in splits["valid"]]


def test_data_to_json_errors_leave_nothing(tmp_path, capsys):
    data = tmp_path / "data"
    write_parallel_dir(generate_pairs(5, seed=2), data, "train", "sa", "sb")
    argv = ["data", "to-json", "--data-dir", data, "--src-lang", "sa", "--tgt-lang", "sb"]

    code, _, err = run([*argv, "--split", "test", tmp_path / "test.jsonl"], capsys)
    assert code == 2 and "unknown split 'test'" in err and "available splits for sa-sb: train" in err
    (tmp_path / "train.jsonl").write_text("keep\n")
    code, _, err = run([*argv, "--split", "train", tmp_path / "train.jsonl"], capsys)
    assert code == 2 and "pass --overwrite" in err
    assert (tmp_path / "train.jsonl").read_text() == "keep\n"
    code, _, _ = run([*argv, "--split", "train", "--overwrite", tmp_path / "train.jsonl"], capsys)
    assert code == 0 and len((tmp_path / "train.jsonl").read_text().splitlines()) == 5
    code, _, err = run(
        [*argv[:4], "--src-lang", "xx", "--tgt-lang", "sb", "--all-splits", tmp_path / "o"], capsys
    )
    assert code == 2 and "no split has files for both xx and sb" in err
    code, _, err = run(
        [
            "data",
            "to-json",
            "--data-dir",
            tmp_path / "nope",
            "--src-lang",
            "a",
            "--tgt-lang",
            "b",
            "--split",
            "train",
            tmp_path / "n.jsonl",
        ],
        capsys,
    )
    assert code == 2 and "no such directory" in err
    with pytest.raises(SystemExit):
        main([str(a) for a in argv] + ["--split", "train", "--all-splits", str(tmp_path / "both")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "train.jsonl"]


def _subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield path + (name,), sub
                yield from _subparsers(sub, path + (name,))


@pytest.mark.parametrize(
    "command", [("fold",), ("export",), ("plot", "dlcl"), ("plot", "omega"), ("data", "to-json")]
)
def test_help_of_each_tool_mentions_every_flag(command, capsys):
    parser = dict(_subparsers(build_parser()))[command]
    flags = [option for action in parser._actions for option in action.option_strings]
    assert len(flags) >= 2
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for flag in flags:
        assert flag in text, f"deep-nmt {' '.join(command)} --help does not mention {flag}"
    positionals = [
        action.metavar for action in parser._actions if not action.option_strings and action.metavar
    ]
    for name in positionals:
        assert name in text
