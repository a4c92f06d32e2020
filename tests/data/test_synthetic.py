"""Tests for the synthetic Lang A -> Lang B corpus used by the offline demo."""

from __future__ import annotations

import random
import re
from collections import Counter

import pytest

from deep_nmt_hf.data import synthetic as syn

LINE = re.compile(r"^[a-z]+( [a-z]+)* [.?]$")


@pytest.fixture(scope="module")
def pairs_2000() -> list[tuple[str, str]]:
    return syn.generate_pairs(2000, seed=11)


def test_deterministic_for_a_seed_and_seed_dependent():
    a = syn.generate_pairs(300, seed=3)
    assert a == syn.generate_pairs(300, seed=3)
    assert a[:100] == syn.generate_pairs(100, seed=3)  # one stream per seed
    b = syn.generate_pairs(300, seed=4)
    assert sum(x[0] == y[0] for x, y in zip(a, b, strict=True)) < 10


def test_format(pairs_2000):
    for src, tgt in pairs_2000:
        assert LINE.match(src), src
        assert LINE.match(tgt), tgt
        assert src[-1] == tgt[-1]
    assert {src[-1] for src, _ in pairs_2000} == {".", "?"}


def test_source_lengths(pairs_2000):
    lengths = Counter(len(src.split()) for src, _ in pairs_2000)
    assert syn.MIN_LEN == 3 and syn.MAX_LEN == 20
    assert min(lengths) >= 3 and max(lengths) <= 20
    assert min(lengths) <= 4 and max(lengths) >= 18  # the whole range is used
    assert len(lengths) >= 15


def test_demo_splits_held_out():
    splits = syn.demo_splits()
    assert {k: len(v) for k, v in splits.items()} == {"train": 12000, "valid": 500, "test": 500}
    train = {src for src, _ in splits["train"]}
    valid = {src for src, _ in splits["valid"]}
    test = {src for src, _ in splits["test"]}
    assert len(train) == 12000 and len(valid) == 500 and len(test) == 500
    assert not train & valid and not train & test and not valid & test
    small = syn.demo_splits(train=50, valid=5, test=5, seed=9)
    assert small == syn.demo_splits(train=50, valid=5, test=5, seed=9)
    assert small["train"] != splits["train"][:50]


def test_adjective_and_determiner_agreement():
    lex = syn.lexicon()
    rng = random.Random(0)
    nouns = lex["noun_anim"] + lex["noun_inan"]
    assert set(Counter(n.cls for n in nouns)) == {0, 1, 2}
    for noun in nouns:
        for plural in (False, True):
            adjs = tuple(rng.sample(lex["adj"], 2))
            det = rng.choice(["def", "indef", "dem"] + ([] if plural else ["every"]))
            np = syn.NounPhrase(head=noun, plural=plural, det=det, adjs=adjs)
            src, tgt = syn.source_np(np), syn.target_np(np)
            suffix = syn.agreement_suffix(noun.cls, plural)
            # source: det adj adj noun; target: noun adj adj det (mirrored), all agreeing with the noun
            assert src[1:] == [adjs[0].src, adjs[1].src, syn.word_forms(noun, syn.SRC_LANG)[plural]]
            assert tgt[0] == syn.word_forms(noun, syn.TGT_LANG)[plural]
            assert tgt[1].startswith(adjs[1].tgt) and tgt[2].startswith(adjs[0].tgt)
            assert all(tok.endswith(suffix) for tok in tgt[1:]), (tgt, suffix)
    # the same source adjective has one form per class and number in the target
    adj = lex["adj"][0]
    forms = {
        syn.target_np(syn.NounPhrase(head=n, plural=p, adjs=(adj,)))[1] for n in nouns for p in (False, True)
    }
    assert len(forms) == 6
    assert len({syn.agreement_suffix(c, p) for c in range(3) for p in (False, True)}) == 6


