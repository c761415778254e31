"""The coreference example ("… because it was too tired / wide"): which word "it" reads in the encoder's
heads, and where the model decides il or elle (model/coref.py runs the experiments).

Notice words and their rules (checked in tests/test_notice_rules.py over every coreference sentence of the
toy set): a head "links" "it" to a noun only when it gives that noun at least LINK (0.5) and at least
twice what it gives the other noun; otherwise the notice says that no encoder head picks the noun out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from model.trace import Trace
from viz.attention import is_parking, word_of
from viz.heads import find_word, top_words, word_across_layers

# The toy data set's coreference template (assets/make_dataset.py): "the <animal> didn't cross the <place>
# because it was too <adjective>"; the adjective fits only the animal or only the place.
ANIMAL_STATES = ("tired", "scared", "hungry", "lazy")


PLACE_STATES = ("wide", "long", "narrow", "busy")


@dataclass(frozen=True)
class Coref:
    it: int  # position of "it"
    animal: int  # position of the animal noun (the first noun)
    place: int  # position of the place noun (after "cross the")
    adjective: int  # position of the adjective that decides
    referent: int  # animal or place: the noun "it" refers to

    @property
    def other(self) -> int:
        return self.place if self.referent == self.animal else self.animal


def coref_parts(tokens) -> Coref | None:
    """The positions of the coreference sentence's words, or None for any other sentence."""
    t = list(tokens)
    if len(t) != 11 or t[0] != "the" or t[2:5] != ["didn't", "cross", "the"] or t[6:10] != ["because", "it", "was",
                                                                                             "too"]:
        return None
    if t[10] not in ANIMAL_STATES + PLACE_STATES:
        return None
    return Coref(it=7, animal=1, place=5, adjective=10, referent=1 if t[10] in ANIMAL_STATES else 5)


@dataclass(frozen=True)
class Focus:
    layer: int
    head: int
    weight: float  # the weight "it" gives the deciding noun in that head
    other: float  # the weight it gives the other noun there


def coref_focus(trace: Trace, n_layers: int, c: Coref, stack: str = "enc") -> Focus:
    """The (layer, head) that best links "it" to the deciding noun, chosen by the data: the largest weight on
    that noun among the heads that give it more than the other noun (among all heads when none does)."""
    rows = word_across_layers(trace, stack, "self_attn", n_layers, c.it)  # [L·H, Tk]
    score = rows[:, c.referent].copy()
    prefer = rows[:, c.referent] > rows[:, c.other]
    if prefer.any():
        score[~prefer] = -1.0
    best = int(score.argmax())
    n_heads = rows.shape[0] // n_layers
    return Focus(best // n_heads, best % n_heads, float(rows[best, c.referent]), float(rows[best, c.other]))


def coref_notice(rows: np.ndarray, row_labels: list[str], key_labels: list[str], c: Coref, f: Focus) -> str:
    """Every head's weights of "it" [L·H, Tk]: which head links it to the deciding noun (`f`, from
    `coref_focus`), the strongest weight of all, and how many heads park on <eos>/punctuation."""
    ref, other, adj = key_labels[c.referent], key_labels[c.other], key_labels[c.adjective]
    best = row_labels.index(f"L{f.layer} h{f.head}")
    strongest = np.unravel_index(int(rows.argmax()), rows.shape)
    parked = int(sum(is_parking(key_labels[j]) for j in rows.argmax(1)))
    return (f"“{word_of(adj)}” makes “it” the {word_of(ref)}. The head that best links “it” to “{ref}” is "
            f"{row_labels[best]} ({rows[best, c.referent]:.2f}, against {rows[best, c.other]:.2f} for “{other}”). "
            f"The strongest single weight of “it” is {rows[strongest]:.2f}, in {row_labels[strongest[0]]}, to "
            f"“{key_labels[strongest[1]]}”; {parked} of {len(rows)} heads put most of it on <eos> or punctuation.")


def coref_table(rows: np.ndarray, row_labels: list[str], key_labels: list[str], tokens: list[str] | tuple[str, ...],
                it: int, candidates: tuple[str, ...] = ("animal", "street", "tired", "wide")) -> pd.DataFrame:
    """Per head: the weight "it" gives each candidate word, and its strongest word besides itself."""
    out = {}
    for word in candidates:
        j = find_word(tokens, word)
        if j is not None:
            out[f"→ {word}"] = rows[:, j].round(4)
    top = top_words(rows, row_labels, key_labels, skip=it, column="strongest word besides “it”")
    return pd.DataFrame(out, index=list(row_labels)).join(top)
