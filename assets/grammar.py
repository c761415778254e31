"""The toy data set's surface realisation (assets/make_dataset.py): lexicon words -> English and French text.

Subjects (pronouns and noun phrases with article and agreeing adjective), the spelling rules (a/an;
French elision and contraction: l'arbre, du, aux), verb and être phrases with do-support and ne ... pas,
the `Sentence` record, and `Realizer`, the random surface choices (determiner, number, adjective) for a
combination. And back: `combo_key`, the combination (frame and content lemmas) read off an English
sentence. The words are in `assets/lexicon.py`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from assets.lexicon import (
    ADJECTIVES,
    ADVERBS,
    ALLER,
    DRINK,
    EN_VOWELS,
    ETRE_EN,
    ETRE_FR,
    FR_VOWELS,
    INTRANSITIVE,
    MASS,
    NOUNS,
    PERSONS,
    PREPOSITIONS,
    PROFESSIONS,
    TM,
    VERBS,
    Noun,
    Verb,
)


@dataclass(frozen=True)
class Subject:
    """A realised subject: English and French words, and what the verb/adjective must agree with."""

    en: tuple[str, ...]
    fr: tuple[str, ...]
    person: str
    gender: str
    number: str
    head: str  # lemma for the combination key


PRONOUNS = {
    "i": ("je", "1s", "m", "sg"),
    "you": ("tu", "2s", "m", "sg"),
    "he": ("il", "3s", "m", "sg"),
    "she": ("elle", "3s", "f", "sg"),
    "we": ("nous", "1p", "m", "pl"),
    "they": ("ils", "3p", "m", "pl"),
}


def pronoun(p: str) -> Subject:
    fr, person, gender, number = PRONOUNS[p]
    return Subject((p,), (fr,), person, gender, number, p)


def noun_phrase(noun: Noun, det: str, number: str, adj: str = "", neg_indef: bool = False) -> Subject:
    """ "the small dogs" -> "les petits chiens". det is "the" or "a"; neg_indef: "a" -> "de" (after ne ... pas)."""
    en = [det] + ([adj] if adj else []) + [noun.en_form(number)]
    noun_fr = noun.fr_form(number)
    words = [noun_fr]
    if adj:
        a = ADJECTIVES[adj]
        if a.before:
            words = [a.form(noun.gender, number, noun_fr), noun_fr]
        else:
            words = [noun_fr, a.form(noun.gender, number)]
    if det == "the":
        article = "les" if number == "pl" else ("le" if noun.gender == "m" else "la")
    elif neg_indef:
        article = "de"
    else:
        article = "un" if noun.gender == "m" else "une"
    person = "3p" if number == "pl" else "3s"
    return Subject(tuple(en), (article, *words), person, noun.gender, number, noun.en)


# --- Spelling: a/an, elision, contraction ---------------------------------------------------------


def en_text(words: list[str] | tuple[str, ...]) -> str:
    """Join English words, turning "a" into "an" before a vowel: "an apple", "an old dog"."""
    words = list(words)
    for i, w in enumerate(words[:-1]):
        if w == "a" and words[i + 1][0] in EN_VOWELS:
            words[i] = "an"
    return " ".join(words)


ELIDE = {"je": "j'", "le": "l'", "la": "l'", "de": "d'", "ne": "n'", "que": "qu'"}


def fr_text(words: list[str] | tuple[str, ...]) -> str:
    """Join French words with contraction (de le -> du, à les -> aux) and elision (le arbre -> l'arbre)."""
    words = [w for part in words for w in part.split()]  # "près de" is two words
    out: list[str] = []
    i = 0
    while i < len(words):
        w = words[i]
        nxt = words[i + 1] if i + 1 < len(words) else ""
        after = words[i + 2] if i + 2 < len(words) else ""
        if w in ("de", "à") and nxt == "les":
            out.append("des" if w == "de" else "aux")
            i += 2
            continue
        if w in ("de", "à") and nxt == "le" and after and after[0] not in FR_VOWELS:
            out.append("du" if w == "de" else "au")
            i += 2
            continue
        out.append(ELIDE[w] if w in ELIDE and nxt and nxt[0] in FR_VOWELS else w)
        i += 1
    return " ".join(out).replace("' ", "'")


# --- Sentence builders ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sentence:
    en: str
    fr: str
    tag: str
    key: tuple[str, ...]


def verb_phrase(subj: Subject, en_verb: Verb, negative: bool) -> tuple[list[str], list[str]]:
    """Subject + conjugated verb, with do-support / ne ... pas when negative (the object comes after)."""
    fr_verb = en_verb.fr_form(subj.person)
    if negative:
        do = "doesn't" if subj.person == "3s" else "don't"
        return [*subj.en, do, en_verb.en], [*subj.fr, "ne", fr_verb, "pas"]
    return [*subj.en, en_verb.en_form(subj.person)], [*subj.fr, fr_verb]


def be_phrase(subj: Subject, negative: bool) -> tuple[list[str], list[str]]:
    en = [*subj.en, ETRE_EN[subj.person]] + (["not"] if negative else [])
    fr_verb = ETRE_FR[PERSONS.index(subj.person)]
    fr = [*subj.fr, "ne", fr_verb, "pas"] if negative else [*subj.fr, fr_verb]
    return en, fr


def nouns_of(kinds: tuple[str, ...]) -> list[Noun]:
    return [n for n in NOUNS.values() if set(kinds) & set(n.kinds) and "place" not in n.kinds]


def subject_heads(kinds: tuple[str, ...]) -> list[str]:
    heads = list(PRONOUNS) if "person" in kinds else []
    heads += [n.en for n in NOUNS.values() if set(n.kinds) & set(kinds) and "place" not in n.kinds]
    heads += [n.en for n in NOUNS.values() if n.en in kinds]  # a single noun named as a kind ("bird")
    return list(dict.fromkeys(heads))


class Realizer:
    """Random surface choices (determiner, number, adjective) for a given combination."""

    def __init__(self, rng: random.Random):
        self.rng = rng

    def subject(self, head: str, adj_p: float = 0.3, allow_a: bool = True) -> Subject:
        if head in PRONOUNS:
            return pronoun(head)
        noun = NOUNS[head]
        return self.np(noun, adj_p, allow_a=allow_a)

    def np(
        self,
        noun: Noun,
        adj_p: float = 0.3,
        allow_a: bool = True,
        number: str = "",
        neg_indef: bool = False,
        adjs: tuple[str, ...] | None = None,
    ) -> Subject:
        rng = self.rng
        det = "a" if allow_a and rng.random() < 0.35 else "the"
        if not number:
            number = "pl" if det == "the" and rng.random() < 0.4 else "sg"
        if det == "a":
            number = "sg"
        choices = noun.adjs if adjs is None else adjs
        adj = rng.choice(choices) if choices and rng.random() < adj_p else ""
        return noun_phrase(noun, det, number, adj, neg_indef=neg_indef and det == "a")


# --- Reading the combination back from an English sentence ----------------------------------------


def _lemma_table() -> dict[str, str]:
    table = {}
    for n in NOUNS.values():
        table[n.en] = table[n.en_pl] = n.en
    table["shops"] = "shops"
    for p in PROFESSIONS.values():
        table[p.en] = table[p.en_pl] = p.en
    for v in [*VERBS.values(), *INTRANSITIVE.values(), DRINK, ALLER]:
        table[v.en] = table[v.en3] = v.en
    for w in [*PRONOUNS, *MASS, *ADJECTIVES, *ADVERBS]:
        table[w] = w
    return table


LEMMAS = _lemma_table()
BE_FORMS = ("am", "is", "are")
NEGATORS = ("don't", "doesn't", "not")
VERBS_AND_GO = {v.en for v in [*VERBS.values(), *INTRANSITIVE.values(), DRINK, ALLER]}


def combo_key(en: str) -> tuple[str, ...]:
    """The combination of an English sentence of this data set (see assets/make_dataset.py's docstring).

    >>> combo_key("the small dogs don't eat the red apples")
    ('do', 'dog', 'eat', 'apple')
    """
    words = en.split()
    if "because" in words:  # the animal didn't cross the PLACE because it was too ADJ
        return ("coref", LEMMAS[words[1]], LEMMAS[words[5]], words[-1])
    # the subject head is the last word before the verb; "thinking machine(s)" counts as one head
    verb_at = next(
        i
        for i, w in enumerate(words)
        if w in BE_FORMS
        or w in NEGATORS
        or (i > 0 and LEMMAS.get(w) in VERBS_AND_GO and words[i - 1] not in ("a", "the", "thinking"))
    )
    subject = LEMMAS[words[verb_at - 1]]
    if verb_at >= 2 and words[verb_at - 2] == "thinking":
        subject = TM
    rest = words[verb_at:]
    while rest and rest[0] in NEGATORS:
        rest = rest[1:]
    head = TM if words[-2] == "thinking" else LEMMAS.get(words[-1], words[-1])
    if words[verb_at] in BE_FORMS:
        rest = [w for w in rest[1:] if w != "not"]
        if rest[0] in PREPOSITIONS:
            return ("at", subject, rest[0], head)
        return ("be", subject, head)
    verb = LEMMAS[rest[0]]
    if verb == "go":
        return ("go", subject, head)
    if " ".join(rest[1:]) in ADVERBS:
        return ("adv", subject, verb, " ".join(rest[1:]))
    return ("do", subject, verb, head)
