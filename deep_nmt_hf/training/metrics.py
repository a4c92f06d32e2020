"""sacreBLEU metrics with signatures: BLEU, chrF and TER for generated translations; paired bootstrap tests."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU, CHRF, TER
from transformers import (
    EvalPrediction,
    PreTrainedTokenizerBase,
)

logger = logging.getLogger(__name__)


def compute_translation_metrics(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """Corpus BLEU, chrF and TER (sacrebleu defaults, one reference per sentence) with their signatures.

    Returns {"bleu", "chrf", "ter", "bleu_signature", "chrf_signature", "ter_signature", "num_sentences"}.
    Raises ValueError when the lists differ in length or are empty.
    """
    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: they must pair up")
    if not hypotheses:
        raise ValueError("no sentences to score: hypotheses and references are empty")
    result: dict[str, Any] = {}
    for name, metric in (("bleu", BLEU()), ("chrf", CHRF()), ("ter", TER())):
        result[name] = float(metric.corpus_score(hypotheses, [references]).score)
        result[f"{name}_signature"] = str(metric.get_signature())
    result["num_sentences"] = len(hypotheses)
    return result


def paired_bootstrap(
    baseline: Sequence[str], system: Sequence[str], references: Sequence[str], n_samples: int = 1000
) -> dict[str, Any]:
    """Is `system` better than `baseline` by chance? sacreBLEU's paired bootstrap resampling of corpus BLEU
    (Koehn, 2004; Moses' bootstrap-hypothesis-difference-significance): `n_samples` resamples of the test
    sentences with replacement, both systems scored on each; p is the share of resamples whose difference
    exceeds the observed one around the resampled mean (two-sided).

    Returns {"baseline_bleu", "bleu", "delta", "p_value", "ci95" (of the system's BLEU), "signature"}.
    """
    from sacrebleu.significance import PairedTest

    baseline, system, references = list(baseline), list(system), list(references)
    if not len(baseline) == len(system) == len(references) > 0:
        raise ValueError(
            f"{len(baseline)} baseline and {len(system)} system hypotheses, {len(references)} references: "
            "they must pair up and not be empty"
        )
    test = PairedTest(
        [("baseline", baseline), ("system", system)],
        {"BLEU": BLEU()},
        [references],
        test_type="bs",
        n_samples=n_samples,
    )
    signatures, scores = test()
    base, result = scores["BLEU"]
    return {
        "baseline_bleu": float(base.score),
        "bleu": float(result.score),
        "delta": float(result.score - base.score),
        "p_value": float(result.p_value),
        "ci95": float(result.ci),
        "signature": str(signatures["BLEU"]),
    }


def make_compute_metrics(
    tokenizer: PreTrainedTokenizerBase, references: Sequence[str] | None = None
) -> Callable[[EvalPrediction], dict[str, Any]]:
    """A `compute_metrics` for `Seq2SeqTrainer(predict_with_generate=True)`.

    Generated ids are decoded with `skip_special_tokens` (-100 padding replaced by the pad id first). When
    `references` (the raw target sentences of the evaluation set, in order) are given and match the number of
    predictions, BLEU is computed against them; otherwise against the decoded labels (which have been
    tokenized, so unknown characters and truncation show up in them).
    """
    pad_id = tokenizer.pad_token_id

    def decode(ids: Any) -> list[str]:
        if isinstance(ids, tuple):
            ids = ids[0]
        ids = np.asarray(ids)
        ids = np.where(ids == -100, pad_id, ids)
        return [text.strip() for text in tokenizer.batch_decode(ids, skip_special_tokens=True)]

    def compute_metrics(prediction: EvalPrediction) -> dict[str, Any]:
        hypotheses = decode(prediction.predictions)
        if references is not None and len(references) == len(hypotheses):
            refs = list(references)
        else:
            refs = decode(prediction.label_ids)
        return compute_translation_metrics(hypotheses, refs)

    return compute_metrics
