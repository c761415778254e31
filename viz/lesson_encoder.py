"""The guided lesson's steps inside one encoder layer (5-14): q, k and v, one row of attention (scores, ÷√d_k,
softmax, z), all heads, concat and W^O, add & norm, the FFN and the stack. Figures and notices as viz/lesson.py
says (its steps 0-4 and the registry of every step are there; the decoder's are in viz/lesson_decoder.py).

Rules of the judging words: `notice_softmax` and `notice_z` say why a head parks on <eos> only when <eos> holds the
largest weight, or one of the 3 largest with at least PARK_NOTE; `notice_heads` says "park" only when a head's
largest weight is on <eos> (tests/test_notice_rules.py recomputes them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from explain import lesson, paper, recompute
from explain.experiments import head_projection
from explain.recompute import Projection
from explain.textbook import D_K, WORDS, thinking_machines
from model.pipeline import label_word
from viz.heatmap import SCALES, as_array, count, heatmap, table
from viz.layers import attention_input
from viz.lesson_base import (
    BLUE,
    GREEN,
    GREY,
    PARKING_WHY,
    Context,
    View,
    bars,
    indices,
    layout,
    parks,
    q,
    q_at,
    repeated,
    vectors,
)

PARK_NOTE = 0.1  # z's notice explains parking when <eos> is among its 3 largest weights with at least this


def _enc(c: Context, name: str) -> torch.Tensor:
    """The followed encoder layer's captured tensor `name` (`self_attn.z`, `ffn.hidden`, ...: model/trace.py)."""
    return c.a.trace[f"enc.{c.f.layer}.{name}"]


# --- 5. q, k, v -------------------------------------------------------------------------------------


def notice_qkv(p: lesson.Projections, head: int, proj: Projection | None = None) -> str:
    """Shapes, per head (N12: this head's W^Q is [d_model, d_k]), and, with the model's weights, the product
    x·W^Q + b^Q checked against the model's own q. No judging words."""
    shapes = (
        f"X is [{p.n_tokens}, {p.d_model}]. Each of the {p.n_heads} heads has its own W^Q, W^K, W^V of "
        f"[{p.d_model}, {p.d_k}] (plus a bias b of {p.d_k} numbers in this model), so Q = XW^Q + b^Q is "
        f"[{p.n_tokens}, {p.d_k}] in each head."
    )
    if proj is None:
        return (
            shapes + f" In head {head}, {q(p.word)} has q of length {p.q_norm:.3f}, k of length "
            f"{p.k_norm:.3f}, v of length {p.v_norm:.3f}."
        )
    return (
        shapes + f" For {q(p.word)} in head {head}: x (its {proj.x.numel()} numbers) · W^Q + b^Q computed here "
        f"equals the model's own q to {proj.error('q'):.1e} (k: {proj.error('k'):.1e}, v: {proj.error('v'):.1e}); "
        f"q has length {p.q_norm:.3f}."
    )


def projection(c: Context) -> Projection | None:
    """x·W^Q + b^Q (and k, v) of the followed word in the followed head, from the model's own weights."""
    if c.model is None:
        return None
    f = c.f
    x = attention_input(c.a.trace, f.layer)[f.word]  # [D]
    return recompute.projection(
        c.a.trace, f"enc.{f.layer}.self_attn", f.head, f.word, x, *head_projection(c.model, f.layer, f.head)
    )


