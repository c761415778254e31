"""il or elle, measured (explain/pronoun.py): a bar figure of the tracing at the pronoun and the notice that says
what it measured, for lesson step 19 and the self-attention page.

Judging words follow viz/tracing.py's rules: "carries" (a patch alone brings back at least HALF of the
difference), "needed" (hiding the word there loses at least HALF), "decides" (the two sentences differ in the
adjective alone and the pronouns differ). When both nouns have the same gender the notice says the adjective
cannot change the pronoun (the model writes the same pronoun with either adjective).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain.pronoun import GENDER, Story
from explain.tracing import HALF
from model.pipeline import label_word
from viz.tracing import num

BLUE, ORANGE = "#1f77b4", "#ff7f0e"


def _w(s: Story, i: int) -> str:
    return f"“{s.words[i]}”"


def _writer(s: Story) -> str:
    """The decoder's input at the position that writes the pronoun (its bars' label): "qu'" before "il"."""
    return label_word(s.p.tgt_labels[-1])


def _rows(s: Story, hidden: tuple[str, int] | None) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """(patched bars, hidden bars): label and share, in the figure's order."""
    n_dec = sum(1 for r in s.tracing.decoder.rows if r.endswith("enc-dec attn"))
    pron_in = _writer(s)
    patched = [(f"encoder vector of {_w(s, j)}", s.encoder_at(j)[1]) for j in (s.animal, s.place, s.it, s.adjective)]
    for i in range(n_dec):
        patched += [
            (f"decoder at “{pron_in}”, layer {i} after self-attn", s.decoder_after(i, "self-attn")),
            (f"decoder at “{pron_in}”, layer {i} after enc-dec attn", s.decoder_after(i, "enc-dec attn")),
            (f"layer {i} enc-dec heads together", s.heads_together(i)),
        ]
    layer, head, share = s.best_head(hidden)
    patched.append((f"best single head: layer {layer} head {head}", share))
    lost = [(row, s.hidden_loss(row)) for row in s.tracing.mask.rows]
    return patched, lost


