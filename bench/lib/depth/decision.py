"""The depth study's one decision rule (issues #58, #67): which verdict word a comparison earns, the same way for
every claim and both directions.

Each BLEU comparison has two-sided tests from the same t distribution as its 95% interval: against 0, and against
the claim's target (`target`: the paper's Δ where the paper measured the same comparison, or −CLOSE_MARGIN for
"close"). Every test the report makes is Holm-corrected in one family (`correct`), under each of two df choices
(`DF_CHOICES`: Welch–Satterthwaite, the seed variance's own); a verdict that differs between them is inconclusive.
"reproduces" and "contradicts" are only what a corrected test says; a target closer to its null than the
comparison's detectable Δ cannot be decided at this size; a comparison whose rows differ in what they train with,
besides what the claim names (`confounds`), gets no verdict word at all. `DECISION_RULE` says this in words, once,
above the report's table."""

from __future__ import annotations

from typing import Any

from deep_nmt_hf.science.significance import detectable_delta, holm, t_ppf, t_sf

from . import core
from .claims import (
    ALPHA,
    CLOSE_MARGIN,
    CONTRADICTS,
    INCONCLUSIVE,
    POWER,
    REPRODUCES,
    Claim,
)

SETTING_NAMES = {  # core.training_setting's keys as a confound names them
    "optimizer": "optimizer",
    "adam_beta1": "Adam β1",
    "adam_beta2": "Adam β2",
    "adam_epsilon": "Adam ε",
    "weight_decay": "weight decay",
    "max_grad_norm": "gradient clipping (max norm; 0: none)",
    "label_smoothing": "label smoothing",
    "learning_rate": "lr",
    "warmup_steps": "warmup",
    "dropout": "dropout",
    "attention_dropout": "attention dropout",
    "activation_dropout": "activation dropout",
    "share_encoder_decoder_embeddings": "shared encoder-decoder embeddings",
}


def _value(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value).lower()


def confounds(system: str, baseline: str, warmup_scale: float = 0.1, varies: tuple[str, ...] = ()) -> str:
    """What SYSTEM and BASELINE train with differently (core.training_setting: the recipes and the rows'
    overrides), as "lr 2e-3 vs 1e-3, warmup 1600 vs 800": every difference besides the architecture and the
    settings the claim itself varies (`varies`, a Claim's), which is what a claim names; "" where they train
    alike."""
    ours, theirs = core.training_setting(system, warmup_scale), core.training_setting(baseline, warmup_scale)
    return ", ".join(
        f"{SETTING_NAMES[key]} {_value(ours[key])} vs {_value(theirs[key])}"
        for key in ours
        if ours[key] != theirs[key] and key not in varies
    )


def target(claim: Claim) -> float | None:
    """The value a claim's Δ is tested against besides 0: the paper's Δ ("better") where the paper measured the
    same comparison (same depths, same baseline: no `paper_comparison` names another), −CLOSE_MARGIN ("close"),
    None otherwise: a paper's Δ from other depths is quoted beside the row, never tested against (issue #67)."""
    if claim.rule == "close":
        return -CLOSE_MARGIN
    if claim.rule != "better" or claim.paper_comparison:
        return None
    return claim.paper_delta


def null(claim: Claim) -> float:
    """Where a claim's effect is measured from: 0, or −CLOSE_MARGIN for "close" (within the margin or not)."""
    return -CLOSE_MARGIN if claim.rule == "close" else 0.0


def direction(claim: Claim) -> int:
    """+1 where the claim says the system is better (or, for "close", above −CLOSE_MARGIN), −1 where it says it
    falls behind ("fails-or-behind", or a paper's negative Δ)."""
    if claim.rule == "fails-or-behind":
        return -1
    if claim.rule == "better" and claim.paper_delta is not None and claim.paper_delta < 0:
        return -1
    return 1


def p_against(test: dict[str, Any], value: float) -> float:
    """Two-sided p of Δ = `value` from the comparison's own t (se, df): the interval's test, moved to `value`."""
    if test["se"] <= 0:
        return 1.0 if test["delta"] == value else 0.0
    return min(1.0, 2 * t_sf(abs(test["delta"] - value) / test["se"], test["df"]))


def distance(claim: Claim) -> float | None:
    """How far the paper's Δ lies from the claim's null (0; −CLOSE_MARGIN for "close"): the effect a comparison
    must be able to see to decide the claim (None without a paper Δ or a target)."""
    if target(claim) is None or claim.paper_delta is None:
        return None
    return abs(claim.paper_delta - null(claim))


