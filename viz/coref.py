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
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model.coref import LINK, READS, Coref, Decision, coref_parts  # noqa: F401 - coref_parts: the pages' import
from model.trace import Trace
from viz.attention import is_parking, word_of
from viz.heads import find_word, top_words, word_across_layers


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
    """Every head's weights of "it" [L·H, Tk]: does any head link it to the deciding noun, and where its
    strongest weight goes.

    Rule: "links" only when a head gives the deciding noun at least LINK (0.5) and at least twice what it gives
    the other noun (`EncoderLinks.links`); otherwise the notice says plainly that no encoder head picks the
    noun out, with the largest weight each noun gets, and points to where the pronoun is decided."""
    ref, other, adj = (word_of(key_labels[j]) for j in (c.referent, c.other, c.adjective))
    strongest = np.unravel_index(int(rows.argmax()), rows.shape)
    parked = int(sum(is_parking(key_labels[j]) for j in rows.argmax(1)))
    best = row_labels.index(f"L{f.layer} h{f.head}")
    ref_w, other_w = float(rows[best, c.referent]), float(rows[best, c.other])
    other_max = float(rows[:, c.other].max())
    if ref_w >= LINK and ref_w >= 2 * other_w:
        head = (f"{row_labels[best]} links “it” to “{ref}”: {ref_w:.2f}, against {other_w:.2f} for “{other}”.")
    else:
        most = float(rows[:, c.referent].max())
        head = (f"No encoder head picks out “{ref}”: the most any head gives it is {most:.2f}, and “{other}” gets "
                f"up to {other_max:.2f} (a head “links” a noun at {LINK:g} or more and twice the other noun's weight).")
    return (f"“{adj}” makes “it” the {ref}. {head} The strongest single weight of “it” is {rows[strongest]:.2f}, in "
            f"{row_labels[strongest[0]]}, to “{word_of(key_labels[strongest[1]])}”; {parked} of {len(rows)} heads "
            "put most of it on <eos> or punctuation. Where il / elle is decided: see the encoder-decoder "
            "attention row below.")


def decision_figure(decisions: list[Decision]) -> go.Figure:
    """p(il) and p(elle) at the pronoun's position: as trained, then without each decoder layer's
    encoder-decoder attention; one panel per sentence."""
    fig = make_subplots(rows=1, cols=len(decisions), shared_yaxes=True,
                        subplot_titles=[f"“… too {d.adjective}” → {d.pronoun}" for d in decisions])
    for col, d in enumerate(decisions, start=1):
        xs = ["as trained"] + [f"layer {o.layer} cross-attn off" for o in d.off]
        for name, vals, colour in (("p(il)", [d.p_il] + [o.p_il for o in d.off], "#1f77b4"),
                                   ("p(elle)", [d.p_elle] + [o.p_elle for o in d.off], "#d62728")):
            fig.add_trace(go.Bar(x=xs, y=vals, name=name, marker_color=colour, showlegend=col == 1,
                                 text=[f"{v:.2f}" for v in vals], textposition="outside", cliponaxis=False,
                                 hovertemplate=f"{name}" + ": %{y:.4f}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(type="category", row=1, col=col)
    fig.update_yaxes(range=[0, 1.15], title_text="probability of the pronoun", row=1, col=1)
    fig.update_layout(barmode="group", height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10},
                      legend={"orientation": "h", "y": -0.2})
    return fig


def decision_notice(d: Decision) -> str:
    """The row that writes the pronoun, what it reads, and the head-off experiment's verdict.

    Rules: the row "reads" the adjective in a layer when its head-average weight there is >= READS (0.5),
    else the notice gives the weight and says the row reads it only weakly; a layer is "needed" only when the
    greedy translation without that layer's encoder-decoder attention loses the pronoun (it flips or
    disappears); a probability change without a flip is reported as a change, not as a cause."""
    L = d.reading_layer
    avg = d.average(L)
    heads = ", ".join(f"{w:.2f}" for w in d.reads[L])
    reads = (f"reads “{d.adjective}” with {avg:.2f} on average in decoder layer {L} (heads: {heads})" if avg >= READS
             else f"reads “{d.adjective}” only weakly: {avg:.2f} on average at most, in decoder layer {L} "
                  f"(heads: {heads})")
    p = d.p_il if d.pronoun == "il" else d.p_elle
    parts = []
    for o in d.off:
        q = o.p_il if d.pronoun == "il" else o.p_elle
        if o.pronoun != d.pronoun:
            parts.append(f"without layer {o.layer}'s encoder-decoder attention the model writes "
                         f"“{o.pronoun or 'neither il nor elle'}” instead (p({d.pronoun}) {p:.2f} → {q:.2f})")
        else:
            parts.append(f"without layer {o.layer}'s it still writes “{d.pronoun}” (p {p:.2f} → {q:.2f})")
    verdict = ("so the pronoun depends on layer " + " and ".join(str(x) for x in d.needed) + "'s reading of the source"
               if d.needed else "so no single layer's encoder-decoder attention is needed for it")
    return (f"The decoder row that writes “{d.pronoun}” (input “{d.row_input.split(' ', 1)[-1]}”, p = {p:.2f}) "
            f"{reads}. Switched off: " + "; ".join(parts) + f": {verdict}.")


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