def _qkv(c: Context) -> View:
    a, f = c.a, c.f
    labels = a.src_labels
    p = lesson.projections(a, f)
    proj = projection(c)
    if proj is None:
        mats = [as_array(_enc(c, f"self_attn.{n}")[0, f.head]) for n in "qkv"]
        titles, ys = [f"{n} (head {f.head})" for n in "qkv"], [labels] * 3
    else:
        mats = [as_array(proj.x)[:, None], as_array(proj.W["q"]), as_array(proj.computed("q"))[None]]
        titles = [
            f"xᵀ [{p.d_model}, 1]",
            f"W^Q of head {f.head} [{p.d_model}, {p.d_k}]",
            f"q = x·W^Q + b^Q [1, {p.d_k}]",
        ]
        ys = [indices(p.d_model), indices(p.d_model), [label_word(labels[f.word])]]
    fig = make_subplots(
        rows=1,
        cols=3,
        subplot_titles=titles,
        horizontal_spacing=0.06,
        column_widths=[0.12, 0.5, 0.38] if proj is not None else None,
    )
    for i, (x, y) in enumerate(zip(mats, ys, strict=True)):
        lim = float(np.abs(x).max()) or 1.0  # each panel its own scale: W^Q's entries are far smaller than x's
        fig.add_trace(
            go.Heatmap(
                z=x,
                x=indices(x.shape[1]),
                y=y,
                zmin=-lim,
                zmax=lim,
                showscale=False,
                colorscale=SCALES["activations"]["colorscale"],
                hovertemplate="row %{y}, column %{x}: %{z:.4f}<extra></extra>",
            ),
            1,
            i + 1,
        )
    fig.update_yaxes(autorange="reversed", type="category", showticklabels=proj is None)
    fig.update_xaxes(type="category", showticklabels=False)
    if proj is not None:  # q is one row: a strip under its title, not a block as tall as W^Q
        fig.update_yaxes(domain=[0.86, 0.94], row=1, col=3)
    layout(fig, height=max(300, min(520, 80 + 30 * len(labels))))
    tab = pd.DataFrame({"dimension": indices(p.d_k), f"q of {label_word(labels[f.word])}": p.q})
    return View(
        fig,
        notice_qkv(p, f.head, proj),
        tab,
        textbook=f"The Illustrated Transformer (the paper's base model): x₁ has {paper.BASE.d_model} numbers, "
        f"W^Q is {paper.BASE.d_model} × {paper.BASE.d_k} in each of {paper.BASE.n_heads} heads, "
        f"q₁ = x₁W^Q has {paper.BASE.d_k}. This model: x has {p.d_model}, W^Q is {p.d_model} × "
        f"{p.d_k} in each of {p.n_heads} heads, q has {p.d_k}.",
        warning=_head_off(c),
    )


def _head_off(c: Context) -> str | None:
    m = f"enc.{c.f.layer}.self_attn"
    if (m, c.f.head) in c.a.interventions.heads_off:
        return (
            f"Head {c.f.head} of encoder layer {c.f.layer} is switched off in the sidebar: its weights are "
            f"still computed (shown here), but its z is set to 0 before the heads are joined."
        )
    return None


# --- 6-9. one row of attention ------------------------------------------------------------------------


def _textbook_row() -> tuple[list[float], list[float], list[float]]:
    tm = thinking_machines()
    return ([float(v) for v in tm.scores[0]], [float(v) for v in tm.scaled[0]], [float(v) for v in tm.weights[0]])


def textbook_line(kind: str) -> str:
    """The Illustrated Transformer's numbers for q1 ("Thinking"), computed from explain/textbook.py."""
    scores, scaled, weights = _textbook_row()
    w1, w2 = WORDS
    root = D_K**0.5
    head = f"Textbook (the Illustrated Transformer's made-up “{w1} {w2}” vectors, d_k = {D_K}, not this model): "
    if kind == "scores":
        return head + f"q1·k1 = {scores[0]:g}, q1·k2 = {scores[1]:g}."
    if kind == "scale":
        return head + (
            f"{scores[0]:g} / {root:g} = {scaled[0]:g}, {scores[1]:g} / {root:g} = {scaled[1]:g} (√{D_K} = {root:g})."
        )
    if kind == "softmax":
        return head + f"softmax({scaled[0]:g}, {scaled[1]:g}) = {weights[0]:.2f}, {weights[1]:.2f}."
    return head + f"z1 = {weights[0]:.2f} · v1 + {weights[1]:.2f} · v2."


