"""A synthetic, seedable parallel corpus for offline demos: "Lang A" (``sa``) -> "Lang B" (``sb``).

The project may not ship third-party text, so the demo generates its own language pair. Both languages
are invented here: word forms come from two small syllable generators with different sound patterns and
a fixed lexicon seed, so the lexicon (about 250 lemmas) is the same for every corpus seed, while the
sentences depend on the seed only (``random.Random(seed)``, stdlib only). Every target sentence is the
output of a deterministic rule-based translation of the sampled source structure, so the pair is always
consistent. Text is lowercase ASCII, tokens are separated by single spaces, and the final "." or "?" is
its own token. Source sentences have 3-20 tokens (punctuation included).

Lang A (source) is English-like: SVO, determiner/numeral + adjectives + noun, prepositions. Nouns mark
number (``-s``) but have no gender; present-tense verbs mark only 3rd person singular (``-t``), the past
(``-da``) and the future (auxiliary ``vel``) do not mark the subject at all. Subject pronouns are
``jo tu ela nu vu eli`` (1sg ... 3pl); function words: ``ta`` the, ``un``/``sem`` a/some, ``vi``/``vin``
this/these, ``kol`` every, ``no`` not, ``ke`` that (both complementizer and relative pronoun), ``e`` and,
``pa`` to (recipient), ``kwe`` (yes/no question, sentence-initial).

Lang B (target) is verb-final and head-final:

* Noun classes: every noun belongs to one of three classes, not predictable from its form and not
  visible in the source, so the model has to learn it per lemma. Plural suffixes depend on the class.
* Agreement: determiners (``l-`` the, ``m-`` a/some, ``d-`` this, ``s-`` every) and adjectives take a
  class/number suffix (``-o -os / -a -ai / -e -ei``); verbs take tense (``-il`` past, ``-ov`` future)
  and person/number suffixes agreeing with the subject (``-am -ek -a -umi -eti -ano``), also in the past
  and future, where the source verb carries no agreement. Coordinated subjects ("x and y") are plural.
* Pro-drop: subject pronouns are dropped; only the verb suffix shows the subject.
* Reordering: SOV with the verb clause-final; the noun phrase is mirrored (noun, adjectives in reverse
  order, then determiner or numeral); prepositions become postpositions; order inside the clause is
  subject, adverb, postpositional phrase, recipient + ``ni``, object + ``ku``, negation ``bu``, verb.
* Subordination: complement clauses ("she says that ...") precede the matrix verb and end in ``ti``;
  subject relative clauses ("the dog that sees a cat") precede their noun and end in ``ju``, with the
  verb agreeing with that noun. Source ``ke`` is thus translated two ways depending on the structure.
* Coordination: source ``e`` is ``mu`` between noun phrases and ``hi`` between clauses.
* Questions: ``kwe ... ?`` becomes ``... wu ?``; names are copied unchanged.

Public API: :data:`SRC_LANG`, :data:`TGT_LANG`, :func:`generate_pairs`, :func:`iter_pairs`, :func:`demo_splits`,
:func:`lexicon_size`. The structures and renderers (:class:`NounPhrase`, :class:`Clause`,
:class:`Sentence`, :func:`sample_clause`, :func:`source_np`, :func:`target_np`, :func:`source_clause`,
:func:`target_clause`, :func:`target_verb`, :func:`agreement_suffix`, :func:`lexicon`) are exposed for
tests and inspection.
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from types import MappingProxyType

__all__ = [
    "SRC_LANG",
    "TGT_LANG",
    "Clause",
    "Lemma",
    "NounPhrase",
    "Sentence",
    "agreement_suffix",
    "demo_splits",
    "generate_pairs",
    "iter_pairs",
    "lexicon",
    "lexicon_size",
    "render",
    "sample_clause",
    "sample_sentence",
    "source_clause",
    "source_np",
    "target_clause",
    "target_np",
    "source_verb",
    "target_verb",
    "word_forms",
]

SRC_LANG = "sa"
TGT_LANG = "sb"
MIN_LEN, MAX_LEN = 3, 20  # source tokens, final punctuation included
LEXICON_SEED = 20240611  # fixed: every corpus seed shares one lexicon

# (person, plural) -> form
Features = tuple[int, bool]
PERSONS: tuple[Features, ...] = ((1, False), (2, False), (3, False), (1, True), (2, True), (3, True))
SRC_PRONOUNS = dict(zip(PERSONS, ("jo", "tu", "ela", "nu", "vu", "eli"), strict=True))
TGT_VERB_AGR = dict(zip(PERSONS, ("am", "ek", "a", "umi", "eti", "ano"), strict=True))
TGT_TENSE = {"pres": "", "past": "il", "fut": "ov"}
NOUN_CLASSES = 3
_AGR = {(0, False): "o", (0, True): "os", (1, False): "a", (1, True): "ai", (2, False): "e", (2, True): "ei"}
_TGT_PLURAL = {0: "ot", 1: "an", 2: "ir"}
_SRC_DET = {
    ("def", False): "ta",
    ("def", True): "ta",
    ("indef", False): "un",
    ("indef", True): "sem",
    ("dem", False): "vi",
    ("dem", True): "vin",
    ("every", False): "kol",
}
_TGT_DET = {"def": "l", "indef": "m", "dem": "d", "every": "s"}
_SRC_PARTICLES = ("ke", "e", "no", "vel", "kwe", "pa")  # that, and, not, will, question, to
_TGT_PARTICLES = ("ku", "ni", "ju", "ti", "mu", "hi", "bu", "wu")  # obj, recipient, rel, comp, and x2, not, q
_PUNCT = (".", "?")

# generated lexicon: category -> size
_CATEGORY_SIZES = (
    ("noun_anim", 30),  # people and animals: subjects and recipients
    ("noun_inan", 70),  # things and places: objects and postpositional phrases
    ("adj", 30),
    ("v_intr", 20),
    ("v_tr", 30),
    ("v_ditr", 6),  # give-type: subject, object and recipient
    ("v_comp", 5),  # say/think-type: take a "that" clause
    ("adv", 12),
    ("prep", 8),
    ("num", 9),
    ("name", 16),
)
_SRC_SOUNDS = ("b d f g k l m n p r s t v".split(), "a e i o u".split(), [])
_TGT_SOUNDS = ("h j k l m n r s t w y z sh kh".split(), "a e i o u".split(), "k l m n r s t".split())


@dataclass(frozen=True)
class Lemma:
    """A lexical entry: category, source stem, target stem; nouns also have a class and animacy."""

    cat: str
    src: str
    tgt: str
    cls: int = 0
    animate: bool = False


@dataclass(frozen=True)
class NounPhrase:
    """A subject pronoun (``pron``), a name, or a noun with determiner/numeral, adjectives, relative clause.

    ``conj`` chains a second noun phrase ("x and y"); the whole phrase is then 3rd person plural.
    """

    head: Lemma | None = None
    pron: Features | None = None
    plural: bool = False
    det: str | None = "def"  # def | indef | dem | every; None with a numeral or a name
    numeral: Lemma | None = None
    adjs: tuple[Lemma, ...] = ()
    rel: Clause | None = None  # subject relative clause: its ``subj`` is None, the head is the subject
    conj: NounPhrase | None = None

    @property
    def features(self) -> Features:
        """(person, plural) used for verb agreement."""
        if self.conj is not None:
            return (3, True)
        if self.pron is not None:
            return self.pron
        return (3, self.plural)


@dataclass(frozen=True)
class Clause:
    """One clause; the verb lemma's category decides which of obj/iobj/comp are present."""

    subj: NounPhrase | None
    verb: Lemma
    tense: str = "pres"  # pres | past | fut
    neg: bool = False
    obj: NounPhrase | None = None
    iobj: NounPhrase | None = None
    comp: Clause | None = None
    pp: tuple[Lemma, NounPhrase] | None = None
    adv: Lemma | None = None


