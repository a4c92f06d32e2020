"""Converted models decode with the static cache as with the dynamic one, and as the toolkit did (issue 68 item 3).

`deep-nmt translate --compile` decodes with a static cache (training/compilation.py, `compiled_decoding`), whose
positions reach model/positions.py as a tensor: the branch that must still add fairseq's `position_offset`. For every
converted fixture (the fairseq layouts, sentencepiece, Moses, two dictionaries, and zero), greedy and beam-4
decoding with `cache_implementation="static"` give the dynamic cache's tokens and per-step scores, and greedy gives
the toolkit's own output; once, compiled (`compiled_decoding`, dynamo's ``eager`` backend: the capture, without
inductor's minutes of code generation on a CPU) gives the same.

Tolerance: per-step scores within 1e-4 absolute (float32; the static cache attends over its whole padded length
with masked slots, the dynamic one over the filled positions only, so sums differ in order): measured max 1.4e-5 on
default / avx2 and eager / sdpa, 2026-11-29 (bench/results/parity_spread.md); tolerance 1e-4. Dropping fairseq's
position offset from the static branch fails every fairseq fixture here (checked by planting it).
"""

from __future__ import annotations

import json

import pytest
import torch
from fairseq_reference import FIXTURES, MANIFEST, MAX_LEN_B
from fairseq_reference import reference as fairseq_reference
from zero_reference import FIXTURES as ZERO
from zero_reference import NAMES as ZERO_NAMES
from zero_reference import reference as zero_reference

from deep_nmt_hf.publish.convert_fairseq import fairseq_model
from deep_nmt_hf.publish.convert_zero import zero_model

ATOL = 1e-4
VOCABULARIES = FIXTURES.parent / "fairseq_vocabularies"
FAIRSEQ = {name: {} for name, spec in MANIFEST["layouts"].items() if "flags" in spec}
FAIRSEQ["spm_unigram_args"] = {"sentencepiece_model": FIXTURES / "spm_unigram.model"}
FAIRSEQ |= {f"moses/{name}": {"bpe_codes": FIXTURES / "moses" / "bpecodes"} for name in MANIFEST["moses"]}
CASES = [f"fairseq/{name}" for name in FAIRSEQ] + ["fairseq/postln_two_dictionaries"]
CASES += [f"zero/{name}" for name in ZERO_NAMES]


def converted(case: str) -> tuple[torch.nn.Module, list[tuple[list[int], list[int], int]]]:
    """The converted model (in memory) and (source, the toolkit's greedy output, max new tokens) per sentence."""
    toolkit, name = case.split("/", 1)
    if toolkit == "zero":
        model = zero_model(ZERO / name)[0]
        ref = zero_reference(name)
        sentences = [
            (p["source"], greedy, len(p["source"]) + 6)
            for p, greedy in zip(ref["pairs"], ref["greedy"], strict=True)
        ]
        return model.eval(), sentences
    if name == "postln_two_dictionaries":
        model = fairseq_model(VOCABULARIES / f"{name}.pt")[0]
        ref = json.loads((VOCABULARIES / f"{name}.json").read_text())
    else:
        model = fairseq_model(FIXTURES / f"{name}.pt", **FAIRSEQ[name])[0]
        ref = fairseq_reference(name)
    # fairseq appends a forced </s> at its max length (max_len_b), where Transformers stops without one
    greedy = [g[:MAX_LEN_B] if len(g) == MAX_LEN_B + 1 else g for g in ref["greedy"]]
    return model.eval(), [(source, g, MAX_LEN_B) for source, g in zip(ref["sources"], greedy, strict=True)]


def decode(model, source: list[int], max_new_tokens: int, **kwargs):
    with torch.no_grad():
        return model.generate(
            torch.tensor([source]),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            output_scores=True,
            return_dict_in_generate=True,
            **kwargs,
        )


def assert_same_decoding(got, expected, what: str) -> None:
    assert got.sequences.tolist() == expected.sequences.tolist(), what
    assert len(got.scores) == len(expected.scores), what
    for step, (a, b) in enumerate(zip(got.scores, expected.scores, strict=True)):
        finite = torch.isfinite(b)
        assert torch.equal(torch.isfinite(a), finite), f"{what}, step {step}: different tokens ruled out"
        torch.testing.assert_close(a[finite], b[finite], atol=ATOL, rtol=0, msg=f"{what}, step {step}")


def check_static_equals_dynamic(model, sentences, **static) -> None:
    """Greedy and beam-4 with `static` generate options equal the dynamic cache's; greedy equals the toolkit's."""
    for source, toolkit_greedy, max_new_tokens in sentences:
        for beams in (1, 4):
            dynamic = decode(model, source, max_new_tokens, num_beams=beams)
            got = decode(model, source, max_new_tokens, num_beams=beams, **static)
            assert_same_decoding(got, dynamic, f"beams {beams}, source {source}")
            if beams == 1:
                assert got.sequences[0, 1:].tolist() == toolkit_greedy, source  # [0, 0]: the decoder start
            else:
                torch.testing.assert_close(got.sequences_scores, dynamic.sequences_scores, atol=ATOL, rtol=0)


@pytest.mark.parametrize("case", CASES)
def test_static_cache_decodes_as_the_dynamic_cache_and_the_toolkit(case: str) -> None:
    model, sentences = converted(case)
    check_static_equals_dynamic(model, sentences, cache_implementation="static")


def test_compiled_decoding_of_a_converted_model_decodes_as_the_toolkit() -> None:
    """`deep-nmt translate --compile`'s path (fairseq's offset table; dynamo's eager backend), greedy and beam."""
    from deep_nmt_hf.training.compilation import compiled_decoding

    model, sentences = converted("fairseq/admin_args")
    assert model.config.position_offset == 2
    dynamic = {
        (tuple(s), beams): decode(model, s, n, num_beams=beams) for s, _, n in sentences for beams in (1, 4)
    }
    torch._dynamo.reset()
    compiled_decoding(model, backend="eager")
    for source, toolkit_greedy, max_new_tokens in sentences:
        for beams in (1, 4):
            got = decode(model, source, max_new_tokens, num_beams=beams)
            assert_same_decoding(got, dynamic[(tuple(source), beams)], f"compiled, beams {beams}")
            if beams == 1:
                assert got.sequences[0, 1:].tolist() == toolkit_greedy
