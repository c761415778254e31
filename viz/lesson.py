"""The guided lesson's figures and "notice" lines: one focused figure per step, one sentence that says
what to look at, computed from the tensors the figure draws (model/lesson.py reads them).

Pure: plotly figures, pandas tables and plain strings, no Streamlit. `view(key, ctx)` gives a step's
`View`; each `notice_*` function takes the numbers of one step (a dataclass of model/lesson.py) and is
tested against the tensors. Notices are plain text (the page escapes them): words are written in
“quotes”, weights and probabilities with 3 decimals, scores with 2.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from model import lesson as L
from model import paper
from model.pipeline import Analysis
from model.textbook import D_K, WORDS, thinking_machines
from model.vocab import UNK_ID
from viz.heatmap import SCALES, as_array, heatmap, table

BLUE, GREEN, GREY, ORANGE = "#1f77b4", "#2ca02c", "#9e9e9e", "#ff7f0e"
CONFIG = {"displayModeBar": False}


def word(label: str) -> str:
    """"3 the" -> "the" (axis labels carry their position)."""
    return label.split(" ", 1)[1] if " " in label and label.split(" ", 1)[0].isdigit() else label


def q(label: str) -> str:
    """A word for a notice: “the”."""
    return f"“{word(label)}”"


@dataclass(frozen=True)
class Context:
    """Everything a step needs: the analysis, what the lesson follows, the French vocabulary."""

    a: Analysis
    f: L.Focus
    itos: list[str]  # target vocabulary, id -> word
    src_vocab: int  # size of the English vocabulary


def context(a: Analysis, itos: list[str], src_vocab: int) -> Context:
    return Context(a, L.focus(a), list(itos), src_vocab)


@dataclass(frozen=True)
class View:
    figure: go.Figure
    notice: str
    table: pd.DataFrame  # the exact numbers behind the figure
    textbook: str | None = None  # the Illustrated Transformer's numbers, labelled as such
    warning: str | None = None  # when a sidebar intervention changes what this step shows


# --- small figure helpers -------------------------------------------------------------------------

def _layout(fig: go.Figure, height: int = 320, **kw) -> go.Figure:
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 30, "b": 10}, showlegend=kw.pop("legend", False),
                      **kw)
    return fig


def bars(labels: list[str], values, title: str, y_title: str, colour: str = BLUE, highlight: int | None = None,
         digits: int = 3) -> go.Figure:
    values = [float(v) for v in values]
    colours = [ORANGE if i == highlight else colour for i in range(len(values))]
    fig = go.Figure(go.Bar(x=list(labels), y=values, marker_color=colours, text=[f"{v:.{digits}f}" for v in values],
                           textposition="outside", cliponaxis=False,
                           hovertemplate="%{x}: %{y:.4f}<extra></extra>"))
    return _layout(fig, title=title, yaxis_title=y_title, xaxis={"type": "category"})


def plain_table(columns: dict[str, list], height: int | None = None) -> go.Figure:
    fig = go.Figure(go.Table(header={"values": list(columns), "align": "left", "fill_color": "#e8eef7"},
                             cells={"values": list(columns.values()), "align": "left"}))
    n = max((len(v) for v in columns.values()), default=1)
    return _layout(fig, height=height or min(520, 60 + 28 * n))


def dims(n: int) -> list[str]:
    return [str(i) for i in range(n)]


# --- 1. the sentence --------------------------------------------------------------------------------

def notice_sentence(a: Analysis) -> str:
    n_in, n_out = len(a.prepared.tokens), len(a.out_tokens)
    runs = len(a.greedy.steps)
    text = (f"{n_in} English token(s) go in, {n_out} French token(s) come out: “{a.translation}”. "
            f"The encoder runs once; the decoder ran {runs} time(s), once per word it wrote"
            + (" plus once for <eos>." if a.greedy.finished else " (it stopped at the length limit, without <eos>)."))
    if a.prepared.unknown:
        text += f" {len(a.prepared.unknown)} word(s) are not in the vocabulary and go in as <unk>."
    return text


def _sentence(c: Context) -> View:
    a = c.a
    fig = plain_table({"English, in (encoder)": list(a.prepared.tokens) + ["<eos>"],
                       "French, out (decoder)": list(a.out_tokens) + (["<eos>"] if a.greedy.finished else [])})
    tab = pd.DataFrame({"sentence": [a.prepared.text], "translation": [a.translation]})
    return View(fig, notice_sentence(a), tab)


# --- 2. tokens and ids --------------------------------------------------------------------------------

def notice_tokens(t: L.Tokens, vocab_size: int) -> str:
    pairs = ", ".join(f"“{w}” → {i}" for w, i in list(zip(t.tokens, t.ids, strict=True))[:4])
    more = f" (and {len(t.ids) - 4} more)" if len(t.ids) > 4 else ""
    text = f"{pairs}{more}: {len(t.ids)} ids from a vocabulary of {vocab_size} English tokens."
    if t.unknown:
        text += f" Unknown: {', '.join(f'“{w}”' for w in t.unknown)} → id {UNK_ID} (<unk>)."
    if t.truncated:
        text += f" {t.truncated} token(s) beyond the model's limit were cut off."
    return text


def _tokens(c: Context) -> View:
    t = L.tokens(c.a)
    fig = plain_table({"position": list(range(len(t.ids))), "token": list(t.tokens), "id": list(t.ids),
                       "in vocabulary": ["no → <unk>" if w in t.unknown else "yes" for w in t.tokens]})
    tab = pd.DataFrame({"token": t.tokens, "id": t.ids})
    return View(fig, notice_tokens(t, c.src_vocab), tab)


# --- 3. embedding -----------------------------------------------------------------------------------

def notice_embedding(e: L.Embedding) -> str:
    pe = e.factor / 2 ** 0.5  # every PE row has length √(d_model / 2)
    return (f"The row of {q(e.word)} (id {e.token_id}) has length {e.raw_norm:.3f}; "
            f"× √d_model = {e.factor:.3f} makes it {e.scaled_norm:.3f}, comparable to the positional encoding "
            f"added next (every PE row has length √(d_model/2) = {pe:.3f}).")


def _embedding(c: Context) -> View:
    a = c.a
    e = L.embedding(a, c.f.word)
    x = a.trace["src.embed"][0]
    fig = heatmap(x, dims(x.shape[1]), a.src_labels, "activations", x_title="dimension", y_title="token",
                  height=max(220, min(520, 60 + 30 * x.shape[0])))
    return View(fig, notice_embedding(e), table(x, dims(x.shape[1]), a.src_labels),
                textbook=f"The paper's base model uses d_model = {paper.BASE.d_model}, so √d_model = "
                         f"{paper.BASE.d_model ** 0.5:.2f} there; this model uses d_model = {x.shape[1]}.")


# --- 4. positional encoding -------------------------------------------------------------------------

def notice_positional(p: L.Positional, label: str) -> str:
    if not p.on:
        return (f"Positional encoding is switched off: {q(label)} enters the encoder as its embedding alone "
                f"(length {p.input_norm:.3f}), so the model cannot tell word order apart.")
    return (f"{q(label)} is at position {p.position}: PE[{p.position}, 0] = sin({p.position}) = {p.first[0]:.3f} and "
            f"PE[{p.position}, 1] = cos({p.position}) = {p.first[1]:.3f}. Every PE row has length {p.pe_norm:.3f}; "
            f"embedding (length {p.embed_norm:.3f}) + PE gives the encoder input X (length {p.input_norm:.3f}).")


def _positional(c: Context) -> View:
    a = c.a
    pos = L.pe_position(c.f, len(a.src_labels))
    p = L.positional(a, pos)
    labels = a.src_labels
    if not p.on:
        x = a.trace["src.input"][0]
        fig = heatmap(x, dims(x.shape[1]), labels, "activations", x_title="dimension", y_title="position")
        return View(fig, notice_positional(p, labels[pos]), table(x, dims(x.shape[1]), labels),
                    warning="Positional encoding is switched off in the sidebar: the figure shows the encoder's "
                            "input, which is now the embedding alone.")
    pe = a.trace["src.pos"][0]
    fig = heatmap(pe, dims(pe.shape[1]), labels, "encoding", x_title="dimension (even: sin, odd: cos)",
                  y_title="position", height=max(220, min(520, 60 + 30 * pe.shape[0])))
    return View(fig, notice_positional(p, labels[pos]), table(pe, dims(pe.shape[1]), labels))


# --- 5. q, k, v -------------------------------------------------------------------------------------

def notice_qkv(p: L.Projections, head: int) -> str:
    return (f"X is [{p.n_tokens}, {p.d_model}]; W^Q, W^K, W^V are [{p.d_model}, {p.d_model}], so Q, K, V are "
            f"[{p.n_tokens}, {p.d_model}], cut into {p.n_heads} heads of {p.d_k} numbers. In head {head}, "
            f"{q(p.word)} has q of length {p.q_norm:.3f}, k of length {p.k_norm:.3f}, v of length {p.v_norm:.3f}.")


def _qkv(c: Context) -> View:
    a, f = c.a, c.f
    m = f"enc.{f.layer}.self_attn"
    labels = a.src_labels
    mats = [as_array(a.trace[f"{m}.{n}"][0, f.head]) for n in "qkv"]
    lim = float(max(np.abs(x).max() for x in mats)) or 1.0
    fig = make_subplots(rows=1, cols=3, subplot_titles=[f"{n} (head {f.head})" for n in "qkv"], shared_yaxes=True,
                        horizontal_spacing=0.03)
    for i, x in enumerate(mats):
        fig.add_trace(go.Heatmap(z=x, x=dims(x.shape[1]), y=labels, coloraxis="coloraxis",
                                 hovertemplate="%{y}, dim %{x}: %{z:.4f}<extra></extra>"), 1, i + 1)
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category", showticklabels=False)
    _layout(fig, height=max(240, min(520, 80 + 30 * len(labels))),
            coloraxis={"colorscale": SCALES["activations"]["colorscale"], "cmin": -lim, "cmax": lim})
    p = L.projections(a, f)
    tab = pd.DataFrame({"dimension": dims(p.d_k), f"q of {word(labels[f.word])}": p.q})
    return View(fig, notice_qkv(p, f.head), tab,
                textbook=f"The Illustrated Transformer (the paper's base model): X rows of {paper.BASE.d_model} "
                         f"numbers, {paper.BASE.n_heads} heads, q, k, v of {paper.BASE.d_k} numbers each "
                         f"(W^Q is {paper.BASE.d_model} × {paper.BASE.d_k} per head).",
                warning=_head_off(c))


def _head_off(c: Context) -> str | None:
    m = f"enc.{c.f.layer}.self_attn"
    if (m, c.f.head) in c.a.interventions.heads_off:
        return (f"Head {c.f.head} of encoder layer {c.f.layer} is switched off in the sidebar: its weights are "
                f"still computed (shown here), but its z is set to 0 before the heads are joined.")
    return None


# --- 6-9. one row of attention ------------------------------------------------------------------------

def _textbook_row() -> tuple[list[float], list[float], list[float]]:
    tm = thinking_machines()
    return ([float(v) for v in tm.scores[0]], [float(v) for v in tm.scaled[0]], [float(v) for v in tm.weights[0]])


def textbook_line(kind: str) -> str:
    """The Illustrated Transformer's numbers for q1 ("Thinking"), computed from model/textbook.py."""
    scores, scaled, weights = _textbook_row()
    w1, w2 = WORDS
    root = D_K ** 0.5
    head = f"Textbook (the Illustrated Transformer's made-up “{w1} {w2}” vectors, d_k = {D_K}, not this model): "
    if kind == "scores":
        return head + f"q1·k1 = {scores[0]:g}, q1·k2 = {scores[1]:g}."
    if kind == "scale":
        return head + (f"{scores[0]:g} / {root:g} = {scaled[0]:g}, {scores[1]:g} / {root:g} = {scaled[1]:g} "
                       f"(√{D_K} = {root:g}).")
    if kind == "softmax":
        return head + f"softmax({scaled[0]:g}, {scaled[1]:g}) = {weights[0]:.2f}, {weights[1]:.2f}."
    return head + f"z1 = {weights[0]:.2f} · v1 + {weights[1]:.2f} · v2."


