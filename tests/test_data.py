"""The toy data set (its promises, checked on the shipped file), batching, and corpus uploads."""

import hashlib
import re
from collections import Counter

import pytest
import torch

from model.data import (
    DATASET_PATH,
    DIRECTIONS,
    CorpusError,
    Pair,
    ParsedCorpus,
    batches,
    build_vocabs,
    data_hash,
    dataset_reference,
    encode_pairs,
    langs,
    load_dataset,
    pad,
    parse_corpus,
    split_pairs,
)
from model.vocab import BOS_ID, EOS_ID, PAD_ID, tokenize


@pytest.fixture(scope="module")
def gen():
    from assets import make_dataset

    return make_dataset


@pytest.fixture(scope="module")
def rows() -> list[tuple[str, str, str, str]]:
    """(split, en, fr, tag) for every line of the shipped file."""
    lines = DATASET_PATH.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "split\ten\tfr\ttag"
    return [tuple(line.split("\t")) for line in lines[1:]]


@pytest.fixture(scope="module")
def data() -> dict[str, list[Pair]]:
    return load_dataset()


def train_rows(rows):
    return [r for r in rows if r[0] == "train"]


def heldout_rows(rows):
    return [r for r in rows if r[0] == "heldout"]


# --- the shipped data set ---------------------------------------------------------------------------


def test_file_is_small_utf8_tsv(rows):
    raw = DATASET_PATH.read_bytes()
    assert len(raw) < 1_000_000
    raw.decode("utf-8")
    assert all(len(r) == 4 for r in rows)
    assert {r[0] for r in rows} == {"train", "heldout"}
    assert all(r[1] == r[1].strip().lower() and r[2] == r[2].strip().lower() for r in rows)
    assert all(not r[1].endswith((".", "!", "?")) and not r[2].endswith((".", "!", "?")) for r in rows)


def test_sizes(data):
    assert 3500 <= len(data["train"]) <= 4500
    assert 400 <= len(data["heldout"]) <= 700


def test_vocabulary_size_per_side(data):
    en, fr = build_vocabs(data["train"], "en-fr")
    assert 150 <= len(en) - 4 <= 400 and 150 <= len(fr) - 4 <= 400, (len(en), len(fr))
    assert "étudiant" in fr and "student" in en
    fr2, en2 = build_vocabs(load_dataset(direction="fr-en")["train"], "fr-en")
    assert (fr2.itos, en2.itos) == (fr.itos, en.itos)  # the same vocabularies, whichever the direction


def test_sentence_lengths(rows):
    for _, en, fr, tag in rows:
        limit = 14 if tag == "coref" else 12  # the lecture's sentence has 14 French tokens
        assert 3 <= len(tokenize(en, "en")) <= limit, en
        assert 3 <= len(tokenize(fr, "fr")) <= limit, fr
    coref_lengths = {(len(tokenize(en, "en")), len(tokenize(fr, "fr"))) for _, en, fr, tag in rows if tag == "coref"}
    assert coref_lengths == {(11, 14)}


def test_one_translation_each_way(rows):
    """No English sentence twice, no French sentence twice: both directions are unambiguous."""
    assert len({r[1] for r in rows}) == len(rows)
    assert len({r[2] for r in rows}) == len(rows)


def test_no_heldout_sentence_in_train(rows):
    train_en = {r[1] for r in train_rows(rows)}
    train_fr = {r[2] for r in train_rows(rows)}
    assert not any(r[1] in train_en or r[2] in train_fr for r in heldout_rows(rows))


def test_no_heldout_combination_in_train(rows, gen):
    """The generator's held-out rule, re-derived from the sentences of the file."""
    train_keys = {gen.combo_key(r[1]) for r in train_rows(rows)}
    held_keys = [gen.combo_key(r[1]) for r in heldout_rows(rows)]
    assert [k for k in held_keys if k in train_keys] == []
    # spot checks of the key
    assert gen.combo_key("the small dogs don't eat the red apples") == ("do", "dog", "eat", "apple")
    assert gen.combo_key("thinking machines learn fast") == ("adv", "thinking machine", "learn", "fast")
    assert gen.combo_key("i like thinking machines") == ("do", "i", "like", "thinking machine")
    assert gen.combo_key("i am a student") == ("be", "i", "student")
    assert gen.combo_key("the bird is not near the trees") == ("at", "bird", "near", "tree")
    assert gen.combo_key("we go to the park") == ("go", "we", "park")
    assert gen.combo_key("she doesn't drink water") == ("do", "she", "drink", "water")


