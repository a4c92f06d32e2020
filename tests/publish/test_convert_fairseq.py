"""`deep-nmt convert fairseq` against fairseq's own numbers.

The fixtures in tests/fixtures/fairseq/ were written by fairseq 0.12.3.1 itself
(tests/fixtures/make_converter_fixtures.py): tiny random-weight checkpoints, their dictionaries and BPE codes, and
what fairseq's model and SequenceGenerator computed — per-token log-probabilities of given targets, greedy outputs,
beam lists with scores, and for one model the hub interface's encoding and translation of raw text.

The ADMIN, DeepNorm and DLCL layouts are RECONSTRUCTIONS: their authors' forks (Transformer-Clinic on fairseq 0.8,
torchscale, dlcl on fairseq 0.5) do not run here, so the generator builds each on the maintained fairseq by the
documented change, with the authors' parameter names (see the generator's docstring).

How the numbers are compared: tests/fairseq_reference.py.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from fairseq_reference import (
    FIXTURES,
    FLOAT32_TOLERANCE,
    MANIFEST,
    MAX_LEN_B,
    assert_refused,
    check_against_fairseq,
    needs_fsmt_fold,
    reference,
    tolerance,
)

from deep_nmt_hf.cli import main
from deep_nmt_hf.model.modeling_deep_nmt import DeepNMTForConditionalGeneration
from deep_nmt_hf.publish.convert_fairseq import ConversionError, convert_fairseq, fairseq_model

LAYOUTS = [name for name, spec in MANIFEST["layouts"].items() if "flags" in spec]


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """Every layout converted once through the command line (save_pretrained inside)."""
    root = tmp_path_factory.mktemp("converted")
    out = {}
    for name in LAYOUTS:
        out[name] = root / name
        argv = ["convert", "fairseq", str(FIXTURES / f"{name}.pt"), str(out[name])]
        assert main(argv + ["--bpe-codes", str(FIXTURES / "bpecodes")]) == 0
    return out


@pytest.mark.parametrize("name", LAYOUTS)
def test_converted_model_scores_as_fairseq_after_save_and_load(name: str, converted: dict[str, Path]) -> None:
    model = DeepNMTForConditionalGeneration.from_pretrained(converted[name]).eval()
    check_against_fairseq(model, reference(name), tolerance(name))


def test_in_memory_model_scores_as_fairseq_before_saving() -> None:
    model, _, provenance = fairseq_model(FIXTURES / "admin_args.pt")
    assert provenance["layout"]["fork"] == "admin"
    assert model.config.admin_first_omega and model.config.position_offset == 2
    check_against_fairseq(model, reference("admin_args"))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("postln_shared_args", dict(layer_norm_position="post", share_encoder_decoder_embeddings=True)),
        ("preln_tied_cfg", dict(layer_norm_position="pre", tie_word_embeddings=True)),
        (
            "postln_untied_learned_cfg",
            dict(tie_word_embeddings=False, position_embedding="learned", layernorm_embedding=True)
            | dict(scale_embedding=False, activation_function="gelu"),
        ),
        ("deepnorm_args", dict(residual_scaling="deepnorm")),
        ("dlcl_pre_args", dict(layer_norm_position="pre", encoder_layer_aggregation="dlcl")),
        ("dlcl_post_args", dict(layer_norm_position="post", decoder_layer_aggregation="dlcl")),
    ],
)
def test_layout_is_read_from_the_checkpoint(name: str, expected: dict, converted: dict[str, Path]) -> None:
    config = json.loads((converted[name] / "config.json").read_text())
    assert {k: config[k] for k in expected} == expected
    assert config["position_embedding"] in ("fairseq_sinusoidal", "learned")
    assert (config["pad_token_id"], config["eos_token_id"], config["decoder_start_token_id"]) == (1, 2, 2)


def test_tokenizer_and_pipeline_reproduce_fairseq_on_raw_text(converted: dict[str, Path]) -> None:
    from transformers import AutoTokenizer, pipeline

    text = reference("postln_shared_args")["text"]
    tokenizer = AutoTokenizer.from_pretrained(converted["postln_shared_args"])
    for sentence, ids in zip(text["sentences"], text["encoded"], strict=True):
        ours = tokenizer(sentence).input_ids
        ours = [i if i < 28 else 3 for i in ours]  # pieces the dictionary lacks: <unk>, as in fairseq
        assert ours == ids
    translate = pipeline("translation", model=str(converted["postln_shared_args"]))
    for sentence, expected in zip(text["sentences"], text["translations"], strict=True):
        got = translate(sentence, num_beams=1, max_new_tokens=MAX_LEN_B)[0]["translation_text"]
        assert got == expected
    # `deep-nmt translate`'s batch path too (its last sentence holds a piece only fairseq's <unk> covers)
    from deep_nmt_hf.training.translation import translate as translate_batch

    model = DeepNMTForConditionalGeneration.from_pretrained(converted["postln_shared_args"])
    got = translate_batch(model, tokenizer, text["sentences"], num_beams=1, max_new_tokens=MAX_LEN_B)
    assert got == text["translations"]


# ------------------------------------------------------------------------------------------------ bad input
def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def test_other_architecture_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, err = run_cli(["convert", "fairseq", str(FIXTURES / "lstm_args.pt"), str(out)], capsys)
    assert_refused(code, err, out, "'lstm'", "transformer")


def test_bart_is_refused(tmp_path: Path, capsys) -> None:
    import argparse

    with torch.serialization.safe_globals([argparse.Namespace]):
        raw = torch.load(FIXTURES / "postln_shared_args.pt", weights_only=True)
    raw["args"].arch = "bart_base"
    torch.save(raw, tmp_path / "bart.pt")
    out = tmp_path / "out"
    code, err = run_cli(["convert", "fairseq", str(tmp_path / "bart.pt"), str(out)], capsys)
    assert_refused(code, err, out, "'bart_base'")


def test_missing_dictionary_is_refused(tmp_path: Path, capsys) -> None:
    shutil.copy(FIXTURES / "postln_shared_args.pt", tmp_path / "model.pt")
    out = tmp_path / "out"
    code, err = run_cli(["convert", "fairseq", str(tmp_path / "model.pt"), str(out)], capsys)
    assert_refused(code, err, out, "dict.src.txt", "--source-dict")


def test_vocabulary_size_mismatch_is_refused(tmp_path: Path, capsys) -> None:
    lines = (FIXTURES / "dict.src.txt").read_text().splitlines()
    (tmp_path / "short.txt").write_text("\n".join(lines[:-1]) + "\n")
    out = tmp_path / "out"
    argv = ["convert", "fairseq", str(FIXTURES / "postln_shared_args.pt"), str(out)]
    code, err = run_cli(argv + ["--source-dict", str(tmp_path / "short.txt")], capsys)
    assert_refused(code, err, out, f"{len(lines) + 3} symbols", f"{len(lines) + 4} rows")


def test_unknown_layout_is_refused(tmp_path: Path, capsys) -> None:
    import argparse

    with torch.serialization.safe_globals([argparse.Namespace]):
        raw = torch.load(FIXTURES / "postln_shared_args.pt", weights_only=True)
    raw["model"]["encoder.layers.0.mystery_gate"] = torch.ones(8)
    torch.save(raw, tmp_path / "model.pt")
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    out = tmp_path / "out"
    code, err = run_cli(["convert", "fairseq", str(tmp_path / "model.pt"), str(out)], capsys)
    assert_refused(code, err, out, "encoder.layers.0.mystery_gate", "layout")


def test_fork_flag_that_disagrees_with_the_weights_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    argv = ["convert", "fairseq", str(FIXTURES / "postln_shared_args.pt"), str(out), "--fork", "admin"]
    code, err = run_cli(argv, capsys)
    assert_refused(code, err, out, "--fork admin", "'none'")


def test_pickled_objects_need_trust(tmp_path: Path) -> None:
    raw = torch.load(FIXTURES / "postln_shared_args.pt", weights_only=False)
    raw["extra_state"]["meter"] = Path("x")  # any pickled class beyond tensors and Namespace
    torch.save(raw, tmp_path / "model.pt")
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    with pytest.raises(ConversionError, match="--trust-pickle"):
        convert_fairseq(tmp_path / "model.pt", tmp_path / "out")
    assert convert_fairseq(tmp_path / "model.pt", tmp_path / "out", trust_pickle=True).is_dir()


@pytest.mark.parametrize("trust", [False, True])
def test_a_text_file_is_not_a_pytorch_checkpoint(tmp_path: Path, capsys, trust: bool) -> None:
    """Not pickle's internals ("pop from empty list", "could not find MARK" with --trust-pickle): one line."""
    text = tmp_path / "model.pt"
    text.write_text("this is a dictionary file, not weights\n")
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    out = tmp_path / "out"
    code, err = run_cli(["convert", "fairseq", str(text), str(out)] + ["--trust-pickle"] * trust, capsys)
    assert_refused(code, err, out, f"{text} is not a PyTorch checkpoint")
    assert "MARK" not in err and "empty list" not in err


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("preln_tied_cfg", "position_embedding='fairseq_sinusoidal' with layer_norm_position='pre'"),
        ("postln_untied_learned_cfg", "layernorm_embedding=True"),
        ("admin_args", "admin_first_omega=True"),
    ],
)
def test_fold_refuses_what_no_stock_class_keeps_exact(
    name: str, reason: str, converted: dict[str, Path], tmp_path: Path, capsys
) -> None:
    """Marian / Pegasus rebuild their own sinusoidal table from row 0 on load: a fairseq model does not fold."""
    out = tmp_path / "folded"
    code, err = run_cli(["fold", str(converted[name]), str(out)], capsys)
    assert_refused(code, err, out, reason)


