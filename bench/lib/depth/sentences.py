"""The depth study's summary sentences, generated from its verdicts (issue #58): what README, docs/results.md,
bench/README.md and CONTRIBUTING.md say of the study is these sentences, word for word, between markers

    <!-- depth:KEY -->the sentence<!-- /depth:KEY -->

which the report rewrites whenever it is rebuilt (`requote_files`); tests/benchmarks/test_depth_summaries.py fails where a
marked sentence differs from the one the committed report's verdicts generate, and where the study's other marked
prose (<!-- depth-prose --> … <!-- /depth-prose -->) states a number the reports do not print, or a verdict word.
The number check is by token: it catches a figure no report prints, not one that happens to appear elsewhere in
them. Pure functions of the verdict dicts (report.claim_verdicts,
or the same dicts read back from bench/results/depth_multi30k.json), so a summary can say no more than the report.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deep_nmt_hf.science.significance import detectable_delta

from .claims import ALPHA, POWER, VERDICTS

# the papers' gains from depth: a deep model against a 6-6 one (a confounded claim is represented by its control)
DEPTH_GAINS = (
    "admin-18-6 vs post-6-6",
    "admin-36-6 vs post-6-6",
    "pre-18-6 vs pre-6-6",
    "dsinit-matt-18-6 vs post-6-6",
    "deep-decoder-6-12 vs pre-6-6",
)
MARKER = re.compile(r"<!-- depth:([a-z-]+) -->(.*?)<!-- /depth:\1 -->", re.S)
PROSE = re.compile(r"<!-- depth-prose -->(.*?)<!-- /depth-prose -->", re.S)
# verdict words a summary may state only through a generated sentence
VERDICT_WORDS = re.compile(
    r"reproduc|contradict|inconclusive|cannot decide|no verdict|does not hold|\bholds\b|not significant", re.I
)
# an older study's finding kept for the record: it must say that it is superseded (and by what)
SUPERSEDED = re.compile(r"<!-- depth-superseded -->(.*?)<!-- /depth-superseded -->", re.S)
# a block (paragraph, list item, table line) that speaks of the study: its findings are checked (issue #67)
ABOUT_THE_STUDY = re.compile(r"depth_multi30k|depth study|the study's|at small scale", re.I)
# what a finding says: a verdict word, a comparison's word, a p-value, a score (± or BLEU after it, "scored"
# before it) or a signed difference; a setting (dropout 0.3, lr 2e-3) is not a finding
FINDING = re.compile(
    VERDICT_WORDS.pattern
    + r"|\bbeats?\b|\bunder-fit|\bp\s*[<=]|significan|\d+\.\d+\s*(?:±|BLEU)|(?<![\w.])[+−]\d+\.\d+|"
    r"\bscor\w*\s+\d",
    re.I,
)
REPORTS = (
    "depth_multi30k.md",
    "depth_multi30k_weights.md",
    "depth_multi30k_pilot.md",
)  # what prose may quote
NUMBER = re.compile(r"[+\-−]?\d+(?:\.\d+)*")  # "2.6.0" (a version) is not "2.6"; a sign is part of it


def pair(v: dict[str, Any]) -> str:
    return f"{v['system']} vs {v['baseline']}"


def counted(verdicts: Sequence[dict[str, Any]]) -> dict[str, int]:
    """The verdicts counted as the report counts them: each phenomenon (a claim's `group`) once, by the verdict of
    its first claim (the one that states it; the others rest on it), a claim counted through its control
    (`controlled_by`) not at all; in claims.VERDICTS order."""
    counts: dict[str, int] = {}
    for v in verdicts:
        if not v.get("group") and not v.get("controlled_by"):
            counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
    for group in dict.fromkeys(v["group"] for v in verdicts if v.get("group")):
        word = next(v["verdict"] for v in verdicts if v.get("group") == group)
        counts[word] = counts.get(word, 0) + 1
    return {word: counts[word] for word in VERDICTS if counts.get(word)}


def counted_lines(verdicts: Sequence[dict[str, Any]]) -> int:
    """How many lines `counted` counts: the claims outside a group and not counted through a control, and one a
    group."""
    alone = sum(1 for v in verdicts if not v.get("group") and not v.get("controlled_by"))
    return alone + len({v["group"] for v in verdicts if v.get("group")})


def delta_text(v: dict[str, Any]) -> str:
    """ "Δ +0.26 (95% CI −0.67 … +1.18), the paper +2.50 at 60L-12L vs 6L-6L (not tested against)" of a verdict
    with a test: a paper's Δ from another comparison says which (issue #67)."""
    test = v["test"]
    low, high = test["ci95"]
    paper = ""
    if v.get("paper_delta") is not None:
        paper = f", the paper {v['paper_delta']:+.2f}"
        if v.get("paper_comparison"):
            paper += f" at {v['paper_comparison']} (not tested against)"
    return f"Δ {test['delta']:+.2f} (95% CI {low:+.2f} … {high:+.2f}){paper}"


def depth_gains(verdicts: Sequence[dict[str, Any]]) -> str:
    """The papers' gains from depth (DEPTH_GAINS), each by its verdict (a confounded one through its control)."""
    by_pair = {pair(v): v for v in verdicts}
    chosen = []
    for key in DEPTH_GAINS:
        v = by_pair.get(key)
        if v is None:
            continue
        chosen.append(by_pair.get(v.get("controlled_by") or "", v))
    words: dict[str, list[str]] = {}
    for v in chosen:
        shown = f"{pair(v)}: {delta_text(v)}" if v.get("test") else pair(v)
        words.setdefault(v["verdict"], []).append(shown)
    parts = [f"{len(words[w])} {w} ({'; '.join(words[w])})" for w in VERDICTS if w in words]
    return f"The papers' {len(chosen)} gains from depth, each tested against 0: " + ", ".join(parts) + "."


def one_claim(verdicts: Sequence[dict[str, Any]], key: str) -> str:
    """One claim's verdict with its Δ: "pre-18-6 vs marian-6-6: no verdict (confounded), Δ −0.43 (…)"."""
    v = next((v for v in verdicts if pair(v) == key), None)
    if v is None:
        return f"{key}: not in the report"
    shown = f", {delta_text(v)}" if v.get("test") else ""
    confound = f"; {v['confound']}" if v.get("confound") and not v.get("controlled_by") else ""
    return f"{key}: {v['verdict']}{shown}{confound}"


def rule_sentence(verdicts: Sequence[dict[str, Any]], tests: Sequence[dict[str, Any]]) -> str:
    """The decision rule in one sentence (`rule`), with the size of its one Holm family (depth.decision states it
    in full above the report's table)."""
    targets = sum(bool(v.get("in_family")) for v in verdicts)
    return (
        f"every test the report makes ({len(tests)} against 0, {targets} against a target: the paper's Δ only "
        "where the paper measured the same comparison, else none) is Holm-corrected in one family, at the "
        "Welch–Satterthwaite df and at the seed variance's own df; a claim reproduces where the corrected test "
        "against 0 is significant in its direction and Δ is not significantly short of its target, contradicts "
        "where Δ is significantly short of the target or significantly the other way, and is inconclusive "
        "otherwise or where the two df choices disagree; rows that train differently get no verdict word; a "
        "seed added after a look at the result is shown, not used"
    )


def summary_sentences(verdicts: Sequence[dict[str, Any]], tests: Sequence[dict[str, Any]]) -> dict[str, str]:
    """Every sentence a summary may quote, by its marker KEY: the count (`tally`), the papers' gains from depth
    (`depth-gains`), the lr control (`lr-control`), the deep row against Marian (`marian`), shared layers
    (`shared`), the CAD + CRT rescue (`rescue`), DS-Init's dropouts at
    this scale (`dropouts`: the recipe sentence of docs/recipes.md), the decision rule (`rule`) and what the test set can detect
    (`detectable`)."""
    tally = counted(verdicts)
    trained = [t for t in tests if abs(t["delta"]) < 10]
    sentences = {
        "tally": "Counted with each phenomenon once: "
        + ", ".join(f"{n} {w}" for w, n in tally.items())
        + f" ({counted_lines(verdicts)} counted of {len(verdicts)} claim lines).",
        "depth-gains": depth_gains(verdicts),
        "lr-control": one_claim(verdicts, "pre-18-6 vs pre-6-6-lr2e-3"),
        "marian": next(
            (one_claim(verdicts, pair(v)) for v in verdicts if v["baseline"] == "marian-6-6"), "marian-6-6: —"
        ),
        "shared": one_claim(verdicts, "shared-18-6 vs unshared-18-6"),
        "rescue": one_claim(verdicts, "deep-decoder-6-12 vs deep-decoder-6-12-plain"),
        "rule": rule_sentence(verdicts, tests),
        "dropouts": one_claim(verdicts, "dsinit-matt-18-6-low-dropout vs dsinit-matt-18-6"),
    }
    if trained:
        m = tests[0].get("family", len(tests))  # the one Holm family's size
        floor = detectable_delta(statistics.median(t["sentence_se"] for t in trained), ALPHA, m, POWER)
        sentences["detectable"] = (
            f"this test set detects {floor:.2f} BLEU from its {trained[0]['sentences']} sentences alone and "
            f"{statistics.median(t['detectable'] for t in trained):.2f} with the seeds' variance added (median over "
            f"the {len(trained)} comparisons between rows that both translate; {POWER:.0%} power after Holm over "
            f"the {m} tests of the report, t at each comparison's Welch–Satterthwaite df; "
            f"{statistics.median(t.get('detectable_seed', t['detectable']) for t in trained):.2f} at the seed df)"
        )
    return sentences


def marked(text: str) -> dict[str, list[str]]:
    """The generated sentences TEXT quotes: {KEY: [the quoted text, ...]}."""
    found: dict[str, list[str]] = {}
    for key, body in MARKER.findall(text):
        found.setdefault(key, []).append(body)
    return found


def requote(text: str, generated: dict[str, str]) -> str:
    """TEXT with every `<!-- depth:KEY -->` quote replaced by the sentence KEY of GENERATED (a key the report no
    longer generates is left as it is, for the test to name)."""

    def one(match: re.Match[str]) -> str:
        key = match.group(1)
        body = generated.get(key, match.group(2))
        return f"<!-- depth:{key} -->{body}<!-- /depth:{key} -->"

    return MARKER.sub(one, text)


def requote_files(root: Path, generated: dict[str, str]) -> list[Path]:
    """Requote the summary files under ROOT (summary_files) with GENERATED; the files that changed."""
    changed = []
    for path in summary_files(root):
        if path.exists() and (new := requote(text := path.read_text(), generated)) != text:
            path.write_text(new)
            changed.append(path)
    return changed


def prose_problems(text: str, reports: str) -> list[str]:
    """What the study's marked prose in TEXT states beyond the REPORTS' text: a number none of them has, or a
    verdict word (those only come through generated sentences)."""
    signed = {n.replace("−", "-") for n in NUMBER.findall(reports)}  # as printed, with its sign
    known = signed | {n.lstrip("+-") for n in signed}  # a number the prose writes without a sign
    problems = []
    for body in PROSE.findall(text):
        plain = MARKER.sub("", body)
        problems += [f"verdict word {w!r}" for w in VERDICT_WORDS.findall(plain)]
        numbers = [n.replace("−", "-") for n in NUMBER.findall(plain)]
        problems += [f"number {n} is in no report" for n in numbers if n not in known]
    return problems


def unchecked_findings(text: str) -> list[str]:
    """The findings of the study TEXT states outside the checked forms (issue #67): in every block (paragraph, list
    item, table line) that speaks of the study, a verdict word, "beats", a p-value or a number with decimals
    that is neither a quoted sentence (`<!-- depth:KEY -->`), checked prose (`<!-- depth-prose -->`) nor marked as
    superseded (`<!-- depth-superseded -->`, whose text must say "superseded"). Code blocks are not prose."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    problems = [
        f"a superseded block that does not say so: {body[:60]!r}"
        for body in SUPERSEDED.findall(text)
        if "superseded" not in body.lower()
    ]
    for block in re.split(r"\n\s*\n|\n(?=\s*[-*|] )", text):
        if not ABOUT_THE_STUDY.search(block):
            continue
        plain = SUPERSEDED.sub("", PROSE.sub("", MARKER.sub("", block)))
        plain = re.sub(r"\[[^\]]*\]\([^)]*\)|`[^`]*`", "", plain)  # links and code name files, not findings
        problems += [f"{found!r} in {' '.join(block.split())[:80]!r}…" for found in FINDING.findall(plain)]
    return problems


def summary_files(root: Path) -> list[Path]:
    """The files that summarise the study: README, every page of docs/, bench/README, CONTRIBUTING and the model
    cards (issue #67: every sentence about the study's findings is checked, wherever it is)."""
    cards = sorted(p for p in (root / "model_cards").rglob("*") if p.is_file() and p.suffix in (".md", ".j2"))
    return [
        root / "README.md",
        *sorted((root / "docs").glob("*.md")),
        root / "bench" / "README.md",
        root / "CONTRIBUTING.md",
        *cards,
    ]
