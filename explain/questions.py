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
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypedDict

from torch import Tensor

from model.checkpoint import Bundle
from model.pipeline import Analysis, Prepared, analyse, prepare
from model.trace import Interventions, describe_head
from model.vocab import BOS, EOS, PAD, UNK

KINDS = {
    "attention": "Which word does a word attend to most?",
    "next_word": "Which word does the decoder pick next?",
    "head_off": "What does switching a head off do to the translation?",
    "no_mask": "Does the model trained without the look-ahead mask translate this sentence?",
}
MAX_OPTIONS = 4  # a class reads 4 options quickly (the store allows 6)
MAX_OPTION = 80  # the class store's limit for one option: classroom.rules.MAX_OPTION, copied (tests/test_structure.py)
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


MAX_DETAIL_WORDS = 16  # a detail line names at most this many words of a row (a class's detail is at most 600 chars)


def _labels(words: list[str]) -> list[str]:
    """Option labels for words: the word itself, or "the (word 3)" when a word occurs more than once."""
    out = [plain(w, MAX_OPTION - 12) for w in words]
    return [f"{w} (word {i + 1})" if out.count(w) > 1 else w for i, w in enumerate(out)]


def quote(words: Iterable[str]) -> str:
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
    best = int(w.argmax())
    top = distractors(a, layer, head, query, best)  # the answer and plausible wrong ones, in sentence order
    labels = _labels(words)
    options = tuple(labels[i] for i in top)
    order = sorted(range(len(words)), key=lambda i: -float(w[i]))  # the whole row, largest first
    detail = ", ".join(f"{labels[i]} {float(w[i]):.2f}" for i in order[:MAX_DETAIL_WORDS])
    more = len(order) - MAX_DETAIL_WORDS
    # the word is named as on every heatmap and grid of the app: "7:it" (its position, counted from 0)
    return Question(
        "attention",
        f"Encoder layer {layer}, head {head}: which word does {quote([words[query]])} "
        f"({query}:{plain(words[query])} in {quote(a.prepared.tokens)}) give its largest attention "
        "weight to?",
        options,
        top.index(best),
        f"Attention weights of {quote([words[query]])}, the whole row: {detail}"
        + (f" and {more} more" if more > 0 else "")
        + f" (they add up to {float(w.sum()):.2f}).",
    )


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
    so_far = f"The translation so far is {quote(a.out_tokens[:position])}" if position else "Nothing is translated yet"
    detail = ", ".join(f"{plain(tgt_itos[i])} {float(p[i]):.2f}" for i in top)
    return Question(
        "next_word",
        f"{quote(a.prepared.tokens)}: {so_far}. Which word does the decoder pick next?",
        tuple(options),
        answer,
        f"Probabilities at decoder position {position}: {detail}.",
    )


# -- switching a head off -------------------------------------------------------------------------------
HEAD_OFF_OPTIONS = ("The translation stays the same", "The translation changes")


def head_off(bundle: Bundle, prepared: Prepared, iv: Interventions, head: tuple[str, int]) -> Question:
    """With `head` switched off as well as what is off already (`iv`), does the greedy translation change?"""
    if prepared.empty:
        raise ValueError("no sentence")
    if head in iv.heads_off:
        raise ValueError("that head is already off")
    before = analyse(bundle, prepared, iv).translation
    after = analyse(bundle, prepared, iv.with_head(*head, on=False)).translation
    return Question(
        "head_off",
        f"{quote(prepared.tokens)} translates as {quote([before]) if before else 'nothing'}. "
        f"Switch off {describe_head(*head)}: does the translation change?",
        HEAD_OFF_OPTIONS,
        int(after != before),
        f"With {describe_head(*head)} off the model gives {quote([after]) if after else 'nothing'}.",
    )


# -- the model trained without the look-ahead mask --------------------------------------------------------
NO_MASK_OPTIONS = ("Yes: the same translation as the shipped model", "No: a different translation")


def no_mask(base: Bundle, cheat: Bundle, prepared: Prepared) -> Question:
    """Does the model trained without the look-ahead mask give the shipped model's translation?"""
    if prepared.empty:
        raise ValueError("no sentence")
    good = analyse(base, prepared).translation
    other = analyse(cheat, prepare(cheat, prepared.text)).translation
    return Question(
        "no_mask",
        f"The shipped model translates {quote(prepared.tokens)} as {quote([good])}. Does the model "
        "trained without the look-ahead mask give the same translation?",
        NO_MASK_OPTIONS,
        0 if other == good else 1,
        f"The model trained without the mask gives {quote([other]) if other else 'nothing'}.",
    )