@needs_fsmt_fold
@pytest.mark.parametrize("name", ["postln_shared_args", "deepnorm_args"])
def test_fold_into_fsmt_keeps_fairseq_scores(name: str, converted: dict[str, Path], tmp_path: Path) -> None:
    """Post-LN with fairseq's positions folds into FSMTForConditionalGeneration, which holds fairseq's table: the
    folded folder loads with plain AutoModelForSeq2SeqLM and still scores as fairseq."""
    from transformers import AutoModelForSeq2SeqLM, FSMTForConditionalGeneration, pipeline

    assert main(["fold", str(converted[name]), str(tmp_path / "fsmt")]) == 0
    stock = AutoModelForSeq2SeqLM.from_pretrained(tmp_path / "fsmt").eval()
    assert isinstance(stock, FSMTForConditionalGeneration)
    # FSMT's masks do not build in float64 (Transformers' fill_with_neg_inf overflows float32): compared in float32,
    # the spread measured in bench/results/parity_spread.md (this test's row)
    check_against_fairseq(stock, reference(name), FLOAT32_TOLERANCE, dtype=torch.float32)
    if name == "postln_shared_args":
        text = reference(name)["text"]
        translate = pipeline("translation", model=str(tmp_path / "fsmt"))
        got = [
            translate(s, num_beams=1, max_new_tokens=MAX_LEN_B)[0]["translation_text"]
            for s in text["sentences"]
        ]
        assert got == text["translations"]