def notice_scores(r: L.Row) -> str:
    top = r.top_score
    low = min(range(len(r.scores)), key=r.scores.__getitem__)
    return (f"In head {r.head}, q of {q(r.query_label)} scores highest against the key of {q(r.key_labels[top])} "
            f"({r.scores[top]:.2f}) and lowest against {q(r.key_labels[low])} ({r.scores[low]:.2f}).")


def notice_scale(r: L.Row) -> str:
    top = r.top_score
    if not r.scale_on:
        return (f"Scaling is switched off: the scores stay as they are ({q(r.key_labels[top])}: {r.scaled[top]:.2f}), "
                f"and the softmax of such large numbers is more all-or-nothing.")
    spread, spread_s = max(r.scores) - min(r.scores), max(r.scaled) - min(r.scaled)
    return (f"√d_k = √{r.d_k} = {r.d_k ** 0.5:.3f}: {q(r.key_labels[top])}'s score {r.scores[top]:.2f} becomes "
            f"{r.scaled[top]:.2f}, and the gap between the highest and the lowest score shrinks from "
            f"{spread:.2f} to {spread_s:.2f}.")


def notice_softmax(r: L.Row) -> str:
    top = r.top
    return (f"{q(r.query_label)} gives {r.weights[top]:.3f} of its attention to {q(r.key_labels[top])}; "
            f"the {len(r.weights)} weights add up to {sum(r.weights):.3f}.")