def test_heldout_words_all_occur_in_training(rows):
    for lang, i in (("en", 1), ("fr", 2)):
        train_words = {w for r in train_rows(rows) for w in tokenize(r[i], lang)}
        unseen = {w for r in heldout_rows(rows) for w in tokenize(r[i], lang)} - train_words
        assert unseen == set(), (lang, unseen)


def test_every_family_in_both_splits(rows):
    families = {"basic", "action", "negation", "like", "partitive", "adverb", "location", "thinking", "coref"}
    assert {r[3] for r in train_rows(rows)} == families
    assert {r[3] for r in heldout_rows(rows)} == families


def test_seed_examples(rows):
    train = {(r[1], r[2]) for r in train_rows(rows)}
    assert ("i am a student", "je suis étudiant") in train
    assert ("thinking machines learn fast", "les machines pensantes apprennent vite") in train
    assert ("i like thinking machines", "j'aime les machines pensantes") in train
    assert (
        "the animal didn't cross the street because it was too tired",
        "l'animal n'a pas traversé la rue parce qu'il était trop fatigué",
    ) in train
    assert (
        "the animal didn't cross the street because it was too wide",
        "l'animal n'a pas traversé la rue parce qu'elle était trop large",
    ) in train


def test_thinking_machines(rows):
    def count(split):
        return sum(
            "thinking machine" in r[1] and "machine" in r[2] and "pensante" in r[2] for r in rows if r[0] == split
        )

    assert count("train") >= 10
    assert count("heldout") >= 3


@pytest.mark.parametrize(
    "en, fr",
    [
        ("i like dogs", "j'aime les chiens"),
        ("we drink water", "nous buvons de l'eau"),
        ("i don't drink water", "je ne bois pas d'eau"),
    ],
)
def test_grammar_examples_are_generated_this_way(gen, en, fr):
    """A few textbook sentences, built by the generator's own functions."""
    r = gen.Realizer(__import__("random").Random(0))
    key = gen.combo_key(en)
    negative = "don't" in en
    fn = gen.realize_like if key[2] == "like" else gen.realize_partitive
    s = fn(key, r, negative, "x")
    assert (s.en, s.fr) == (en, fr)


def test_french_elision_and_contraction(rows):
    """No "le animal", "que il", "de eau", "je aime", "ne a"; no "de le", "à le", "à les"."""
    vowel_after = re.compile(r"\b(le|la|de|ne|je|que) [aàâeéèêiîoôœuùh]")
    contraction = re.compile(r"\b(de le|à le|de les|à les)\b")
    for _, _, fr, _ in rows:
        assert not vowel_after.search(fr), fr
        assert not contraction.search(fr), fr
    all_fr = " ".join(r[2] for r in rows)
    for form in (
        "j'aime",
        "l'animal",
        "l'étudiant",
        "n'a pas",
        "d'eau",
        "qu'il",
        "qu'elle",
        "l'école",
        "au parc",
        "à l'école",
        "aux magasins",
        "du pain",
        "de la soupe",
        "de l'eau",
        "près du",
        "vieil",
    ):
        assert form in all_fr, form


def test_adjective_position_and_agreement(rows):
    pairs = {r[1]: r[2] for r in rows}
    text = "\n".join(pairs.values())
    assert re.search(r"\b(petit|petite|petits|petites) \w+", text)  # before the noun
    assert re.search(r"\b(voiture|voitures) (rouge|rouges)\b", text)  # after the noun
    assert "vache est fatiguée" in text or "vaches sont fatiguées" in text or "vache n'est pas fatiguée" in text


# --- the coreference family -------------------------------------------------------------------------

ANIMALS = {
    "animal": "l'animal",
    "dog": "le chien",
    "horse": "le cheval",
    "cat": "le chat",
    "cow": "la vache",
    "mouse": "la souris",
}
PLACES = {"street": "la rue", "road": "la route", "river": "la rivière", "bridge": "le pont", "park": "le parc"}
ANIMAL_ADJS = {"tired": "fatigué", "scared": "effrayé", "hungry": "affamé"}
PLACE_ADJS = {
    "wide": ("large", "large"),
    "long": ("long", "longue"),
    "narrow": ("étroit", "étroite"),
    "busy": ("animé", "animée"),
}
FEMININE = {"cow", "mouse", "goat", "hen", "street", "road", "river", "lane"}
COREF_EN = re.compile(r"^the (\w+) didn't cross the (\w+) because it was too (\w+)$")
COREF_FR = re.compile(r"^(le |la |l')(\w+) n'a pas traversé (le |la |l')(\w+) parce qu'(il|elle) était trop (\w+)$")