@pytest.mark.slow
def test_converted_model_loads_as_remote_code_without_the_package(
    converted: dict[str, Path], tmp_path: Path
) -> None:
    """The new position table ships in the folder (model/positions.py): trust_remote_code alone scores as fairseq."""
    from fresh_process import run_without_package

    shutil.copytree(converted["postln_untied_learned_cfg"], tmp_path / "model")
    ref = reference("postln_untied_learned_cfg")
    code = f"""
    import json, torch
    from transformers import AutoModelForSeq2SeqLM
    model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
    source, target = {ref["sources"][0]}, {ref["targets"][0]}
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([[2] + target[:-1]])).logits
    print(json.dumps(torch.log_softmax(logits[0], -1).tolist()))
    """
    ours = torch.tensor(run_without_package(code, tmp_path))
    torch.testing.assert_close(ours, torch.tensor(ref["logprobs"][0]), atol=FLOAT32_TOLERANCE, rtol=0)


def test_dlcl_layer_history_layout_is_read(tmp_path: Path) -> None:
    """dlcl's older LearnableDenseLayerHistory (fairseq/modules/layer_history.py): weight (L+1, L+1) and LayerNorms
    0..L-1 for y_1..y_L, rewritten here from the dlcl.py fixture (weight (L+1, L+1, 1), LayerNorms 1..L): the same
    function, so fairseq's numbers still hold."""
    import argparse
    import re

    with torch.serialization.safe_globals([argparse.Namespace]):
        raw = torch.load(FIXTURES / "dlcl_pre_args.pt", weights_only=True)
    state = {}
    for key, value in raw["model"].items():
        if key.endswith("history.weight"):
            value = value[:, :, 0]
        match = re.match(r"(.*history\.layer_norms\.)(\d+)(\..*)", key)
        state[f"{match[1]}{int(match[2]) - 1}{match[3]}" if match else key] = value
    raw["model"] = state
    torch.save(raw, tmp_path / "model.pt")
    for name in ("dict.src.txt", "dict.tgt.txt"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    model, _, provenance = fairseq_model(tmp_path / "model.pt")
    assert provenance["layout"]["fork"] == "dlcl"
    check_against_fairseq(model, reference("dlcl_pre_args"))


def test_dictionary_is_read_as_fairseq_reads_it(tmp_path: Path) -> None:
    """fairseq's add_from_file: specials first, file order, `#fairseq:overwrite` gives a known symbol a new id too
    (fairseq 0.12.3.1's Dictionary.load of this file gives exactly this list), a plain duplicate is an error."""
    from deep_nmt_hf.publish.convert_fairseq import read_dictionary

    path = tmp_path / "dict.txt"
    path.write_text("b 5\n<unk> 3 #fairseq:overwrite\na 2\nmadeupword0000 0 #fairseq:overwrite\n")
    assert read_dictionary(path) == ["<s>", "<pad>", "</s>", "<unk>", "b", "<unk>", "a", "madeupword0000"]
    path.write_text("b 5\nb 2\n")
    with pytest.raises(ConversionError, match="'b' is listed twice"):
        read_dictionary(path)
