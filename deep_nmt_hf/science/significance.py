"""Significance across seeds and sentences: corpus BLEU from sufficient statistics, a paired bootstrap that
resamples both training runs (seeds) and test sentences, and Holm's correction for many comparisons.

sacreBLEU's paired bootstrap (`deep_nmt_hf.training.metrics.paired_bootstrap`) resamples the test sentences of one
translation per system, so it answers "is this run better than that run?". Clark et al. (2011) show that the
optimizer's randomness (the seed) moves BLEU by as much as many claimed improvements, and that the test must
resample it too: `seeded_paired_bootstrap` takes several runs per system and draws, in every resample, the test
sentences (the same draw for both systems: paired) and, independently for each system, its runs.

Everything works on sacreBLEU's per-sentence BLEU sufficient statistics (`bleu_statistics`): corpus BLEU of any
resample is computed from their sums, so no translation text is needed once the statistics are stored.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist
from typing import Any

import numpy as np

MAX_NGRAM_ORDER = 4
N_STATISTICS = 2 + 2 * MAX_NGRAM_ORDER  # hypothesis length, reference length, matched n-grams, total n-grams


def bleu_statistics(hypotheses: Sequence[str], references: Sequence[str]) -> list[list[int]]:
    """Per sentence: sacreBLEU's BLEU sufficient statistics [hypothesis length, reference length, matched n-grams
    for n = 1..4, total n-grams for n = 1..4] with its default BLEU (13a tokens, one reference). Uses sacreBLEU's
    private `BLEU._extract_corpus_statistics` (its paired tests use it too; tests/science/test_significance.py names it)."""
    from sacrebleu.metrics import BLEU

    hypotheses, references = list(hypotheses), list(references)
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references: they must pair up")
    stats = BLEU()._extract_corpus_statistics(hypotheses, [references])
    return [[int(x) for x in sentence] for sentence in stats]


def bleu_from_statistics(sums: Any) -> Any:
    """Corpus BLEU (0-100) from summed sufficient statistics, as sacreBLEU's default BLEU computes it
    (`BLEU.compute_bleu`: brevity penalty, 'exp' smoothing of zero n-gram matches, no effective order).

    `sums` has the 10 statistics in its last axis: one corpus (shape (10,)) gives a float, an array (..., 10)
    gives an array of scores (how the bootstrap scores all its resamples at once)."""
    sums = np.asarray(sums, dtype=np.float64)
    if sums.shape[-1] != N_STATISTICS:
        raise ValueError(f"BLEU statistics have {N_STATISTICS} values in the last axis, not {sums.shape}")
    sys_len, ref_len = sums[..., 0], sums[..., 1]
    correct = sums[..., 2 : 2 + MAX_NGRAM_ORDER]
    total = sums[..., 2 + MAX_NGRAM_ORDER :]
    with np.errstate(divide="ignore", invalid="ignore"):
        short = sys_len < ref_len
        brevity = np.where(short, np.exp(1.0 - ref_len / np.where(sys_len > 0, sys_len, 1.0)), 1.0)
        brevity = np.where(short & (sys_len <= 0), 0.0, brevity)
        # 'exp' smoothing: the k-th order with no match (counting from the lowest) gets 1 / (2^k · total)
        halvings = np.cumsum(correct == 0, axis=-1)
        precision = np.where(correct > 0, 100.0 * correct / total, 100.0 / (2.0**halvings * total))
        # an order with no n-grams at all ends sacreBLEU's loop: its precision stays 0 and BLEU is 0
        usable = np.all(total > 0, axis=-1) & np.any(correct > 0, axis=-1)
        logs = np.log(np.where(total > 0, precision, 1.0))
        score = np.where(usable, brevity * np.exp(logs.sum(axis=-1) / MAX_NGRAM_ORDER), 0.0)
    return float(score) if score.ndim == 0 else score


def _as_runs(runs: Sequence[Any], name: str) -> np.ndarray:
    array = np.asarray(runs, dtype=np.float64)
    if array.ndim != 3 or array.shape[0] == 0 or array.shape[2] != N_STATISTICS:
        raise ValueError(
            f"{name}: expected a list of runs (seeds), each a list of per-sentence BLEU statistics with "
            f"{N_STATISTICS} values (bleu_statistics), got an array of shape {array.shape}"
        )
    return array


def seeded_paired_bootstrap(
    baseline: Sequence[Sequence[Sequence[int]]],
    system: Sequence[Sequence[Sequence[int]]],
    n_samples: int = 1000,
    seed: int = 12345,
) -> dict[str, Any]:
    """Is `system` better than `baseline` beyond the noise of test sentences and of training seeds?

    `baseline` and `system` are lists of runs (one per training seed; the two may differ in number), each run the
    per-sentence BLEU statistics of its translations of the same test set (`bleu_statistics`). The statistic is
    the mean over a system's runs of their corpus BLEU, system minus baseline; the observed `delta` uses every run
    once. Each of `n_samples` resamples draws the test sentences with replacement (one draw shared by both
    systems: the test is paired) and, independently for each system, its runs with replacement, and recomputes
    the statistic.

    `p_value` is two-sided, computed as sacreBLEU's paired bootstrap does (Koehn 2004; Moses'
    bootstrap-hypothesis-difference-significance): the resampled deltas are centred on their mean (the null
    hypothesis of no difference), and p = (1 + #{|centred delta| >= |observed delta|}) / (1 + n_samples).
    sacreBLEU centres |delta| instead of delta and counts strictly greater values: that is one tail where the
    resampled deltas keep one sign (there this p is about twice sacreBLEU's), far less than either tail where
    they straddle 0, and p = 1 / (1 + n_samples) for identical systems, which get p = 1 here. With one run per
    system the resampled deltas are exactly those of sacreBLEU's test with the same seed (the sentence draw is
    the first use of the generator in both).
    `ci95` is the 2.5th and 97.5th percentile of the resampled deltas.

    Returns {"delta", "p_value", "ci95", "baseline_bleu", "system_bleu" (means over runs), "baseline_runs",
    "system_runs", "sentences", "n_samples", "seed"}.
    """
    base, sys_, sentences = _paired_runs(baseline, system)
    if n_samples < 1:
        raise ValueError(f"n_samples={n_samples} must be >= 1")
    base_bleu = bleu_from_statistics(base.sum(axis=1))  # (runs,)
    sys_bleu = bleu_from_statistics(sys_.sum(axis=1))
    observed = float(sys_bleu.mean() - base_bleu.mean())

    rng = np.random.default_rng(seed)
    counts = _draw_counts(rng, n_samples, sentences)

    def resampled_mean(runs: np.ndarray) -> np.ndarray:
        sums = np.einsum("ij,rjk->irk", counts, runs, optimize=True)  # (samples, runs, statistics)
        scores = bleu_from_statistics(sums)
        picked = rng.integers(runs.shape[0], size=(n_samples, runs.shape[0]))  # the runs, with replacement
        return np.take_along_axis(scores, picked, axis=1).mean(axis=1)

    deltas = resampled_mean(sys_) - resampled_mean(base)
    centred = deltas - deltas.mean()
    extreme = int(np.sum(np.abs(centred) >= abs(observed) - 1e-12 * max(1.0, abs(observed))))
    low, high = np.percentile(deltas, [2.5, 97.5])
    return {
        "delta": observed,
        "p_value": (1 + extreme) / (1 + n_samples),
        "ci95": [float(low), float(high)],
        **_run_summary(base, sys_, base_bleu, sys_bleu, n_samples, seed),
    }


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm–Bonferroni adjusted p-values (step-down): the k-th smallest of m p-values is multiplied by m − k + 1,
    made non-decreasing in that order and capped at 1. Rejecting where the adjusted p < α keeps the chance of
    any false rejection among all m comparisons below α. Returned in the order given."""
    p = np.asarray(p_values, dtype=np.float64)
    if p.ndim != 1:
        raise ValueError(f"holm takes a flat list of p-values, got shape {p.shape}")
    if p.size == 0:
        return []
    if np.any(np.isnan(p)) or np.any((p < 0) | (p > 1)):
        raise ValueError(f"p-values must lie in [0, 1], got {p.tolist()}")
    order = np.argsort(p, kind="stable")
    m = p.size
    stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return adjusted.tolist()


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b) (Lentz's continued fraction, Numerical Recipes' betacf):
    the Student t tail without scipy, which the package does not depend on."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    front = (
        math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
        / a
    )
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-14:
            break
    return front * result


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom (normal where df is infinite)."""
    if not math.isfinite(df):
        return NormalDist().cdf(-t)
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_ppf(q: float, df: float) -> float:
    """The `q` quantile of Student's t with `df` degrees of freedom (bisection on `t_sf`)."""
    if not 0 < q < 1:
        raise ValueError(f"q={q} must lie in (0, 1)")
    if not math.isfinite(df):
        return NormalDist().inv_cdf(q)
    low, high = -1.0, 1.0
    while 1 - t_sf(low, df) > q:
        low *= 2
    while 1 - t_sf(high, df) < q:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if 1 - t_sf(mid, df) < q:
            low = mid
        else:
            high = mid
    return (low + high) / 2