def coref(rows, split=None):
    out = []
    for r in rows:
        if r[3] == "coref" and split in (None, r[0]):
            en, fr = COREF_EN.match(r[1]), COREF_FR.match(r[2])
            assert en and fr, r
            out.append((r[0], *en.groups(), fr.group(5), fr.group(6), r[2]))
    return out


def expected_pronoun_and_adjective(animal, place, adj):
    fits = animal if adj in ANIMAL_ADJS or adj == "lazy" else place
    feminine = fits in FEMININE
    return ("elle" if feminine else "il"), feminine


def test_coref_family_covers_the_required_words(rows):
    items = coref(rows, "train")
    assert len(items) >= 300
    assert set(ANIMALS) <= {i[1] for i in items}
    assert set(PLACES) <= {i[2] for i in items}
    assert set(ANIMAL_ADJS) | set(PLACE_ADJS) <= {i[3] for i in items}
    assert {i[4] for i in items} == {"il", "elle"}
    for animal, article in ANIMALS.items():
        assert any(
            i[1] == animal and i[6].startswith(article + ("" if article.endswith("'") else " ")) for i in items
        ), animal
    for place, article in PLACES.items():
        assert any(i[2] == place and f"traversé {article} " in i[6] for i in items), place


def test_coref_pronoun_and_agreement(rows):
    """il/elle follows the noun the adjective fits; the adjective agrees with that noun."""
    for _, animal, place, adj, pronoun, fr_adj, _ in coref(rows):
        want_pronoun, feminine = expected_pronoun_and_adjective(animal, place, adj)
        assert pronoun == want_pronoun, (animal, place, adj)
        if adj in ANIMAL_ADJS:
            assert fr_adj == ANIMAL_ADJS[adj] + ("e" if feminine else "")
        if adj in PLACE_ADJS:
            assert fr_adj == PLACE_ADJS[adj][feminine]


def test_coref_heldout_combinations_are_new(rows):
    train = {i[1:4] for i in coref(rows, "train")}
    held = [i[1:4] for i in coref(rows, "heldout")]
    assert 50 <= len(held) <= 120
    assert not set(held) & train
    # every word, and every animal+adjective / place+adjective agreement form, is still in training
    train_animals = {(i[1], i[3]) for i in coref(rows, "train")}
    train_places = {(i[2], i[3]) for i in coref(rows, "train")}
    for animal, place, adj in held:
        assert (animal, adj) in train_animals if adj in ANIMAL_ADJS or adj == "lazy" else (place, adj) in train_places
    held_pronouns = Counter(i[4] for i in coref(rows, "heldout"))
    assert held_pronouns["il"] > 10 and held_pronouns["elle"] > 10


def test_generator_is_deterministic(tmp_path, gen):
    out = tmp_path / "toy.tsv"
    gen.write(out)
    assert out.read_bytes() == DATASET_PATH.read_bytes(), "run `python -m assets.make_dataset` to refresh the file"


# --- loading ----------------------------------------------------------------------------------------


def test_load_dataset_directions(data, rows):
    assert data["train"][0] == Pair(*train_rows(rows)[0][1:])
    fr_en = load_dataset(direction="fr-en")
    assert [(p.tgt, p.src, p.tag) for p in fr_en["heldout"]] == [(p.src, p.tgt, p.tag) for p in data["heldout"]]
    assert len(data["train"]) == len(train_rows(rows)) and len(data["heldout"]) == len(heldout_rows(rows))


def test_unknown_direction():
    assert DIRECTIONS == ("en-fr", "fr-en")
    with pytest.raises(ValueError, match="unknown direction 'en-de'.*en-fr, fr-en"):
        load_dataset(direction="en-de")
    with pytest.raises(ValueError, match="unknown direction"):
        langs("french")
    assert langs("en-fr") == ("en", "fr") and langs("fr-en") == ("fr", "en")


