"""Words to ids and back: the tokenizer and the vocabulary.

A Transformer never sees text, only integer ids. This module does the two steps in between:

1. `tokenize` cuts a sentence into *tokens* (here: words and punctuation marks), and
   `detokenize` glues tokens back into a sentence.
2. `Vocab` numbers the tokens seen in the training data: ``encode`` turns tokens into ids and
   ``decode`` turns ids back into tokens.

The tokenizer is word-level on purpose: every token is a word a learner can read, so every row
and column of an attention map is a word. (Real systems use sub-word pieces such as BPE, which can
spell any word but are harder to read in a heat map.) A word that is not in the vocabulary becomes
the special token ``<unk>``; `Vocab.encode` also returns the list of those words so that the app
can point them out.

Tokenizer rules, in order:

* Unicode NFC normalisation (so "é" typed as ``e`` + combining accent equals the single "é"), then
  lower-casing.
* Whitespace and invisible control/format characters (tabs, newlines, zero-width spaces, RTL
  marks, ...) separate tokens and are dropped.
* Letters, digits and combining marks form words. An apostrophe (``'`` or the typographic ``’``,
  both written as ``'``) or a hyphen *between* two letters stays inside the word: "didn't",
  "peut-être".
* French elision is split off after the apostrophe: "j'aime" -> ``j'`` ``aime``, "l'animal" ->
  ``l'`` ``animal``, "qu'elle" -> ``qu'`` ``elle``. Only the elided words of French do this (``l``,
  ``d``, ``j``, ``n``, ``m``, ``t``, ``s``, ``c``, ``qu``, ``jusqu``, ``lorsqu``, ``puisqu``,
  ``quoiqu``), so "aujourd'hui" stays one word. English keeps contractions whole ("didn't" is one
  token) and has no elision.
* Every other character (punctuation, symbols, emoji) is a token of its own: "stop!" -> ``stop``
  ``!``. Punctuation is kept, not dropped, so that "?" can change a translation. Odd characters
  simply end up as ``<unk>`` when encoded.

`tokenize` never raises, whatever the string (emoji, right-to-left scripts, control characters,
HTML, very long input), and never produces one of the special tokens, so typed text can never
inject ``<pad>`` or ``<eos>``.

`detokenize` is the inverse on ordinary text: words are joined with single spaces, except after an
elided French word ("j'" + "aime" -> "j'aime"), before closing punctuation (",", ".", "!", "?",
";", ":", ")", ...) and after opening brackets. French typography would put a space before "?"
and "!"; we attach them for both languages (one simple rule). On every sentence of the toy data set
``detokenize(tokenize(s, lang), lang) == s`` holds (the tests check it).
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# --- Special tokens ----------------------------------------------------------------------------

PAD = "<pad>"  # fills short sequences up to the length of the longest one in a batch
BOS = "<bos>"  # "beginning of sentence": the first input of the decoder
EOS = "<eos>"  # "end of sentence": ends the source, and the decoder says it when it is done
UNK = "<unk>"  # stands for any word that is not in the vocabulary

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIALS = (PAD, BOS, EOS, UNK)  # in id order: SPECIALS[PAD_ID] == PAD, ...

LANGS = ("en", "fr")

# French words that drop their vowel before a vowel and are written with an apostrophe.
FRENCH_ELISIONS = frozenset({"l", "d", "j", "n", "m", "t", "s", "c", "qu", "jusqu", "lorsqu", "puisqu", "quoiqu"})

APOSTROPHES = frozenset("'\u2019\u02bc")  # ' (straight), ’ (typographic), ʼ (modifier letter)
HYPHENS = frozenset("-\u2010\u2011")  # hyphen-minus, hyphen, non-breaking hyphen (all written "-")

# No space before these when detokenizing ...
CLOSING = frozenset(".,!?;:…)]}»%\u201d")
# ... and no space after these.
OPENING = frozenset("([{«\u201c¿¡")


def _is_word_char(ch: str) -> bool:
    """Letters (L*), combining marks (M*) and digits/numbers (N*) make up words."""
    return unicodedata.category(ch)[0] in "LMN"


def _is_separator(ch: str) -> bool:
    """Whitespace and invisible characters: control, format, surrogate, private-use, unassigned."""
    return ch.isspace() or unicodedata.category(ch)[0] in "CZ"


def tokenize(text: str, lang: str) -> list[str]:
    """Cut `text` into lower-case word and punctuation tokens (see the module docstring).

    >>> tokenize("J'aime les machines pensantes !", "fr")
    ["j'", 'aime', 'les', 'machines', 'pensantes', '!']
    >>> tokenize("The animal didn't cross the street.", "en")
    ['the', 'animal', "didn't", 'cross', 'the', 'street', '.']

    `lang` is "en" or "fr" (any other value is treated like English: no elision splitting).
    Never raises for a `str`; anything else is converted with ``str()`` first.
    """
    if not isinstance(text, str):
        text = str(text)
    text = unicodedata.normalize("NFC", unicodedata.normalize("NFC", text).lower())
    elide = lang == "fr"
    tokens: list[str] = []
    word: list[str] = []  # characters of the word being read

    def flush() -> None:
        if word:
            tokens.append("".join(word))
            word.clear()

    n = len(text)
    for i, ch in enumerate(text):
        if _is_word_char(ch):
            word.append(ch)
        elif ch in APOSTROPHES:
            if elide and word and "".join(word) in FRENCH_ELISIONS:
                word.append("'")  # "j'" is a token of its own, whatever follows
                flush()
            elif word and i + 1 < n and _is_word_char(text[i + 1]):
                word.append("'")  # inside a word: "didn't", "aujourd'hui"
            else:
                flush()
                tokens.append("'")  # a quote mark, not part of a word
        elif ch in HYPHENS and word and i + 1 < n and _is_word_char(text[i + 1]):
            word.append("-")  # "peut-être"
        elif _is_separator(ch):
            flush()
        else:
            flush()
            tokens.append(ch)  # punctuation, symbol, emoji: one token per character
    flush()
    return tokens


def _is_elided(token: str) -> bool:
    return len(token) > 1 and token.endswith("'")


def detokenize(tokens: Iterable[str], lang: str) -> str:
    """Join tokens back into a sentence; the special tokens (<pad>, <bos>, <eos>, <unk>... ) are skipped.

    >>> detokenize(["j'", "aime", "les", "machines", "pensantes", "!"], "fr")
    "j'aime les machines pensantes!"

    Words are separated by one space, except: no space after an elided French word ("l'" "animal"
    -> "l'animal"), none before closing punctuation, none after an opening bracket.
    """
    out: list[str] = []
    glue_next = True  # True: the next token is written without a space before it
    for token in tokens:
        if token in SPECIALS:
            continue
        if out and not glue_next and token not in CLOSING:
            out.append(" ")
        out.append(token)
        glue_next = token in OPENING or (lang == "fr" and _is_elided(token))
    return "".join(out)


# --- Vocabulary --------------------------------------------------------------------------------


@dataclass
class Vocab:
    """A numbered list of tokens: ``itos[i]`` is the token with id ``i``, ``stoi`` the reverse.

    Ids 0-3 are always the special tokens <pad>, <bos>, <eos>, <unk>. Build one from training
    sentences with `Vocab.build`; save it with `to_dict` (plain JSON) and load it with `from_dict`.
    """

    itos: list[str]
    stoi: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.itos = list(self.itos)
        if tuple(self.itos[: len(SPECIALS)]) != SPECIALS:
            raise ValueError(f"a vocabulary must start with the special tokens {list(SPECIALS)}")
        if len(set(self.itos)) != len(self.itos):
            dupes = sorted(t for t, c in Counter(self.itos).items() if c > 1)
            raise ValueError(f"a vocabulary may not list a token twice (repeated: {dupes[:10]})")
        if not all(isinstance(t, str) and t for t in self.itos):
            raise ValueError("vocabulary tokens must be non-empty strings")
        self.stoi = {token: i for i, token in enumerate(self.itos)}

    @classmethod
    def build(cls, sentences: Iterable[Sequence[str]], min_freq: int = 1) -> Vocab:
        """Number every token that occurs at least `min_freq` times in `sentences` (lists of tokens).

        The order is deterministic: the special tokens, then the tokens by decreasing frequency,
        ties broken alphabetically. So the same data always gives the same ids.
        """
        if min_freq < 1:
            raise ValueError(f"min_freq must be at least 1 (got {min_freq})")
        counts = Counter(token for sentence in sentences for token in sentence if token not in SPECIALS)
        kept = sorted((t for t, c in counts.items() if c >= min_freq), key=lambda t: (-counts[t], t))
        return cls(list(SPECIALS) + kept)

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi and token not in SPECIALS

    def encode(self, tokens: Iterable[str]) -> tuple[list[int], list[str]]:
        """Tokens -> (ids, unknown words). Unknown words get UNK_ID and are listed in order.

        No <bos>/<eos> is added here (see `model.data.encode_pairs`). A special-token string in the
        input is treated as an unknown word: typed text must never become a control token.
        """
        ids: list[int] = []
        unknown: list[str] = []
        for token in tokens:
            i = self.stoi.get(token)
            if i is None or token in SPECIALS:
                ids.append(UNK_ID)
                unknown.append(token)
            else:
                ids.append(i)
        return ids, unknown

    def decode(self, ids: Iterable[int]) -> list[str]:
        """Ids -> tokens. Stops at the first EOS; skips PAD and BOS; UNK_ID becomes "<unk>".

        Accepts any iterable of integers (a list, or a 1-D tensor). An id outside the vocabulary
        raises ValueError: it can only come from a bug, never from the model.
        """
        tokens: list[str] = []
        for raw in ids:
            i = int(raw)
            if i == EOS_ID:
                break
            if i in (PAD_ID, BOS_ID):
                continue
            if not 0 <= i < len(self.itos):
                raise ValueError(f"id {i} is not in this vocabulary of {len(self.itos)} tokens")
            tokens.append(self.itos[i])
        return tokens

    def to_dict(self) -> dict[str, list[str]]:
        """A JSON-safe description: ``{"itos": [token, ...]}``."""
        return {"itos": list(self.itos)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Vocab:
        """The inverse of `to_dict`. Raises ValueError on a malformed description."""
        if not isinstance(d, dict) or not isinstance(d.get("itos"), list):
            raise ValueError('a vocabulary description must be a dict with an "itos" list of tokens')
        return cls(d["itos"])