def test_verb_agreement_needs_the_subject():
    lex = syn.lexicon()
    verb = lex["v_intr"][0]
    for tense in ("pres", "past", "fut"):
        clauses = [syn.Clause(syn.NounPhrase(pron=f), verb, tense) for f in syn.PERSONS]
        tgt_forms = {syn.target_verb(c) for c in clauses}
        src_forms = {tuple(syn.source_verb(c, c.subj.features)) for c in clauses}
        assert len(tgt_forms) == 6
        assert len(src_forms) == (2 if tense == "pres" else 1)  # only the present marks 3sg in Lang A
        for c in clauses:  # pro-drop: the target clause is just the verb
            assert syn.target_clause(c) == [syn.target_verb(c)]
    # coordinated subjects are 3rd person plural
    a, b = (syn.NounPhrase(head=n) for n in lex["noun_anim"][:2])
    both = syn.NounPhrase(head=a.head, conj=b)
    assert syn.target_verb(syn.Clause(both, verb)) == syn.target_verb(
        syn.Clause(syn.NounPhrase(pron=(3, True)), verb)
    )
    assert syn.target_verb(syn.Clause(a, verb)) == syn.target_verb(
        syn.Clause(syn.NounPhrase(pron=(3, False)), verb)
    )


def test_reordering_verb_final():
    rng = random.Random(5)
    for _ in range(300):
        clause = syn.sample_clause(rng, "tr")
        src, tgt = (s.split() for s in syn.render(syn.Sentence((clause,))))
        verb = syn.target_verb(clause)
        assert tgt[-2] == verb
        assert tgt[-3] in ("ku", "bu")  # object marker (or negation) right before the verb
        src_verb = syn.source_verb(clause, clause.subj.features)[-1]
        i = len(syn.source_np(clause.subj)) + len(syn.source_verb(clause, clause.subj.features)) - 1
        assert src[i] == src_verb and i < len(src) - 2  # SVO: the object follows the source verb
        obj_end = len(tgt) - 3 - clause.neg  # target: ... object ku [bu] verb .
        obj = syn.target_np(clause.obj)
        assert tgt[obj_end] == "ku" and tgt[obj_end - len(obj) : obj_end] == obj


def test_phenomena_present(pairs_2000):
    src_tokens = Counter(tok for src, _ in pairs_2000 for tok in src.split())
    tgt_tokens = Counter(tok for _, tgt in pairs_2000 for tok in tgt.split())
    for particle in ("ku", "ni", "ju", "ti", "mu", "hi", "bu", "wu"):
        assert tgt_tokens[particle] >= 20, particle  # object, recipient, relative, complement, and, not, ?
    assert src_tokens["ke"] == tgt_tokens["ju"] + tgt_tokens["ti"]  # one source word, two translations
    assert src_tokens["e"] == tgt_tokens["mu"] + tgt_tokens["hi"]
    lex = syn.lexicon()
    postpositions = {p.tgt for p in lex["prep"]}
    assert sum(tgt_tokens[p] for p in postpositions) >= 200
    names = {n.src for n in lex["name"]}
    for src, tgt in pairs_2000:
        assert Counter(t for t in src.split() if t in names) == Counter(t for t in tgt.split() if t in names)


def test_lexicon_sizes_and_unambiguous_forms():
    sizes = syn.lexicon_size()
    assert 200 <= sizes["lemmas"] <= 400
    assert 300 <= sizes["source"] < sizes["target"] <= 3000
    lemmas = [lem for items in syn.lexicon().values() for lem in items]
    for lang in (syn.SRC_LANG, syn.TGT_LANG):
        owner: dict[str, syn.Lemma] = {}
        for lem in lemmas:
            for form in set(syn.word_forms(lem, lang)):
                assert owner.setdefault(form, lem) == lem, (lang, form)
    assert syn.SRC_LANG == "sa" and syn.TGT_LANG == "sb"


def test_mostly_unique():
    # no timed assertion (it failed at 21.8 s on a loaded machine): the generator's speed is bench material
    pairs = syn.generate_pairs(12000, seed=0)
    assert len(pairs) == 12000
    assert len({src for src, _ in pairs}) > 0.95 * 12000
