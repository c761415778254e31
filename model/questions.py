"""Questions for a class, generated from the model's real state and answered by the model itself.

Predict, then reveal: the teacher asks the class a question about the sentence on the screen, the
students answer, then the model's own answer is shown. Every answer here is read from the tensors (or
the translations) of the model the teacher is showing, never written by hand:

- `attention`: which source word does a word (default: "it", else the last word) attend to most in one
  encoder self-attention head? The argmax of ``enc.{layer}.self_attn.weights[0, head, query]``.
- `next_word`: the translation so far is "je suis": which word does the decoder pick next? The argmax of
  ``probs[0, t]`` of the teacher-forced pass over the model's own translation (what greedy decoding picked).
- `head_off`: does the translation change when one more head is switched off? The greedy translations
  with and without it, compared.
- `no_mask`: does the model trained without the look-ahead mask give the same translation as the
  shipped model? Both greedy translations, compared.

A question is plain data (`Question`): its text, 2 to 6 distinct options, the index of the model's
answer, and a `detail` line with the numbers (for the teacher's screen and after the reveal). Texts and
options never contain ``<`` or ``>`` (special tokens are written EOS, BOS; a typed ``<`` becomes ‹),
so the class store accepts them. Pure Python/PyTorch: no Streamlit.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from model.checkpoint import Bundle
from model.pipeline import Analysis, Prepared, analyse, prepare
from model.trace import Interventions, attention_modules
from model.vocab import BOS, EOS, PAD, UNK

KINDS = {"attention": "Which word does a word attend to most?",
         "next_word": "Which word does the decoder pick next?",
         "head_off": "What does switching a head off do to the translation?",
         "no_mask": "Does the model trained without the look-ahead mask translate this sentence?"}
MAX_OPTIONS = 4  # a class reads 4 options quickly (the store allows 6)
MAX_OPTION = 80  # the class store's limit for one option
_SPECIAL_LABELS = {EOS: "EOS (end of sentence)", BOS: "BOS (start)", PAD: "PAD", UNK: "UNK (unknown word)"}


@dataclass(frozen=True)
class Question:
    kind: str
    text: str
    options: tuple[str, ...]
    answer: int  # index into options: the model's answer
    detail: str  # the numbers behind the answer, one line

    @property
    def answer_text(self) -> str:
        return self.options[self.answer]


def plain(text: str, limit: int = MAX_OPTION) -> str:
    """Text a class store accepts: no < or > (‹ ›), no control or format characters, at most `limit`."""
    text = _SPECIAL_LABELS.get(text, text)
    text = text.replace("<", "‹").replace(">", "›")
    text = "".join(c if unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Co", "Cn") else " " for c in text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _labels(words: list[str]) -> list[str]:
    """Option labels for words: the word itself, or "the (word 3)" when a word occurs more than once."""
    out = [plain(w, MAX_OPTION - 12) for w in words]
    return [f"{w} (word {i + 1})" if out.count(w) > 1 else w for i, w in enumerate(out)]


def quote(words) -> str:
    return "“" + plain(" ".join(words), 200) + "”"


# -- attention ------------------------------------------------------------------------------------------
def default_query(a: Analysis) -> int:
    """The source position a question about attention asks about: "it" if the sentence has it, else the
    last word."""
    tokens = list(a.prepared.tokens)
    return tokens.index("it") if "it" in tokens else max(0, len(tokens) - 1)


def most_decided_head(a: Analysis, layer: int, query: int) -> int:
    """The head of encoder layer `layer` that gives its largest weight to one word, for this query."""
    w = a.trace[f"enc.{layer}.self_attn.weights"][0, :, query]  # [H, Ts]
    return int(w.max(-1).values.argmax())


def attention(a: Analysis, layer: int = 0, head: int | None = None, query: int | None = None) -> Question:
    """Which source word does the word at `query` attend to most in encoder layer `layer`, head `head`?"""
    if a.prepared.empty:
        raise ValueError("no sentence")
    words = [*a.prepared.tokens, EOS]
    query = default_query(a) if query is None else query
    head = most_decided_head(a, layer, query) if head is None else head
    w = a.trace[f"enc.{layer}.self_attn.weights"][0, head, query]  # [Ts]
    top = sorted(w.argsort(descending=True)[:MAX_OPTIONS].tolist())  # the most attended positions, in order
    best = int(w.argmax())
    labels = _labels(words)
    options = tuple(labels[i] for i in top)
    detail = ", ".join(f"{labels[i]} {float(w[i]):.2f}" for i in sorted(top, key=lambda i: -float(w[i])))
    return Question("attention",
                    f"Encoder layer {layer}, head {head}: which word does {quote([words[query]])} "
                    f"(word {query + 1} of {quote(a.prepared.tokens)}) give its largest attention weight to?",
                    options, top.index(best), f"Attention weights of {quote([words[query]])}: {detail}.")


# -- the next word --------------------------------------------------------------------------------------
def next_word(a: Analysis, tgt_itos: list[str], position: int | None = None) -> Question:
    """The translation so far is the first `position` words of the model's own translation: which word
    does the decoder pick next? (Default: the middle of the translation.)"""
    if a.prepared.empty:
        raise ValueError("no sentence")
    n = len(a.out_tokens)
    position = n // 2 if position is None else max(0, min(int(position), n))
    p = a.trace["probs"][0, position]  # [V]: what decoder position `position` predicts
    top = p.argsort(descending=True)[:MAX_OPTIONS].tolist()
    best = int(p.argmax())
    words = [tgt_itos[i] for i in top]
    options = sorted(_labels(words))
    answer = options.index(_labels(words)[top.index(best)])
    so_far = (f"The translation so far is {quote(a.out_tokens[:position])}" if position
              else "Nothing is translated yet")
    detail = ", ".join(f"{plain(tgt_itos[i])} {float(p[i]):.2f}" for i in top)
    return Question("next_word",
                    f"{quote(a.prepared.tokens)}: {so_far}. Which word does the decoder pick next?",
                    tuple(options), answer, f"Probabilities at decoder position {position}: {detail}.")


# -- switching a head off -------------------------------------------------------------------------------
def head_label(module: str, head: int) -> str:
    stack, layer, kind = module.split(".")
    where = {"enc": "encoder", "dec": "decoder"}[stack]
    what = {"self_attn": "self-attention", "cross_attn": "encoder-decoder attention"}[kind]
    return f"head {head} of {where} layer {layer}'s {what}"


def all_heads(bundle: Bundle) -> list[tuple[str, int]]:
    cfg = bundle.config
    return [(m, h) for m in attention_modules(cfg) for h in range(cfg.n_heads)]


HEAD_OFF_OPTIONS = ("The translation stays the same", "The translation changes")


def head_off(bundle: Bundle, prepared: Prepared, iv: Interventions, head: tuple[str, int]) -> Question:
    """With `head` switched off as well as what is off already (`iv`), does the greedy translation change?"""
    if prepared.empty:
        raise ValueError("no sentence")
    if head in iv.heads_off:
        raise ValueError("that head is already off")
    before = analyse(bundle, prepared, iv).translation
    after = analyse(bundle, prepared, iv.with_head(*head, on=False)).translation
    return Question("head_off",
                    f"{quote(prepared.tokens)} translates as {quote([before]) if before else 'nothing'}. "
                    f"Switch off {head_label(*head)}: does the translation change?",
                    HEAD_OFF_OPTIONS, int(after != before),
                    f"With {head_label(*head)} off the model gives {quote([after]) if after else 'nothing'}.")


# -- the model trained without the look-ahead mask --------------------------------------------------------
NO_MASK_OPTIONS = ("Yes: the same translation as the shipped model", "No: a different translation")


def no_mask(base: Bundle, cheat: Bundle, prepared: Prepared) -> Question:
    """Does the model trained without the look-ahead mask give the shipped model's translation?"""
    if prepared.empty:
        raise ValueError("no sentence")
    good = analyse(base, prepared).translation
    other = analyse(cheat, prepare(cheat, prepared.text)).translation
    return Question("no_mask",
                    f"The shipped model translates {quote(prepared.tokens)} as {quote([good])}. Does the model "
                    "trained without the look-ahead mask give the same translation?",
                    NO_MASK_OPTIONS, 0 if other == good else 1,
                    f"The model trained without the mask gives {quote([other]) if other else 'nothing'}.")