def test_load_dataset_rejects_a_bad_file(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("en\tfr\nhello\tbonjour\n", encoding="utf-8")
    with pytest.raises(ValueError, match="header"):
        load_dataset(bad)
    bad.write_text("split\ten\tfr\ttag\ntest\ta\tb\tc\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 2"):
        load_dataset(bad)


def test_data_hash():
    assert data_hash() == hashlib.sha256(DATASET_PATH.read_bytes()).hexdigest()
    assert len(data_hash(DATASET_PATH)) == 64


# --- encoding and batching --------------------------------------------------------------------------


def test_build_vocabs_and_encode_pairs_convention(data):
    src_vocab, tgt_vocab = build_vocabs(data["train"], "en-fr")
    assert "student" in src_vocab and "étudiant" in tgt_vocab and "étudiant" not in src_vocab
    pair = Pair("i am a student", "je suis étudiant", "basic")
    [(src, tgt)] = encode_pairs([pair], src_vocab, tgt_vocab, "en", "fr")
    assert src == [src_vocab.stoi[w] for w in ("i", "am", "a", "student")] + [EOS_ID]
    assert tgt == [BOS_ID] + [tgt_vocab.stoi[w] for w in ("je", "suis", "étudiant")] + [EOS_ID]
    [(src, _)] = encode_pairs([Pair("i am a zebra", "je", "")], src_vocab, tgt_vocab, "en", "fr")
    assert src[3] == 3  # UNK_ID


def test_pad():
    t = pad([[5, 6, 7], [8]])
    assert t.dtype == torch.long and t.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]


@pytest.fixture(scope="module")
def encoded(data):
    src_vocab, tgt_vocab = build_vocabs(data["train"], "en-fr")
    return encode_pairs(data["train"], src_vocab, tgt_vocab, "en", "fr")


def test_batches_are_padded_and_cover_everything_once(encoded):
    seen = []
    for src, tgt in batches(encoded, 64, shuffle=True, seed=1):
        assert src.dtype == tgt.dtype == torch.long
        assert src.size(0) == tgt.size(0) <= 64
        for s_row, t_row in zip(src.tolist(), tgt.tolist(), strict=True):
            s = s_row[: s_row.index(EOS_ID) + 1]
            t = t_row[: t_row.index(EOS_ID) + 1]
            assert all(i == PAD_ID for i in s_row[len(s) :]) and all(i == PAD_ID for i in t_row[len(t) :])
            assert PAD_ID not in s and PAD_ID not in t and t[0] == BOS_ID
            seen.append((tuple(s), tuple(t)))
        # the longest row of the batch has no padding
        assert (src != PAD_ID).sum(1).max() == src.size(1) and (tgt != PAD_ID).sum(1).max() == tgt.size(1)
    assert Counter(seen) == Counter((tuple(s), tuple(t)) for s, t in encoded)


def test_batches_are_length_bucketed(encoded):
    spreads = []
    for src, _ in batches(encoded, 64, shuffle=True, seed=0):
        lengths = (src != PAD_ID).sum(1)
        spreads.append(int(lengths.max() - lengths.min()))
    # sorted chunks: most batches hold one or two lengths; only the last batch of a chunk (the longest,
    # rarest sentences) may mix more. Without bucketing, a batch spans the whole range (about 8).
    assert sum(s <= 1 for s in spreads) >= 0.8 * len(spreads)
    assert sum(spreads) / len(spreads) < 1.0
    unbucketed = [int(n.max() - n.min()) for n in ((s != PAD_ID).sum(1) for s, _ in batches(encoded, 64, bucket=0))]
    assert sum(unbucketed) / len(unbucketed) > 5
    padding = sum(int((src == PAD_ID).sum()) for src, _ in batches(encoded, 64, seed=0))
    unbucketed = sum(int((src == PAD_ID).sum()) for src, _ in batches(encoded, 64, seed=0, bucket=0))
    assert padding < unbucketed / 3


def test_batches_are_deterministic_and_shuffled(encoded):
    def firsts(**kw):
        return [src[0].tolist() for src, _ in batches(encoded, 64, **kw)]

    assert firsts(seed=3) == firsts(seed=3)
    assert firsts(seed=3) != firsts(seed=4)
    g1, g2 = torch.Generator().manual_seed(7), torch.Generator().manual_seed(7)
    assert firsts(seed=g1) == firsts(seed=g2)
    assert firsts(shuffle=False) == firsts(shuffle=False)
    # no shuffle: the first batch holds the 64 shortest sources of the first chunk (20 batches' worth)
    lengths = sorted(len(encoded[i][0]) for i in range(64 * 20))
    first = next(batches(encoded, 64, shuffle=False))[0]
    assert sorted((first != PAD_ID).sum(1).tolist()) == lengths[:64]


