"""Builders for "Before the Transformer": the recurrent model's tensors and the measured comparison as
plotly figures, tables and one-line notices. Pure: traces and dicts in, figures and strings out.

Every notice is computed from the tensors (or the measured numbers) its figure draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch

from explain.recompute import CrossAttention, agreement
from model.pipeline import label_word
from model.trace import Trace
from viz.heatmap import as_array, heatmap

RNN_COLOUR, TRANSFORMER_COLOUR = "#d95f02", "#1b9e77"
CONFIG = {"displayModeBar": False}


# --- Numbering: positions count from 1 on this page ----------------------------------------------------


def numbered(labels: list[str]) -> list[str]:
    """The page's position labels counted from 1: ["0 the", "1 cat", "2 <eos>"] -> ["1 the", "2 cat", "3 <eos>"].

    One numbering for the whole page, the one its formulas and the lecture use: the encoder reads x_1 … x_m into
    h_1 … h_m from the zero state h_0, and decoder step t reads s_{t-1} (s_0 from the encoder) into c_t and s_t and
    outputs y_t. The sliders ("Encoder step i" 1 … m, "1: l'"), the notices (step i, h_i, c_t) and the rows and
    columns of every figure and table on the page (the row labelled "11 tired" is h_11, the one read at step 11)
    all count this way. Counting from 0 instead, as the Transformer pages' axes do, would make the first state
    h_0, which on this page is the state before any word; so the axes follow the formulas, not the other way
    round. Layer and head numbers are not positions: they stay the trace's names (dec.0.cross_attn, head 0).
    """
    return [f"{i} {label_word(label)}" for i, label in enumerate(labels, 1)]


# --- The encoder, one step at a time ---------------------------------------------------------------


def encoder_states(trace: Trace, step: int) -> np.ndarray:
    """The first sentence's states h_1 … h_{step+1} (rows 0 … step, `step` counted from 0), later rows NaN (not
    computed yet): [Ts, H]."""
    h = as_array(trace["rnn.enc.h"][0])  # [Ts, H]
    h[step + 1 :] = np.nan
    return h


def encoder_figure(trace: Trace, step: int, labels: list[str]):
    """One row per state h_i, labelled with `labels` (the page's: `numbered`, so row "i word" is h_i)."""
    h = encoder_states(trace, step)
    return heatmap(
        h,
        [str(d) for d in range(h.shape[1])],
        labels,
        "activations",
        x_title="hidden unit",
        y_title="encoder state h_i",
    )


def encoder_notice(trace: Trace, step: int, labels: list[str], cell: str) -> str:
    """What step `step` (0-based; the sentence says step `step` + 1) did: how much of the previous state h_step it
    kept, how far the state moved from it to h_{step+1}."""
    h = trace["rnn.enc.h"][0]  # [Ts, H]
    prev = h[step - 1] if step > 0 else torch.zeros_like(h[0])
    moved = float((h[step] - prev).norm())
    w = label_word(labels[step])
    if cell == "gru":
        z = float(trace["rnn.enc.z"][0, step].mean())
        keep = f"the update gate keeps on average {z:.0%} of h_{step} and takes {1 - z:.0%} from the new candidate"
    else:
        f = float(trace["rnn.enc.f"][0, step].mean())
        i = float(trace["rnn.enc.i"][0, step].mean())
        keep = f"the forget gate keeps on average {f:.0%} of the cell state and the input gate lets in {i:.0%}"
    after = (
        f"Step {step + 2} cannot start before this one ends."
        if step + 1 < h.shape[0]
        else "Only now can the decoder start: it needs h_1 … h_m."
    )
    return (
        f"Step {step + 1} of {h.shape[0]} reads “{w}”: {keep}; the state moves by ‖h_{step + 1} − h_{step}‖ = "
        f"{moved:.2f}. {after}"
    )


# --- One decoder step: scores, α, c ------------------------------------------------------------------


@dataclass(frozen=True)
class DecoderStep:
    scores: np.ndarray  # [Ts]
    alpha: np.ndarray  # [Ts]
    context: np.ndarray  # [Dv]
    values: np.ndarray  # [Ts, Dv]
    predicted: str  # the word this step outputs


def decoder_step(trace: Trace, t: int, next_labels: list[str]) -> DecoderStep:
    return DecoderStep(
        as_array(trace["rnn.dec.scores"][0, t]),
        as_array(trace["rnn.dec.alpha"][0, t]),
        as_array(trace["rnn.dec.context"][0, t]),
        as_array(trace["rnn.attn.v"][0]),
        label_word(next_labels[t]),
    )


def bars_figure(scores: np.ndarray, alpha: np.ndarray, labels: list[str], score_name: str = "score e_ti"):
    """α as bars (left axis, 0-1) and the scores it came from as points (right axis), one per source word."""
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=labels,
            y=[float(s) if math.isfinite(s) else None for s in scores],
            name=score_name,
            mode="markers+lines",
            marker_color="#737373",
            line={"dash": "dot"},
            yaxis="y2",
            hovertemplate="%{x}<br>score %{y:.4f}<extra></extra>",
        )
    )
    fig.add_trace(
        go.Bar(
            x=labels,
            y=alpha.tolist(),
            name="α (softmax)",
            marker_color="#2171b5",
            hovertemplate="%{x}<br>α %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        height=300,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        xaxis={"type": "category", "title": "source word i"},
        yaxis={"title": "α", "range": [0, 1]},
        yaxis2={"title": "score", "overlaying": "y", "side": "right", "showgrid": False},
        legend={"orientation": "h", "y": 1.15},
    )
    return fig


def step_notice(s: DecoderStep, labels: list[str], t: int) -> str:
    """Rule: "the context is mostly that one word" only when c_t lies within 30% of ‖v‖ of the top word's value."""
    order = np.argsort(-s.alpha)
    top, second = int(order[0]), (int(order[1]) if len(order) > 1 else None)
    text = (
        f"Step {t + 1}, which outputs “{s.predicted}”, gives the biggest weight to “{label_word(labels[top])}” "
        f"(α = {s.alpha[top]:.2f})"
    )
    if second is not None:
        text += f"; next is “{label_word(labels[second])}” ({s.alpha[second]:.2f})"
    near = float(np.linalg.norm(s.context - s.values[top]) / max(np.linalg.norm(s.values[top]), 1e-12))
    return text + (
        f". c_{t + 1}, the α-weighted sum of the values, lies {near:.0%} of ‖value‖ away from that word's "
        "value alone: " + ("the context is mostly that one word." if near < 0.3 else "the context mixes several words.")
    )


def context_figure(s: DecoderStep, t: int):
    c = s.context[None, :]
    return _no_cell_text(
        heatmap(c, [str(d) for d in range(c.shape[1])], [f"c_{t + 1}"], "activations", x_title="dimension", height=140)
    )


def _no_cell_text(fig: go.Figure) -> go.Figure:
    """A long thin vector: numbers written in its cells would overlap (they stay on hover)."""
    fig.data[0].texttemplate = None
    return fig


def step_table(s: DecoderStep, labels: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"source word": labels, "score e": np.round(s.scores, 4), "α": np.round(s.alpha, 4)})