def notice_z(r: L.Row, off: bool = False) -> str:
    order = sorted(range(len(r.weights)), key=r.weights.__getitem__, reverse=True)[:3]
    terms = " + ".join(f"{r.weights[j]:.3f} · v({word(r.key_labels[j])})" for j in order)
    more = " + …" if len(r.weights) > 3 else ""
    if off:
        return f"The head is switched off, so its z is all zeros; it would have been {terms}{more}."
    return (f"z of {q(r.query_label)} = {terms}{more}: a vector of {r.d_k} numbers (length {r.z_norm:.3f}); "
            f"the model's own z differs from this sum by at most {r.z_error:.1e}.")


def _row(c: Context) -> L.Row:
    return L.encoder_row(c.a, c.f)


def _scores(c: Context) -> View:
    r = _row(c)
    fig = bars(list(r.key_labels), r.scores, f"q({word(r.query_label)}) · k, head {r.head}", "score", BLUE,
               highlight=r.query, digits=2)
    return View(fig, notice_scores(r), _row_table(r), textbook_line("scores"), _head_off(c))


def _scale(c: Context) -> View:
    r = _row(c)
    fig = go.Figure([go.Bar(name="q · k", x=list(r.key_labels), y=list(r.scores), marker_color=GREY),
                     go.Bar(name=f"÷ √{r.d_k}", x=list(r.key_labels), y=list(r.scaled), marker_color=BLUE)])
    _layout(fig, title=f"q({word(r.query_label)}) · k before and after ÷ √d_k", yaxis_title="score", legend=True,
            barmode="group", xaxis={"type": "category"})
    warn = None if r.scale_on else "Dividing by √d_k is switched off in the sidebar: both bars are equal."
    return View(fig, notice_scale(r), _row_table(r), textbook_line("scale"), warn or _head_off(c))