def notice_scores(r: lesson.Row) -> str:
    top = r.top_score
    low = min(range(len(r.scores)), key=r.scores.__getitem__)
    return (
        f"In head {r.head}, q of {q(r.query_label, r.key_labels)} scores highest against the key of "
        f"{q_at(r.key_labels, top)} ({r.scores[top]:.2f}) and lowest against {q_at(r.key_labels, low)} "
        f"({r.scores[low]:.2f}). Orange marks the highest."
        + ("" if r.query in (top, low) else f" Its own key scores {r.scores[r.query]:.2f}.")
    )


def notice_scale(r: lesson.Row) -> str:
    top = r.top_score
    if not r.scale_on:
        return (
            f"Scaling is switched off: the scores stay as they are ({q_at(r.key_labels, top)}: {r.scaled[top]:.2f}), "
            f"√{r.d_k} = {r.d_k**0.5:.3f} times what the model was trained to put into the softmax."
        )
    spread, spread_s = max(r.scores) - min(r.scores), max(r.scaled) - min(r.scaled)
    return (
        f"√d_k = √{r.d_k} = {r.d_k**0.5:.3f}: the score of {q_at(r.key_labels, top)}, {r.scores[top]:.2f}, becomes "
        f"{r.scaled[top]:.2f}, and the gap between the highest and the lowest score shrinks from "
        f"{spread:.2f} to {spread_s:.2f}."
    )


def notice_softmax(r: lesson.Row) -> str:
    """The largest weight and the sum; explains parking when the largest weight is on <eos>."""
    top = r.top
    out = (
        f"{q(r.query_label, r.key_labels)} gives {r.weights[top]:.3f} of its attention to "
        f"{q_at(r.key_labels, top)} (orange); the {len(r.weights)} weights add up to {sum(r.weights):.3f}."
    )
    return out + (" " + PARKING_WHY if parks([r.key_labels[top]]) else "")


def _top3(r: lesson.Row) -> list[int]:
    return sorted(range(len(r.weights)), key=r.weights.__getitem__, reverse=True)[:3]


def parking_explained(r: lesson.Row) -> int | None:
    """The step whose notice first says why a head parks on <eos> for the followed word (softmax: its largest
    weight is there; z: <eos> is among its 3 largest weights with at least PARK_NOTE), or None."""
    if parks([r.key_labels[r.top]]):
        return lesson.step_index("softmax")
    if any(parks([r.key_labels[j]]) and r.weights[j] >= PARK_NOTE for j in _top3(r)):
        return lesson.step_index("z")
    return None


def _value_of(labels: list[str], j: int) -> str:
    """Whose value vector: "machines", or "the, position 5" when the sentence holds the word twice (as `q`)."""
    where = f", position {labels[j].partition(' ')[0]}" if repeated(labels[j], labels) else ""
    return label_word(labels[j]) + where


def notice_z(r: lesson.Row, off: bool = False) -> str:
    """The 3 largest terms of z and the measured difference to the model's z. Rule: the parking sentence only
    when <eos> is among those terms with a weight of at least PARK_NOTE (0.1); the step before has already
    explained it when the largest weight is on <eos>, so then it points there."""
    order = _top3(r)
    terms = " + ".join(f"{r.weights[j]:.3f} · v({_value_of(r.key_labels, j)})" for j in order)
    more = " + …" if len(r.weights) > 3 else ""
    if off:
        return f"The head is switched off, so its z is all zeros; it would have been {terms}{more}."
    out = (
        f"z of {q(r.query_label, r.key_labels)} = {terms}{more}: a vector of {r.d_k} numbers (length {r.z_norm:.3f}); "
        f"the model's own z differs from this sum by at most {r.z_error:.1e}."
    )
    parked = [j for j in order if parks([r.key_labels[j]]) and r.weights[j] >= PARK_NOTE]
    if not parked:
        return out
    before = parking_explained(r)
    why = PARKING_WHY if before == lesson.step_index("z") else f"(Why: step {before}.)"
    return out + f" {r.weights[parked[0]]:.3f} goes to <eos>. {why}"


