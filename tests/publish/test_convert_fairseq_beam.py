"""A converted fairseq model searches as fairseq-generate does (publish/convert_fairseq.py's generation config).

tests/fixtures/fairseq/beam_rules.json was written by fairseq 0.12.3.1's own SequenceGenerator, built as
fairseq-generate builds it (`task.build_generator` with its default options: beam 5, lenpen 1, unkpen 0, min-len 1,
max-len-a 0, max-len-b 200), on 24 sources decoded one at a time by one fixture checkpoint, and again with
--max-len-a 1 --max-len-b 2 (tests/fixtures/make_converter_fixtures.py, `beam_rule_references`). On that model
some hypotheses end after one or two tokens and others run to the positions' limit, so Transformers' own stopping
and finishing rules give other n-best lists (checked below: the fixture tells the rules apart).

Scores: fairseq's length-normalised sums; ours within 1e-5 (both float32, the same operations in another order:
the differences seen are below 3e-6, and below 5e-6 with ATEN_CPU_CAPABILITY=default). The folded FSMT model's within
3e-5: the fold computes the same function through FSMT's own layers (its check allows 1e-4 on the logits), and the
differences seen over the 240 scores are at most 9.8e-6 (avx2) and 8.5e-6 (ATEN_CPU_CAPABILITY=default).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import transformers
from fairseq_reference import FIXTURES
from fresh_process import run_without_package
from packaging.version import Version
from transformers import AutoModelForSeq2SeqLM, LogitsProcessorList

from deep_nmt_hf.cli import main
from deep_nmt_hf.model.length_limit import SourceLengthLimitLogitsProcessor, source_length_limits
from deep_nmt_hf.publish.folding import FSMT_CACHED_DECODING_SINCE

REFERENCE = json.loads((FIXTURES / "beam_rules.json").read_text())
SCORE_TOLERANCE = 1e-5
FOLDED_SCORE_TOLERANCE = 3e-5


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    """The checkpoint converted through the command line, and that folder folded into stock FSMT where the
    installed Transformers' FSMT decodes right (publish/folding.py's FSMT_CACHED_DECODING_SINCE; before it the fold
    is refused: test_the_fold_into_fsmt_is_refused_where_stock_fsmt_decodes_wrongly)."""
    root = tmp_path_factory.mktemp("beam_rules")
    converted, folded = root / "converted", root / "fsmt"
    assert main(["convert", "fairseq", str(FIXTURES / REFERENCE["checkpoint"]), str(converted)]) == 0
    if Version(transformers.__version__) >= Version(FSMT_CACHED_DECODING_SINCE):
        assert main(["fold", str(converted), str(folded)]) == 0
    return {"converted": converted, "folded": folded}


@pytest.fixture
def folded(folders: dict[str, Path]) -> Path:
    if not folders["folded"].is_dir():
        pytest.skip(f"transformers {transformers.__version__}: FSMT folds need {FSMT_CACHED_DECODING_SINCE}")
    return folders["folded"]


def n_best(model, source: list[int], **generate_kwargs) -> tuple[list[list[int]], list[float]]:
    """The model's n-best list for one source, each hypothesis up to and with its </s>, and the scores."""
    eos = model.generation_config.eos_token_id
    out = model.generate(
        torch.tensor([source]),
        num_return_sequences=model.generation_config.num_beams,
        output_scores=True,
        return_dict_in_generate=True,
        **generate_kwargs,
    )
    hypotheses = [row[1:] for row in out.sequences.tolist()]  # row[0]: the decoder start (</s>, as fairseq's)
    return [
        row[: row.index(eos) + 1] if eos in row else row for row in hypotheses
    ], out.sequences_scores.tolist()


def limit_of(key: str) -> dict[str, float]:
    """The generate keywords of the fixture's `key` run: --max-len-a / --max-len-b where they are not the defaults
    (which the converted config carries)."""
    limit = {} if key == "defaults" else REFERENCE["limited"]["options"]
    return {k: limit[k] for k in ("max_len_a", "max_len_b") if k in limit}


def assert_fairseqs(model, key: str, tolerance: float = SCORE_TOLERANCE, **generate_kwargs) -> None:
    for source, expected in zip(REFERENCE["sources"], REFERENCE[key]["hypotheses"], strict=True):
        tokens, scores = n_best(model, source, **generate_kwargs)
        assert tokens == [h["tokens"] for h in expected], source
        for ours, theirs in zip(scores, expected, strict=True):
            assert abs(ours - theirs["score"]) < tolerance, (source, ours, theirs["score"])