def test_batches_small_inputs():
    enc = [([4, EOS_ID], [BOS_ID, 5, EOS_ID])] * 3
    out = list(batches(enc, 2, shuffle=True, seed=0))
    assert [b[0].size(0) for b in out] in ([2, 1], [1, 2])
    assert list(batches([], 8)) == []
    with pytest.raises(ValueError):
        list(batches(enc, 0))


# --- corpus uploads ---------------------------------------------------------------------------------


def corpus(n=25, sep="\t", header=None, start=0):
    lines = [header] if header else []
    lines += [f"sentence number {i}{sep}phrase numéro {i}" for i in range(start, start + n)]
    return ("\n".join(lines) + "\n").encode("utf-8")


def test_parse_tsv():
    parsed = parse_corpus(corpus(), "mine.tsv")
    assert isinstance(parsed, ParsedCorpus)
    assert len(parsed.pairs) == 25 and parsed.warnings == [] and parsed.delimiter == "\t" and not parsed.header
    assert parsed.pairs[0] == Pair("sentence number 0", "phrase numéro 0", "upload")


def test_parse_csv_with_header_and_quotes():
    body = 'en,fr\n"hello, world","bonjour, le monde"\r\n' + corpus(24, ",").decode()
    parsed = parse_corpus(body.encode("utf-8"), "mine.csv")
    assert parsed.header and parsed.delimiter == "," and len(parsed.pairs) == 25
    assert parsed.pairs[0] == Pair("hello, world", "bonjour, le monde", "upload")


def test_parse_sniffs_the_format_and_skips_bom_and_blank_lines():
    data = b"\xef\xbb\xbf" + corpus(25, "\t", header="source\ttarget").replace(b"\n", b"\n\n", 3)
    parsed = parse_corpus(data, "corpus.txt")
    assert parsed.delimiter == "\t" and parsed.header and len(parsed.pairs) == 25
    assert parse_corpus(corpus(25, ","), "corpus").delimiter == ","


def test_duplicates_are_dropped_with_a_warning():
    data = corpus(25) + corpus(3) + corpus(2, start=10)
    parsed = parse_corpus(data, "mine.tsv")
    assert len(parsed.pairs) == 25
    assert parsed.warnings == ["Dropped 5 duplicate lines (the same pair more than once)."]


def test_error_not_utf8():
    data = corpus(5) + "café\tcafé\n".encode("latin-1") + corpus(20, start=5)
    with pytest.raises(CorpusError, match=r"not valid UTF-8: byte 0xe9 at byte offset \d+ \(line 6\)"):
        parse_corpus(data, "mine.tsv")


@pytest.mark.parametrize("data", [b"", b"   \n\n\t\n"])
def test_error_empty(data):
    with pytest.raises(CorpusError, match="The file is empty"):
        parse_corpus(data, "mine.tsv")


def test_error_wrong_number_of_columns():
    data = corpus(5) + b"one\ttwo\tthree\n" + corpus(20, start=5)
    with pytest.raises(CorpusError, match="Line 6 has 3 columns; every line needs exactly 2"):
        parse_corpus(data, "mine.tsv")
    with pytest.raises(CorpusError, match="Line 3 has 1 column;"):
        parse_corpus(corpus(2) + b"just one\n" + corpus(20, start=2), "mine.tsv")
    with pytest.raises(CorpusError, match="Line 2 has 3 columns.*double quotes"):
        parse_corpus(corpus(1, ",") + b"a, b, c\n" + corpus(20, ",", start=1), "mine.csv")


def test_trailing_empty_cells_are_ignored():
    data = corpus(20).replace(b"\n", b"\t\t\n")
    assert len(parse_corpus(data, "mine.tsv").pairs) == 20
    assert len(parse_corpus(corpus(20, ",").replace(b"\n", b",\n"), "mine.csv").pairs) == 20


def test_error_empty_cell():
    data = corpus(7) + b"a sentence\t   \n" + corpus(20, start=7)
    with pytest.raises(CorpusError, match="Line 8: the target sentence is empty"):
        parse_corpus(data, "mine.tsv")
    with pytest.raises(CorpusError, match="Line 1: the source sentence is empty"):
        parse_corpus(b"\tune phrase\n" + corpus(20), "mine.tsv")