def _softmax(c: Context) -> View:
    r = _row(c)
    fig = bars(list(r.key_labels), r.weights, f"attention weights of {word(r.query_label)}, head {r.head}",
               "weight", BLUE, highlight=r.top)
    fig.update_yaxes(range=[0, 1.1])
    return View(fig, notice_softmax(r), _row_table(r), textbook_line("softmax"), _head_off(c))


def _z(c: Context) -> View:
    r = _row(c)
    a = c.a
    v = as_array(a.trace[f"{r.module}.v"][0, r.head])  # [Tk, d_k]
    w = np.array(r.weights)[:, None]
    z = as_array(a.trace[f"{r.module}.z"][0, r.head, r.query])[None]
    rows = np.vstack([w * v, z])
    labels = [f"{r.weights[j]:.3f} · v({word(lab)})" for j, lab in enumerate(r.key_labels)] + ["z = sum"]
    labels = [f"{i}: {lab}" for i, lab in enumerate(labels)]  # unique axis labels
    fig = heatmap(rows, dims(v.shape[1]), labels, "activations", x_title="dimension", y_title="",
                  height=max(240, min(560, 60 + 30 * len(labels))))
    off = (r.module, r.head) in a.interventions.heads_off
    return View(fig, notice_z(r, off), table(rows, dims(v.shape[1]), labels), textbook_line("z"), _head_off(c))