# -- more kinds from the lecture: scaling, the look-ahead mask, positional encoding, a head switched off ------
DETERMINERS = frozenset({"the", "a", "an", "this", "that", "my", "your", "his", "her", "our", "their"})
MORE_KINDS = {
    "scaling": "What does ÷√d_k do to a row of attention weights?",
    "look_ahead": "Which weights does the look-ahead mask set to zero?",
    "pos_column": "Which positional-encoding column changes fastest?",
    "head_zero": "What does switching a head off change inside the layer?",
}


def distractors(a: Analysis, layer: int, head: int, query: int, best: int) -> list[int]:
    """The options of an attention question: the model's answer, then the words a learner would plausibly
    pick: nouns (a word after a determiner: for "big" in "the cat is big", "cat"), what the other heads of
    every encoder layer pick for this query, the query word itself, then the next-largest weights. At most
    MAX_OPTIONS positions, in sentence order."""
    tokens = list(a.prepared.tokens)
    w = a.trace[f"enc.{layer}.self_attn.weights"][0, head, query]  # [Ts]
    nouns = [i + 1 for i, t in enumerate(tokens[:-1]) if t in DETERMINERS and i + 1 != query]
    others = []
    n_layers = sum(1 for k in a.trace.tensors if k.startswith("enc.") and k.endswith(".self_attn.weights"))
    for other_layer in [layer, *[x for x in range(n_layers) if x != layer]]:
        ws = a.trace[f"enc.{other_layer}.self_attn.weights"][0, :, query]  # [H, Ts]
        others += [int(i) for i in ws.argmax(-1).tolist()]
    by_weight = w.argsort(descending=True).tolist()
    picked: list[int] = []
    for i in [best, *nouns, *others, query, *by_weight]:
        if i not in picked and len(picked) < MAX_OPTIONS:
            picked.append(i)
    return sorted(picked)


def _softmax_top(row: Tensor) -> tuple[float, int]:
    p = row.softmax(-1)
    return float(p.max()), int(p.argmax())


SCALING_OPTIONS = (
    "Its largest weight gets smaller: the row is flatter",
    "Its largest weight gets larger: the row is sharper",
    "Another word gets the largest weight",
    "Nothing: softmax gives the same row",
)


def scaling(a: Analysis, layer: int = 0, head: int | None = None, query: int | None = None) -> Question:
    """Encoder layer `layer`, head `head`, the row of `query`: softmax(scores) against softmax(scores / √d_k),
    from the traced raw scores QKᵀ."""
    if a.prepared.empty:
        raise ValueError("no sentence")
    query = default_query(a) if query is None else query
    head = most_decided_head(a, layer, query) if head is None else head
    scores = a.trace[f"enc.{layer}.self_attn.scores"][0, head, query]  # [Ts]: q·k, not yet divided
    d_k = a.trace[f"enc.{layer}.self_attn.q"].shape[-1]
    raw, raw_at = _softmax_top(scores)
    scaled, scaled_at = _softmax_top(scores / d_k**0.5)
    if scaled_at != raw_at:
        answer = 2
    elif abs(scaled - raw) < 1e-6:
        answer = 3
    else:
        answer = 0 if scaled < raw else 1
    words = _labels([*a.prepared.tokens, EOS])
    return Question(
        "scaling",
        f"Encoder layer {layer}, head {head}, the row of {quote([words[query]])}: without ÷√d_k its "
        f"largest weight is {raw:.2f}. Dividing the scores by √d_k = {d_k**0.5:.1f} first, what "
        "happens to the row?",
        SCALING_OPTIONS,
        answer,
        f"Largest weight without ÷√d_k: {raw:.3f} (on {quote([words[raw_at]])}); with it: {scaled:.3f} "
        f"(on {quote([words[scaled_at]])}).",
    )


LOOK_AHEAD_OPTIONS = (
    "The words after it in the translation",
    "The words before it",
    "The word itself",
    "None: every weight is above zero",
)