def _row(c: Context) -> lesson.Row:
    return lesson.encoder_row(c.a, c.f)


def _scores(c: Context) -> View:
    r = _row(c)
    fig = bars(
        list(r.key_labels),
        r.scores,
        f"q({label_word(r.query_label)}) · k, head {r.head}",
        "score",
        BLUE,
        highlight=r.top_score,
        digits=2,
    )
    return View(fig, notice_scores(r), _row_table(r), textbook_line("scores"), _head_off(c))


def _scale(c: Context) -> View:
    r = _row(c)
    fig = go.Figure(
        [
            go.Bar(name="q · k", x=list(r.key_labels), y=list(r.scores), marker_color=GREY),
            go.Bar(name=f"÷ √{r.d_k}", x=list(r.key_labels), y=list(r.scaled), marker_color=BLUE),
        ]
    )
    layout(
        fig,
        title=f"q({label_word(r.query_label)}) · k before and after ÷ √d_k",
        yaxis_title="score",
        legend=True,
        barmode="group",
        xaxis={"type": "category"},
    )
    warn = None if r.scale_on else "Dividing by √d_k is switched off in the sidebar: both bars are equal."
    return View(fig, notice_scale(r), _row_table(r), textbook_line("scale"), warn or _head_off(c))


def _softmax(c: Context) -> View:
    r = _row(c)
    fig = bars(
        list(r.key_labels),
        r.weights,
        f"attention weights of “{label_word(r.query_label)}”, head {r.head}",
        "weight",
        BLUE,
        highlight=r.top,
    )
    fig.update_yaxes(range=[0, 1.1])
    return View(fig, notice_softmax(r), _row_table(r), textbook_line("softmax"), _head_off(c))


def _z(c: Context) -> View:
    r = _row(c)
    a = c.a
    v = as_array(a.trace[f"{r.module}.v"][0, r.head])  # [Tk, d_k]
    w = np.array(r.weights)[:, None]
    z = as_array(a.trace[f"{r.module}.z"][0, r.head, r.query])[None]
    rows = np.vstack([w * v, z])
    labels = [f"{r.weights[j]:.3f} · v({label_word(lab)})" for j, lab in enumerate(r.key_labels)] + ["z = sum"]
    labels = [f"{i}: {lab}" for i, lab in enumerate(labels)]  # unique axis labels
    fig = vectors(rows, labels, "dimension", "", height=max(240, min(560, 60 + 30 * len(labels))))
    off = (r.module, r.head) in a.interventions.heads_off
    return View(fig, notice_z(r, off), table(rows, indices(v.shape[1]), labels), textbook_line("z"), _head_off(c))


def _row_table(r: lesson.Row) -> pd.DataFrame:
    return pd.DataFrame({"key": list(r.key_labels), "q·k": r.scores, "÷√d_k": r.scaled, "weight": r.weights}).round(4)


# --- 10. all heads, 11. concat and W^O -----------------------------------------------------------------