def _row_table(r: L.Row) -> pd.DataFrame:
    return pd.DataFrame({"key": list(r.key_labels), "q·k": r.scores, "÷√d_k": r.scaled, "weight": r.weights}).round(4)


# --- 10. all heads, 11. concat and W^O -----------------------------------------------------------------

def notice_heads(hs: list[L.HeadChoice], label: str) -> str:
    parts = "; ".join(f"head {h.head} → {q(h.top_label)} {h.weight:.3f}" + (" (off)" if h.off else "") for h in hs)
    distinct = len({h.top for h in hs})
    return f"Where {q(label)} looks hardest in each head: {parts}. {distinct} different word(s) across {len(hs)} heads."


def _heads(c: Context) -> View:
    a, f = c.a, c.f
    hs = L.heads(a, f)
    w = a.trace[f"enc.{f.layer}.self_attn.weights"][0, :, f.word]  # [H, Ts]
    ylabels = [f"head {h}" + (" (off)" if x.off else "") for h, x in enumerate(hs)]
    fig = heatmap(w, a.src_labels, ylabels, "weights", x_title="key word", y_title="head")
    return View(fig, notice_heads(hs, a.src_labels[f.word]), table(w, a.src_labels, ylabels),
                textbook=f"The paper's base model has {paper.BASE.n_heads} heads per layer; this model has "
                         f"{len(hs)}.")


def notice_concat(cc: L.Concat, label: str, n_heads: int) -> str:
    lengths = ", ".join(f"{n:.3f}" for n in cc.z_norms)
    d_k = cc.concat_shape[1] // max(1, n_heads)
    return (f"The {n_heads} z's of {q(label)} (lengths {lengths}) sit side by side: {n_heads} × {d_k} = "
            f"{cc.concat_shape[1]} numbers; concat [{cc.concat_shape[0]}, {cc.concat_shape[1]}] · W^O "
            f"[{cc.w_o_shape[0]}, {cc.w_o_shape[1]}] mixes them into the output (length {cc.out_norm:.3f}).")


def _concat(c: Context) -> View:
    a, f = c.a, c.f
    m = f"enc.{f.layer}.self_attn"
    x = a.trace[f"{m}.concat"][0]
    cc = L.concat(a, f)
    n_heads = a.trace[f"{m}.z"].shape[1]
    fig = heatmap(x, dims(x.shape[1]), a.src_labels, "activations", x_title="dimension (head 0 | head 1 | …)",
                  y_title="token", height=max(220, min(520, 60 + 30 * x.shape[0])))
    d_k = x.shape[1] // n_heads
    for h in range(1, n_heads):
        fig.add_vline(x=h * d_k - 0.5, line_color="black", line_width=2)
    return View(fig, notice_concat(cc, a.src_labels[f.word], n_heads), table(x, dims(x.shape[1]), a.src_labels))


# --- 12. add & norm, 13. FFN, 14. stack ---------------------------------------------------------------

def notice_add_norm(n: L.AddNorm) -> str:
    return (f"x + attention(x) of {q(n.word)} has mean {n.resid_mean:.3f} and standard deviation {n.resid_std:.3f}; "
            f"LayerNorm brings it to mean {n.normed_mean:.3f} and standard deviation {n.normed_std:.3f}, then "
            f"the learned γ and β rescale it.")


