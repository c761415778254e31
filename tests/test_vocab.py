"""The tokenizer and the vocabulary: exact tokens, exact round trips, and no crash on any text."""

import json
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from model import transformer
from model.data import DATASET_PATH, load_dataset
from model.vocab import (
    BOS,
    BOS_ID,
    EOS,
    EOS_ID,
    PAD,
    PAD_ID,
    SPECIALS,
    UNK,
    UNK_ID,
    Vocab,
    detokenize,
    tokenize,
)

# --- special tokens ---------------------------------------------------------------------------------


def test_special_tokens_and_ids():
    assert (PAD, BOS, EOS, UNK) == ("<pad>", "<bos>", "<eos>", "<unk>")
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    assert SPECIALS == (PAD, BOS, EOS, UNK)
    assert PAD_ID == transformer.PAD_ID


# --- tokenize -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, lang, expected",
    [
        ("i am a student", "en", ["i", "am", "a", "student"]),
        ("I am a Student", "en", ["i", "am", "a", "student"]),
        ("j'aime les machines pensantes", "fr", ["j'", "aime", "les", "machines", "pensantes"]),
        (
            "l'animal n'a pas traversé la rue parce qu'il était trop fatigué",
            "fr",
            [
                "l'",
                "animal",
                "n'",
                "a",
                "pas",
                "traversé",
                "la",
                "rue",
                "parce",
                "qu'",
                "il",
                "était",
                "trop",
                "fatigué",
            ],
        ),
        ("parce qu'elle était trop large", "fr", ["parce", "qu'", "elle", "était", "trop", "large"]),
        ("je ne bois pas d'eau", "fr", ["je", "ne", "bois", "pas", "d'", "eau"]),
        ("l'étudiant", "fr", ["l'", "étudiant"]),
        ("J’aime l’école", "fr", ["j'", "aime", "l'", "école"]),  # typographic apostrophe
        ("l' animal", "fr", ["l'", "animal"]),  # a stray space after the elision
        ("aujourd'hui", "fr", ["aujourd'hui"]),  # not an elision
        ("peut-être", "fr", ["peut-être"]),
        ("the animal didn't cross the street", "en", ["the", "animal", "didn't", "cross", "the", "street"]),
        ("it doesn’t", "en", ["it", "doesn't"]),
        ("l'animal", "en", ["l'animal"]),  # English has no elision
        ("Hello, world!", "en", ["hello", ",", "world", "!"]),
        ("est-ce vrai ?", "fr", ["est-ce", "vrai", "?"]),
        ("(dogs) run.", "en", ["(", "dogs", ")", "run", "."]),
        ("'quoted'", "en", ["'", "quoted", "'"]),
        ("a\tb\nc\x00d\u200be", "en", ["a", "b", "c", "d", "e"]),  # control and zero-width chars separate
        ("", "en", []),
        ("   \n\t ", "fr", []),
        ("<b>bold</b>", "en", ["<", "b", ">", "bold", "<", "/", "b", ">"]),
        ("i ❤ cats 🐈", "en", ["i", "❤", "cats", "🐈"]),
        ("ÉTÉ", "fr", ["été"]),
    ],
)
def test_tokenize(text, lang, expected):
    assert tokenize(text, lang) == expected


def test_tokenize_normalises_unicode():
    decomposed = "e\u0301te\u0301"  # e + combining acute accent
    assert tokenize(decomposed, "fr") == ["été"]
    assert tokenize(decomposed, "fr") == tokenize("été", "fr")
    assert all(unicodedata.is_normalized("NFC", t) for t in tokenize("E\u0301COLE", "fr"))


def test_tokenize_never_yields_special_tokens():
    assert tokenize("<pad> <eos> <bos> <unk>", "en") == [
        "<",
        "pad",
        ">",
        "<",
        "eos",
        ">",
        "<",
        "bos",
        ">",
        "<",
        "unk",
        ">",
    ]


def test_tokenize_right_to_left_and_long_text():
    assert tokenize("שלום עולם", "en") == ["שלום", "עולם"]
    assert tokenize("مرحبا بالعالم", "fr") == ["مرحبا", "بالعالم"]
    long = "the dog sees the cat. " * 500  # 11,000 characters
    tokens = tokenize(long, "en")
    assert len(tokens) == 3000
    assert tokens[:6] == ["the", "dog", "sees", "the", "cat", "."]


# --- detokenize -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tokens, lang, expected",
    [
        (["j'", "aime", "les", "machines", "pensantes"], "fr", "j'aime les machines pensantes"),
        (["parce", "qu'", "il", "était"], "fr", "parce qu'il était"),
        (["hello", ",", "world", "!"], "en", "hello, world!"),
        (["est-ce", "vrai", "?"], "fr", "est-ce vrai?"),
        (["(", "dogs", ")", "run", "."], "en", "(dogs) run."),
        (["<bos>", "je", "suis", "<unk>", "étudiant", "<eos>", "<pad>"], "fr", "je suis étudiant"),
        (["i", "didn't"], "en", "i didn't"),
        ([], "en", ""),
    ],
)
def test_detokenize(tokens, lang, expected):
    assert detokenize(tokens, lang) == expected


def test_jaime_has_no_space():
    assert detokenize(tokenize("j'aime", "fr"), "fr") == "j'aime"
    assert detokenize(["j'", "aime"], "fr") == "j'aime"


