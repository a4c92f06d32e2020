"""`deep-nmt convert zero` against the DS-Init authors' own TensorFlow code (bzhangGo/zero).

The fixtures in tests/fixtures/zero/ were written by zero's graph code (models/transformer_fuse.py,
models/transformer.py, func.py, search.py at d97e2c2) run under TensorFlow 2.21's `tf.compat.v1`
(tests/fixtures/make_zero_fixtures.py; two textual patches at generation time only: the `tensorflow.compat.v1`
import and `collections.abc.Mapping`, see its docstring): tiny random-weight models saved with `tf.train.Saver`,
zero's param.json and vocabularies, subword-nmt BPE codes, and what zero computed — per-token log-probabilities of
given targets (its training-mode decoder), greedy outputs, and its beam search's final hypotheses with their GNMT
scores (cache mode: the incremental decoder with the merged attention's running sum).

The project's environment has no TensorFlow: these tests read the checkpoints through the converter's own reader
of the V2 checkpoint format (publish/tf_checkpoint.py), the path every conversion takes unless that reader refuses a
file (then TensorFlow, the `[convert-tf]` extra, is used).

zero's hypotheses are rescored (each one's summed log-prob over GNMT's ((5 + len) / 6)^α must be zero's score), and
the converted model's own beam search, by zero's rules written into its generation config, must give zero's n-best
lists.

Converted models do not fold: merged attention, the embedding bias and the zero-vector decoder start have no stock
Transformers equivalent; `deep-nmt fold` refuses them with those reasons (checked below).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForSeq2SeqLM
from zero_reference import FIXTURES, FLOAT32_TOLERANCE, NAMES, check_against_zero, reference, token_logprobs

from deep_nmt_hf.cli import main
from deep_nmt_hf.publish.convert_zero import (
    ConversionError,
    convert_weights,
    read_params,
    read_vocab,
    zero_model,
)
from deep_nmt_hf.publish.tf_checkpoint import read_checkpoint


def test_beam_search_gives_zeros_n_best_lists() -> None:
    """zero's search.py, run by zero itself on the four sentences of each fixture in one batch: every n-best list
    (tokens, and scores within 1e-5: float32 on both sides, seen below 7e-6) is the converted model's, by zero's
    rules (``beam_search_rule="zero"``: an <eos> anywhere among the 2 · beam candidates ends a hypothesis, the
    search stops when no live beam can beat the worst finished one at the sentence's limit, a hypothesis cut at the
    limit counts only where none ended) and zero's per-sentence limit. One thing of zero's batch is replayed: in a
    batch zero runs until its longest sentence's limit, and a shorter sentence past its own limit gets one more
    step (search.py's force-finish at time >= max_target_length), so those get ``max_len_b = decode_length + 1``;
    the longest sentence of each batch is decoded as zero decodes it alone, with the converted config as it is.
    Transformers' own rules (the config before) miss most of these lists."""
    for name in NAMES:
        model = zero_model(FIXTURES / name)[0].eval()
        ref, params = reference(name), read_params(FIXTURES / name)
        assert model.generation_config.max_len_b == params["decode_length"]
        longest = max(len(pair["source"]) for pair in ref["pairs"])
        for pair, expected in zip(ref["pairs"], ref["beam"], strict=True):
            source = pair["source"]
            out = model.generate(
                torch.tensor([source]),
                num_return_sequences=params["beam_size"],
                output_scores=True,
                return_dict_in_generate=True,
                max_len_b=params["decode_length"] + (len(source) < longest),
            )
            hypotheses = [row[1:] for row in out.sequences.tolist()]  # row[0]: the decoder start (<pad>)
            hypotheses = [
                row[: row.index(2) + 1] if 2 in row else [t for t in row if t != 0] for row in hypotheses
            ]
            assert hypotheses == [h["tokens"] for h in expected], (name, source)
            for ours, theirs in zip(out.sequences_scores.tolist(), expected, strict=True):
                assert abs(ours - theirs["score"]) < 1e-5, (name, source, ours, theirs["score"])


@pytest.fixture(scope="module")
def converted(tmp_path_factory) -> dict[str, Path]:
    """Every fixture converted once through the command line (save_pretrained inside)."""
    root = tmp_path_factory.mktemp("converted")
    out = {}
    for name in NAMES:
        out[name] = root / name
        argv = ["convert", "zero", str(FIXTURES / name), str(out[name])]
        assert main(argv + ["--bpe-codes", str(FIXTURES / name / "bpe.codes")]) == 0
    return out


@pytest.mark.parametrize("name", NAMES)
def test_converted_model_scores_as_zero_after_save_and_load(name: str, converted: dict[str, Path]) -> None:
    model = AutoModelForSeq2SeqLM.from_pretrained(converted[name]).eval()
    check_against_zero(model, reference(name))


def test_in_memory_model_scores_as_zero_and_holds_its_form() -> None:
    folder = FIXTURES / "fuse_separate"
    model, tokenizers, _ = zero_model(folder, bpe_codes=folder / "bpe.codes")
    config = model.config
    assert config.decoder_attention == "merged" and config.embedding_bias
    assert config.decoder_start_embedding == "zero" and config.layer_norm_eps == 1e-8
    sizes = [len(read_vocab(folder / f"vocab.zero.{side}")) for side in ("src", "tgt")]
    assert (config.vocab_size, config.decoder_vocab_size) == (sizes[0], sizes[1]) != (sizes[0], sizes[0])
    assert tokenizers[""].target_tokenizer.convert_ids_to_tokens(2) == "<eos>"
    assert model.generation_config.length_penalty_form == "gnmt"
    check_against_zero(model, reference("fuse_separate"))


def test_zero_start_is_what_matches_zero() -> None:
    """The decoder's first input must be a zero vector: reading the start token's embedding (+ bias) instead
    moves the log-probs far past the tolerance (the check above would fail without the new field)."""
    model, _, _ = zero_model(FIXTURES / "fuse_shared")
    ref = reference("fuse_shared")
    pair = ref["pairs"][0]
    model.model.decoder.zero_start = False
    ours = token_logprobs(model, pair["source"], pair["target"])
    assert (ours - torch.tensor(ref["log_probs"][0])).abs().max() > 1e-2


def test_our_beam_search_with_gnmt_penalty_finds_zeros_best(converted: dict[str, Path]) -> None:
    """Where zero's best hypothesis ends in <eos>, ours (beam 4, GNMT's α from param.json) finds it too."""
    ref = reference("fuse_untied")
    model = AutoModelForSeq2SeqLM.from_pretrained(converted["fuse_untied"]).eval()
    checked = 0
    for pair, hypotheses in zip(ref["pairs"], ref["beam"], strict=True):
        best = max(hypotheses, key=lambda h: h["score"])
        if best["tokens"][-1] != 2:
            continue
        with torch.no_grad():
            out = model.generate(torch.tensor([pair["source"]]), max_new_tokens=len(pair["source"]) + 6)
        assert out[0, 1:].tolist() == best["tokens"]
        checked += 1
    assert checked


def test_tokenizers_reproduce_subword_nmt_and_zeros_vocab(converted: dict[str, Path]) -> None:
    """One vocabulary: one tokenizer, and pipeline('translation') runs on raw text; two: the source's at the top
    (PairedTokenizerFast) and target_tokenizer/. Ids are zero's Vocab.to_id of subword-nmt's segmentation (<unk> = 1
    for unknown pieces)."""
    from transformers import AutoTokenizer, PreTrainedTokenizerFast, pipeline

    for name in ("fuse_shared", "fuse_separate"):
        ref = reference(name)["tokenizer"]
        tokenizer = PreTrainedTokenizerFast.from_pretrained(converted[name])
        config = json.loads((converted[name] / "config.json").read_text())
        for raw, ids in zip(ref["raw"], ref["ids"], strict=True):
            ours = [i if i < config["vocab_size"] else 1 for i in tokenizer(raw).input_ids]
            assert ours == ids
    translate = pipeline("translation", model=str(converted["fuse_shared"]))
    ref = reference("fuse_shared")
    tokenizer = AutoTokenizer.from_pretrained(converted["fuse_shared"])
    text = translate(ref["tokenizer"]["raw"][0], num_beams=1, max_new_tokens=5)[0]["translation_text"]
    assert text and "@@" not in text
    target = AutoTokenizer.from_pretrained(converted["fuse_separate"] / "target_tokenizer")
    greedy = reference("fuse_separate")["greedy"][0]
    assert target.decode(greedy, skip_special_tokens=True) == target.decode(
        [t for t in greedy if t > 2], skip_special_tokens=True
    )
    assert len(target) >= 29 and not (converted["fuse_separate"] / "source_tokenizer").exists()


@pytest.mark.parametrize("name", ["fuse_shared", "transformer_separate"])
def test_fold_refuses_with_the_reason(name: str, converted: dict[str, Path], tmp_path: Path, capsys) -> None:
    out = tmp_path / "folded"
    code, err = run_cli(["fold", str(converted[name]), str(out)], capsys)
    reasons = ["embedding_bias=True", "decoder_start_embedding='zero'"]
    assert_refused(code, err, out, *reasons, *(["decoder_attention='merged'"] if "fuse" in name else []))


# ------------------------------------------------------------------------------------------------ bad input
def run_cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def assert_refused(code: int, err: str, output: Path, *words: str) -> None:
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    assert not output.exists()
    assert not list(output.parent.glob(f".{output.name}*"))  # no half-written sibling left


def copy_fixture(name: str, into: Path) -> Path:
    return Path(shutil.copytree(FIXTURES / name, into / name))


def test_missing_param_json_is_refused(tmp_path: Path, capsys) -> None:
    model = copy_fixture("fuse_shared", tmp_path)
    (model / "param.json").unlink()
    out = tmp_path / "out"
    assert_refused(*run_cli(["convert", "zero", str(model), str(out)], capsys), out, "param.json")


def test_missing_vocabulary_is_refused(tmp_path: Path, capsys) -> None:
    model = copy_fixture("fuse_separate", tmp_path)
    (model / "vocab.zero.tgt").unlink()
    out = tmp_path / "out"
    code, err = run_cli(["convert", "zero", str(model), str(out)], capsys)
    assert_refused(code, err, out, "vocab.zero.tgt", "--target-vocab")


def test_vocabulary_size_mismatch_is_refused(tmp_path: Path, capsys) -> None:
    lines = (FIXTURES / "fuse_separate" / "vocab.zero.src").read_text().splitlines()
    (tmp_path / "short.txt").write_text("\n".join(lines[:-1]) + "\n")
    out = tmp_path / "out"
    argv = [
        "convert",
        "zero",
        str(FIXTURES / "fuse_separate"),
        str(out),
        "--source-vocab",
        str(tmp_path / "short.txt"),
    ]
    code, err = run_cli(argv, capsys)
    assert_refused(code, err, out, f"{len(lines) - 1} entries", f"{len(lines)} rows", "src_embedding")


@pytest.mark.parametrize("model_name", ["rnnsearch", "transformer_aan"])
def test_other_model_name_is_refused(model_name: str, tmp_path: Path, capsys) -> None:
    model = copy_fixture("fuse_shared", tmp_path)
    params = json.loads((model / "param.json").read_text())
    (model / "param.json").write_text(json.dumps(params | {"model_name": model_name}) + "\n")
    out = tmp_path / "out"
    code, err = run_cli(["convert", "zero", str(model), str(out)], capsys)
    assert_refused(code, err, out, f"model_name={model_name!r}", "transformer_fuse")


def test_unknown_model_variable_is_refused() -> None:
    params = read_params(FIXTURES / "fuse_shared")
    model, _, _ = zero_model(FIXTURES / "fuse_shared")
    weights = {
        name[len("transformer_fuse/") :]: value
        for name, value in read_checkpoint(FIXTURES / "fuse_shared").items()
        if name.startswith("transformer_fuse/")
    }
    assert convert_weights(weights, params, model.config)  # Adam's slots are skipped
    weights["decoder/layer_1/fuse_attention/gate/W_0_0"] = weights["bias"]
    with pytest.raises(ConversionError, match="decoder/layer_1/fuse_attention/gate/W_0_0.*unknown layout"):
        convert_weights(weights, params, model.config)


def test_checkpoint_file_naming_the_training_machines_path_is_followed(tmp_path: Path) -> None:
    """zero's `checkpoint` file records the path it was saved to; a released directory is read by file name."""
    model = copy_fixture("fuse_untied", tmp_path)
    (model / "checkpoint").write_text('model_checkpoint_path: "/home/zero/train/model-100"\n')
    ours, _, provenance = zero_model(model)
    assert provenance["converted_from"].endswith("model-100")
    check_against_zero(ours, reference("fuse_untied"))


def test_checkpoint_reader_agrees_with_the_variables_zero_saved() -> None:
    variables = read_checkpoint(FIXTURES / "fuse_shared")
    assert variables["global_step"].dtype.kind == "i"
    assert variables["transformer_fuse/encoder/layer_0/self_attention/dot_attention/qkv_map/W_0_0"].shape == (
        16,
        48,
    )
    assert "transformer_fuse/bias/Adam_1" in variables  # the optimizer's slots are in the file


def test_translate_command_encodes_with_the_source_and_decodes_with_the_target_vocabulary(
    converted: dict[str, Path], monkeypatch, capsys
) -> None:
    """Two vocabularies: `deep-nmt translate` encodes with the source and decodes with target_tokenizer/."""
    import io
    import sys

    from transformers import AutoTokenizer, PreTrainedTokenizerFast

    folder = converted["fuse_separate"]
    raw = reference("fuse_separate")["tokenizer"]["raw"]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(("\n".join(raw) + "\n").encode())))
    assert main(["translate", str(folder), "--num-beams", "1", "--max-new-tokens", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    source = PreTrainedTokenizerFast.from_pretrained(folder)
    target = AutoTokenizer.from_pretrained(folder / "target_tokenizer")
    model = AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    expected, wrong = [], []
    for sentence in raw:
        ids = [i if i < model.config.vocab_size else 1 for i in source(sentence).input_ids]
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), num_beams=1, max_new_tokens=8)
        expected.append(target.decode(out[0], skip_special_tokens=True).strip())
        wrong.append(source.decode(out[0], skip_special_tokens=True).strip())
    assert lines == expected and all(lines) and lines != wrong