# --- The alignment matrix: Bahdanau's picture ----------------------------------------------------------


def alignment_figure(alpha, src_labels: list[str], out_labels: list[str], title: str | None = None):
    return heatmap(
        alpha,
        src_labels,
        out_labels,
        "weights",
        title=title,
        x_title="source word (English)",
        y_title="output word (French)",
    )


def alignment_notice(alpha, src_labels: list[str], out_labels: list[str]) -> str:
    a = as_array(alpha)  # [Tt, Ts]
    top = a.argmax(1)
    peaked = int((a.max(1) > 0.5).sum())
    t = int(a.max(1).argmax())
    return (
        f"{peaked} of {a.shape[0]} output words put more than half of their weight on one source word; the "
        f"sharpest alignment is “{label_word(src_labels[top[t]])}” → “{label_word(out_labels[t])}” "
        f"(α = {a[t, top[t]]:.2f})."
    )


def agreement_notice(rnn_alpha, tf_alpha, rnn_out: list[str], tf_out: list[str], src_labels: list[str]) -> str:
    """Do the RNN's attention and one Transformer head point at the same source words?"""
    if [label_word(w) for w in rnn_out] != [label_word(w) for w in tf_out]:
        return (
            "The two models translate this sentence differently, so their rows are not the same words: compare "
            "the patterns, not row by row."
        )
    n = as_array(rnn_alpha).shape[0]
    return (
        f"Same translation from both models: for {agreement(rnn_alpha, tf_alpha)} of {n} output words the "
        f"RNN's strongest source word is also this head's."
    )