def seed_and_sentence_test(
    baseline: Sequence[Sequence[Sequence[int]]],
    system: Sequence[Sequence[Sequence[int]]],
    n_samples: int = 1000,
    seed: int = 12345,
    confidence: float = 0.95,
) -> dict[str, Any]:
    """Is `system` better than `baseline`, with the seeds' variance estimated without bias?

    `seeded_paired_bootstrap` resamples each system's runs with replacement: with n runs that estimates the
    variance of their mean as s² (n − 1) / n² instead of s² / n, half the seed variance with two seeds. This test
    adds the two sources of noise instead (Clark et al. 2011 measure both): the **sentence** variance of Δ from a
    paired bootstrap over the test sentences (every run kept, the same draw for both systems), and the **seed**
    variance s²_sys / n_sys + s²_base / n_base from the unbiased sample variance of each system's corpus BLEU over
    its runs (0 for a system with one run: then nothing estimates it, which `single_run` flags). The interval is
    Δ ± t × se with Welch–Satterthwaite degrees of freedom (the sentence part counts as infinitely many), and p
    is two-sided from the same t: with two runs a side that disagree, df is near 1 and the interval is wide, as
    it must be.

    Returns the keys of `seeded_paired_bootstrap` ("ci95" is the `confidence` interval) and "se", "sentence_se",
    "seed_se", "df", "seed_df" (the seed variance's own df, n_sys − 1 + n_base − 1: the conservative choice, for a
    caller that shows the verdict under both), "single_run", "method"."""
    base, sys_, sentences = _paired_runs(baseline, system)
    if n_samples < 2:
        raise ValueError(f"n_samples={n_samples} must be >= 2")
    base_bleu = bleu_from_statistics(base.sum(axis=1))
    sys_bleu = bleu_from_statistics(sys_.sum(axis=1))
    observed = float(sys_bleu.mean() - base_bleu.mean())

    rng = np.random.default_rng(seed)
    counts = _draw_counts(rng, n_samples, sentences)

    def mean_over_runs(runs: np.ndarray) -> np.ndarray:
        return bleu_from_statistics(np.einsum("ij,rjk->irk", counts, runs, optimize=True)).mean(axis=1)

    sentence_var = float(np.var(mean_over_runs(sys_) - mean_over_runs(base), ddof=1))
    parts = [
        float(np.var(b, ddof=1)) / b.size if b.size > 1 else 0.0
        for b in (np.atleast_1d(sys_bleu), np.atleast_1d(base_bleu))
    ]
    seed_var = sum(parts)
    var = sentence_var + seed_var
    dofs = [b.size - 1 for b in (np.atleast_1d(sys_bleu), np.atleast_1d(base_bleu))]
    seed_terms = sum(part**2 / dof for part, dof in zip(parts, dofs, strict=True) if dof > 0 and part > 0)
    df = var**2 / seed_terms if seed_terms > 0 else math.inf
    # the other defensible choice: the df of the seed variance alone (runs − 1 of each side with more than one),
    # which ignores that the sentence part is known far better; ∞ where no side has two runs, as above
    seed_df = float(sum(d for d in dofs if d > 0)) or math.inf
    se = math.sqrt(var)
    quantile = t_ppf(0.5 + confidence / 2, df)
    if se > 0:
        p_value = min(1.0, 2 * t_sf(abs(observed) / se, df))
    else:
        p_value = 1.0 if observed == 0 else 0.0
    return {
        "delta": observed,
        "p_value": p_value,
        "ci95": [observed - quantile * se, observed + quantile * se],
        **_run_summary(base, sys_, base_bleu, sys_bleu, n_samples, seed),
        "se": se,
        "sentence_se": math.sqrt(sentence_var),
        "seed_se": math.sqrt(seed_var),
        "df": df,
        "seed_df": seed_df,
        "single_run": min(base.shape[0], sys_.shape[0]) < 2,
        "method": "t: sentence bootstrap + unbiased seed variance",
    }


