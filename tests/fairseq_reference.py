"""What fairseq computed for the converter's fixtures, and the check that a model reproduces it.

tests/fixtures/fairseq/ was written by fairseq 0.12.3.1 itself (tests/fixtures/make_converter_fixtures.py); shared by
tests/publish/test_convert_fairseq.py and tests/publish/test_convert_fairseq_spm.py.

Beam search itself may order or prune differently from fairseq's (Transformers finishes beams by its own rules), so
the beam check rescores fairseq's hypotheses with our model: each one's per-token log-probs and its length-normalised
score must be fairseq's. Greedy decoding must give fairseq's tokens; fairseq appends a forced </s> at its max length
(max_len_b), where Transformers stops without one, so a sequence of max_len_b + 1 tokens is compared without it.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "fairseq"
MANIFEST = json.loads((FIXTURES / "MANIFEST.json").read_text())
MAX_LEN_B = MANIFEST["max_len_b"]
TOLERANCE = 1e-4


def reference(name: str) -> dict:
    """fairseq's numbers for one fixture checkpoint (NAME.json)."""
    return json.loads((FIXTURES / f"{name}.json").read_text())


def teacher_forced_logprobs(model, source: list[int], target: list[int]) -> torch.Tensor:
    """(len(target), vocab) log-probs of each next token given the source and the target prefix."""
    decoder_input = torch.tensor([[model.config.decoder_start_token_id, *target[:-1]]])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([source]), decoder_input_ids=decoder_input).logits[0]
    return torch.log_softmax(logits.float(), dim=-1)


def check_against_fairseq(model, ref: dict) -> None:
    """Log-probs within 1e-4, greedy identical, fairseq's beam hypotheses rescoring to fairseq's scores."""
    for source, target, expected in zip(ref["sources"], ref["targets"], ref["logprobs"], strict=True):
        ours = teacher_forced_logprobs(model, source, target)
        torch.testing.assert_close(ours, torch.tensor(expected), atol=TOLERANCE, rtol=0)
    for source, greedy in zip(ref["sources"], ref["greedy"], strict=True):
        with torch.no_grad():
            out = model.generate(
                torch.tensor([source]), num_beams=1, do_sample=False, max_new_tokens=MAX_LEN_B
            )
        expected = greedy[:MAX_LEN_B] if len(greedy) == MAX_LEN_B + 1 else greedy
        assert out[0, 1:].tolist() == expected  # out[0, 0] is the decoder start (</s>, fairseq's too)
    for source, hypotheses in zip(ref["sources"], ref["beam"], strict=True):
        for hypothesis in hypotheses:
            tokens = hypothesis["tokens"]
            lprobs = teacher_forced_logprobs(model, source, tokens)
            positional = lprobs.gather(1, torch.tensor(tokens).unsqueeze(1)).squeeze(1)
            torch.testing.assert_close(
                positional, torch.tensor(hypothesis["positional_scores"]), atol=TOLERANCE, rtol=0
            )
            score = positional.sum() / len(tokens)  # fairseq: normalised by length ** lenpen, lenpen 1
            assert abs(score.item() - hypothesis["score"]) < TOLERANCE


def assert_refused(code: int, err: str, output: Path, *words: str) -> None:
    """One line `error: ...` naming each of `words`, exit 2, and nothing written (no half-written sibling)."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for word in words:
        assert word in lines[0], lines[0]
    assert not output.exists()
    assert not list(output.parent.glob(f".{output.name}*"))