@dataclass(frozen=True)
class Sentence:
    """One clause, or two clauses joined by "and"; optionally a yes/no question."""

    clauses: tuple[Clause, ...]
    question: bool = False


def _stem_maker(rng: random.Random, sounds: tuple[list[str], list[str], list[str]]):
    """Returns a function producing new 2-3 syllable stems; all stems of one language are prefix-free.

    Prefix-freeness plus suffixes that start with a vowel (target) or consonant after vowel-final stems
    (source) makes every inflected form parse back to exactly one lemma.
    """
    onsets, vowels, codas = sounds
    used: list[str] = []

    def make() -> str:
        while True:
            word = "".join(rng.choice(onsets) + rng.choice(vowels) for _ in range(rng.choice((2, 2, 3))))
            word += rng.choice(codas) if codas else ""
            if not any(word.startswith(u) or u.startswith(word) for u in used):
                used.append(word)
                return word

    return make


@lru_cache(maxsize=1)
def lexicon() -> Mapping[str, tuple[Lemma, ...]]:
    """The generated lexicon (same for every corpus seed), by category (see ``_CATEGORY_SIZES``)."""
    rng = random.Random(LEXICON_SEED)
    src, tgt = _stem_maker(rng, _SRC_SOUNDS), _stem_maker(rng, _TGT_SOUNDS)
    n_nouns = sum(n for cat, n in _CATEGORY_SIZES if cat.startswith("noun"))
    classes = [i % NOUN_CLASSES for i in range(n_nouns)]
    rng.shuffle(classes)
    names: set[str] = set()
    out: dict[str, tuple[Lemma, ...]] = {}
    for cat, size in _CATEGORY_SIZES:
        items = []
        for _ in range(size):
            if cat == "name":  # VCVCV, vowel-initial: cannot clash with a generated word of either language
                name = ""
                while not name or name in names:
                    name = "".join(
                        rng.choice(c) for c in ("aeiou", "dklmnrstv", "aeiou", "dklmnrstv", "aeiou")
                    )
                names.add(name)
                items.append(Lemma(cat, name, name))  # names are copied unchanged
            elif cat.startswith("noun"):
                items.append(Lemma(cat, src(), tgt(), cls=classes.pop(), animate=cat == "noun_anim"))
            else:
                items.append(Lemma(cat, src(), tgt()))
        out[cat] = tuple(items)
    return MappingProxyType(out)