def too_small(claim: Claim, test: dict[str, Any]) -> bool:
    """Whether the paper's Δ lies closer to the claim's null than the comparison's detectable Δ: at this size
    neither outcome would be evidence about it."""
    gap = distance(claim)
    return gap is not None and gap < test["detectable"]


def holm_family(tests: dict[str, float]) -> dict[str, float]:
    """Holm across one family: {key: raw p} → {key: adjusted p}."""
    return dict(zip(tests, holm(list(tests.values())), strict=True))


DF_CHOICES = ("df", "seed_df")  # Welch–Satterthwaite (the verdict's), the seed variance's own (shown beside)


def at_df(test: dict[str, Any], choice: str) -> dict[str, Any]:
    """The comparison under one df choice (DF_CHOICES): its df, p, 95% interval, Holm p and detectable Δ as if
    that df were the only one (the keys `decide` and `too_small` read)."""
    if choice == "df":
        return test
    seed = {**test, "df": test["seed_df"]}
    quantile = t_ppf(0.975, seed["df"])
    return seed | {
        "p_value": p_against(seed, 0.0),
        "ci95": [test["delta"] - quantile * test["se"], test["delta"] + quantile * test["se"]],
        "p_holm": test.get("p_holm_seed", test["p_holm"]),
        "detectable": test.get("detectable_seed", test["detectable"]),
    }