def sub(n: int) -> str:
    """7 -> "₇": a subscript, as the book writes Z₀ … Z₇."""
    return str(n).translate(str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉"))


def notice_heads(
    hs: list[lesson.HeadChoice], label: str, explained: int | None = None, among: Sequence[str] = ()
) -> str:
    """Every head's largest weight for the word ("looks hardest" = that argmax). Rule: "park on <eos>" only when a
    head's largest weight is on <eos>; why they park is said here unless step `explained` said it already."""
    parts = "; ".join(
        f"head {h.head} → {q(h.top_label, among)} {h.weight:.3f}" + (" (off)" if h.off else "") for h in hs
    )
    distinct = len({h.top for h in hs})
    parked = [h.head for h in hs if parks([h.top_label])]
    out = (
        f"Where {q(label, among)} looks hardest in each head: {parts}. {count(distinct, 'different word')} across "
        f"{len(hs)} heads."
    )
    if parked:
        who = f"Head {parked[0]} parks" if len(parked) == 1 else f"Heads {', '.join(map(str, parked))} park"
        out += f" {who} on <eos>. " + (f"(Why: step {explained}.)" if explained else PARKING_WHY)
    return out


def _heads(c: Context) -> View:
    a, f = c.a, c.f
    hs = lesson.heads(a, f)
    w = _enc(c, "self_attn.weights")[0, :, f.word]  # [H, Ts]
    ylabels = [f"head {h}" + (" (off)" if x.off else "") for h, x in enumerate(hs)]
    fig = heatmap(w, a.src_labels, ylabels, "weights", x_title="key word", y_title="head")
    return View(
        fig,
        notice_heads(hs, a.src_labels[f.word], parking_explained(_row(c)), a.src_labels),
        table(w, a.src_labels, ylabels),
        textbook=f"The Illustrated Transformer draws {paper.BASE.n_heads} heads (the paper's base model), "
        f"Z₀ … Z₇, one per head; this model has {len(hs)}: Z₀ … Z{sub(len(hs) - 1)}, each made "
        "from one row of weights above.",
    )


def notice_concat(cc: lesson.Concat, label: str, n_heads: int) -> str:
    lengths = ", ".join(f"{n:.3f}" for n in cc.z_norms)
    d_k = cc.concat_shape[1] // max(1, n_heads)
    return (
        f"The {n_heads} z's of {q(label)} (lengths {lengths}) sit side by side: {n_heads} × {d_k} = "
        f"{cc.concat_shape[1]} numbers; concat [{cc.concat_shape[0]}, {cc.concat_shape[1]}] · W^O "
        f"[{cc.w_o_shape[0]}, {cc.w_o_shape[1]}] mixes them into the output (length {cc.out_norm:.3f})."
    )


def _concat(c: Context) -> View:
    a, f = c.a, c.f
    x = _enc(c, "self_attn.concat")[0]
    cc = lesson.concat(a, f)
    n_heads = _enc(c, "self_attn.z").shape[1]
    fig = vectors(
        x, a.src_labels, "dimension (head 0 | head 1 | …)", "token", height=max(220, min(520, 60 + 30 * x.shape[0]))
    )
    d_k = x.shape[1] // n_heads
    for h in range(1, n_heads):
        fig.add_vline(x=h * d_k - 0.5, line_color="black", line_width=5)
    B = paper.BASE
    return View(
        fig,
        notice_concat(cc, a.src_labels[f.word], n_heads),
        table(x, indices(x.shape[1]), a.src_labels),
        textbook=f"The Illustrated Transformer's picture: Z₀ … Z₇ ({B.n_heads} heads × {B.d_k} = "
        f"{B.d_model} numbers per word) concatenated, then × W^O [{B.d_model}, {B.d_model}] gives Z. "
        f"Here the same with Z₀ … Z{sub(n_heads - 1)}: {n_heads} × {d_k} = {x.shape[1]}, "
        f"W^O [{x.shape[1]}, {x.shape[1]}].",
    )


# --- 12. add & norm, 13. FFN, 14. stack ---------------------------------------------------------------


def notice_add_norm(n: lesson.AddNormStep) -> str:
    return (
        f"x + attention(x) of {q(n.word)} has mean {n.resid_mean:.3f} and standard deviation {n.resid_std:.3f}; "
        f"LayerNorm brings it to mean {n.normed_mean:.3f} and standard deviation {n.normed_std:.3f}, then "
        f"the learned γ and β rescale it."
    )


def _add_norm(c: Context) -> View:
    a, f = c.a, c.f
    r, z = (as_array(_enc(c, f"add_norm1.{n}")[0, f.word]) for n in ("resid", "normed"))
    d = indices(len(r))
    fig = go.Figure(
        [
            go.Scatter(x=d, y=r, name="x + attention(x)", mode="lines", line_color=GREY),
            go.Scatter(x=d, y=z, name="after LayerNorm (before γ, β)", mode="lines", line_color=BLUE),
        ]
    )
    layout(
        fig,
        title=f"the {len(r)} numbers of “{label_word(a.src_labels[f.word])}”",
        xaxis_title="dimension",
        legend=True,
        xaxis={"type": "category", "showticklabels": False},
    )
    tab = pd.DataFrame({"dimension": d, "x + attention(x)": r, "normalised": z}).round(4)
    warn = (
        None
        if not lesson.pre_ln(a)
        else (
            "This model is pre-LN (LayerNorm before each sublayer, not after it as in the paper): the grey line is "
            "the layer's input + attention, the blue one the LayerNorm of the layer's input."
        )
    )
    return View(fig, notice_add_norm(lesson.add_norm(a, f)), tab, warning=warn)


def notice_ffn(x: lesson.FFNStep) -> str:
    return (
        f"Of the {x.d_ff} hidden units of {q(x.word)}, {x.zeros} ({x.zeros / x.d_ff:.0%}) are exactly 0 after "
        f"ReLU; the most active is unit {x.largest} ({x.largest_value:.3f}). W_2 maps them back to "
        f"d_model numbers."
    )


def _ffn(c: Context) -> View:
    a, f = c.a, c.f
    h = as_array(_enc(c, "ffn.hidden")[0, f.word])
    x = lesson.ffn(a, f)
    fig = bars(
        indices(len(h)),
        h,
        f"ReLU(x W_1 + b_1) for “{label_word(a.src_labels[f.word])}”",
        "activation",
        GREEN,
        highlight=x.largest,
    )
    fig.update_traces(text=None)
    fig.update_xaxes(showticklabels=False, title_text=f"hidden unit (0 … {len(h) - 1})")
    return View(
        fig,
        notice_ffn(x),
        pd.DataFrame({"unit": indices(len(h)), "activation": h}).round(4),
        textbook=f"The paper's base model: d_ff = {paper.BASE.d_ff} = 4 × d_model; this model: d_ff = {x.d_ff}.",
    )


def notice_stack(s: lesson.Stack) -> str:
    sims = ", ".join(f"{v:.3f}" for v in s.similarity)
    return (
        f"{q(s.word)} after each of the {s.n_layers} encoder layers, compared with its input (cosine "
        f"similarity): {sims}. The encoder's output, [{s.out_shape[0]}, {s.out_shape[1]}], is what every "
        f"decoder layer will read."
    )


def _stack(c: Context) -> View:
    a, f = c.a, c.f
    sims = as_array(lesson.stack_similarity(a))  # [Ts, N + 1]
    xs = ["input"] + [f"after layer {i}" for i in range(sims.shape[1] - 1)]
    fig = go.Figure(
        [
            go.Scatter(x=xs, y=sims[i], name=lab, mode="lines+markers", line={"width": 4 if i == f.word else 1.5})
            for i, lab in enumerate(a.src_labels)
        ]
    )
    layout(
        fig,
        title="each word compared with its own input (cosine similarity)",
        yaxis_title="similarity",
        legend=len(a.src_labels) <= 16,
    )
    return View(
        fig,
        notice_stack(lesson.stack(a, f)),
        pd.DataFrame(sims, index=a.src_labels, columns=xs).round(4),
        textbook=f"The paper stacks N = {paper.BASE.n_layers} layers in the encoder and in the decoder; this "
        f"model {lesson.n_layers(a, 'enc')} and {lesson.n_layers(a, 'dec')}.",
    )


VIEWS: dict[str, Callable[[Context], View]] = {
    "qkv": _qkv,
    "scores": _scores,
    "scale": _scale,
    "softmax": _softmax,
    "z": _z,
    "heads": _heads,
    "concat": _concat,
    "add_norm": _add_norm,
    "ffn": _ffn,
    "stack": _stack,
}