PAPER_BLEU = {
    "base": "27.59",
    "big": "29.07",
    "base_fuse_init20": "28.67",
    "base_fuse_init30": "28.86",
    "big_fuse_init20": "29.62",
}


@pytest.mark.parametrize("name", sorted(PAPER_BLEU))
def test_released_models_card_cites_the_papers_bleu_and_says_it_was_not_rescored(name: str) -> None:
    from deep_nmt_hf.publish.convert_zero import RELEASED, released_card

    model_name, width, layers = RELEASED[name]
    params = read_params(FIXTURES / "fuse_shared") | {"model_name": model_name, "hidden_size": width}
    card = released_card(name, params | {"num_encoder_layer": layers, "num_decoder_layer": layers})
    assert f"**{PAPER_BLEU[name]}**" in card and "newstest2014" in card
    assert "Not re-scored here" in card and "no network" in card.replace("\n", " ")
    assert f"model/{name.replace('_fuse', '+fuse')}.tar.gz" in card


def test_released_flag_checks_the_shape(tmp_path: Path, capsys) -> None:
    out = tmp_path / "out"
    code, err = run_cli(
        ["convert", "zero", str(FIXTURES / "fuse_shared"), str(out), "--released", "big"], capsys
    )
    assert_refused(code, err, out, "--released big", "hidden_size=16", "1024")