def correct(tests: list[dict[str, Any]], targets: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """One Holm family over every test the report makes (issue #67): each comparison against 0 and each claim's
    test against its target, under each df choice separately. Sets each test's "p_holm" / "p_holm_seed" and
    "detectable" / "detectable_seed" (m = the family's size); returns the targets' corrected p, {pair: {choice:
    p}} from `targets`' raw {pair: {choice: p}}."""
    m = len(tests) + len(targets)
    corrected: dict[str, dict[str, float]] = {pair: {} for pair in targets}
    for choice in DF_CHOICES:
        raw = {("zero", i): at_df(t, choice)["p_value"] for i, t in enumerate(tests)}
        raw |= {("target", pair): ps[choice] for pair, ps in targets.items()}
        adjusted = holm_family(raw)
        suffix = "" if choice == "df" else "_seed"
        for i, t in enumerate(tests):
            t[f"p_holm{suffix}"] = adjusted[("zero", i)]
            t[f"detectable{suffix}"] = detectable_delta(t["se"], ALPHA, m, POWER, t[choice])
        for pair in targets:
            corrected[pair][choice] = adjusted[("target", pair)]
    for t in tests:
        t["family"] = m
    return corrected


def _ci(test: dict[str, Any]) -> str:
    low, high = test["ci95"]
    return f"{low:+.2f} … {high:+.2f}"


def decide(claim: Claim, test: dict[str, Any], p_target_holm: float | None) -> tuple[str, str]:
    """(verdict, why) of a comparison by the one rule: reproduces / contradicts where a Holm-corrected test says
    so, inconclusive where neither does. `p_target_holm`: the corrected test against the claim's target (None
    where it has none: then only the test against 0 decides)."""
    sign = direction(claim)
    delta, value = test["delta"], target(claim)
    zero = test["p_holm"] < ALPHA
    against = p_target_holm is not None and p_target_holm < ALPHA
    zero_text = f"against 0 Holm p {p_short(test['p_holm'])}"
    if claim.rule == "close":
        text = f"against −{CLOSE_MARGIN:g} Holm p {p_short(p_target_holm)}"
        if against and delta > value:
            return REPRODUCES, f"significantly within {CLOSE_MARGIN:g} BLEU ({text})"
        if against:
            return CONTRADICTS, f"significantly more than {CLOSE_MARGIN:g} BLEU behind ({text})"
        return (
            INCONCLUSIVE,
            f"neither within nor beyond {CLOSE_MARGIN:g} BLEU after Holm ({text}); " + ci_facts(test, value),
        )
    if value is not None:
        text = f"{zero_text}; against the paper's {value:+.2f} Holm p {p_short(p_target_holm)}"
        if zero and delta * sign < 0:
            return CONTRADICTS, f"significantly the other way ({text})"
        if against and (delta - value) * sign < 0:
            return CONTRADICTS, f"significantly short of the paper's {value:+.2f} ({text})"
        if zero:
            return REPRODUCES, f"significant in the paper's direction and not short of its size ({text})"
        return INCONCLUSIVE, f"neither corrected test decides ({text}); " + ci_facts(test, value)
    if zero and delta * sign > 0:
        way = "falls behind" if sign < 0 else "better"
        return REPRODUCES, f"significant in the claim's direction: it {way} ({zero_text})"
    if zero:
        way = "better" if sign < 0 else "behind"
        return CONTRADICTS, f"significantly the other way: it is {way} ({zero_text})"
    return INCONCLUSIVE, f"not significant either way ({zero_text}); " + ci_facts(test, None)


def ci_facts(test: dict[str, Any], value: float | None) -> str:
    """What the uncorrected 95% interval holds, said as it is (issue #58: an interval that excludes 0 is never
    said to hold it)."""
    low, high = test["ci95"]
    zero = "holds 0" if low <= 0 <= high else "excludes 0"
    if value is None:
        return f"the uncorrected 95% interval ({_ci(test)}) {zero}"
    paper = "holds" if low <= value <= high else "excludes"
    return f"the uncorrected 95% interval ({_ci(test)}) {zero} and {paper} the paper's {value:+.2f}"


def p_short(p: float | None) -> str:
    """A p-value in a verdict's words: 2 significant digits, "< 0.0001" below that, "—" where there is none."""
    if p is None:
        return "—"
    return "< 0.0001" if p < 1e-4 else f"{p:.2g}"


DECISION_RULE = (
    "**The rule** (one for every row and both directions, one family of tests). Each comparison's Δ (system − "
    "baseline, averaged test BLEU, mean over seeds) has a 95% interval Δ ± t × se (sentences and seeds) and "
    "two-sided tests from the same t: **against 0**, and **against the claim's target** where it has one — the "
    "paper's Δ for the same comparison (same depths, same baseline), or −{margin:g} BLEU for \"close\"; a paper's "
    "Δ measured at other depths or against another baseline is quoted beside the row, never tested against, and "
    "such a claim is tested against 0 only. Every test the report makes, {tests} against 0 and {targets} against "
    "a target, is Holm-corrected in **one family** of {family}. **The df**: t has the Welch–Satterthwaite df "
    "(sentence variance counted as exact, seed variance with n − 1 per side); the other defensible choice, the "
    "seed variance's own df (n_system − 1 + n_baseline − 1), gives wider intervals; every test is made under both "
    '(column "at seed df"), and a verdict that differs between them is **inconclusive**. **reproduces**: the '
    "corrected test against 0 is significant in the claim's direction and the one against the target does not "
    'find Δ significantly short of it ("close": the corrected test against −{margin:g} finds Δ above it). '
    "**contradicts**: the corrected test against the target finds Δ significantly short of it, or the one "
    'against 0 finds it significantly the other way ("close": significantly below −{margin:g}). '
    "**inconclusive**: neither, or the two df choices disagree. **cannot decide at this size**: the target lies "
    "closer to its null than the comparison's detectable Δ, (t_df(1 − α/2m) + t_df({power:g})) × se with m the "
    "family's size: the smallest Δ found with {power:.0%} power at Holm's strictest step, so neither outcome "
    "would be evidence. **no verdict (confounded)**: the two rows train differently besides what the claim names "
    "(optimizer, β's, ε, clipping, label smoothing, lr, warmup, dropouts or embedding sharing of their recipes, "
    "named in the row, or a scope the claim names) or decode differently and are not yet rescored: the row gives "
    "Δ and the confound, no verdict word; where a control removes the confound, the claim counts once, through "
    "its control. **Seeds fixed before looking**: a row whose later seeds were added after a look at its result "
    "(`claims.INTERIM`) is decided with the seeds it had then; the later seeds' result is shown beside, not used. "
    "Source reliance explains a failure (a row that barely reads the source) but does not replace "
    "the test, except where a row has no translations at all and for the plain deep decoder's collapse, a "
    "diagnosis by source reliance alone."
)


def rule_text(tests: int, targets: int) -> str:
    """DECISION_RULE with the family's parts: `tests` comparisons against 0, `targets` tests against a target."""
    return DECISION_RULE.format(
        margin=CLOSE_MARGIN, power=POWER, tests=tests, targets=targets, family=tests + targets
    )
