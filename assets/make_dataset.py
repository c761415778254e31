"""Generate the toy English-French data set: ``python -m assets.make_dataset [OUTPUT.tsv]``.

Writes ``assets/toy_en_fr.tsv`` (or OUTPUT) with the header ``split<TAB>en<TAB>fr<TAB>tag``. The
output is deterministic: a fixed seed, no dictionary/set iteration order anywhere, so two runs
give byte-identical files (a test checks this against the shipped file).

The data is a small grammar, not real text. Every English sentence has exactly one French
translation and vice versa, so a small Transformer can learn it in both directions. Everything is
lower case, without final punctuation.

Families (the ``tag`` column)
-----------------------------
``basic``       "i am a student" -> "je suis étudiant"; "the cows are tired" -> "les vaches sont
                fatiguées" (être, no article before a profession, adjective agreement)
``action``      "a small dog sees the red car" -> "un petit chien voit la voiture rouge" (verb
                agreement, adjective position: petit/grand/jeune/bon/vieux before the noun, the
                others after; "le vieil homme")
``negation``    "he doesn't have a car" -> "il n'a pas de voiture"; "the road is not long" ->
                "la route n'est pas longue" (ne ... pas, n' before a vowel, un/une -> de/d')
``like``        "i like dogs" -> "j'aime les chiens"; "she likes milk" -> "elle aime le lait"
                (a general statement takes the definite article in French)
``partitive``   "we drink water" -> "nous buvons de l'eau"; "i don't eat bread" -> "je ne mange pas
                de pain" (du / de la / de l', and de / d' after a negation)
``adverb``      "the children run fast" -> "les enfants courent vite"
``location``    "the cat is under the table" -> "le chat est sous la table"; "the bird is near the
                tree" -> "l'oiseau est près de l'arbre"; "we go to the park" -> "nous allons au parc"
                (de + le = du, à + le = au, à + les = aux)
``thinking``    "thinking machines learn fast" -> "les machines pensantes apprennent vite"
``coref``       the lecture's coreference example: "the animal didn't cross the street because it
                was too tired" -> "l'animal n'a pas traversé la rue parce qu'il était trop fatigué",
                but "... because it was too wide" -> "... la rue parce qu'elle était trop large". The
                adjective only fits the animal (tired, scared, hungry, lazy) or only the place (wide,
                long, narrow, busy); "it" becomes il or elle by the gender of the noun it fits, and
                the adjective agrees with that noun.

The held-out rule
-----------------
Every sentence has a *combination* (`combo_key`): its frame plus the lemmas of its content heads,
read off the English sentence. Determiners, adjectives inside a noun phrase, singular/plural and
negation are not part of it.

* ``("be", subject, predicate)``        "the small dogs are not hungry" -> ("be", "dog", "hungry")
* ``("at", subject, preposition, place)`` "i am near the river" -> ("at", "i", "near", "river")
* ``("go", subject, place)``            "the boys go to the market" -> ("go", "boy", "market")
* ``("do", subject, verb, object)``     "she doesn't like cats" -> ("do", "she", "like", "cat")
* ``("adv", subject, verb, adverb)``    "thinking machines learn fast" ->
                                        ("adv", "thinking machine", "learn", "fast")
* ``("coref", animal, place, adjective)``

About 15% of all combinations (84 of the 560 for ``coref``) are drawn at random as *held out*. The held-out
split only has sentences whose combination is held out, the training split only has the others.
So no held-out sentence, nor any other sentence with the same subject+verb+object (or
animal+place+adjective) combination, is ever seen in training: the held-out split tests
generalisation to new combinations of known words. Every word of the held-out split does occur in
training (sentences that would break this are dropped), and for ``coref`` every animal+adjective
and place+adjective pair (so every agreement form) stays in training.

Sentence length: 3 to 12 tokens on both sides (counted by `model.vocab.tokenize`, which counts
"j'" and "aime" as two tokens), except the lecture's ``coref`` sentences, which have 11 English and
14 French tokens ("l' animal n' a pas traversé la rue parce qu' il était trop fatigué").

French notes: "h" in homme, hôpital, huile is mute (l'homme, l'hôpital, de l'huile). Speaker
gender: "i", "you" (always "tu") and "we"/"they" (always "ils") take masculine agreement.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

from model.vocab import tokenize

SEED = 20170612  # the day "Attention Is All You Need" appeared on arXiv
OUTPUT = Path(__file__).resolve().with_name("toy_en_fr.tsv")
HEADER = ("split", "en", "fr", "tag")
HELDOUT_FRACTION = 0.15
COREF_HELDOUT = 84  # of 10 animals x 7 places x 8 adjectives = 560 coref combinations (15%)
MAX_TOKENS = 12
MAX_TOKENS_COREF = 14

# Sentences per family: (train, held-out). Families with few combinations may give fewer.
TARGETS = {
    "basic": (560, 70),
    "action": (1250, 150),
    "negation": (620, 80),
    "like": (300, 40),
    "partitive": (300, 40),
    "adverb": (380, 45),
    "location": (520, 65),
    "thinking": (60, 12),
}

# Sentences that must be in the training split (the seeds' and the lecture's examples).
FORCED_TRAIN = (
    "i am a student",
    "thinking machines learn fast",
    "i like thinking machines",
    "the animal didn't cross the street because it was too tired",
    "the animal didn't cross the street because it was too wide",
)

FR_VOWELS = set("aàâeéèêëiîïoôœuùûyh")  # every h-word of this lexicon has a mute h
EN_VOWELS = set("aeiou")


# --- Lexicon ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Adj:
    """An adjective: English, French forms (masc. sg., fem. sg., masc. pl., fem. pl.), position."""

    en: str
    m: str
    f: str
    mp: str
    fp: str
    before: bool = False  # French position: True = before the noun (petit, grand, ...)
    m_vowel: str = ""  # masc. sg. form before a vowel ("vieil"), if different

    def form(self, gender: str, number: str, next_word: str = "") -> str:
        if number == "pl":
            return self.mp if gender == "m" else self.fp
        if gender == "f":
            return self.f
        if self.m_vowel and next_word and next_word[0] in FR_VOWELS:
            return self.m_vowel
        return self.m


def _regular(en: str, m: str, **kw) -> Adj:
    """An adjective with regular French endings: +e, +s, +es (no extra e after a final e)."""
    f = m if m.endswith("e") else m + "e"
    return Adj(en, m, f, m if m.endswith(("s", "x")) else m + "s", f + "s", **kw)


ADJECTIVES = {
    a.en: a
    for a in [
        # before the noun
        _regular("small", "petit", before=True),
        _regular("big", "grand", before=True),
        _regular("young", "jeune", before=True),
        Adj("good", "bon", "bonne", "bons", "bonnes", before=True),
        Adj("old", "vieux", "vieille", "vieux", "vieilles", before=True, m_vowel="vieil"),
        # after the noun: colours
        _regular("red", "rouge"),
        _regular("blue", "bleu"),
        _regular("green", "vert"),
        _regular("black", "noir"),
        Adj("white", "blanc", "blanche", "blancs", "blanches"),
        # people and animals
        Adj("happy", "heureux", "heureuse", "heureux", "heureuses"),
        _regular("sad", "triste"),
        _regular("tired", "fatigué"),
        _regular("hungry", "affamé"),
        _regular("scared", "effrayé"),
        Adj("lazy", "paresseux", "paresseuse", "paresseux", "paresseuses"),
        _regular("clever", "intelligent"),
        # things
        _regular("heavy", "lourd"),
        _regular("broken", "cassé"),
        # places
        _regular("wide", "large"),
        Adj("long", "long", "longue", "longs", "longues"),
        _regular("narrow", "étroit"),
        _regular("busy", "animé"),
    ]
}

ANIMAL_STATES = ("tired", "scared", "hungry", "lazy")  # coref: fit only an animal
PLACE_STATES = ("wide", "long", "narrow", "busy")  # coref: fit only a place
PERSON_ADJS = ("young", "old", "happy", "sad", "tired", "hungry", "scared", "lazy", "clever")
ANIMAL_ADJS = (
    "small",
    "big",
    "young",
    "old",
    "black",
    "white",
    "happy",
    "sad",
    "tired",
    "hungry",
    "scared",
    "lazy",
    "clever",
)


@dataclass(frozen=True)
class Noun:
    """A noun: English sg./pl., French sg./pl., gender, kinds (what it can do or have done to it)."""

    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: str
    kinds: tuple[str, ...]
    adjs: tuple[str, ...] = ()  # adjectives that fit it (attributive and predicative)

    def en_form(self, number: str) -> str:
        return self.en_pl if number == "pl" else self.en

    def fr_form(self, number: str) -> str:
        return self.fr_pl if number == "pl" else self.fr


def _n(
    en: str, fr: str, gender: str, kinds: str, adjs: str | tuple[str, ...] = "", en_pl: str = "", fr_pl: str = ""
) -> Noun:
    adj_tuple = tuple(adjs.split()) if isinstance(adjs, str) else adjs
    return Noun(en, en_pl or en + "s", fr, fr_pl or fr + "s", gender, tuple(kinds.split()), adj_tuple)


NOUNS = {
    n.en: n
    for n in [
        # people
        _n("man", "homme", "m", "person", PERSON_ADJS, en_pl="men"),
        _n("woman", "femme", "f", "person", PERSON_ADJS, en_pl="women"),
        _n("boy", "garçon", "m", "person", PERSON_ADJS),
        _n("girl", "fille", "f", "person", PERSON_ADJS),
        _n("child", "enfant", "m", "person", PERSON_ADJS, en_pl="children"),
        _n("student", "étudiant", "m", "person", PERSON_ADJS),
        _n("teacher", "professeur", "m", "person", PERSON_ADJS),
        _n("friend", "ami", "m", "person", PERSON_ADJS),
        # animals
        _n("animal", "animal", "m", "animal", ANIMAL_ADJS, fr_pl="animaux"),
        _n("dog", "chien", "m", "animal", ANIMAL_ADJS),
        _n("horse", "cheval", "m", "animal", ANIMAL_ADJS, fr_pl="chevaux"),
        _n("cat", "chat", "m", "animal", ANIMAL_ADJS),
        _n("bird", "oiseau", "m", "animal", ANIMAL_ADJS, fr_pl="oiseaux"),
        _n("cow", "vache", "f", "animal", ANIMAL_ADJS),
        _n("mouse", "souris", "f", "animal", ANIMAL_ADJS, en_pl="mice", fr_pl="souris"),
        _n("goat", "chèvre", "f", "animal", ANIMAL_ADJS),
        _n("rabbit", "lapin", "m", "animal", ANIMAL_ADJS),
        _n("hen", "poule", "f", "animal", ANIMAL_ADJS),
        # food (count nouns)
        _n("apple", "pomme", "f", "food thing small", "small big good red green"),
        _n("cake", "gâteau", "m", "food thing small", "small big good", fr_pl="gâteaux"),
        _n("orange", "orange", "f", "food thing small", "small big good"),
        _n("egg", "œuf", "m", "food thing small", "small big white"),
        # things
        _n("book", "livre", "m", "thing small readable openable", "small big good old red blue green black heavy"),
        _n("letter", "lettre", "f", "thing small readable openable", "old blue white"),
        _n(
            "car",
            "voiture",
            "f",
            "thing washable place_in place_under",
            "small big old red blue green black white broken",
        ),
        _n("house", "maison", "f", "thing buildable place_in", "small big old red blue white"),
        _n("ball", "balle", "f", "thing small", "small big red blue green white black"),
        _n("tree", "arbre", "m", "thing place_under place_near", "small big old young green"),
        _n("door", "porte", "f", "thing openable place_near", "big small old red blue green black white broken heavy"),
        _n("window", "fenêtre", "f", "thing openable washable", "small big old broken"),
        _n(
            "table",
            "table",
            "f",
            "thing washable buildable place_on place_under",
            "small big old heavy broken black white",
        ),
        _n(
            "chair",
            "chaise",
            "f",
            "thing small washable buildable place_on place_under",
            "small big old broken heavy red blue black white",
        ),
        _n("key", "clé", "f", "thing small", "small big old black"),
        _n(
            "box",
            "boîte",
            "f",
            "thing small openable buildable place_in place_on",
            "small big old heavy red blue black white",
            en_pl="boxes",
        ),
        _n("bag", "sac", "m", "thing small openable place_in", "small big old heavy red black"),
        _n("boat", "bateau", "m", "thing buildable", "small big old red blue white", fr_pl="bateaux"),
        _n("machine", "machine", "f", "thing buildable", "small big old heavy broken"),
        _n("bed", "lit", "m", "thing place_on place_under", "small big old"),
        # places
        _n("street", "rue", "f", "place coref_place", PLACE_STATES),
        _n("road", "route", "f", "place coref_place", PLACE_STATES),
        _n("river", "rivière", "f", "place coref_place go place_near", PLACE_STATES),
        _n("bridge", "pont", "m", "place coref_place go place_on place_under place_near", PLACE_STATES),
        _n("park", "parc", "m", "place coref_place go place_in place_near", PLACE_STATES),
        _n("path", "chemin", "m", "place coref_place", PLACE_STATES),
        _n("lane", "ruelle", "f", "place coref_place", PLACE_STATES),
        _n("garden", "jardin", "m", "place go place_in place_near", "small big old"),
        _n("school", "école", "f", "place go place_in place_near", "small big old"),
        _n("market", "marché", "m", "place go place_near", "busy"),
        _n("station", "gare", "f", "place go place_in place_near", "busy"),
        _n("beach", "plage", "f", "place go place_near", "busy", en_pl="beaches"),
        _n("hospital", "hôpital", "m", "place go place_in place_near", "", fr_pl="hôpitaux"),
        _n("shop", "magasin", "m", "place go", ""),
    ]
}

# preposition -> the nouns after it ("the cat is under the table"); GO_PLACES: "we go to the park"
LOCATION_PLACES = {
    "in": ("house", "garden", "school", "park", "station", "hospital", "box", "bag", "car"),
    "on": ("table", "chair", "bed", "box", "bridge"),
    "under": ("table", "chair", "bed", "tree", "bridge", "car"),
    "near": (
        "house",
        "tree",
        "door",
        "river",
        "bridge",
        "park",
        "garden",
        "school",
        "market",
        "station",
        "beach",
        "hospital",
    ),
    "behind": ("house", "tree", "door", "car", "school", "chair"),
}
PREPOSITIONS = {"in": "dans", "on": "sur", "under": "sous", "near": "près de", "behind": "derrière"}
GO_PLACES = ("park", "school", "market", "station", "beach", "hospital", "river", "bridge", "garden", "shops", "house")
LOCATION_SUBJECTS = (
    "man",
    "woman",
    "boy",
    "girl",
    "child",
    "student",
    "teacher",
    "friend",
    "dog",
    "cat",
    "horse",
    "bird",
    "cow",
    "mouse",
    "goat",
    "rabbit",
    "hen",
    "animal",
    "book",
    "key",
    "ball",
    "apple",
    "letter",
    "bag",
)
SMALL_THINGS_ON_IN = ("book", "key", "ball", "apple", "letter", "bag")


@dataclass(frozen=True)
class Mass:
    en: str
    fr: str
    gender: str


MASS = {
    m.en: m
    for m in [
        Mass("water", "eau", "f"),
        Mass("milk", "lait", "m"),
        Mass("bread", "pain", "m"),
        Mass("soup", "soupe", "f"),
        Mass("coffee", "café", "m"),
        Mass("tea", "thé", "m"),
        Mass("juice", "jus", "m"),
        Mass("rice", "riz", "m"),
        Mass("cheese", "fromage", "m"),
        Mass("oil", "huile", "f"),
    ]
}


@dataclass(frozen=True)
class Profession:
    en: str
    en_pl: str
    m: str
    f: str
    mp: str
    fp: str


PROFESSIONS = {
    p.en: p
    for p in [
        Profession("student", "students", "étudiant", "étudiante", "étudiants", "étudiantes"),
        Profession("teacher", "teachers", "professeur", "professeure", "professeurs", "professeures"),
        Profession("doctor", "doctors", "médecin", "médecin", "médecins", "médecins"),
        Profession("singer", "singers", "chanteur", "chanteuse", "chanteurs", "chanteuses"),
        Profession("cook", "cooks", "cuisinier", "cuisinière", "cuisiniers", "cuisinières"),
    ]
}

PERSONS = ("1s", "2s", "3s", "1p", "3p")


@dataclass(frozen=True)
class Verb:
    """A verb: English base and 3rd-sg. forms, French present tense in PERSONS order."""

    en: str
    en3: str
    fr: tuple[str, str, str, str, str]
    subjects: tuple[str, ...] = ("person",)  # noun kinds that can be the subject
    objects: tuple[str, ...] = ()  # noun kinds (or noun names) that can be the object

    def fr_form(self, person: str) -> str:
        return self.fr[PERSONS.index(person)]

    def en_form(self, person: str) -> str:
        return self.en3 if person == "3s" else self.en


def _er(stem: str) -> tuple[str, str, str, str, str]:
    """Present tense of a regular -er verb: aim -> aime, aimes, aime, aimons, aiment."""
    nous = stem + ("eons" if stem.endswith("g") else "ons")
    return (stem + "e", stem + "es", stem + "e", nous, stem + "ent")


PA = ("person", "animal")
VERBS = {
    v.en: v
    for v in [
        Verb("eat", "eats", _er("mang"), PA, ("food",)),
        Verb("see", "sees", ("vois", "vois", "voit", "voyons", "voient"), PA, ("person", "animal", "thing")),
        Verb("like", "likes", _er("aim"), PA, ("person", "animal", "thing")),
        Verb("want", "wants", ("veux", "veux", "veut", "voulons", "veulent"), PA, ("thing", "animal")),
        Verb("have", "has", ("ai", "as", "a", "avons", "ont"), ("person",), ("thing", "animal")),
        Verb("watch", "watches", _er("regard"), PA, ("person", "animal", "thing")),
        Verb("find", "finds", _er("trouv"), PA, ("thing", "animal")),
        Verb("carry", "carries", _er("port"), ("person",), ("small",)),
        Verb("wash", "washes", _er("lav"), ("person",), ("washable", "animal")),
        Verb("read", "reads", ("lis", "lis", "lit", "lisons", "lisent"), ("person",), ("readable",)),
        Verb("open", "opens", ("ouvre", "ouvres", "ouvre", "ouvrons", "ouvrent"), ("person",), ("openable",)),
        Verb("help", "helps", _er("aid"), ("person",), ("person", "animal")),
        Verb(
            "feed", "feeds", ("nourris", "nourris", "nourrit", "nourrissons", "nourrissent"), ("person",), ("animal",)
        ),
        Verb("buy", "buys", ("achète", "achètes", "achète", "achetons", "achètent"), ("person",), ("thing", "animal")),
        Verb(
            "build",
            "builds",
            ("construis", "construis", "construit", "construisons", "construisent"),
            ("person",),
            ("buildable",),
        ),
    ]
}
PARTITIVE_VERBS = {  # verb -> mass nouns it takes
    "eat": ("bread", "soup", "rice", "cheese"),
    "drink": ("water", "milk", "coffee", "tea", "juice", "soup"),
    "want": ("water", "milk", "bread", "soup", "coffee", "tea", "juice", "rice", "cheese"),
    "buy": ("milk", "bread", "coffee", "tea", "juice", "rice", "cheese", "oil"),
}
DRINK = Verb("drink", "drinks", ("bois", "bois", "boit", "buvons", "boivent"))
LIKE_MASS = ("water", "milk", "bread", "soup", "coffee", "tea", "juice", "rice", "cheese")

INTRANSITIVE = {
    v.en: v
    for v in [
        Verb("learn", "learns", ("apprends", "apprends", "apprend", "apprenons", "apprennent"), ("person", "animal")),
        Verb("run", "runs", ("cours", "cours", "court", "courons", "courent"), ("person", "animal")),
        Verb("sleep", "sleeps", ("dors", "dors", "dort", "dormons", "dorment"), ("person", "animal")),
        Verb("work", "works", _er("travaill"), ("person",)),
        Verb("swim", "swims", _er("nag"), ("person", "animal")),
        Verb("sing", "sings", _er("chant"), ("person", "bird")),
        Verb("eat", "eats", _er("mang"), ("person", "animal")),
        Verb("read", "reads", ("lis", "lis", "lit", "lisons", "lisent"), ("person",)),
    ]
}
ADVERBS = {"fast": "vite", "slowly": "lentement", "well": "bien", "badly": "mal", "a lot": "beaucoup"}
VERB_ADVERBS = {
    "learn": ("fast", "slowly", "well", "a lot"),
    "run": ("fast", "slowly", "a lot"),
    "sleep": ("well", "badly", "a lot"),
    "work": ("fast", "slowly", "well", "badly", "a lot"),
    "swim": ("fast", "slowly", "well", "badly", "a lot"),
    "sing": ("well", "badly", "a lot"),
    "eat": ("fast", "slowly", "well", "a lot"),
    "read": ("fast", "slowly", "well", "a lot"),
}
THINKING_VERBS = {
    "learn": ("fast", "slowly", "well", "a lot"),
    "work": ("fast", "slowly", "well", "a lot"),
    "read": ("fast", "slowly", "a lot"),
}
THINKING_PREDICATES = ("clever", "big", "small", "heavy", "broken")

ETRE_FR = ("suis", "es", "est", "sommes", "sont")
ETRE_EN = {"1s": "am", "2s": "are", "3s": "is", "1p": "are", "3p": "are"}
ALLER = Verb("go", "goes", ("vais", "vas", "va", "allons", "vont"))


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


# --- Families: every combination, and a function realising one sentence for a combination --------

SUBJECT_NOUNS_PEOPLE = tuple(n.en for n in NOUNS.values() if "person" in n.kinds)
SUBJECT_NOUNS_ANIMALS = tuple(n.en for n in NOUNS.values() if "animal" in n.kinds)


def subject_heads(kinds: tuple[str, ...]) -> list[str]:
    heads = list(PRONOUNS) if "person" in kinds else []
    heads += [n.en for n in NOUNS.values() if set(n.kinds) & set(kinds) and "place" not in n.kinds]
    heads += [n.en for n in NOUNS.values() if n.en in kinds]  # a single noun named as a kind ("bird")
    return list(dict.fromkeys(heads))


def do_keys() -> list[tuple[str, ...]]:
    keys = []
    for v in VERBS.values():
        objects = [n.en for n in nouns_of(v.objects)]
        for s in subject_heads(v.subjects):
            for o in objects:
                if o != s:
                    keys.append(("do", s, v.en, o))
    return keys


def be_keys() -> list[tuple[str, ...]]:
    keys = [("be", p, prof) for p in list(PRONOUNS) + list(SUBJECT_NOUNS_PEOPLE) for prof in PROFESSIONS if p != prof]
    keys += [("be", p, a) for p in PRONOUNS for a in PERSON_ADJS]
    for n in NOUNS.values():
        keys += [("be", n.en, a) for a in n.adjs]
    return keys


ADJ_GROUPS = (
    ("small", "big"),
    ("young", "old"),
    ("red", "blue", "green", "black", "white"),
    ("happy", "sad"),
    ANIMAL_STATES,
    PLACE_STATES,
)


def clash(attributive: str, predicate: str) -> bool:
    """ "the tired dog is hungry", "the green car is red": two adjectives of one group sound wrong together."""
    return any(attributive in g and predicate in g for g in ADJ_GROUPS) or attributive == predicate


def realize_be(key: tuple[str, ...], r: Realizer, negative: bool, tag: str) -> Sentence:
    _, head, pred = key
    if head in PRONOUNS:
        subj = pronoun(head)
    else:
        noun = NOUNS[head]
        # an attributive adjective on the subject, but not one that clashes with the predicate; places: singular
        subj = r.np(
            noun,
            adj_p=0.15,
            allow_a=False,
            number="sg" if "place" in noun.kinds else "",
            adjs=tuple(a for a in noun.adjs if not clash(a, pred)),
        )
    en, fr = be_phrase(subj, negative)
    if pred in PROFESSIONS:
        prof = PROFESSIONS[pred]
        if subj.number == "pl":
            en += [prof.en_pl]
            fr += [prof.mp if subj.gender == "m" else prof.fp]
        else:
            en += ["a", prof.en]
            fr += [prof.m if subj.gender == "m" else prof.f]
    else:
        en += [pred]
        fr += [ADJECTIVES[pred].form(subj.gender, subj.number)]
    return Sentence(en_text(en), fr_text(fr), tag, key)


def realize_do(key: tuple[str, ...], r: Realizer, negative: bool, tag: str) -> Sentence:
    _, head, verb, obj_head = key
    v = VERBS[verb]
    subj = r.subject(head)
    en, fr = verb_phrase(subj, v, negative)
    # "like" takes "the" + a singular object here: "i like the dogs" would translate like "i like dogs" (family
    # like), and French says "je n'aime pas le chien", not "je n'aime pas de chien"
    liking = verb == "like"
    obj = r.np(NOUNS[obj_head], number="sg" if liking else "", allow_a=not liking, neg_indef=negative)
    return Sentence(en_text(en + list(obj.en)), fr_text(fr + list(obj.fr)), tag, key)


def like_keys() -> list[tuple[str, ...]]:
    v = VERBS["like"]
    objects = [n.en for n in nouns_of(v.objects)] + list(LIKE_MASS)
    return [("do", s, "like", o) for s in subject_heads(v.subjects) for o in objects if o != s]


def realize_like(key: tuple[str, ...], r: Realizer, negative: bool, tag: str) -> Sentence:
    """General statements: "i like dogs" -> "j'aime les chiens", "she likes milk" -> "elle aime le lait"."""
    _, head, _, obj = key
    subj = r.subject(head, adj_p=0.15, allow_a=False)
    en, fr = verb_phrase(subj, VERBS["like"], negative)
    if obj in MASS:
        m = MASS[obj]
        en += [m.en]
        fr += ["le" if m.gender == "m" else "la", m.fr]
    else:
        n = NOUNS[obj]
        en += [n.en_pl]
        fr += ["les", n.fr_pl]
    return Sentence(en_text(en), fr_text(fr), tag, key)


def partitive_keys() -> list[tuple[str, ...]]:
    heads = list(PRONOUNS) + list(SUBJECT_NOUNS_PEOPLE)
    return [("do", s, v, m) for v, masses in PARTITIVE_VERBS.items() for s in heads for m in masses]


def realize_partitive(key: tuple[str, ...], r: Realizer, negative: bool, tag: str) -> Sentence:
    """ "we drink water" -> "nous buvons de l'eau"; negative: "je ne mange pas de pain"."""
    _, head, verb, mass = key
    subj = r.subject(head, adj_p=0.15, allow_a=False)
    v = DRINK if verb == "drink" else VERBS[verb]
    en, fr = verb_phrase(subj, v, negative)
    m = MASS[mass]
    en += [m.en]
    fr += ["de", m.fr] if negative else ["de", "le" if m.gender == "m" else "la", m.fr]
    return Sentence(en_text(en), fr_text(fr), tag, key)


def adverb_keys() -> list[tuple[str, ...]]:
    keys = []
    for v in INTRANSITIVE.values():
        for s in subject_heads(v.subjects):
            keys += [("adv", s, v.en, a) for a in VERB_ADVERBS[v.en]]
    return keys


def realize_adverb(key: tuple[str, ...], r: Realizer, negative: bool, tag: str) -> Sentence:
    _, head, verb, adv = key
    subj = r.subject(head)
    en, fr = verb_phrase(subj, INTRANSITIVE[verb], negative)
    return Sentence(en_text(en + [adv]), fr_text(fr + [ADVERBS[adv]]), tag, key)


def location_keys() -> list[tuple[str, ...]]:
    keys = []
    for prep, places in LOCATION_PLACES.items():
        for s in list(PRONOUNS) + list(LOCATION_SUBJECTS):
            for p in places:
                if s in SMALL_THINGS_ON_IN and prep == "behind":  # "the key is behind the house": no
                    continue
                if s == p or (s == "bag" and p == "box"):
                    continue
                keys.append(("at", s, prep, p))
    for s in list(PRONOUNS) + list(SUBJECT_NOUNS_PEOPLE) + list(SUBJECT_NOUNS_ANIMALS):
        keys += [("go", s, p) for p in GO_PLACES]
    return keys


def realize_location(key: tuple[str, ...], r: Realizer, negative: bool, tag: str) -> Sentence:
    """ "the cat is under the table", "the bird is near the tree" -> "l'oiseau est près de l'arbre"."""
    if key[0] == "at":
        _, head, prep, place = key
        subj = r.subject(head, adj_p=0.2, allow_a=True)
        en, fr = be_phrase(subj, negative)
        p = NOUNS[place]
        number = "pl" if place in ("tree", "house") and r.rng.random() < 0.3 else "sg"
        en += [*prep.split(), "the", p.en_form(number)]
        fr += [PREPOSITIONS[prep], "les" if number == "pl" else ("le" if p.gender == "m" else "la"), p.fr_form(number)]
        return Sentence(en_text(en), fr_text(fr), tag, key)
    _, head, place = key
    subj = r.subject(head, adj_p=0.2, allow_a=False)
    en, fr = verb_phrase(subj, ALLER, negative)
    if place == "shops":
        en += ["to", "the", "shops"]
        fr += ["à", "les", "magasins"]
    else:
        p = NOUNS[place]
        en += ["to", "the", p.en]
        fr += ["à", "le" if p.gender == "m" else "la", p.fr]
    return Sentence(en_text(en), fr_text(fr), tag, key)


TM = "thinking machine"


def thinking_candidates() -> list[Sentence]:
    """Every "thinking machine(s)" sentence (a small family: all of them are enumerated)."""
    out = []
    machines = Subject(("thinking", "machines"), ("les", "machines", "pensantes"), "3p", "f", "pl", TM)
    machine = Subject(("the", "thinking", "machine"), ("la", "machine", "pensante"), "3s", "f", "sg", TM)
    for subj in (machines, machine):
        for verb, advs in THINKING_VERBS.items():
            for adv in advs:
                for negative in (False, True):
                    en, fr = verb_phrase(subj, INTRANSITIVE[verb], negative)
                    out.append(
                        Sentence(en_text(en + [adv]), fr_text(fr + [ADVERBS[adv]]), "thinking", ("adv", TM, verb, adv))
                    )
        for pred in THINKING_PREDICATES:
            for negative in (False, True):
                en, fr = be_phrase(subj, negative)
                out.append(
                    Sentence(
                        en_text(en + [pred]),
                        fr_text(fr + [ADJECTIVES[pred].form("f", subj.number)]),
                        "thinking",
                        ("be", TM, pred),
                    )
                )
    people = list(PRONOUNS) + ["student", "teacher", "child", "friend"]
    for head in people:
        subj = pronoun(head) if head in PRONOUNS else noun_phrase(NOUNS[head], "the", "pl")
        for negative in (False, True):
            en, fr = verb_phrase(subj, VERBS["like"], negative)
            out.append(
                Sentence(
                    en_text(en + ["thinking", "machines"]),
                    fr_text(fr + ["les", "machines", "pensantes"]),
                    "thinking",
                    ("do", subj.head, "like", TM),
                )
            )
        for verb in ("build", "want", "have", "see"):
            v = VERBS[verb]
            for negative in (False, True):
                en, fr = verb_phrase(subj, v, negative)
                art = "de" if negative else "une"
                out.append(
                    Sentence(
                        en_text(en + ["a", "thinking", "machine"]),
                        fr_text(fr + [art, "machine", "pensante"]),
                        "thinking",
                        ("do", subj.head, verb, TM),
                    )
                )
    return out


def coref_sentence(animal: str, place: str, adj: str) -> Sentence:
    """The lecture's example, for one (animal, place, adjective) combination."""
    a, p = NOUNS[animal], NOUNS[place]
    fits = a if adj in ANIMAL_STATES else p
    en = ["the", a.en, "didn't", "cross", "the", p.en, "because", "it", "was", "too", adj]
    fr = [
        "le" if a.gender == "m" else "la",
        a.fr,
        "ne",
        "a",
        "pas",
        "traversé",
        "le" if p.gender == "m" else "la",
        p.fr,
        "parce",
        "que",
        "il" if fits.gender == "m" else "elle",
        "était",
        "trop",
        ADJECTIVES[adj].form(fits.gender, "sg"),
    ]
    return Sentence(en_text(en), fr_text(fr), "coref", ("coref", animal, place, adj))