def test_unreadable_checkpoint_is_refused(tmp_path: Path, capsys) -> None:
    model = copy_fixture("fuse_untied", tmp_path)
    (model / "model-100.index").write_bytes(b"not an index" * 8)
    out = tmp_path / "out"
    code, err = run_cli(["convert", "zero", str(model), str(out)], capsys)
    assert_refused(code, err, out, "model-100.index is not a TensorFlow V2 checkpoint index")


@pytest.mark.slow
def test_converted_model_loads_as_remote_code_without_the_package(
    converted: dict[str, Path], tmp_path: Path
) -> None:
    """The new fields (embedding bias, zero-vector start, target vocabulary size) ship in the folder's model code:
    trust_remote_code alone scores as zero."""
    from fresh_process import run_without_package

    shutil.copytree(converted["fuse_separate"], tmp_path / "model")
    pair = reference("fuse_separate")["pairs"][0]
    code = f"""
    import json, torch
    from transformers import AutoModelForSeq2SeqLM
    model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
    source, target = {pair["source"]}, {pair["target"]}
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([source]), decoder_input_ids=torch.tensor([[0] + target[:-1]])).logits
    lprobs = torch.log_softmax(logits[0], -1)
    print(json.dumps([lprobs[t, token].item() for t, token in enumerate(target)]))
    """
    ours = torch.tensor(run_without_package(code, tmp_path))
    expected = torch.tensor(reference("fuse_separate")["log_probs"][0])
    torch.testing.assert_close(ours, expected, atol=FLOAT32_TOLERANCE, rtol=0)


