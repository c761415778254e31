"""The concept test as a versioned instrument: its learning objectives, its items in two isomorphic forms (A, B),
and the lesson parts' "Check yourself" questions.

A version (`VERSIONS`) lists its item slots in order: each slot is one template of explain/items.py with the
parameters of form A and of form B. The two forms ask the same objective with the same template on different
sentences (no sentence is in both forms, none is one of the guided lesson's), so each item is answered by the model
again, and no correct option reads the same in both (tests/test_study_items.py holds all of it). `build` answers
every item with the shipped models; a study freezes what it built (study/), so an answer key never changes under a
running study.

`PARTS` groups the guided lesson's 25 steps into five parts; the last step of each part offers a few "Check
yourself" items on the student's own sentence (`check_items`), kept only in their session.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from explain.items import Item, Models, make
from explain.lesson import step_index

# objective -> (what a participant should be able to say, the lesson steps that teach it)
OBJECTIVES = {
    "row_sum": ("A row of attention weights is a softmax: positive, adding up to 1", ("softmax",)),
    "scaling": ("Dividing the scores by √d_k flattens the softmax's row", ("scale",)),
    "look_ahead": (
        "The look-ahead mask zeroes the later words' weights, and training needs it",
        ("masked", "training"),
    ),
    "cross": ("Encoder-decoder attention: queries from the decoder, keys and values from the encoder", ("cross",)),
    "positional": ("Without positional encoding the encoder cannot tell word orders apart", ("positional",)),
    "head_off": ("Switching a head off zeroes its output; the translation may or may not change", ("heads",)),
    "decoding": (
        "Greedy decoding takes the most probable word; beam search keeps several hypotheses",
        ("chosen", "next"),
    ),
    "add_norm": ("Residual connection, then LayerNorm centres and scales each word's vector", ("add_norm",)),
    "label_smoothing": ("Label smoothing trains towards 1 − ε + ε/V on the right word, ε/V on the others", ("loss",)),
    "teacher_forcing": ("Teacher forcing: in training the decoder reads the reference shifted right", ("training",)),
    "transfer": ("Predict a head's row for a sentence never seen", ("softmax", "heads")),
}
FORMS = ("A", "B")


@dataclass(frozen=True)
class Slot:
    template: str
    a: dict[str, object]  # form A's parameters of the template
    b: dict[str, object]


def _s(sentence: str, **kw: object) -> dict[str, object]:
    return {"sentence": sentence, **kw}


VERSIONS: dict[str, tuple[Slot, ...]] = {
    "ct-1": (
        Slot("row_rest", _s("the girls see the machine", word=1), _s("a clever cat likes the bed", word=2)),
        Slot(
            "scaling_row",
            _s("the cows don't watch the young trees", word=6),
            _s("the hen wants a scared animal", word=5),
        ),
        Slot("mask_zeroes", _s("they don't find a big key", row=2), _s("he doesn't feed a big dog", row=2)),
        Slot("mask_training", _s("he helps the sad goat"), _s("we watch a big boat")),
        Slot("cross_shape", _s("the man wants bread", row=1), _s("the hungry children want soup", row=3)),
        Slot("cross_top", _s("a cat likes the book", row=2), _s("the young friend watches a big box", row=2)),
        Slot(
            "pos_permutation",
            _s("the dog sees the cat", other="the cat sees the dog", word="cat"),
            _s("a girl likes the horse", other="the horse likes a girl", word="horse"),
        ),
        Slot("head_zero", _s("the woman buys the cake", head=1), _s("the rabbits are big", head=2)),
        Slot(
            "head_translation",
            _s("the girls see the machine", module="enc.0.self_attn", head=0),
            _s("a clever cat likes the bed", module="enc.0.self_attn", head=0),
        ),
        Slot("greedy_pick", _s("they don't find a big key", position=2), _s("he doesn't feed a big dog", position=2)),
        Slot("greedy_beam", _s("the rabbits are hungry"), _s("the road is long")),
        Slot("layer_norm", _s("he helps the sad goat", word=3), _s("the letters are white", word=1)),
        Slot(
            "smoothed_target",
            _s("the friends like the cake", reference="les amis aiment le gâteau", position=2, word="aiment"),
            _s("he likes the chair", reference="il aime la chaise", position=2, word="chaise"),
        ),
        Slot(
            "decoder_input",
            _s("the friends like the cake", reference="les amis aiment le gâteau", position=3),
            _s("we watch a big boat", reference="nous regardons un grand bateau", position=3),
        ),
        Slot(
            "transfer_row",
            _s("the bird is near the bridge", layer=0, head=0, word=2),
            _s("a hungry child sees the rabbit", layer=0, head=3, word=2),
        ),
        Slot(
            "transfer_row",
            _s("the cows don't watch the young trees", layer=0, head=3, word=2),
            _s("the bird didn't cross the path because it was too wide", layer=0, head=3, word=2),
        ),
    ),
}
CURRENT = "ct-1"


@dataclass(frozen=True)
class Instrument:
    version: str
    forms: dict[str, tuple[Item, ...]]  # "A" -> its items in order; "B" -> the same slots on other sentences

    def item(self, item_id: str) -> Item | None:
        for items in self.forms.values():
            for it in items:
                if it.id == item_id:
                    return it
        return None

    def as_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "forms": {f: [it.as_dict() for it in items] for f, items in self.forms.items()},
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Instrument:
        return cls(
            str(d["version"]), {str(f): tuple(Item.from_dict(x) for x in items) for f, items in d["forms"].items()}
        )


def build(models: Models, version: str = CURRENT) -> Instrument:
    """Every item of `version`, both forms, answered by `models` (ValueError when a slot cannot be built)."""
    slots = VERSIONS[version]
    forms = {}
    for form in FORMS:
        forms[form] = tuple(
            make(models, s.template, s.a if form == "A" else s.b, f"{form}{n:02d}")
            for n, s in enumerate(slots, start=1)
        )
    return Instrument(version, forms)


def slot_of(item_id: str) -> int:
    """ "B07" -> 7: the slot both forms share."""
    return int(item_id[1:])


# -- the lesson's parts and their "Check yourself" --------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    title: str
    last: str  # key of the part's last step: where "Check yourself" is offered
    checks: tuple[tuple[str, dict[str, object]], ...]  # (template, parameters other than the sentence)


PARTS: tuple[Part, ...] = (
    Part("From words to vectors", "positional", (("pos_permutation", {}),)),
    Part(
        "Attention",
        "concat",
        (("row_rest", {"word": 0}), ("scaling_row", {"word": 0}), ("transfer_row", {"layer": 0, "head": 0, "word": 0})),
    ),
    Part("The encoder layer", "stack", (("layer_norm", {"word": 0}), ("head_zero", {"head": 0}))),
    Part("The decoder", "coref", (("mask_zeroes", {"row": 1}), ("cross_shape", {"row": 1}), ("mask_training", {}))),
    Part("Output and training", "training", (("greedy_pick", {"position": 1}), ("greedy_beam", {}))),
)


def part_ending_at(step_key: str) -> Part | None:
    return next((p for p in PARTS if p.last == step_key), None)


def part_steps(part: Part) -> range:
    """1-based numbers of the part's steps."""
    i = PARTS.index(part)
    first = step_index(PARTS[i - 1].last) + 1 if i else 1
    return range(first, step_index(part.last) + 1)


def check_items(models: Models, part: Part, sentence: str, words: int) -> list[Item]:
    """The part's "Check yourself" items on the student's sentence (`words`: its length): the ones this sentence
    gives a clear item for (a template that cannot ask on it is left out)."""
    out = []
    for n, (template, params) in enumerate(part.checks, start=1):
        p = {
            key: (
                min(max(words // 2, 1 if key != "word" else 0), max(words - 1, 0))
                if key in ("word", "row", "position")
                else value
            )
            for key, value in params.items()
        }
        if template == "pos_permutation":  # the same words, reversed
            tokens = sentence.split()
            p = {"other": " ".join(reversed(tokens)), "word": tokens[0]}
        try:
            out.append(make(models, template, {"sentence": sentence, **p}, f"C{n:02d}"))
        except (ValueError, IndexError, KeyError):
            continue
    return out