def agreement_suffix(noun_class: int, plural: bool) -> str:
    """Target suffix that determiners and adjectives take to agree with a noun of this class/number."""
    return _AGR[(noun_class, plural)]


def word_forms(lem: Lemma, lang: str) -> list[str]:
    """Every inflected form of a lemma in ``lang`` (:data:`SRC_LANG` or :data:`TGT_LANG`)."""
    return _src_forms(lem) if lang == SRC_LANG else _tgt_forms(lem)


def _src_forms(lem: Lemma) -> list[str]:
    if lem.cat.startswith("noun"):
        return [lem.src, lem.src + "s"]
    if lem.cat.startswith("v_"):
        return [lem.src, lem.src + "t", lem.src + "da"]
    return [lem.src]


def _tgt_forms(lem: Lemma) -> list[str]:
    if lem.cat.startswith("noun"):
        return [lem.tgt, lem.tgt + _TGT_PLURAL[lem.cls]]
    if lem.cat == "adj":
        return [lem.tgt + s for s in _AGR.values()]
    if lem.cat.startswith("v_"):
        return [lem.tgt + t + a for t in TGT_TENSE.values() for a in TGT_VERB_AGR.values()]
    return [lem.tgt]


def lexicon_size() -> dict[str, int]:
    """Vocabulary sizes: ``lemmas`` (source lemmas incl. function words), ``source`` and ``target``
    (distinct word types of every inflected form, punctuation included)."""
    lemmas = [lem for items in lexicon().values() for lem in items]
    src = {f for lem in lemmas for f in _src_forms(lem)}
    src |= set(_SRC_DET.values()) | set(SRC_PRONOUNS.values()) | set(_SRC_PARTICLES) | set(_PUNCT)
    tgt = {f for lem in lemmas for f in _tgt_forms(lem)}
    tgt |= {d + s for d in _TGT_DET.values() for s in _AGR.values()} | set(_TGT_PARTICLES) | set(_PUNCT)
    n_function = len(_TGT_DET) + len(SRC_PRONOUNS) + len(_SRC_PARTICLES)
    return {"lemmas": len(lemmas) + n_function, "source": len(src), "target": len(tgt)}


