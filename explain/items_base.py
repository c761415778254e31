"""The parts every concept-test item is made of (explain/items.py says what an item is): the record, the shipped
models it is answered by, the misconceptions a distractor stands for, and the helpers the templates share
(a quoted word, a number as an option writes it, the options in a seeded order, a checked analysis)."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from explain import questions
from explain.questions import plain, quote
from model.checkpoint import Bundle
from model.pipeline import Analysis, analyse, prepare
from model.trace import Interventions
from model.vocab import EOS

MAX_ITEM_OPTION = 160  # characters of an option (a translation in full)
MISCONCEPTIONS = {
    "softmax_range": "Softmax weights are numbers from −1 to 1 that need not add up to 1",
    "uniform": "Attention spreads evenly over the words",
    "importance": "The largest attention weight goes to the most important word (a noun)",
    "scaling_sharpens": "Dividing the scores by √d_k makes a row sharper",
    "scale_after": "√d_k divides the weights after the softmax",
    "mask_decoding": "The look-ahead mask matters while generating word by word",
    "mask_harmless": "Training without the mask costs nothing: the mask only hides words",
    "mask_backwards": "The mask hides the words before a position",
    "cross_from_decoder": "Encoder-decoder attention weighs the decoder's own words",
    "cross_aligned": "The decoder reads the English word at its own position",
    "order_known": "The encoder knows word order without positional encoding",
    "heads_compensate": "The other heads make up for a head switched off",
    "off_uniform": "A head switched off spreads its weights evenly",
    "head_irrelevant": "One head never changes the translation",
    "greedy_sampling": "Greedy decoding draws each word at random by its probability",
    "beam_always_better": "Beam search always finds another, better translation",
    "layernorm_unit": "LayerNorm divides a vector by its length",
    "layernorm_keeps": "The residual and LayerNorm leave the vector's statistics as they were",
    "onehot_target": "The training target is the one-hot right word",
    "no_shift": "The decoder's input at a position is the word it must predict",
    "free_running": "In training the decoder reads its own predictions",
}


@dataclass(frozen=True)
class Item:
    id: str  # "A03": form and number
    objective: str  # a key of explain.instrument.OBJECTIVES
    template: str
    text: str
    options: tuple[str, ...]  # for a transfer item: its cells' labels ("row → column"), row by row
    answer: int  # index of the right option (a transfer item: its cell)
    explain: str  # the numbers behind the answer, one line
    tags: tuple[str | None, ...] = ()  # per option: a MISCONCEPTIONS key or None
    # transfer items: rows, cols, row, answer, values
    grid: questions.ClickGrid | None = field(default=None, compare=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "objective": self.objective,
            "template": self.template,
            "text": self.text,
            "options": list(self.options),
            "answer": self.answer,
            "explain": self.explain,
            "tags": list(self.tags),
            **({"grid": self.grid} if self.grid is not None else {}),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Item:
        return cls(
            str(d["id"]),
            str(d["objective"]),
            str(d["template"]),
            str(d["text"]),
            tuple(str(o) for o in d["options"]),
            int(d["answer"]),
            str(d["explain"]),
            tuple(None if t is None else str(t) for t in d.get("tags", ())),
            d.get("grid"),
        )


@dataclass(frozen=True)
class Models:
    """The shipped models the items are answered by: the base model and the copy trained without the mask."""

    base: Bundle
    no_mask: Bundle


def _q(text: str) -> str:
    return quote([text]) if text else "nothing"


def _n(x: float, places: int = 2) -> str:
    """A number as an option writes it (a true minus sign; never −0.00)."""
    text = f"{x:.{places}f}"
    return text.lstrip("-").replace("-", "−") if float(text) == 0 else text.replace("-", "−")


Wrong = list[tuple[str, str | None]]  # the wrong options: (text, the misconception it shows, or None)


def _item(objective: str, template: str, text: str, right: str, wrong: Wrong, explain: str, seed: str) -> Item:
    """Options in an order fixed by `seed` (not always first); distinct texts or ValueError."""
    options = [(plain(right, MAX_ITEM_OPTION), None), *[(plain(t, MAX_ITEM_OPTION), tag) for t, tag in wrong]]
    if len({o for o, _ in options}) != len(options):
        raise ValueError("two options read the same on this sentence")
    random.Random(seed).shuffle(options)
    texts = tuple(o for o, _ in options)
    return Item(
        "",
        objective,
        template,
        plain(text, 500),
        texts,
        texts.index(plain(right, MAX_ITEM_OPTION)),
        plain(explain, 500),
        tuple(tag for _, tag in options),
    )


def _analysis(b: Bundle, sentence: str, iv: Interventions | None = None) -> Analysis:
    a = analyse(b, prepare(b, sentence), iv)
    if a.prepared.empty or a.prepared.unknown:
        raise ValueError(f"{sentence!r}: not a sentence of the toy set")
    return a


def _words(a: Analysis) -> list[str]:
    return [*a.prepared.tokens, EOS]