def detectable_delta(
    se: float, alpha: float = 0.05, comparisons: int = 1, power: float = 0.8, df: float = math.inf
) -> float:
    """The smallest |Δ| a two-sided test at level alpha / comparisons (Bonferroni: the first step of Holm's
    correction, the strictest) detects with probability `power`, for a Δ whose standard error is `se`:
    (t_{1 − α/2m} + t_{power}) × se with the t distribution of `df` degrees of freedom, the one the test's own
    interval and p use (normal where df is infinite, the default)."""
    if se < 0 or comparisons < 1 or not 0 < alpha < 1 or not 0 < power < 1 or not df > 0:
        raise ValueError(f"se={se}, comparisons={comparisons}, alpha={alpha}, power={power}, df={df}")
    return (t_ppf(1 - alpha / (2 * comparisons), df) + t_ppf(power, df)) * se


def _paired_runs(baseline: Any, system: Any) -> tuple[np.ndarray, np.ndarray, int]:
    """Both systems' runs as (runs, sentences, statistics) arrays and the sentence count; ValueError unless every
    run holds the statistics of the same non-empty test set."""
    base, sys_ = _as_runs(baseline, "baseline"), _as_runs(system, "system")
    sentences = base.shape[1]
    if sys_.shape[1] != sentences or sentences == 0:
        raise ValueError(
            f"baseline runs have {base.shape[1]} sentences and system runs {sys_.shape[1]}: every run must hold "
            "the statistics of the same (non-empty) test set"
        )
    return base, sys_, sentences


def _draw_counts(rng: np.random.Generator, n_samples: int, sentences: int) -> np.ndarray:
    """How often each sentence is drawn in each of `n_samples` resamples (drawn as sacreBLEU draws them): the
    resampled sums are then one matrix product per run."""
    draws = rng.choice(sentences, size=(n_samples, sentences), replace=True)
    return np.bincount(
        (draws + sentences * np.arange(n_samples)[:, None]).ravel(), minlength=n_samples * sentences
    ).reshape(n_samples, sentences)


def _run_summary(
    base: np.ndarray, sys_: np.ndarray, base_bleu: np.ndarray, sys_bleu: np.ndarray, n_samples: int, seed: Any
) -> dict[str, Any]:
    """The fields both paired tests report beside their delta, p and interval: mean BLEU and run counts."""
    return {
        "baseline_bleu": float(base_bleu.mean()),
        "system_bleu": float(sys_bleu.mean()),
        "baseline_runs": int(base.shape[0]),
        "system_runs": int(sys_.shape[0]),
        "sentences": int(base.shape[1]),
        "n_samples": int(n_samples),
        "seed": seed,
    }
