"""deep_nmt_hf.science.significance: corpus BLEU from sufficient statistics, the paired bootstrap over seeds and
sentences, Holm's correction. Synthetic sentences only (no data files), CPU, about a second."""

from __future__ import annotations

import random
import time

import numpy as np
import pytest
from sacrebleu.metrics import BLEU
from sacrebleu.significance import PairedTest

from deep_nmt_hf.science.significance import (
    bleu_from_statistics,
    bleu_statistics,
    holm,
    seeded_paired_bootstrap,
)

WORDS = [f"w{i}" for i in range(40)]


def references(n: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 15))) for _ in range(n)]


def translate(refs: list[str], error: float, seed: int) -> list[str]:
    """A synthetic system: each reference word replaced by a random one with probability `error`."""
    rng = random.Random(seed)
    return [" ".join(w if rng.random() > error else rng.choice(WORDS) for w in r.split()) for r in refs]


def runs(refs: list[str], errors: list[float], seed: int) -> list[list[list[int]]]:
    """One run (seed) per error rate: its per-sentence BLEU statistics."""
    return [bleu_statistics(translate(refs, e, seed + i), refs) for i, e in enumerate(errors)]


def test_sacrebleu_private_extract_corpus_statistics_layout() -> None:
    """bleu_statistics relies on sacreBLEU's private `BLEU._extract_corpus_statistics` and its per-sentence layout
    [hypothesis length, reference length, matched 1..4-grams, total 1..4-grams]: a rename or a new layout fails
    here, not in a significance test's numbers."""
    assert callable(getattr(BLEU, "_extract_corpus_statistics", None))
    stats = BLEU()._extract_corpus_statistics(["a b c d"], [["a b c e"]])
    assert [int(x) for x in stats[0]] == [4, 4, 3, 2, 1, 0, 4, 3, 2, 1]
    assert bleu_statistics(["a b c d"], ["a b c e"]) == [[4, 4, 3, 2, 1, 0, 4, 3, 2, 1]]


@pytest.mark.parametrize(
    "hypotheses",
    [
        translate(references(50), 0.3, 1),  # ordinary
        references(50),  # perfect
        [""] * 50,  # empty output: BLEU 0
        [" ".join(r.split()[:2]) for r in references(50)],  # no 3- or 4-grams at all: BLEU 0, brevity penalty
        [r.split()[0] + " x y z" for r in references(50)],  # unigram matches only: 2..4-grams smoothed
    ],
    ids=["ordinary", "perfect", "empty", "no-4-grams", "unigrams-only"],
)
def test_bleu_from_statistics_equals_sacrebleu_corpus_score(hypotheses: list[str]) -> None:
    refs = references(50)
    stats = np.asarray(bleu_statistics(hypotheses, refs))
    expected = BLEU().corpus_score(hypotheses, [refs]).score
    assert bleu_from_statistics(stats.sum(axis=0)) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # vectorised: every prefix of the corpus at once, each equal to sacreBLEU's score of that prefix
    prefixes = np.cumsum(stats, axis=0)[9::10]
    scores = bleu_from_statistics(prefixes)
    for k, score in zip(range(10, 51, 10), scores, strict=True):
        assert score == pytest.approx(BLEU().corpus_score(hypotheses[:k], [refs[:k]]).score, abs=1e-12)


def test_one_seed_each_matches_sacrebleu_paired_bootstrap() -> None:
    """With one run per system the statistic is sacreBLEU's, with the same sentence draws (seed 12345): the
    delta is equal. The p-value is close, not equal: ours counts both tails of the centred deltas, sacreBLEU
    counts |delta| − mean |delta| > |observed|, one tail when the resampled deltas keep one sign (a difference
    near significance, as here: sacreBLEU p ≈ 0.05). The tolerance: sacreBLEU's p ≤ ours ≤ 2 × sacreBLEU's +
    0.01. (Where the deltas straddle 0, sacreBLEU's centring of |delta| gives far smaller p than either tail
    count: 0.39 for a delta of −0.08 BLEU, where ours gives 0.98.)"""
    refs = references()
    baseline, system = translate(refs, 0.30, 1), translate(refs, 0.26, 2)
    ours = seeded_paired_bootstrap([bleu_statistics(baseline, refs)], [bleu_statistics(system, refs)])
    _, scores = PairedTest(
        [("baseline", baseline), ("system", system)], {"BLEU": BLEU()}, [refs], test_type="bs", n_samples=1000
    )()
    base, result = scores["BLEU"]
    assert ours["delta"] == pytest.approx(result.score - base.score, abs=1e-9)
    assert ours["baseline_bleu"] == pytest.approx(base.score, abs=1e-9)
    assert 0.01 < result.p_value < 0.1  # near significance: neither clearly different nor identical
    assert result.p_value - 1e-9 <= ours["p_value"] <= 2 * result.p_value + 0.01
    low, high = ours["ci95"]
    assert low < ours["delta"] < high


