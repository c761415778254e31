"""Generate the toy English-French data set: ``python -m assets.make_dataset [OUTPUT.tsv]``.

Writes ``assets/toy_en_fr.tsv`` (or OUTPUT) with the header ``split<TAB>en<TAB>fr<TAB>tag``. The
output is deterministic: a fixed seed, no dictionary/set iteration order anywhere, so two runs
give byte-identical files (a test checks this against the shipped file).

The data is a small grammar, not real text. Every English sentence has exactly one French
translation and vice versa, so a small Transformer can learn it in both directions. Everything is
lower case, without final punctuation. The words are in `assets/lexicon.py`, their English and
French spelling-out in `assets/grammar.py`; this module draws the combinations and writes the file
(also run as ``python assets/make_dataset.py [OUTPUT.tsv]``).

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
from pathlib import Path

if not __package__:  # run as a script (python assets/make_dataset.py): import from the repository's root
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from assets.grammar import (
    PRONOUNS,
    Realizer,
    Sentence,
    Subject,
    be_phrase,
    combo_key,
    en_text,
    fr_text,
    noun_phrase,
    nouns_of,
    pronoun,
    subject_heads,
    verb_phrase,
)
from assets.lexicon import (
    ADJECTIVES,
    ADVERBS,
    ALLER,
    ANIMAL_STATES,
    DRINK,
    GO_PLACES,
    INTRANSITIVE,
    LIKE_MASS,
    LOCATION_PLACES,
    LOCATION_SUBJECTS,
    MASS,
    NOUNS,
    PARTITIVE_VERBS,
    PERSON_ADJS,
    PLACE_STATES,
    PREPOSITIONS,
    PROFESSIONS,
    SMALL_THINGS_ON_IN,
    SUBJECT_NOUNS_ANIMALS,
    SUBJECT_NOUNS_PEOPLE,
    THINKING_PREDICATES,
    THINKING_VERBS,
    TM,
    VERB_ADVERBS,
    VERBS,
    clash,
)
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


# --- Families: every combination, and a function realising one sentence for a combination --------


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