@pytest.mark.parametrize("lang", ["en", "fr"])
def test_round_trip_on_the_whole_dataset(lang):
    data = load_dataset(DATASET_PATH, "en-fr" if lang == "en" else "fr-en")
    sentences = [p.src for split in data.values() for p in split]
    assert len(sentences) > 3400
    bad = [s for s in sentences if detokenize(tokenize(s, lang), lang) != s]
    assert bad == []


# --- Vocab ----------------------------------------------------------------------------------------

SENTENCES = [["le", "chat", "dort"], ["le", "chien", "dort"], ["le", "chat", "mange"], ["un", "chat"]]


def test_build_order_specials_then_frequency_then_alphabet():
    v = Vocab.build(SENTENCES)
    # le: 3, chat: 3, dort: 2, then chien, mange, un (1 each) alphabetically
    assert v.itos == ["<pad>", "<bos>", "<eos>", "<unk>", "chat", "le", "dort", "chien", "mange", "un"]
    assert len(v) == 10
    assert v.stoi["chat"] == 4 and v.stoi[PAD] == PAD_ID and v.stoi[UNK] == UNK_ID
    assert Vocab.build(list(reversed(SENTENCES))).itos == v.itos  # input order does not matter


def test_build_min_freq():
    v = Vocab.build(SENTENCES, min_freq=2)
    assert v.itos == ["<pad>", "<bos>", "<eos>", "<unk>", "chat", "le", "dort"]
    with pytest.raises(ValueError):
        Vocab.build(SENTENCES, min_freq=0)


def test_build_ignores_special_tokens_in_data():
    assert Vocab.build([["<eos>", "chat"]]).itos == list(SPECIALS) + ["chat"]


def test_encode_reports_unknown_words_in_order():
    v = Vocab.build(SENTENCES)
    ids, unknown = v.encode(["le", "zèbre", "chat", "mange", "une", "zèbre"])
    assert ids == [5, UNK_ID, 4, 8, UNK_ID, UNK_ID]
    assert unknown == ["zèbre", "une", "zèbre"]
    assert v.encode([]) == ([], [])


def test_encode_treats_special_strings_as_unknown():
    v = Vocab.build(SENTENCES)
    assert v.encode(["<eos>", "chat", "<pad>"]) == ([UNK_ID, 4, UNK_ID], ["<eos>", "<pad>"])


def test_decode_stops_at_eos_and_skips_pad_and_bos():
    v = Vocab.build(SENTENCES)
    assert v.decode([BOS_ID, 5, 4, UNK_ID, EOS_ID, 6, 6]) == ["le", "chat", "<unk>"]
    assert v.decode([5, PAD_ID, 4, PAD_ID]) == ["le", "chat"]
    with pytest.raises(ValueError, match="not in this vocabulary"):
        v.decode([5, 99])


def test_decode_accepts_a_tensor():
    import torch

    v = Vocab.build(SENTENCES)
    assert v.decode(torch.tensor([BOS_ID, 4, 7, EOS_ID])) == ["chat", "chien"]


def test_encode_decode_round_trip():
    v = Vocab.build(SENTENCES)
    ids, unknown = v.encode(["le", "chien", "mange"])
    assert unknown == [] and v.decode(ids) == ["le", "chien", "mange"]


def test_to_dict_from_dict_json_round_trip():
    v = Vocab.build(SENTENCES)
    d = json.loads(json.dumps(v.to_dict()))
    assert d == {"itos": v.itos}
    w = Vocab.from_dict(d)
    assert w.itos == v.itos and w.stoi == v.stoi and len(w) == len(v)


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"itos": "abc"},
        [],
        {"itos": ["a", "b"]},
        {"itos": list(SPECIALS) + ["x", "x"]},
        {"itos": ["<bos>", "<pad>", "<eos>", "<unk>"]},
        {"itos": list(SPECIALS) + [""]},
    ],
)
def test_from_dict_rejects_malformed(bad):
    with pytest.raises(ValueError):
        Vocab.from_dict(bad)


def test_contains_excludes_specials():
    v = Vocab.build(SENTENCES)
    assert "chat" in v and "zèbre" not in v and PAD not in v


# --- never crash on any text ------------------------------------------------------------------------

VOCAB = Vocab.build(SENTENCES)


@settings(max_examples=300, deadline=None)
@given(text=st.text(), lang=st.sampled_from(["en", "fr", "xx"]))
def test_tokenize_and_encode_never_raise(text, lang):
    tokens = tokenize(text, lang)
    assert all(isinstance(t, str) and t and not any(ch.isspace() for ch in t) for t in tokens)
    assert not set(tokens) & set(SPECIALS)
    ids, unknown = VOCAB.encode(tokens)
    assert len(ids) == len(tokens)
    assert all(0 <= i < len(VOCAB) for i in ids)
    assert unknown == [t for t in tokens if t not in VOCAB]
    detokenize(tokens, lang)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(codec="utf-8"), min_size=0, max_size=200))
def test_tokenize_is_stable(text):
    """Tokenizing detokenized tokens gives the same tokens back (a fixed point)."""
    for lang in ("en", "fr"):
        tokens = tokenize(text, lang)
        assert tokenize(" ".join(tokens), lang) == tokens