def test_error_too_large():
    with pytest.raises(CorpusError, match="too large: 2,000,001 bytes; the limit is 2,000,000 bytes"):
        parse_corpus(b"a\tb\n" * 500_000 + b"x", "mine.tsv")
    with pytest.raises(CorpusError, match="the limit is 100 bytes"):
        parse_corpus(corpus(), "mine.tsv", max_bytes=100)


def test_error_too_many_pairs():
    with pytest.raises(CorpusError, match="Too many pairs: 25; the limit is 21"):
        parse_corpus(corpus(25), "mine.tsv", max_pairs=21)


def test_error_sentence_too_long():
    long = " ".join(["word"] * 31)
    data = corpus(3) + f"{long}\tcourt\n".encode() + corpus(20, start=3)
    with pytest.raises(CorpusError, match="Line 4: the source sentence is too long \\(31 words\\); the limit is 30"):
        parse_corpus(data, "mine.tsv")
    parse_corpus(data, "mine.tsv", max_words=31)


def test_error_word_too_long_for_a_checkpoint():
    """A word longer than a checkpoint's vocabulary allows: refused at upload, not after training."""
    from model import checkpoint_checks
    from model.limits import MAX_TOKEN_CHARS

    data = corpus(3) + f"le {'x' * (MAX_TOKEN_CHARS + 1)}\tcourt\n".encode() + corpus(20, start=3)
    with pytest.raises(
        CorpusError,
        match=f"Line 4: the source sentence has a word of {MAX_TOKEN_CHARS + 1} "
        f"characters; the limit is {MAX_TOKEN_CHARS}",
    ):
        parse_corpus(data, "mine.tsv")
    ok = corpus(3) + f"le {'x' * MAX_TOKEN_CHARS}\tcourt\n".encode() + corpus(20, start=3)
    assert len(parse_corpus(ok, "mine.tsv").pairs) == 24
    assert checkpoint_checks.MAX_TOKEN_CHARS == MAX_TOKEN_CHARS  # the upload check reads the same limit


def test_error_too_few_pairs():
    with pytest.raises(CorpusError, match="Too few pairs: 19; at least 20"):
        parse_corpus(corpus(19), "mine.tsv")
    with pytest.raises(CorpusError, match="Too few pairs: 10"):
        parse_corpus(corpus(10) + corpus(10), "mine.tsv")  # duplicates do not count


def test_error_binary_file():
    data = corpus(2) + b"PK\x03\x04\x00\x00binary" + corpus(20)
    with pytest.raises(CorpusError, match=r"binary file.*NUL byte at byte offset \d+ \(line 3\)"):
        parse_corpus(data, "mine.tsv")
    utf16 = "hello\tbonjour\n".encode("utf-16")
    with pytest.raises(CorpusError, match="NUL byte"):
        parse_corpus(utf16, "mine.tsv")


def test_error_no_delimiter():
    with pytest.raises(CorpusError, match="neither a tab nor a comma"):
        parse_corpus(b"just words\nmore words\n", "notes.txt")


def test_error_bad_csv_quoting():
    with pytest.raises(CorpusError, match="Line 2: a double quote is opened but never closed"):
        parse_corpus(b'"a","b"\n"unterminated,b\n' + corpus(20, ","), "mine.csv")


def test_split_pairs_every_tenth():
    pairs = parse_corpus(corpus(25), "mine.tsv").pairs
    split = split_pairs(pairs)
    assert [p.src for p in split["heldout"]] == ["sentence number 9", "sentence number 19"]
    assert len(split["train"]) == 23
    assert split == split_pairs(pairs)
    with pytest.raises(ValueError):
        split_pairs(pairs, every=1)


def test_dataset_reference():
    assert dataset_reference("i am a student") == "je suis étudiant"
    assert dataset_reference("  I am a   STUDENT ") == "je suis étudiant"
    assert (
        dataset_reference("the animal didn't cross the street because it was too tired")
        == "l'animal n'a pas traversé la rue parce qu'il était trop fatigué"
    )
    assert dataset_reference("zebras juggle quantum spoons") is None
    assert dataset_reference("je suis étudiant", "fr-en") == "i am a student"
    assert dataset_reference("i am a student", "xx-yy") is None
