"""User docs (README.md, docs/, examples/, model_cards/ with the card template) need nothing outside the repository: no `../shared` (the
project's data beside our checkout), no paths of our machines, no issue numbers a reader cannot open."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
USER_DOCS = sorted(
    [
        ROOT / "README.md",
        *(p for folder in ("docs", "examples", "model_cards") for p in (ROOT / folder).rglob("*.md*")),
    ]
)
FORBIDDEN = {
    "a path outside the repository (../shared)": re.compile(r"\.\./shared\b"),
    "a path of our machines": re.compile(r"(?<![\w.~])/(?:work|root)/"),
    "an issue number": re.compile(r"(?i)\b(?:issues?|PRs?|pull requests?)\s*#?\d+|(?<![\w&#/])#\d+\b"),
}


def test_every_user_doc_is_checked() -> None:
    names = {str(p.relative_to(ROOT)) for p in USER_DOCS}
    assert {"README.md", "docs/results.md", "examples/README.md", "model_cards/card.md.j2"} <= names


@pytest.mark.parametrize("doc", USER_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_user_doc_needs_nothing_outside_the_repository(doc: Path) -> None:
    problems = [
        f"{doc.relative_to(ROOT)}:{number}: {what}: {match.group(0)!r}"
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1)
        for what, pattern in FORBIDDEN.items()
        for match in pattern.finditer(line)
    ]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    "text, found",
    [
        ("see issue #59", True),
        ("Issues #50 and #58 test", True),
        ("the #48 code", True),
        ("`/work/venvs/fairseq/bin/pip`", True),
        ("--data-dir ../shared/data/multi30k", True),
        ("[GPU](#gpu-and-clusters)", False),
        ("&#8212; a dash", False),
        ("~/venvs/fairseq/bin/pip and /tmp/site", False),
    ],
)
def test_the_patterns_find_what_they_should(text: str, found: bool) -> None:
    assert any(pattern.search(text) for pattern in FORBIDDEN.values()) is found
