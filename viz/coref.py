"""The coreference example ("… because it was too tired / wide"): which word "it" reads in the encoder's
heads, and where the model decides il or elle (explain/coref.py runs the experiments).

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

from explain.coref import LINK, READS, Coref, Decision, coref_parts  # noqa: F401 - coref_parts: the pages' import
from model.pipeline import label_word
from model.trace import Trace
from viz.attention import is_parking
from viz.heads import find_word, top_words, word_across_layers


@dataclass(frozen=True)
class CorefFocus:
    layer: int
    head: int
    weight: float  # the weight "it" gives the deciding noun in that head
    other: float  # the weight it gives the other noun there


def coref_focus(trace: Trace, n_layers: int, c: Coref, stack: str = "enc") -> CorefFocus:
    """The (layer, head) that best links "it" to the deciding noun, chosen by the data: the largest weight on
    that noun among the heads that give it more than the other noun (among all heads when none does)."""
    rows = word_across_layers(trace, stack, "self_attn", n_layers, c.it)  # [L·H, Tk]
    score = rows[:, c.referent].copy()
    prefer = rows[:, c.referent] > rows[:, c.other]
    if prefer.any():
        score[~prefer] = -1.0
    best = int(score.argmax())
    n_heads = rows.shape[0] // n_layers
    return CorefFocus(best // n_heads, best % n_heads, float(rows[best, c.referent]), float(rows[best, c.other]))


def coref_notice(rows: np.ndarray, row_labels: list[str], key_labels: list[str], c: Coref, f: CorefFocus) -> str:
    """Every head's weights of "it" [L·H, Tk]: does any head link it to the deciding noun, and where its
    strongest weight goes.

    Rule: "links" only when a head gives the deciding noun at least LINK (0.5) and at least twice what it gives
    the other noun (`EncoderLinks.links`); otherwise the notice says plainly that no encoder head picks the
    noun out, with the largest weight each noun gets, and points to where the pronoun is decided."""
    ref, other, adj = (label_word(key_labels[j]) for j in (c.referent, c.other, c.adjective))
    strongest = np.unravel_index(int(rows.argmax()), rows.shape)
    parked = int(sum(is_parking(key_labels[j]) for j in rows.argmax(1)))
    best = row_labels.index(f"L{f.layer} h{f.head}")
    ref_w, other_w = float(rows[best, c.referent]), float(rows[best, c.other])
    other_max = float(rows[:, c.other].max())
    if ref_w >= LINK and ref_w >= 2 * other_w:
        head = f"{row_labels[best]} links “it” to “{ref}”: {ref_w:.2f}, against {other_w:.2f} for “{other}”."
    else:
        most = float(rows[:, c.referent].max())
        head = (
            f"No encoder head picks out “{ref}”: the most any head gives it is {most:.2f}, and “{other}” gets "
            f"up to {other_max:.2f} (a head “links” a noun at {LINK:g} or more and twice the other noun's weight)."
        )
    return (
        f"“{adj}” makes “it” the {ref}. {head} The strongest single weight of “it” is {rows[strongest]:.2f}, in "
        f"{row_labels[strongest[0]]}, to “{label_word(key_labels[strongest[1]])}”; {parked} of {len(rows)} heads "
        "put most of it on <eos> or punctuation. Where il / elle is decided: see the encoder-decoder "
        "attention row below."
    )


def decision_figure(decisions: list[Decision]) -> go.Figure:
    """p(il) and p(elle) at the pronoun's position: as trained, then without each decoder layer's
    encoder-decoder attention; one panel per sentence."""
    fig = make_subplots(
        rows=1,
        cols=len(decisions),
        shared_yaxes=True,
        subplot_titles=[f"“… too {d.adjective}” → {d.pronoun}" for d in decisions],
    )
    for col, d in enumerate(decisions, start=1):
        xs = ["as trained"] + [f"layer {o.layer} cross-attn off" for o in d.off]
        for name, vals, colour in (
            ("p(il)", [d.p_il] + [o.p_il for o in d.off], "#1f77b4"),
            ("p(elle)", [d.p_elle] + [o.p_elle for o in d.off], "#d62728"),
        ):
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=vals,
                    name=name,
                    marker_color=colour,
                    showlegend=col == 1,
                    text=[f"{v:.2f}" for v in vals],
                    textposition="outside",
                    cliponaxis=False,
                    hovertemplate=f"{name}" + ": %{y:.4f}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(type="category", row=1, col=col)
    fig.update_yaxes(range=[0, 1.15], title_text="probability of the pronoun", row=1, col=1)
    fig.update_layout(
        barmode="group", height=340, margin={"l": 10, "r": 10, "t": 40, "b": 10}, legend={"orientation": "h", "y": -0.2}
    )
    return fig


def _heads(pairs: tuple[tuple[int, int], ...]) -> str:
    """((0, 0), (0, 1), (1, 3)) -> "layer 0 heads 0, 1; layer 1 head 3"."""
    layers = sorted({layer for layer, _ in pairs})
    parts = []
    for layer in layers:
        hs = [str(h) for lay, h in pairs if lay == layer]
        parts.append(f"layer {layer} head{'s' if len(hs) > 1 else ''} {', '.join(hs)}")
    return "; ".join(parts)


def _off(o, d: Decision, p: float, what: str) -> str:
    """One switch-off run in words: what the model writes, and the other words that changed."""
    q = o.p_il if d.pronoun == "il" else o.p_elle
    if o.pronoun != d.pronoun:
        out = f"{what}: “{o.pronoun or 'neither il nor elle'}” instead (p({d.pronoun}) {p:.2f} → {q:.2f})"
    else:
        out = f"{what}: still “{d.pronoun}” (p {p:.2f} → {q:.2f})"
    if o.changed:
        shown = ", ".join(f"“{w}”" for w in o.changed[:4]) + (
            f" and {len(o.changed) - 4} more" if len(o.changed) > 4 else ""
        )
        out += f", and other words change too ({shown})"
    return out


def decision_notice(d: Decision) -> str:
    """The row that writes the pronoun, what it reads, and the switch-off runs, stated as what the model wrote.

    Rules: the row "reads" the adjective in a layer when its head-average weight there is >= READS (0.5), else the
    notice gives the weight and says the row reads it only weakly; every head whose row gives the adjective
    >= READS is named, and the run with all of them off is reported; a run's pronoun is "still" the same or
    "instead" another, and "other words change too" only when other words of the greedy translation changed.
    No causal verdict: switching a whole layer off changes more than the pronoun (the tracing says where the
    adjective's evidence goes, explain/pronoun.py). (While a lesson plan hides a decoder head, ui.attention_steps
    shows no such notice at all.)"""
    L = d.reading_layer
    avg = d.average(L)
    heads = "heads: " + ", ".join(f"{w:.2f}" for w in d.reads[L])
    reads = (
        f"reads “{d.adjective}” with {avg:.2f} on average in decoder layer {L} ({heads})"
        if avg >= READS
        else f"reads “{d.adjective}” only weakly: {avg:.2f} on average at most, in decoder layer {L} ({heads})"
    )
    p = d.p_il if d.pronoun == "il" else d.p_elle
    out = f"The decoder row that writes “{d.pronoun}” (input “{label_word(d.row_input)}”, p = {p:.2f}) {reads}."
    if d.readers_off is not None:
        out += (
            f" Heads whose row gives “{d.adjective}” {READS:g} or more: {_heads(d.readers)}. "
            + _off(d.readers_off, d, p, "All of them switched off at once")
            + "."
        )
        if d.readers_off.pronoun == d.pronoun:
            out += " A large weight shows where a row reads, not what writes the pronoun."
    out += (
        " Each decoder layer's encoder-decoder attention switched off: "
        + "; ".join(_off(o, d, p, f"without layer {o.layer}'s") for o in d.off)
        + "."
    )
    if any(o.changed for o in d.off if o.pronoun != d.pronoun):
        out += " A whole layer off changes more than the pronoun, so it says little about the pronoun alone."
    return out


def coref_table(
    rows: np.ndarray,
    row_labels: list[str],
    key_labels: list[str],
    tokens: list[str] | tuple[str, ...],
    it: int,
    candidates: tuple[str, ...] = ("animal", "street", "tired", "wide"),
) -> pd.DataFrame:
    """Per head: the weight "it" gives each candidate word, and its strongest word besides itself."""
    out = {}
    for word in candidates:
        j = find_word(tokens, word)
        if j is not None:
            out[f"→ {word}"] = rows[:, j].round(4)
    top = top_words(rows, row_labels, key_labels, skip=it, column="strongest word besides “it”")
    return pd.DataFrame(out, index=list(row_labels)).join(top)