def _add_norm(c: Context) -> View:
    a, f = c.a, c.f
    n = f"enc.{f.layer}.add_norm1"
    r = as_array(a.trace[f"{n}.resid"][0, f.word])
    z = as_array(a.trace[f"{n}.normed"][0, f.word])
    d = dims(len(r))
    fig = go.Figure([go.Scatter(x=d, y=r, name="x + attention(x)", mode="lines", line_color=GREY),
                     go.Scatter(x=d, y=z, name="after LayerNorm (before γ, β)", mode="lines", line_color=BLUE)])
    _layout(fig, title=f"the {len(r)} numbers of {word(a.src_labels[f.word])}", xaxis_title="dimension", legend=True,
            xaxis={"type": "category", "showticklabels": False})
    tab = pd.DataFrame({"dimension": d, "x + attention(x)": r, "normalised": z}).round(4)
    warn = ("This model is pre-LN (LayerNorm before each sublayer, not after it as in the paper): the grey line is "
            "the layer's input + attention, the blue one the LayerNorm of the layer's input.") if L.pre_ln(a) else None
    return View(fig, notice_add_norm(L.add_norm(a, f)), tab, warning=warn)


def notice_ffn(x: L.FFN) -> str:
    return (f"Of the {x.d_ff} hidden units of {q(x.word)}, {x.zeros} ({x.zeros / x.d_ff:.0%}) are exactly 0 after "
            f"ReLU; the most active is unit {x.largest} ({x.largest_value:.3f}). W_2 maps them back to "
            f"d_model numbers.")


def _ffn(c: Context) -> View:
    a, f = c.a, c.f
    h = as_array(a.trace[f"enc.{f.layer}.ffn.hidden"][0, f.word])
    x = L.ffn(a, f)
    fig = bars(dims(len(h)), h, f"ReLU(x W_1 + b_1) for {word(a.src_labels[f.word])}", "activation", GREEN,
               highlight=x.largest)
    fig.update_traces(text=None)
    fig.update_xaxes(showticklabels=False)
    return View(fig, notice_ffn(x), pd.DataFrame({"unit": dims(len(h)), "activation": h}).round(4),
                textbook=f"The paper's base model: d_ff = {paper.BASE.d_ff} = 4 × d_model; this model: d_ff = "
                         f"{x.d_ff}.")


def notice_stack(s: L.Stack) -> str:
    sims = ", ".join(f"{v:.3f}" for v in s.similarity)
    return (f"{q(s.word)} after each of the {s.n_layers} encoder layers, compared with its input (cosine "
            f"similarity): {sims}. The encoder's output, [{s.out_shape[0]}, {s.out_shape[1]}], is what every "
            f"decoder layer will read.")


def _stack(c: Context) -> View:
    a, f = c.a, c.f
    sims = as_array(L.stack_similarity(a))  # [Ts, N + 1]
    xs = ["input"] + [f"after layer {i}" for i in range(sims.shape[1] - 1)]
    fig = go.Figure([go.Scatter(x=xs, y=sims[i], name=lab, mode="lines+markers",
                                line={"width": 4 if i == f.word else 1.5})
                     for i, lab in enumerate(a.src_labels)])
    _layout(fig, title="each word compared with its own input (cosine similarity)", yaxis_title="similarity",
            legend=len(a.src_labels) <= 16)
    return View(fig, notice_stack(L.stack(a, f)), pd.DataFrame(sims, index=a.src_labels, columns=xs).round(4),
                textbook=f"The paper stacks N = {paper.BASE.n_layers} layers in the encoder and in the decoder; this "
                         f"model {L.n_layers(a, 'enc')} and {L.n_layers(a, 'dec')}.")


# --- 15. decoder input, 16. masked self-attention, 17. cross-attention ---------------------------------

def notice_decoder_input(d: L.DecoderInput) -> str:
    if len(d.inputs) < 2:
        return "The model wrote nothing: its only input, <bos> at position 0, predicted <eos> at once."
    return (f"Position 0 reads <bos> and predicts “{d.targets[0]}”; position 1 reads “{d.inputs[1]}” and predicts "
            f"“{d.targets[1]}”: {len(d.inputs)} positions, each one word behind the word it predicts.")