def test_the_converted_config_carries_fairseq_generates_defaults(folders: dict[str, Path]) -> None:
    options = REFERENCE["defaults"]["options"]
    saved = json.loads((folders["converted"] / "generation_config.json").read_text())
    assert (saved["num_beams"], saved["length_penalty"]) == (options["beam"], options["lenpen"])
    assert (saved["max_len_a"], saved["max_len_b"]) == (options["max_len_a"], options["max_len_b"])
    assert (saved["early_stopping"], saved["beam_search_rule"], saved["min_new_tokens"]) == (
        True,
        "fairseq",
        1,
    )
    assert (
        options["unkpen"] == 0 and "sequence_bias" not in saved
    )  # fairseq's default neither bans nor penalises


@pytest.mark.parametrize("key", ["defaults", "limited"])
def test_converted_model_gives_fairseqs_n_best_lists(key: str, folders: dict[str, Path]) -> None:
    model = AutoModelForSeq2SeqLM.from_pretrained(folders["converted"]).eval()
    assert_fairseqs(model, key, **limit_of(key))


def test_transformers_rules_give_other_lists_on_this_fixture(folders: dict[str, Path]) -> None:
    """The fixture tells the rules apart: Transformers' defaults (stop by its heuristic, keep the best `beam`
    finished) and `early_stopping=True` alone each miss some of fairseq's lists."""
    model = AutoModelForSeq2SeqLM.from_pretrained(folders["converted"]).eval()
    for rules in (
        {"early_stopping": False, "beam_search_rule": "transformers"},
        {"beam_search_rule": "transformers"},
    ):
        misses = sum(
            n_best(model, source, **rules)[0] != [h["tokens"] for h in expected]
            for source, expected in zip(
                REFERENCE["sources"], REFERENCE["defaults"]["hypotheses"], strict=True
            )
        )
        assert misses > 0, rules


def test_folded_model_gives_fairseqs_best_hypothesis(folded: Path) -> None:
    """Stock FSMT's generate has neither fairseq's finishing rule nor a per-sentence limit. With the limit's
    logits processor passed in, as `deep-nmt translate` passes it (the limit binds here: fairseq's 200 is cut to
    the positions, 63, where fairseq forces </s>), its best hypothesis and score are fairseq's, under the defaults
    and under --max-len-a 1 --max-len-b 2; its lower n-best entries can differ (fairseq keeps the first to end)."""
    from transformers import FSMTForConditionalGeneration

    stock = AutoModelForSeq2SeqLM.from_pretrained(folded).eval()
    assert isinstance(stock, FSMTForConditionalGeneration)
    cap = stock.config.max_position_embeddings - 1  # fairseq: min(a · n + b, max_decoder_positions - 1)
    for key in ("defaults", "limited"):
        options = REFERENCE[key]["options"]
        for source, expected in zip(REFERENCE["sources"], REFERENCE[key]["hypotheses"], strict=True):
            lengths = torch.tensor([len(source)])
            limits = source_length_limits(lengths, options["max_len_a"], options["max_len_b"], cap=cap)
            processor = SourceLengthLimitLogitsProcessor(limits, stock.generation_config.eos_token_id)
            tokens, scores = n_best(
                stock,
                source,
                logits_processor=LogitsProcessorList([processor]),
                max_length=int(limits[0]) + 2,
            )
            assert tokens[0] == expected[0]["tokens"], (key, source)
            assert abs(scores[0] - expected[0]["score"]) < SCORE_TOLERANCE


@pytest.mark.parametrize("key", ["defaults", "limited"])
def test_folded_model_loaded_with_remote_code_gives_fairseqs_n_best_lists(key: str, folded: Path) -> None:
    """The fold writes custom_generate/ (Transformers' door for a model's own decoding method): loaded with
    trust_remote_code=True, stock FSMT searches by the converted model's rules and per-sentence limit."""
    from transformers import FSMTForConditionalGeneration

    model = AutoModelForSeq2SeqLM.from_pretrained(folded, trust_remote_code=True).eval()
    assert isinstance(model, FSMTForConditionalGeneration)
    assert_fairseqs(model, key, tolerance=FOLDED_SCORE_TOLERANCE, **limit_of(key))