# ---------------------------------------------------------------------------------------------- rendering


def source_verb(c: Clause, feats: Features) -> list[str]:
    """Source verb group: [no] [vel] verb; only the present marks the subject (3sg ``-t``)."""
    out = ["no"] if c.neg else []
    if c.tense == "fut":
        return out + ["vel", c.verb.src]
    if c.tense == "past":
        return out + [c.verb.src + "da"]
    return out + [c.verb.src + ("t" if feats == (3, False) else "")]


def target_verb(c: Clause, feats: Features | None = None) -> str:
    """Target verb form: stem + tense + person/number of the subject (``feats`` for relative clauses)."""
    feats = c.subj.features if feats is None else feats
    return c.verb.tgt + TGT_TENSE[c.tense] + TGT_VERB_AGR[feats]


def source_np(np: NounPhrase) -> list[str]:
    """Source tokens: det|numeral adj* noun[-s] [ke predicate] [e np]."""
    if np.pron is not None:
        out = [SRC_PRONOUNS[np.pron]]
    elif np.head.cat == "name":
        out = [np.head.src]
    else:
        out = [np.numeral.src] if np.numeral else [_SRC_DET[(np.det, np.plural)]]
        out += [a.src for a in np.adjs]
        out.append(np.head.src + ("s" if np.plural else ""))
        if np.rel is not None:
            out += ["ke"] + _source_predicate(np.rel, (3, np.plural))
    return out + (["e"] + source_np(np.conj) if np.conj is not None else [])


def target_np(np: NounPhrase) -> list[str]:
    """Target tokens: [relative ju] noun[-pl] adj-agr* (mirrored) det-agr|numeral [mu np]; pronouns drop."""
    if np.pron is not None:
        out = []
    elif np.head.cat == "name":
        out = [np.head.tgt]
    else:
        cls, suffix = np.head.cls, agreement_suffix(np.head.cls, np.plural)
        out = _target_predicate(np.rel, (3, np.plural)) + ["ju"] if np.rel is not None else []
        out.append(np.head.tgt + (_TGT_PLURAL[cls] if np.plural else ""))
        out += [a.tgt + suffix for a in reversed(np.adjs)]
        out.append(np.numeral.tgt if np.numeral else _TGT_DET[np.det] + suffix)
    return out + (["mu"] + target_np(np.conj) if np.conj is not None else [])


def _source_predicate(c: Clause, feats: Features) -> list[str]:
    out = source_verb(c, feats)
    if c.obj is not None:
        out += source_np(c.obj)
    if c.iobj is not None:
        out += ["pa"] + source_np(c.iobj)
    if c.comp is not None:
        out += ["ke"] + source_clause(c.comp)
    if c.pp is not None:
        out += [c.pp[0].src] + source_np(c.pp[1])
    return out + ([c.adv.src] if c.adv is not None else [])