def _decoder_input(c: Context) -> View:
    d = L.decoder_input(c.a)
    fig = plain_table({"position t": list(range(len(d.inputs))), "decoder input at t": list(d.inputs),
                       "predicts (word t + 1)": list(d.targets)})
    return View(fig, notice_decoder_input(d), pd.DataFrame({"input": d.inputs, "predicts": d.targets}))


def notice_masked(m: L.Masked) -> str:
    head = (f"With the look-ahead mask, every weight above the diagonal is {m.above:.3f}: no position sees a later "
            "word." if m.mask_on else
            f"The look-ahead mask is switched off: the largest weight on a later word is {m.above:.3f}.")
    return (f"{head} Row {q(m.row_label)} (position {m.row}) looks most at {q(m.top_label)} "
            f"({m.weights[m.top]:.3f}, average of the heads in the last layer).")


def _masked(c: Context) -> View:
    a = c.a
    n = L.n_layers(a, "dec")
    w = a.trace[f"dec.{n - 1}.self_attn.weights"][0].mean(0)
    fig = heatmap(w, a.tgt_labels, a.tgt_labels, "weights", x_title="key (earlier words)", y_title="query position")
    warn = None if a.interventions.look_ahead_mask else ("The look-ahead mask is switched off in the sidebar: the "
                                                         "upper triangle is no longer zero.")
    return View(fig, notice_masked(L.masked(a, c.f)), table(w, a.tgt_labels, a.tgt_labels), warning=warn)


def notice_cross(x: L.Cross, src_labels: list[str] | None = None) -> str:
    out = (f"Row {q(x.row_label)} (position {x.row}, predicting {q(x.predicts)}) puts {x.weights[x.top]:.3f} of "
           f"its attention on the source word {q(x.top_label)} (layer {x.layer}, average of the heads).")
    if src_labels and x.reordered:
        order = ", ".join(q(src_labels[i]) for i in x.visits)
        out += (f" Read the rows top to bottom: the decoder visits the English words in the order {order}, not in "
                "the sentence's order; the French word order differs, and attention follows it.")
    return out


def _cross(c: Context) -> View:
    a = c.a
    w = L.cross_matrix(a)
    ylabels = [f"{lab} → {word(nxt)}" for lab, nxt in zip(a.tgt_labels, a.next_labels, strict=True)]
    fig = heatmap(w, a.src_labels, ylabels, "weights", x_title="English source (keys, values from the encoder)",
                  y_title="position → predicts")
    return View(fig, notice_cross(L.cross(a, c.f), a.src_labels), table(w, a.src_labels, ylabels))


# --- 18. output, 19. chosen word, 20. next step, 21. finished -----------------------------------------------

def notice_output(p: L.Prediction, d_model: int) -> str:
    return (f"At position {p.position} (input “{p.input}”) the final linear layer turns {d_model} numbers into "
            f"{p.vocab} scores (logits), one per French token; the highest, {p.logit:.2f}, is “{p.words[0]}”, and "
            f"softmax makes it a probability of {p.probs[0]:.3f}.")


def _output(c: Context) -> View:
    a = c.a
    logits = a.trace["logits"][0, 0]
    top = logits.topk(min(10, logits.numel()))
    words = [c.itos[int(i)] for i in top.indices]
    fig = bars(words, top.values, "the 10 highest logits at position 0", "logit", GREY, highlight=0, digits=2)
    p = L.prediction(a, c.itos, 0)
    probs = a.trace["probs"][0, 0][top.indices]
    tab = pd.DataFrame({"word": words, "logit": as_array(top.values), "probability": as_array(probs)}).round(4)
    return View(fig, notice_output(p, a.trace["dec.out"].shape[-1]), tab, warning=_mask_off(a))


def _mask_off(a: Analysis) -> str | None:
    if a.interventions.look_ahead_mask:
        return None
    return ("The look-ahead mask is switched off in the sidebar: in this traced pass every position also sees the "
            "later words, which decoding never had. The next steps show what decoding itself saw.")