def look_ahead(a: Analysis, layer: int = 0, head: int = 0, row: int | None = None) -> Question:
    """Decoder layer `layer`'s self-attention, the row of decoder input `row`: which weights are exactly 0?"""
    if a.prepared.empty:
        raise ValueError("no sentence")
    w = a.trace[f"dec.{layer}.self_attn.weights"][0, head]  # [Tt, Tt]
    t = w.shape[0]
    if t < 3:
        raise ValueError("the translation is too short for this question")
    row = max(1, min(t - 2, t // 2 if row is None else int(row)))
    zero = {j for j in range(t) if float(w[row, j]) == 0.0}
    sets = [set(range(row + 1, t)), set(range(row)), {row}, set()]
    if zero not in sets:
        raise ValueError("this model's weights fit none of the options")
    words = _labels(["BOS", *a.out_tokens])
    return Question(
        "look_ahead",
        f"The decoder reads {quote(words)} (BOS, then the translation). In decoder layer {layer}'s "
        f"self-attention, head {head}, which weights of the row of {quote([words[row]])} are exactly 0?",
        LOOK_AHEAD_OPTIONS,
        sets.index(zero),
        f"Row {quote([words[row]])}: " + ", ".join(f"{words[j]} {_weight(float(w[row, j]))}" for j in range(t)) + ".",
    )


def _weight(x: float) -> str:
    """A weight for a sentence about which are exactly zero: 0 only when it is."""
    return "0 (masked)" if x == 0.0 else f"{x:.2f}" if x >= 0.005 else f"{x:.0e}"


def pos_column(a: Analysis) -> Question:
    """Which column of the positional encoding this sentence is given changes most from one position to the
    next (the mean absolute change over the sentence's positions, read from the traced `src.pos`)?"""
    if "src.pos" not in a.trace.tensors:
        raise ValueError("positional encoding is switched off")
    pe = a.trace["src.pos"][0]  # [T, D]
    if pe.shape[0] < 2:
        raise ValueError("no sentence")
    d = pe.shape[1]
    change = (pe[1:] - pe[:-1]).abs().mean(0)  # [D]
    columns = sorted({0, d // 4 - d // 4 % 2, d // 2, d - 2})
    best = max(columns, key=lambda c: float(change[c]))
    return Question(
        "pos_column",
        f"The positional encoding adds sin and cos waves of different speeds to each word ({d} columns, "
        f"{pe.shape[0]} positions here). Which column changes most from one word to the next?",
        tuple(f"column {c}" for c in columns),
        columns.index(best),
        "Mean change between neighbours: " + ", ".join(f"column {c} {float(change[c]):.3f}" for c in columns) + ".",
    )


HEAD_ZERO_OPTIONS = (
    "Its output z becomes all zeros; its weights stay as they were",
    "Its weights become equal on every word",
    "The other heads' weights change to make up for it",
    "The whole layer's output becomes zero",
)


def head_zero(bundle: Bundle, prepared: Prepared, iv: Interventions, layer: int = 0, head: int = 0) -> Question:
    """Switch off `head` of encoder layer `layer`'s self-attention: which of the options the two traces show."""
    if prepared.empty:
        raise ValueError("no sentence")
    n = f"enc.{layer}.self_attn"
    on, off = analyse(bundle, prepared, iv).trace, analyse(bundle, prepared, iv.with_head(n, head, on=False)).trace
    others = [h for h in range(on[f"{n}.weights"].shape[1]) if h != head]
    facts = [
        bool((off[f"{n}.z"][0, head] == 0).all())
        and bool((off[f"{n}.weights"][0, head] - on[f"{n}.weights"][0, head]).abs().max() < 1e-6),
        bool((off[f"{n}.weights"][0, head] - 1 / off[f"{n}.weights"].shape[-1]).abs().max() < 1e-6),
        bool((off[f"{n}.weights"][0, others] - on[f"{n}.weights"][0, others]).abs().max() > 1e-6),
        bool((off[f"{n}.out"] == 0).all()),
    ]
    if sum(facts) != 1:
        raise ValueError("the traces do not single out one option")
    change = float((off[f"{n}.out"] - on[f"{n}.out"]).norm() / on[f"{n}.out"].norm())
    return Question(
        "head_zero",
        f"Switch off head {head} of encoder layer {layer}'s self-attention for {quote(prepared.tokens)}. "
        "What changes inside the layer?",
        HEAD_ZERO_OPTIONS,
        facts.index(True),
        f"With the head off: its z is {'all zeros' if facts[0] else 'not zero'}, the other heads' weights "
        f"{'change' if facts[2] else 'stay the same'}, and the attention sublayer's output moves by "
        f"{change:.0%} of its size.",
    )


class ClickGrid(TypedDict):
    """A click question's grid: labels of its rows and columns, the right cell (row * columns + column), the asked
    row and the weights."""

    rows: list[str]
    cols: list[str]
    answer: int
    row: int
    values: list[list[float]]


def attention_grid(a: Analysis, layer: int, head: int, query: int) -> ClickGrid:
    """A click question's grid for encoder layer `layer`, head `head`: rows and columns are the source words
    (labelled with their position), the model's cell is (query, its largest weight)."""
    words = [*a.prepared.tokens, "EOS"]
    labels = [f"{i}:{plain(w, MAX_OPTION - 4)}" for i, w in enumerate(words)]
    w = a.trace[f"enc.{layer}.self_attn.weights"][0, head, query]  # [Ts]
    values = a.trace[f"enc.{layer}.self_attn.weights"][0, head]  # [Ts, Ts]
    return {
        "rows": labels,
        "cols": labels,
        "answer": query * len(labels) + int(w.argmax()),
        "row": query,
        "values": [[round(float(v), 4) for v in row] for row in values],
    }