def _target_predicate(c: Clause, feats: Features) -> list[str]:
    out = [c.adv.tgt] if c.adv is not None else []
    if c.pp is not None:
        out += target_np(c.pp[1]) + [c.pp[0].tgt]
    if c.iobj is not None:
        out += target_np(c.iobj) + ["ni"]
    if c.obj is not None:
        out += target_np(c.obj) + ["ku"]
    if c.comp is not None:
        out += target_clause(c.comp) + ["ti"]
    return out + (["bu"] if c.neg else []) + [target_verb(c, feats)]


def source_clause(c: Clause) -> list[str]:
    """Source tokens of a clause: subject, verb group, object, recipient, complement, PP, adverb."""
    return source_np(c.subj) + _source_predicate(c, c.subj.features)


def target_clause(c: Clause) -> list[str]:
    """Target tokens of a clause: subject, adverb, PP, recipient, object, complement, negation, verb."""
    return target_np(c.subj) + _target_predicate(c, c.subj.features)


def render(s: Sentence) -> tuple[str, str]:
    """The (source, target) strings of a sentence structure."""
    src: list[str] = []
    tgt: list[str] = []
    for i, c in enumerate(s.clauses):
        if i:
            src.append("e")
            tgt.append("hi")
        src += source_clause(c)
        tgt += target_clause(c)
    if s.question:
        src, tgt = ["kwe"] + src + ["?"], tgt + ["wu", "?"]
    else:
        src, tgt = src + ["."], tgt + ["."]
    return " ".join(src), " ".join(tgt)


# ----------------------------------------------------------------------------------------------- sampling


def _table(weights: dict[str, float]) -> tuple[list[str], list[float]]:
    """Choices and cumulative weights for ``_pick`` (precomputed: sampling speed matters)."""
    cum, total = [], 0.0
    for w in weights.values():
        total += w
        cum.append(total)
    return list(weights), cum


def _pick(rng: random.Random, table: tuple[list[str], list[float]]) -> str:
    return table[0][bisect.bisect(table[1], rng.random() * table[1][-1])]


_DET_PL = _table({"def": 0.4, "indef": 0.25, "dem": 0.15, "num": 0.2})
_DET_SG = _table({"def": 0.4, "indef": 0.3, "dem": 0.2, "every": 0.1})
_N_ADJ = _table({"0": 0.5, "1": 0.35, "2": 0.15})
_TENSE = _table({"pres": 0.45, "past": 0.35, "fut": 0.2})
_KIND_TOP = _table({"intr": 0.3, "tr": 0.4, "ditr": 0.12, "comp": 0.18})
_KIND_EMBEDDED = _table({"intr": 0.3, "tr": 0.4, "ditr": 0.12})


def _sample_np(rng: random.Random, role: str, depth: int) -> NounPhrase:
    """A noun phrase for ``role`` in subj | obj | iobj | pp; ``depth`` > 0 forbids nesting."""
    lex = lexicon()
    r = rng.random()
    if role == "subj" and r < 0.2:
        return NounPhrase(pron=rng.choice(PERSONS))
    if r < (0.33 if role == "subj" else 0.12):
        return NounPhrase(head=rng.choice(lex["name"]), det=None)
    if role == "subj" and depth == 0 and r < 0.4:
        first, second = _sample_np(rng, "iobj", 1), _sample_np(rng, "iobj", 1)
        return NounPhrase(first.head, None, first.plural, first.det, first.numeral, first.adjs, conj=second)
    animate = role in ("subj", "iobj") or (role == "obj" and rng.random() < 0.25)
    head = rng.choice(lex["noun_anim" if animate else "noun_inan"])
    plural = rng.random() < 0.4
    if plural:
        det = _pick(rng, _DET_PL)
    else:
        det = _pick(rng, _DET_SG)
    numeral = rng.choice(lex["num"]) if det == "num" else None
    n_adj = int(_pick(rng, _N_ADJ))
    adjs = tuple(rng.sample(lex["adj"], n_adj)) if n_adj else ()
    rel = None
    if depth == 0 and role in ("subj", "obj") and rng.random() < 0.12:
        rel = sample_clause(rng, rng.choice(("intr", "tr")), depth=1, relative=True)
    return NounPhrase(head, None, plural, None if numeral else det, numeral, adjs, rel)