def test_identical_systems_delta_zero_p_one() -> None:
    refs = references()
    one = runs(refs, [0.3], seed=1)
    for baseline, system in ((one, one), (runs(refs, [0.25, 0.3, 0.35], 1),) * 2):
        result = seeded_paired_bootstrap(baseline, system)
        assert result["delta"] == 0.0
        assert result["p_value"] == 1.0
        assert seeded_paired_bootstrap(baseline, system) == result  # a fixed seed: the same draws every time


def test_clearly_better_system_is_significant() -> None:
    refs = references()
    result = seeded_paired_bootstrap(runs(refs, [0.4, 0.41, 0.39], 1), runs(refs, [0.2, 0.21, 0.19], 10))
    assert result["delta"] > 5
    assert result["p_value"] < 0.01
    assert result["ci95"][0] > 0


def test_seed_variance_enters_the_test() -> None:
    """The same mean difference is less certain when the runs of each system spread widely (overlapping) than
    when they are tight: resampling the sentences alone would not see the difference."""
    refs = references(400)
    tight = seeded_paired_bootstrap(runs(refs, [0.34, 0.35, 0.36], 1), runs(refs, [0.29, 0.30, 0.31], 10))
    wide = seeded_paired_bootstrap(runs(refs, [0.20, 0.35, 0.50], 1), runs(refs, [0.15, 0.30, 0.45], 10))
    assert tight["delta"] > 0 and wide["delta"] > 0
    assert wide["p_value"] > tight["p_value"]
    assert wide["ci95"][1] - wide["ci95"][0] > tight["ci95"][1] - tight["ci95"][0]


def test_bootstrap_is_vectorised() -> None:
    """1000 resamples of 1000 sentences with three runs a side: well under a second (2 s allowed here for a
    busy machine)."""
    refs = references(1000)
    baseline, system = runs(refs, [0.3, 0.31, 0.32], 1), runs(refs, [0.28, 0.29, 0.3], 10)
    start = time.perf_counter()
    seeded_paired_bootstrap(baseline, system, n_samples=1000)
    assert time.perf_counter() - start < 2.0


def test_bootstrap_rejects_runs_of_other_test_sets() -> None:
    refs = references()
    with pytest.raises(ValueError, match="same"):
        seeded_paired_bootstrap(runs(refs, [0.3], 1), runs(refs[:-1], [0.3], 1))


def test_holm_hand_worked_and_monotone() -> None:
    # sorted: 0.01·4 = 0.04, 0.03·3 = 0.09, 0.04·2 = 0.08 → 0.09 (monotone), 0.2·1 = 0.2
    assert holm([0.01, 0.04, 0.03, 0.2]) == pytest.approx([0.04, 0.09, 0.09, 0.2])
    # 0.01·3 = 0.03, 0.4·2 = 0.8, 0.5·1 = 0.5 → 0.8 (monotone)
    assert holm([0.5, 0.4, 0.01]) == pytest.approx([0.8, 0.8, 0.03])
    assert holm([0.6, 0.7]) == [1.0, 1.0]
    assert holm([]) == []
    rng = np.random.default_rng(0)
    raw = rng.uniform(0, 0.2, size=30).tolist()
    adjusted = holm(raw)
    order = np.argsort(raw)
    assert np.all(np.diff(np.asarray(adjusted)[order]) >= 0)  # the order of the raw p-values is kept
    assert all(r <= a <= 1.0 for r, a in zip(raw, adjusted, strict=True))