def story_figure(s: Story, hidden: tuple[str, int] | None = None) -> go.Figure:
    """Two panels of horizontal bars: the share of the pronoun's difference brought back by patching one part from
    the sentence's run into its partner's, and the share lost when the adjective is hidden from a layer."""
    patched, lost = _rows(s, hidden)
    pron = s.pronoun
    fig = make_subplots(
        rows=2,
        cols=1,
        vertical_spacing=0.16,
        row_heights=[len(patched), len(lost)],
        subplot_titles=[
            f"patched from “…{s.words[s.adjective]}” into “…{s.partner.split()[-1]}”: "
            f"share of p({pron})'s difference brought back",
            f"{_w(s, s.adjective)} hidden from a layer (weight 0, rows renormalised): "
            f"share of p({pron})'s difference lost",
        ],
    )
    for row, bars in ((1, patched), (2, lost)):
        fig.add_trace(
            go.Bar(
                y=[b[0] for b in bars],
                x=[b[1] for b in bars],
                orientation="h",
                marker_color=[ORANGE if b[1] >= HALF else BLUE for b in bars],
                text=[f"{num(b[1])}" for b in bars],
                textposition="outside",
                cliponaxis=False,
                hovertemplate="%{y}: %{x:.4f}<extra></extra>",
                showlegend=False,
            ),
            row=row,
            col=1,
        )
        fig.update_yaxes(autorange="reversed", type="category", automargin=True, ticksuffix=" ", row=row, col=1)
        low = min(b[1] for b in bars)  # a share below 0 writes its number left of 0: room for it
        fig.update_xaxes(range=[-0.15 if low < 0 else -0.02, 1.2], row=row, col=1)
    fig.add_vline(x=HALF, line_dash="dot", line_color="#9e9e9e")
    fig.update_layout(height=120 + 24 * (len(patched) + len(lost)), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def story_notice(s: Story, hidden: tuple[str, int] | None = None) -> str:
    """What the tracing measured, sentence by sentence, each judging word under its rule (module docstring)."""
    adj, other_adj = s.words[s.adjective], s.partner.split()[-1]
    if s.pronoun is None:
        return f"The model writes neither il nor elle for “…{adj}”, so there is no pronoun to follow."
    if s.same_pronoun:
        return (
            f"Both nouns are {GENDER[s.pronoun]} here: the model writes {s.pronoun} with “{adj}” and with "
            f"“{other_adj}”, so the adjective cannot change the pronoun."
        )
    if s.tracing is None:
        return (
            f"With “{adj}” the model writes {s.pronoun}, with “{other_adj}” {s.partner_pronoun}, but fed the same "
            "French words the two runs give the pronoun nearly the same probability: nothing to trace."
        )
    p, pron = s.p, s.pronoun
    out = [
        f"With “{adj}” the model writes {pron} (p = {num(p.p_clean)}); with “{other_adj}” in its place, "
        f"{s.partner_pronoun} (p({pron}) = {p.p_corrupt:.3f} there): “{adj}” decides the pronoun here."
    ]
    lo = s.encoder_at(s.adjective)[0]
    others = {j: s.encoder_at(j)[1] for j in (s.animal, s.place, s.it)}
    said = ", ".join(f"{_w(s, j)} {num(v)}" for j, v in others.items())
    j_else, v_else = s.encoder_elsewhere()
    out.append(
        f"Patched from this run into the other one, the encoder's vector of “{adj}” alone brings back at least "
        f"{num(lo)} of the difference, at every encoder layer; at the layer where each brings back most, {said}. "
        + (
            f"Only “{adj}” carries it in the encoder: no position but the adjective brings back more than "
            f"{num(max(v_else, 0.0))}, “it” included."
            if lo >= HALF and v_else < HALF
            else f"The adjective's vector brings back {num(lo)} at the least, and {_w(s, j_else)} up to {num(v_else)}."
        )
    )
    first = s.first_carrying_layer()
    if first is not None:
        out.append(
            f"In the decoder, the stream at “{_writer(s)}” (the position that writes {pron}) carries the difference "
            f"from layer {first}'s "
            f"encoder-decoder attention on ({num(s.decoder_after(first, 'enc-dec attn'))}; after that layer's "
            f"self-attention {num(s.decoder_after(first, 'self-attn'))})."
        )
    layer, head, share = s.best_head(hidden)
    if share >= HALF:
        out.append(f"Layer {layer} head {head} carries it alone ({num(share)}).")
    else:
        at = first if first is not None else 0
        together = s.heads_together(at)
        out.append(
            f"No single encoder-decoder head carries it (the most: layer {layer} head {head}, {num(share)}); "
            + (
                f"layer {at}'s heads together carry it ({num(together)})."
                if together >= HALF
                else f"layer {at}'s heads together bring back {num(together)}."
            )
        )
    dec_rows = [r for r in s.tracing.mask.rows if r.startswith("decoder")]
    needed = [(r, s.hidden_loss(r)) for r in dec_rows if s.hidden_loss(r) >= HALF]
    every = s.hidden_loss("every layer")
    if needed:
        out.append(
            " ".join(
                f"Hidden from {r}, “{adj}” takes {num(v)} of {pron}'s lead with it: reading it there is needed."
                for r, v in needed
            )
        )
    else:
        out.append(
            f"Hidden from every layer at once, “{adj}” takes only {num(every)} of {pron}'s lead with it: "
            f"{pron} does not need the adjective read."
        )
    if hidden is not None:
        out.append("(The mystery head is left out until your teacher reveals it.)")
    return " ".join(out)


def story_table(s: Story, hidden: tuple[str, int] | None = None) -> pd.DataFrame:
    if s.tracing is None:
        return pd.DataFrame({"sentence": [s.text, s.partner], "pronoun": [s.pronoun, s.partner_pronoun]})
    patched, lost = _rows(s, hidden)
    return pd.DataFrame([{"run": label, "share": round(v, 4)} for label, v in patched + lost])