def sample_clause(
    rng: random.Random, kind: str | None = None, depth: int = 0, relative: bool = False
) -> Clause:
    """A random clause of ``kind`` intr | tr | ditr | comp (random if None).

    ``depth`` > 0 (embedded, coordinated or relative clauses) forbids complement clauses and relative
    clauses inside; ``relative`` leaves out the subject, PP and adverb (a subject relative clause).
    """
    lex = lexicon()
    if kind is None:
        kind = _pick(rng, _KIND_TOP if depth == 0 else _KIND_EMBEDDED)
    subj = None if relative else _sample_np(rng, "subj", depth)
    verb = rng.choice(lex["v_" + kind])
    tense = _pick(rng, _TENSE)
    neg = rng.random() < 0.15
    obj = _sample_np(rng, "obj", max(depth, int(relative))) if kind in ("tr", "ditr") else None
    iobj = _sample_np(rng, "iobj", 1) if kind == "ditr" else None
    comp = sample_clause(rng, rng.choice(("intr", "tr", "ditr")), depth=1) if kind == "comp" else None
    pp = adv = None
    if not relative and kind != "comp":
        if rng.random() < {"intr": 0.55, "tr": 0.25, "ditr": 0.1}[kind]:
            pp = (rng.choice(lex["prep"]), _sample_np(rng, "pp", 1))
        if rng.random() < 0.25:
            adv = rng.choice(lex["adv"])
    return Clause(subj, verb, tense, neg, obj, iobj, comp, pp, adv)


def sample_sentence(rng: random.Random) -> Sentence:
    """A random sentence: 76% statements, 12% yes/no questions, 12% two coordinated clauses."""
    r = rng.random()
    if r < 0.12:
        return Sentence((sample_clause(rng, depth=1), sample_clause(rng, depth=1)))
    return Sentence((sample_clause(rng),), question=r < 0.24)


def _pair_stream(seed: int):
    rng = random.Random(seed)
    while True:
        src, tgt = render(sample_sentence(rng))
        if MIN_LEN <= src.count(" ") + 1 <= MAX_LEN:
            yield src, tgt


def iter_pairs(n: int, seed: int = 0) -> Iterator[tuple[str, str]]:
    """The pairs of :func:`generate_pairs` one at a time (for writing big corpora without a list)."""
    return itertools.islice(_pair_stream(seed), n)


def generate_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (source, target) pairs, deterministic for ``seed`` (a prefix of the longer list for the
    same seed). Duplicates may occur (rarely, short sentences); :func:`demo_splits` removes them."""
    stream = _pair_stream(seed)
    return [next(stream) for _ in range(n)]


def demo_splits(
    train: int = 12000, valid: int = 500, test: int = 500, seed: int = 1234
) -> dict[str, list[tuple[str, str]]]:
    """Train/valid/test pairs from one stream for ``seed``, deduplicated on the source sentence.

    Every source sentence occurs at most once in the three splits together, so valid and test are really
    held out: none of their sources appears in train (or in the other held-out split).
    """
    seen: set[str] = set()
    splits: dict[str, list[tuple[str, str]]] = {}
    stream = _pair_stream(seed)
    for name, size in (("train", train), ("valid", valid), ("test", test)):
        pairs: list[tuple[str, str]] = []
        for _ in range(20 * size + 1000):
            if len(pairs) >= size:
                break
            src, tgt = next(stream)
            if src not in seen:
                seen.add(src)
                pairs.append((src, tgt))
        if len(pairs) < size:
            raise ValueError(f"cannot draw {size} new distinct source sentences for {name!r}")
        splits[name] = pairs
    return splits