def notice_chosen(p: L.Prediction) -> str:
    gap = p.probs[0] - p.probs[1] if len(p.probs) > 1 else p.probs[0]
    second = f"; next best “{p.words[1]}” with {p.probs[1]:.3f}" if len(p.probs) > 1 else ""
    return (f"Greedy decoding takes the most probable token: “{p.words[0]}” with {p.probs[0]:.3f}{second} "
            f"(a margin of {gap:.3f}). "
            + ("Decoding stops: the translation is empty." if p.chosen == "<eos>" else
               f"“{p.chosen}” becomes the decoder's input at position {p.position + 1}."))


def _prediction_bars(c: Context, position: int, title: str) -> tuple[go.Figure, L.Prediction]:
    p = L.decoding_step(c.a, c.itos, position)
    fig = bars(list(p.words), p.probs, title, "probability", GREEN, highlight=0)
    fig.update_yaxes(range=[0, 1.1])
    return fig, p


def _pred_table(p: L.Prediction) -> pd.DataFrame:
    return pd.DataFrame({"word": p.words, "probability": p.probs}).round(4)


def _chosen(c: Context) -> View:
    fig, p = _prediction_bars(c, 0, f"the {len(c.a.greedy.steps[0].candidates)} most probable first words")
    return View(fig, notice_chosen(p), _pred_table(p))


def notice_next(p: L.Prediction | None, prefix: tuple[str, ...], mask_on: bool = True) -> str:
    if p is None:
        return "There is no next step: the model's first choice was already <eos>, so the translation is empty."
    same = (" Position 0 gives the same numbers as before: the mask hides every later word from it." if mask_on
            else "")
    return (f"The decoder runs again with “{' '.join(prefix)}” as its input. Position {p.position} now predicts "
            f"“{p.words[0]}” with {p.probs[0]:.3f}.{same}")


def _next(c: Context) -> View:
    a = c.a
    d = L.decoder_input(a)
    if len(d.inputs) < 2:
        fig, p = _prediction_bars(c, 0, "position 0: the first choice")
        return View(fig, notice_next(None, d.inputs[:1]), _pred_table(p))
    fig, p = _prediction_bars(c, 1, f"position 1, after “{' '.join(d.inputs[:2])}”")
    return View(fig, notice_next(p, d.inputs[:2], a.interventions.look_ahead_mask), _pred_table(p))


def notice_finished(x: L.Finished) -> str:
    if not x.words:
        return "The translation is empty."
    if x.finished and len(x.words) == 1:
        return f"The translation is empty: <eos> came first ({x.probs[0]:.3f})."
    end = f"then “<eos>” ({x.probs[-1]:.3f}) ends it" if x.finished else "it stopped at the length limit"
    return (f"{len(x.words) - (1 if x.finished else 0)} word(s), {end}: “{x.translation}”. The least sure choice was "
            f"“{x.words[x.least]}” ({x.probs[x.least]:.3f}).")


def _finished(c: Context) -> View:
    x = L.finished(c.a, c.itos)
    labels = [f"{i}: {w}" for i, w in enumerate(x.words)]
    fig = bars(labels, x.probs, "the probability of each chosen word", "probability", GREEN, highlight=x.least)
    fig.update_yaxes(range=[0, 1.1])
    return View(fig, notice_finished(x), pd.DataFrame({"word": x.words, "probability": x.probs}).round(4))


VIEWS: dict[str, Callable[[Context], View]] = {
    "sentence": _sentence, "tokens": _tokens, "embedding": _embedding, "positional": _positional, "qkv": _qkv,
    "scores": _scores, "scale": _scale, "softmax": _softmax, "z": _z, "heads": _heads, "concat": _concat,
    "add_norm": _add_norm, "ffn": _ffn, "stack": _stack, "decoder_input": _decoder_input, "masked": _masked,
    "cross": _cross, "output": _output, "chosen": _chosen, "next": _next, "finished": _finished,
}


def view(key: str, c: Context) -> View:
    """The figure, notice, exact numbers and textbook line of step `key`."""
    return VIEWS[key](c)