COREF_ANIMALS = ("animal", "dog", "horse", "cat", "bird", "rabbit", "cow", "mouse", "goat", "hen")
COREF_PLACES = tuple(n.en for n in NOUNS.values() if "coref_place" in n.kinds)
COREF_ADJS = ANIMAL_STATES + PLACE_STATES


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
    """The combination of an English sentence of this data set (see the module docstring).

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


# --- Putting it together --------------------------------------------------------------------------------

# tag -> (all combinations, the function realising a sentence, probability that a sentence is negative).
# "negation" shares the combinations of "action" and "basic" (realize_do / realize_be, always negative);
# "thinking" and "coref" are enumerated separately (thinking_candidates, coref_sentence).
FAMILIES = {
    "basic": (be_keys, realize_be, 0.0),
    "action": (do_keys, realize_do, 0.0),
    "negation": (lambda: do_keys() + be_keys(), None, 1.0),
    "like": (like_keys, realize_like, 0.25),
    "partitive": (partitive_keys, realize_partitive, 0.35),
    "adverb": (adverb_keys, realize_adverb, 0.2),
    "location": (location_keys, realize_location, 0.15),
}


def realize(tag: str, key: tuple[str, ...], r: Realizer) -> Sentence:
    _, fn, p_neg = FAMILIES[tag]
    negative = r.rng.random() < p_neg
    if tag == "negation":
        fn = realize_be if key[0] == "be" else realize_do
    return fn(key, r, negative, tag)


def n_tokens(s: Sentence) -> tuple[int, int]:
    return len(tokenize(s.en, "en")), len(tokenize(s.fr, "fr"))


def choose_heldout(keys: list[tuple[str, ...]], rng: random.Random, forced: set[tuple[str, ...]]) -> set:
    """About HELDOUT_FRACTION of the (non-coref) combinations, at random."""
    keys = sorted(set(keys) - forced)
    rng.shuffle(keys)
    return set(keys[: round(HELDOUT_FRACTION * len(keys))])


def choose_coref_heldout(rng: random.Random, forced: set[tuple[str, ...]]) -> set:
    """COREF_HELDOUT (animal, place, adjective) combinations, keeping every animal+adjective and
    place+adjective pair (every agreement form) in training at least 3 times."""
    combos = [("coref", a, p, adj) for a in COREF_ANIMALS for p in COREF_PLACES for adj in COREF_ADJS]
    left = {}  # the pair an adjective agrees with -> training combinations left
    for c in combos:
        pair = (c[1] if c[3] in ANIMAL_STATES else c[2], c[3])
        left[pair] = left.get(pair, 0) + 1
    rng.shuffle(combos)
    held = set()
    for c in combos:
        if len(held) == COREF_HELDOUT:
            break
        pair = (c[1] if c[3] in ANIMAL_STATES else c[2], c[3])
        if c not in forced and left[pair] > 3:
            held.add(c)
            left[pair] -= 1
    return held


PRONOUN_WEIGHT = 2.0  # pronoun subjects are few (6) but carry all the je/tu/nous verb forms: pick them more often


def sample(tag: str, keys: list[tuple[str, ...]], n: int, r: Realizer, seen_en: set, seen_fr: set) -> list[Sentence]:
    """Up to n new sentences for the given combinations, spreading them over as many combinations as possible.

    The combinations are put in a random order in which those with a pronoun subject tend to come
    first (weighted sampling without replacement: sort by u ** (1 / weight), u uniform in [0, 1)).
    """

    def priority(key: tuple[str, ...]) -> float:
        return r.rng.random() ** (1 / (PRONOUN_WEIGHT if key[1] in PRONOUNS else 1.0))

    keys = sorted(set(keys))
    keys = [k for _, k in sorted(((priority(k), k) for k in keys), reverse=True)]
    out: list[Sentence] = []
    for _round in range(8):
        for key in keys:
            if len(out) == n:
                return out
            s = realize(tag, key, r)
            if s.en in seen_en or s.fr in seen_fr or max(n_tokens(s)) > MAX_TOKENS:
                continue
            seen_en.add(s.en)
            seen_fr.add(s.fr)
            out.append(s)
    return out


def generate(seed: int = SEED) -> list[tuple[str, Sentence]]:
    """All (split, sentence) rows, training rows first, in a deterministic order."""
    rng = random.Random(seed)
    r = Realizer(rng)
    forced = {combo_key(en) for en in FORCED_TRAIN}

    all_keys = sorted({k for tag, (keys_fn, _, _) in FAMILIES.items() for k in keys_fn()})
    all_keys += [s.key for s in thinking_candidates()]
    held = choose_heldout(all_keys, rng, forced)
    held |= choose_coref_heldout(rng, forced)

    rows: list[tuple[str, Sentence]] = []
    seen_en: set[str] = set()  # no sentence twice, on either side
    seen_fr: set[str] = set()

    def add(split: str, s: Sentence) -> None:
        rows.append((split, s))
        seen_en.add(s.en)
        seen_fr.add(s.fr)

    coref = [coref_sentence(a, p, adj) for a in COREF_ANIMALS for p in COREF_PLACES for adj in COREF_ADJS]
    # the forced examples first
    for s in [*thinking_candidates(), *coref]:
        if s.en in FORCED_TRAIN:
            add("train", s)
    add("train", realize_be(("be", "i", "student"), r, False, "basic"))

    for tag, (keys_fn, _, _) in FAMILIES.items():
        keys = keys_fn()
        n_train, n_held = TARGETS[tag]
        for split, n, pool in (
            ("train", n_train, [k for k in keys if k not in held]),
            ("heldout", n_held, [k for k in keys if k in held]),
        ):
            for s in sample(tag, pool, n, r, seen_en, seen_fr):
                add(split, s)

    thinking = [s for s in thinking_candidates() if s.en not in seen_en]
    rng.shuffle(thinking)
    n_train, n_held = TARGETS["thinking"]
    for split, n, want_held in (("train", n_train, False), ("heldout", n_held, True)):
        for s in [s for s in thinking if (s.key in held) == want_held][:n]:
            add(split, s)

    for s in coref:  # all of them: a combination is either held out or trained on
        if s.en not in seen_en:
            add("heldout" if s.key in held else "train", s)

    # Every word of the held-out split must occur in training: drop held-out sentences that break this.
    train_words = {
        (lang, w)
        for split, s in rows
        if split == "train"
        for lang, text in (("en", s.en), ("fr", s.fr))
        for w in tokenize(text, lang)
    }
    rows = [
        (split, s)
        for split, s in rows
        if split == "train"
        or all((lang, w) in train_words for lang, text in (("en", s.en), ("fr", s.fr)) for w in tokenize(text, lang))
    ]

    rows.sort(key=lambda row: row[0] != "train")  # stable: train first, then held-out
    check(rows)
    return rows


def check(rows: list[tuple[str, Sentence]]) -> None:
    """The properties the tests rely on; raise if the grammar above is ever edited into breaking them."""
    ens = [s.en for _, s in rows]
    frs = [s.fr for _, s in rows]
    assert len(set(ens)) == len(ens), "an English sentence appears twice"
    assert len(set(frs)) == len(frs), "a French sentence appears twice (fr -> en would be ambiguous)"
    train_keys = {s.key for split, s in rows if split == "train"}
    for split, s in rows:
        assert combo_key(s.en) == s.key, (s.en, combo_key(s.en), s.key)
        if split == "heldout":
            assert s.key not in train_keys, s.en
        limit = MAX_TOKENS_COREF if s.tag == "coref" else MAX_TOKENS
        assert all(3 <= n <= limit for n in n_tokens(s)), s


def write(path: Path = OUTPUT, seed: int = SEED) -> list[tuple[str, Sentence]]:
    rows = generate(seed)
    lines = ["\t".join(HEADER)] + ["\t".join((split, s.en, s.fr, s.tag)) for split, s in rows]
    Path(path).write_bytes(("\n".join(lines) + "\n").encode("utf-8"))
    return rows


def main(argv: list[str]) -> None:
    path = Path(argv[1]) if len(argv) > 1 else OUTPUT
    rows = write(path)
    n_train = sum(split == "train" for split, _ in rows)
    print(f"wrote {path}: {n_train} train, {len(rows) - n_train} held-out pairs")


if __name__ == "__main__":
    main(sys.argv)
