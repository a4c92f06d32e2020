"""What zero (bzhangGo/zero) computed for the converter's fixtures, and the check that a model reproduces it.

tests/fixtures/zero/ was written by zero's graph code under TensorFlow (tests/fixtures/make_zero_fixtures.py);
used by tests/publish/test_convert_zero.py, tests/publish/test_converted_decoding.py and bench/parity_spread.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch

from deep_nmt_hf.model.length_penalty import gnmt_penalty

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "zero"
NAMES = json.loads((FIXTURES / "MANIFEST.json").read_text())["fixtures"]
# float64 ours against zero's float32 (zero's own rounding, fixed in the fixture and the same on every CPU): measured
# max 3.8e-5 on default / avx2 and eager / sdpa, 2026-11-29 (bench/results/parity_spread.md); tolerance 1e-4. Our
# float32 against zero's (FLOAT32_TOLERANCE: a model run as saved, in a fresh process): measured max 1.9e-5; 1e-4.
# Greedy runs the model as given: the smallest top-2 gap over zero's greedy steps is 2.7e-2.
TOLERANCE = 1e-4
FLOAT32_TOLERANCE = 1e-4


def reference(name: str) -> dict:
    return json.loads((FIXTURES / name / "reference.json").read_text())


def batch_logprobs(model, sources: list[list[int]], targets: list[list[int]]) -> torch.Tensor:
    """(batch, target length, vocab) log-probs, sources and targets right-padded with <pad> = 0 in one batch (in
    float32, or float64 for a float64 model)."""
    width, length = max(map(len, sources)), max(map(len, targets))
    source = torch.tensor([s + [0] * (width - len(s)) for s in sources])
    target = torch.tensor([t + [0] * (length - len(t)) for t in targets])
    start = torch.full((len(targets), 1), model.config.decoder_start_token_id)
    with torch.no_grad():
        logits = model(
            input_ids=source,
            attention_mask=source.ne(0),
            decoder_input_ids=torch.cat([start, target[:, :-1]], dim=1),
            decoder_attention_mask=target.ne(0),
        ).logits
    return torch.log_softmax(logits.to(torch.promote_types(logits.dtype, torch.float32)), dim=-1)


def token_logprobs(model, source: list[int], target: list[int]) -> torch.Tensor:
    lprobs = batch_logprobs(model, [source], [target])[0]
    return lprobs.gather(1, torch.tensor(target).unsqueeze(1)).squeeze(1)


def check_against_zero(model, ref: dict) -> None:
    """Log-probs within 1e-4 (one padded batch, our model in float64), greedy identical (the model as given), zero's
    beam hypotheses rescoring to its scores (float64)."""
    exact = copy.deepcopy(model).to(torch.float64).eval()
    sources = [pair["source"] for pair in ref["pairs"]]
    targets = [pair["target"] for pair in ref["pairs"]]
    lprobs = batch_logprobs(exact, sources, targets)
    for row, (target, expected) in enumerate(zip(targets, ref["log_probs"], strict=True)):
        ours = lprobs[row, torch.arange(len(target)), torch.tensor(target)]
        torch.testing.assert_close(ours, torch.tensor(expected, dtype=torch.float64), atol=TOLERANCE, rtol=0)
    for source, greedy in zip(sources, ref["greedy"], strict=True):
        with torch.no_grad():
            out = model.generate(  # the fixture's greedy loop has no <eos> rule: no per-sentence limit either
                torch.tensor([source]),
                num_beams=1,
                do_sample=False,
                max_new_tokens=len(source) + 6,
                max_len_a=None,
                max_len_b=None,
            )
        assert out[0, 1:].tolist() == greedy  # out[0, 0]: the decoder start (<pad>, read as a zero vector)
    for source, hypotheses in zip(sources, ref["beam"], strict=True):
        for hypothesis in hypotheses:
            tokens = hypothesis["tokens"]
            score = token_logprobs(exact, source, tokens).sum() / gnmt_penalty(len(tokens), ref["alpha"])
            assert abs(score.item() - hypothesis["score"]) < TOLERANCE, (tokens, score, hypothesis["score"])