def test_push_uploads_a_released_models_own_card(tmp_path: Path, monkeypatch, capsys) -> None:
    """A folder converted with `--released NAME` keeps its card on `push`: the upload's README.md is the released
    model's card (the paper's BLEU, not re-scored), not one rendered from training records the conversion lacks.
    The fixture is tiny, so the released name is given its shape here."""
    from deep_nmt_hf.publish import convert_zero
    from deep_nmt_hf.publish.hub import prepare_upload

    monkeypatch.setitem(convert_zero.RELEASED, "base_fuse_init20", ("transformer_fuse", 16, 2))
    out = tmp_path / "converted"
    codes = ["--bpe-codes", str(FIXTURES / "fuse_shared" / "bpe.codes")]
    argv = ["convert", "zero", str(FIXTURES / "fuse_shared"), str(out), "--released", "base_fuse_init20"]
    assert main(argv + codes) == 0
    card = (out / "README.md").read_text(encoding="utf-8")
    assert "28.67" in card and "Not re-scored here" in card
    prepared = prepare_upload(out, tmp_path / "upload")
    assert (prepared.folder / "README.md").read_text(encoding="utf-8") == card
    plain = tmp_path / "plain"
    assert main(["convert", "zero", str(FIXTURES / "fuse_shared"), str(plain), *codes]) == 0
    rendered = prepare_upload(plain, tmp_path / "upload_plain")
    assert "28.67" not in (rendered.folder / "README.md").read_text(encoding="utf-8")