def test_a_plain_load_of_the_folded_model_runs_no_code(folded: Path) -> None:
    """Without trust_remote_code the folder is stock FSMT as before: no code runs (its class and `generate` are
    Transformers' own) and it searches by Transformers' rules, so some n-best lists are not fairseq's."""
    from transformers import FSMTForConditionalGeneration

    assert (folded / "custom_generate" / "generate.py").is_file()
    model = AutoModelForSeq2SeqLM.from_pretrained(folded).eval()
    assert type(model) is FSMTForConditionalGeneration and "generate" not in vars(model)
    misses = sum(
        n_best(model, source)[0] != [h["tokens"] for h in expected]
        for source, expected in zip(REFERENCE["sources"], REFERENCE["defaults"]["hypotheses"], strict=True)
    )
    assert misses > 0


FRESH_N_BEST = """
import json, torch
from transformers import AutoModelForSeq2SeqLM
reference = json.load(open("beam_rules.json"))
model = AutoModelForSeq2SeqLM.from_pretrained("model", trust_remote_code=True).eval()
eos, lists = model.generation_config.eos_token_id, {}
options = reference["limited"]["options"]
for key, limit in (("defaults", {}), ("limited", {k: options[k] for k in ("max_len_a", "max_len_b")})):
    lists[key] = []
    for source in reference["sources"]:
        out = model.generate(torch.tensor([source]), num_return_sequences=model.generation_config.num_beams,
                             output_scores=True, return_dict_in_generate=True, **limit)
        rows = [row[1:] for row in out.sequences.tolist()]
        rows = [row[: row.index(eos) + 1] if eos in row else row for row in rows]
        lists[key].append({"tokens": rows, "scores": out.sequences_scores.tolist()})
print(json.dumps(lists))
"""


@pytest.mark.slow
def test_folded_folder_gives_fairseqs_n_best_lists_without_the_package(folded: Path, tmp_path: Path) -> None:
    """custom_generate/ holds all its code: a process where deep_nmt_hf cannot be imported gets fairseq's lists."""
    shutil.copytree(folded, tmp_path / "model")
    shutil.copyfile(FIXTURES / "beam_rules.json", tmp_path / "beam_rules.json")
    lists = run_without_package(FRESH_N_BEST, tmp_path)
    for key in ("defaults", "limited"):
        for got, expected in zip(lists[key], REFERENCE[key]["hypotheses"], strict=True):
            assert got["tokens"] == [h["tokens"] for h in expected]
            for ours, theirs in zip(got["scores"], expected, strict=True):
                assert abs(ours - theirs["score"]) < FOLDED_SCORE_TOLERANCE


def test_the_fold_into_fsmt_is_refused_where_stock_fsmt_decodes_wrongly(
    folders: dict[str, Path], tmp_path: Path, monkeypatch, capsys
) -> None:
    """Before FSMT_CACHED_DECODING_SINCE, stock FSMT's cached decoding reads the first position's row at every step
    (on 5.10.4 its beam outputs differ from the converted model's): one line naming the release, exit 2, nothing
    written. Here the installed release is made to come before it."""
    import deep_nmt_hf.publish.folding as folding

    monkeypatch.setattr(folding, "FSMT_CACHED_DECODING_SINCE", "999.0")
    assert main(["fold", str(folders["converted"]), str(tmp_path / "fsmt")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert (
        f"transformers {transformers.__version__}'s FSMTForConditionalGeneration decodes every cached" in err
    )
    assert "fold with transformers>=999.0" in err and not list(tmp_path.iterdir())


def test_the_folded_card_says_how_to_use_custom_generate(folders: dict[str, Path], folded: Path) -> None:
    """The card of a fold that carries custom_generate/ (`push --fold` of a converted model) tells a Hub user that
    `trust_remote_code=True` applies fairseq's rules while the plain load runs no code; a fold without it does not."""
    from deep_nmt_hf.publish.hub import render_model_card

    report = {
        "stock_class": "FSMTForConditionalGeneration",
        "max_abs_logit_diff": 0.0,
        "beam_outputs_identical": True,
    }
    cards = {
        carried: str(
            render_model_card(
                folders["converted"], repo_id="me/fsmt", folded={**report, "custom_generate": carried}
            )
        )
        for carried in (True, False)
    }
    assert (
        "`custom_generate/`" in cards[True]
        and 'from_pretrained("me/fsmt", trust_remote_code=True)' in cards[True]
    )
    assert "custom_generate" not in cards[False]