# --- Attention without recurrence: the Transformer's encoder-decoder attention --------------------------


def context_pair_figure(x: CrossAttention, j: int):
    """c_:j recomputed as V·α_:j above the model's own z row j."""
    rows = np.stack([x.c[j], x.recorded_z[j]])  # [2, d_k]
    return _no_cell_text(
        heatmap(
            rows,
            [str(d) for d in range(rows.shape[1])],
            [f"V·α_:{j + 1}", "model's z"],
            "activations",
            x_title="dimension",
            height=170,
        )
    )


def c_matrix_figure(x: CrossAttention, out_labels: list[str]):
    """C = [c_:1 … c_:t] recomputed, one row per output word (the model's z of this head, transposed)."""
    return _no_cell_text(
        heatmap(
            x.c,
            [str(d) for d in range(x.c.shape[1])],
            out_labels,
            "activations",
            x_title="dimension",
            y_title="output word j",
        )
    )


def c_matrix_notice(x: CrossAttention, off: bool = False) -> str:
    """C's shape as the formula writes it (one column c_:j per output word: d × t) and as the figure draws it (one row
    per output word: t × d)."""
    t, d = x.c.shape
    shape = f"C = [c_:1 … c_:{t}] is {d} × {t}, drawn transposed ({t} rows of {d} numbers)"
    if off:
        return (
            f"{shape}: one context vector per output word, all from one matrix product "
            f"softmax(QKᵀ/√d_k)·V (this head is switched off, so the model passes on zeros instead)."
        )
    return (
        f"{shape}: one context vector per output word, all from one matrix product, equal to the "
        f"model's {x.module}.z of this head to {x.c_error:.1e}. No row waited for another."
    )


def cross_step_notice(
    x: CrossAttention, j: int, src_labels: list[str], out_labels: list[str], off: bool = False
) -> str:
    top = int(x.alpha[j].argmax())
    err = float(np.abs(x.c[j] - x.recorded_z[j]).max())
    text = (
        f"Output word {j + 1} (“{label_word(out_labels[j])}”) takes {x.alpha[j, top]:.0%} of its context from "
        f"“{label_word(src_labels[top])}”; "
    )
    if off:
        return text + (
            f"this head is switched off in the sidebar, so the model's z row {j + 1} is 0 and V·α_:{j + 1} "
            f"is what it would have passed on."
        )
    return text + f"V·α_:{j + 1} equals the model's z row {j + 1} to {err:.1e}."


def cross_notice(x: CrossAttention, src_labels: list[str], out_labels: list[str], head: int, off: bool = False) -> str:
    c_part = (
        f"C is not compared: head {head} is switched off in the sidebar, so the model's {x.module}.z is 0"
        if off
        else f"C equals {x.module}.z to {x.c_error:.1e}"
    )
    return (
        f"Recomputed from K, V and the queries alone, α equals {x.module}.weights (head {head}) to "
        f"{x.alpha_error:.1e}; {c_part}. " + alignment_notice(x.alpha, src_labels, out_labels)
    )
