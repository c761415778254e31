"""The toy data set's lexicon (assets/make_dataset.py): the words, their French forms and what they may combine with.

Adjectives (French forms and position before/after the noun), nouns (plural forms, gender, and the kinds
that say which verbs, adjectives and prepositions they go with), mass nouns, professions, verbs (French
conjugation by person, and which subjects and objects they take), adverbs, prepositions and places, and
the words of the "thinking machine" family; then what may combine (the subject nouns, the adjective
groups that clash). `assets/grammar.py` puts them together into sentences.
"""

from __future__ import annotations

from dataclasses import dataclass

FR_VOWELS = set("aàâeéèêëiîïoôœuùûyh")  # every h-word of this lexicon has a mute h
EN_VOWELS = set("aeiou")


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
TM = "thinking machine"

ETRE_FR = ("suis", "es", "est", "sommes", "sont")
ETRE_EN = {"1s": "am", "2s": "are", "3s": "is", "1p": "are", "3p": "are"}
ALLER = Verb("go", "goes", ("vais", "vas", "va", "allons", "vont"))


# --- What may combine: views of the tables above ------------------------------------------------

SUBJECT_NOUNS_PEOPLE = tuple(n.en for n in NOUNS.values() if "person" in n.kinds)
SUBJECT_NOUNS_ANIMALS = tuple(n.en for n in NOUNS.values() if "animal" in n.kinds)


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
