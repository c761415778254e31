"""Builders for the attention pages: one word's path through a head, heads side by side, the demos.

Everything takes tensors from a `Trace` (or the textbook example, or `model.experiments`) and
returns pandas DataFrames or plotly figures. The only arithmetic here is what the page displays
as a step of the computation (weight × value rows and their sum); the tests compare each step with
the model's own recorded tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from model.experiments import SaturationRow, VarianceRow
from model.pipeline import Analysis
from model.textbook import WORDS, ThinkingMachines
from model.trace import Trace
from viz.heatmap import as_array, heatmap

# The attention modules a page can pick: label -> (stack, kind).
MODULES = {
    "encoder self-attention": ("enc", "self_attn"),
    "decoder self-attention (masked)": ("dec", "self_attn"),
    "decoder cross-attention (encoder-decoder)": ("dec", "cross_attn"),
}
STEP_COLUMNS = ("word", "q·k", "÷√d_k", "softmax weight")
OFF_OPACITY = 0.3  # a switched-off head is drawn faded


def module_name(stack: str, kind: str, layer: int) -> str:
    """("enc", "self_attn", 0) -> "enc.0.self_attn" (the trace's and the interventions' name)."""
    return f"{stack}.{layer}.{kind}"


def axis_labels(a: Analysis, module: str) -> tuple[list[str], list[str]]:
    """(key labels, query labels) of an attention module: encoder tokens or decoder inputs."""
    stack, _, kind = module.split(".")
    if stack == "enc":
        return a.src_labels, a.src_labels
    return (a.src_labels if kind == "cross_attn" else a.tgt_labels), a.tgt_labels


# --- One word through one head ------------------------------------------------------------------

@dataclass(frozen=True)
class WordSteps:
    """Every step of attention for one query word in one head, as real tensors."""

    q: torch.Tensor  # [d_k] the word's query
    k: torch.Tensor  # [Tk, d_k] every word's key
    v: torch.Tensor  # [Tk, d_k] every word's value
    scores: torch.Tensor  # [Tk] q·k
    scaled: torch.Tensor  # [Tk] q·k / sqrt(d_k) (= scores when scaling is off)
    masked: torch.Tensor  # [Tk] scaled + mask (-inf where the word may not look)
    weights: torch.Tensor  # [Tk] softmax, sums to 1
    weighted: torch.Tensor  # [Tk, d_k] weight_j × v_j
    z_sum: torch.Tensor  # [d_k] sum of the weighted values
    z_model: torch.Tensor | None  # [d_k] the model's z for this word and head (0 when the head is off)
    d_k: int
    scale: bool  # was the score divided by sqrt(d_k)?

    @property
    def sqrt_dk(self) -> float:
        return math.sqrt(self.d_k)

    @property
    def has_mask(self) -> bool:
        return bool(torch.isinf(self.masked).any())


def word_steps(trace: Trace, module: str, head: int, word: int) -> WordSteps:
    """Read one word's query, all keys and values, and each step of the softmax from the trace."""
    t = trace.tensors
    q = t[f"{module}.q"][0, head, word]  # [d_k]
    k = t[f"{module}.k"][0, head]  # [Tk, d_k]
    v = t[f"{module}.v"][0, head]  # [Tk, d_k]
    weights = t[f"{module}.weights"][0, head, word]  # [Tk]
    weighted = weights[:, None] * v  # [Tk, d_k]
    return WordSteps(q=q, k=k, v=v, scores=t[f"{module}.scores"][0, head, word],
                     scaled=t[f"{module}.scaled"][0, head, word], masked=t[f"{module}.masked"][0, head, word],
                     weights=weights, weighted=weighted, z_sum=weighted.sum(0),
                     z_model=t[f"{module}.z"][0, head, word], d_k=q.numel(),
                     scale=trace.interventions.scale)


def textbook_steps(tm: ThinkingMachines, word: int = 0) -> WordSteps:
    """The same steps for the Illustrated Transformer's example (query of "Thinking" by default)."""
    weights = tm.weights[word]  # [2]
    weighted = weights[:, None] * tm.v  # [2, 64]
    return WordSteps(q=tm.q[word], k=tm.k, v=tm.v, scores=tm.scores[word], scaled=tm.scaled[word],
                     masked=tm.scaled[word], weights=weights, weighted=weighted, z_sum=weighted.sum(0),
                     z_model=tm.z[word], d_k=tm.q.shape[-1], scale=True)


def textbook_labels() -> list[str]:
    return [f"{i} {w}" for i, w in enumerate(WORDS)]


def step_table(s: WordSteps, key_labels: list[str], digits: int = 4) -> pd.DataFrame:
    """One row per key word: q·k, then ÷√d_k, then the softmax weight (plus the mask when there is one)."""
    df = pd.DataFrame({
        STEP_COLUMNS[0]: list(key_labels),
        STEP_COLUMNS[1]: as_array(s.scores).round(digits),
        STEP_COLUMNS[2]: as_array(s.scaled).round(digits),
    })
    if s.has_mask:
        df["+ mask"] = as_array(s.masked).round(digits)
    df[STEP_COLUMNS[3]] = as_array(s.weights).round(digits)
    return df


def textbook_table(s: WordSteps, key_labels: list[str]) -> pd.DataFrame:
    """The seeds' layout: one column per word, rows Score / Divide by √d_k / Softmax (rounded as printed)."""
    return pd.DataFrame(
        {label: [f"q1·k{j + 1} = {float(s.scores[j]):g}", f"{float(s.scaled[j]):g}", f"{float(s.weights[j]):.2f}"]
         for j, label in enumerate(key_labels)},
        index=["Score", f"Divide by {s.sqrt_dk:g} (√d_k)", "Softmax"])


def z_table(s: WordSteps, digits: int = 4) -> pd.DataFrame:
    """The weighted sum next to the model's own z (first rows: recomputed sum, then the trace)."""
    rows = {"Σ weight × v (sum of the rows above)": as_array(s.z_sum).round(digits)}
    if s.z_model is not None:
        rows["z recorded by the model"] = as_array(s.z_model).round(digits)
    return pd.DataFrame(rows, index=dims(s.d_k)).T


def dims(n: int) -> list[str]:
    """Axis labels for vector dimensions: "d0", "d1", ..."""
    return [f"d{i}" for i in range(n)]


# --- Heads side by side -------------------------------------------------------------------------

def head_figure(weights, x_labels: list[str], y_labels: list[str], head: int, off: bool,
                height: int | None = None) -> go.Figure:
    """A small attention-weights heatmap for one head; faded and titled "(off)" when switched off."""
    title = f"head {head} (off)" if off else f"head {head}"
    fig = heatmap(weights, x_labels, y_labels, "weights", title=title, x_title="key", y_title="query",
                  height=height)
    fig.update_traces(showscale=False, texttemplate=None)
    if off:
        fig.update_traces(opacity=OFF_OPACITY)
        fig.add_annotation(text="switched off: z = 0", xref="paper", yref="paper", x=0.5, y=0.5,
                           showarrow=False, font={"size": 16, "color": "#b71c1c"}, bgcolor="rgba(255,255,255,0.8)")
    fig.update_layout(xaxis={"showticklabels": len(x_labels) <= 14}, yaxis={"showticklabels": len(y_labels) <= 14})
    return fig


def block_figure(values, y_labels: list[str], n_heads: int, kind: str = "activations", title: str | None = None,
                 off: list[int] | tuple[int, ...] = ()) -> go.Figure:
    """A [T, D] matrix whose columns are n_heads blocks of d_k (concat, or W_o's output), borders marked."""
    z = as_array(values)
    width = z.shape[1]
    d_k = width // n_heads
    fig = heatmap(z, dims(width), y_labels, kind, title=title, x_title="dimension", y_title="word")
    for h in range(1, n_heads):
        fig.add_vline(x=h * d_k - 0.5, line_width=3, line_color="black")
    for h in range(n_heads if n_heads > 1 else 0):
        fig.add_annotation(x=h * d_k + (d_k - 1) / 2, y=1.0, xref="x", yref="paper", yanchor="bottom",
                           text=f"head {h}" + (" (off)" if h in off else ""), showarrow=False)
    fig.update_layout(xaxis={"showticklabels": False}, margin={"t": 60})
    return fig


def word_heads(weights, word: int) -> np.ndarray:
    """weights [H, Tq, Tk] -> [H, Tk]: where one query word looks in every head."""
    return as_array(weights)[:, word, :]


def heads_bars_figure(rows: np.ndarray, x_labels: list[str], counts: tuple[int, ...] = (1, 2, 0),
                      off: list[int] | tuple[int, ...] = ()) -> go.Figure:
    """Side-by-side bar charts of one word's weights: head 0 alone, heads 0-1, all heads (0 = all)."""
    n_heads = rows.shape[0]
    counts = tuple(c if c else n_heads for c in counts)
    titles = [f"{c} head{'s' if c > 1 else ''}" + (" (all)" if c == n_heads and c > 2 else "") for c in counts]
    fig = make_subplots(rows=1, cols=len(counts), subplot_titles=titles, shared_yaxes=True)
    palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]
    for col, c in enumerate(counts, start=1):
        for h in range(c):
            fig.add_trace(go.Bar(
                x=list(x_labels), y=rows[h].tolist(), name=f"head {h}" + (" (off)" if h in off else ""),
                marker_color=palette[h % len(palette)], opacity=OFF_OPACITY if h in off else 1.0,
                legendgroup=f"h{h}", showlegend=col == len(counts),
                hovertemplate=f"head {h}<br>%{{x}}: %{{y:.4f}}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(type="category", tickangle=-45, row=1, col=col)
    fig.update_yaxes(range=[0, 1], title_text="attention weight", row=1, col=1)
    fig.update_layout(barmode="group", height=360, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def head_labels(n_layers: int, n_heads: int) -> list[str]:
    return [f"L{layer} h{h}" for layer in range(n_layers) for h in range(n_heads)]


def word_across_layers(trace: Trace, stack: str, kind: str, n_layers: int, word: int) -> np.ndarray:
    """[L·H, Tk]: where one query word looks, every head of every layer (rows "L0 h0", "L0 h1", ...)."""
    return np.concatenate([as_array(trace[f"{module_name(stack, kind, layer)}.weights"][0, :, word, :])
                           for layer in range(n_layers)])


def top_words(rows: np.ndarray, row_labels: list[str], key_labels: list[str], skip: int | None = None,
              column: str = "strongest other word") -> pd.DataFrame:
    """For each row (head), the key word with the largest weight (other than position `skip`)."""
    z = rows.copy()
    if skip is not None:
        z[:, skip] = -1.0
    best = z.argmax(1)
    return pd.DataFrame({column: [key_labels[j] for j in best],
                         "weight": [round(float(rows[i, j]), 4) for i, j in enumerate(best)]},
                        index=list(row_labels))


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


def find_word(tokens: tuple[str, ...] | list[str], word: str) -> int | None:
    """Position of the first occurrence of `word` in the tokens, or None."""
    return list(tokens).index(word) if word in tokens else None


# --- Before / after switching heads off ---------------------------------------------------------

def token_probs(trace: Trace, token_ids: list[int] | tuple[int, ...], labels: list[str]) -> pd.DataFrame:
    """p(token) at every decoder position, read from the trace's "probs" [1, Tt, V]."""
    probs = trace["probs"][0]  # [Tt, V]
    n = min(len(token_ids), probs.shape[0])
    return pd.DataFrame({"token": labels[:n],
                         "probability": [round(float(probs[t, token_ids[t]]), 4) for t in range(n)]})


def compare_probs(before: Trace, after: Trace, token_ids: list[int] | tuple[int, ...],
                  labels: list[str]) -> pd.DataFrame:
    """The same output tokens scored by the unmodified and the modified model (both teacher-forced)."""
    b = token_probs(before, token_ids, labels)
    a = token_probs(after, token_ids, labels)
    return pd.DataFrame({"token": b["token"], "p before": b["probability"], "p after": a["probability"],
                         "change": (a["probability"] - b["probability"]).round(4)})


def output_change(before: Trace, after: Trace, module: str, labels: list[str]) -> pd.DataFrame:
    """Per word: the size of the attention module's output before and after, and of their difference."""
    b, a = before[f"{module}.out"][0], after[f"{module}.out"][0]  # [T, D]
    return pd.DataFrame({"word": labels, "‖out‖ before": as_array(b.norm(dim=-1)).round(4),
                         "‖out‖ after": as_array(a.norm(dim=-1)).round(4),
                         "‖after − before‖": as_array((a - b).norm(dim=-1)).round(4)})


def head_z_norms(trace: Trace, module: str, labels: list[str]) -> pd.DataFrame:
    """‖z‖ of every head at every word ([T, H]): a head that is off has z = 0 everywhere."""
    z = trace[f"{module}.z"][0]  # [H, T, d_k]
    norms = as_array(z.norm(dim=-1)).T.round(4)  # [T, H]
    return pd.DataFrame(norms, index=list(labels), columns=[f"head {h}" for h in range(z.shape[0])])


# --- Why scale: the demos -----------------------------------------------------------------------

def histogram_figure(samples, d_k: int, bins: int = 60) -> go.Figure:
    """Histogram of q·k and of q·k/√d_k (pre-binned bars: the figure stays small)."""
    s = as_array(samples)
    scaled = s / math.sqrt(d_k)
    lim = float(max(np.abs(s).max(), np.abs(scaled).max(), 1e-9))
    edges = np.linspace(-lim, lim, bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure()
    for values, name, colour in ((s, "q·k", "#d62728"), (scaled, "q·k / √d_k", "#1f77b4")):
        counts, _ = np.histogram(values, bins=edges)
        fig.add_trace(go.Bar(x=centres.tolist(), y=counts.tolist(), name=name, marker_color=colour, opacity=0.6,
                             hovertemplate=f"{name}<br>around %{{x:.2f}}: %{{y}} pairs<extra></extra>"))
    fig.update_layout(barmode="overlay", bargap=0, height=320, xaxis_title="value", yaxis_title="pairs",
                      title=f"{len(s)} random pairs, d_k = {d_k}", margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def variance_table(rows: list[VarianceRow]) -> pd.DataFrame:
    return pd.DataFrame({
        "d_k": [r.d_k for r in rows],
        "Var(q·k) measured": [round(r.variance, 2) for r in rows],
        "theory (= d_k)": [r.d_k for r in rows],
        "Var(q·k/√d_k) measured": [round(r.variance_scaled, 3) for r in rows],
        "typical range of q·k (1%–99%)": [f"{r.low:.1f} … {r.high:.1f}" for r in rows],
    })


def variance_figure(rows: list[VarianceRow]) -> go.Figure:
    d = [r.d_k for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=d, y=d, mode="lines", name="theory: Var = d_k", line={"dash": "dash"}))
    fig.add_trace(go.Scatter(x=d, y=[r.variance for r in rows], mode="markers+lines", name="measured Var(q·k)"))
    fig.add_trace(go.Scatter(x=d, y=[r.variance_scaled for r in rows], mode="markers+lines",
                             name="measured Var(q·k / √d_k)"))
    fig.update_layout(height=320, xaxis={"type": "log", "title": "d_k"}, yaxis={"type": "log", "title": "variance"},
                      margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return fig


def saturation_figure(weights_raw, weights_scaled, labels: list[str]) -> go.Figure:
    """Softmax of the same scores without and with the division by √d_k."""
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True,
                        subplot_titles=("softmax(q·k): no scaling", "softmax(q·k / √d_k)"))
    for col, (w, colour) in enumerate(((weights_raw, "#d62728"), (weights_scaled, "#1f77b4")), start=1):
        fig.add_trace(go.Bar(x=list(labels), y=as_array(w).tolist(), marker_color=colour, showlegend=False,
                             hovertemplate="%{x}: %{y:.4f}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(type="category", row=1, col=col)
    fig.update_yaxes(range=[0, 1], title_text="weight", row=1, col=1)
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def saturation_table(rows: list[SaturationRow]) -> pd.DataFrame:
    return pd.DataFrame({
        "d_k": [r.d_k for r in rows],
        "max weight, no scaling": [round(r.max_raw, 3) for r in rows],
        "max weight, ÷√d_k": [round(r.max_scaled, 3) for r in rows],
        "‖Jacobian‖, no scaling": [round(r.jacobian_raw, 4) for r in rows],
        "‖Jacobian‖, ÷√d_k": [round(r.jacobian_scaled, 4) for r in rows],
    })



def greedy_probs(a: Analysis) -> pd.DataFrame:
    """The translation's tokens with the probability the model gave each when it chose it (from "probs")."""
    return token_probs(a.trace, [step.chosen for step in a.greedy.steps], a.next_labels)


def shapes_table(d_model: int, n_heads: int, n_tokens: int) -> pd.DataFrame:
    """The paper's base model next to ours: shapes through multi-head attention (rows = words, T = m)."""
    d_k = d_model // n_heads
    return pd.DataFrame({
        "paper (base)": ["m × 512", "8", "m × 64", "m × 512 (8 × 64)", "512 × 512", "m × 512"],
        f"this model (T = {n_tokens})": [f"{n_tokens} × {d_model}", str(n_heads), f"{n_tokens} × {d_k}",
                                         f"{n_tokens} × {d_model} ({n_heads} × {d_k})", f"{d_model} × {d_model}",
                                         f"{n_tokens} × {d_model}"],
    }, index=["input X", "heads h", "each head's Z_i", "Concat(Z_1 … Z_h)", "W^O", "output"])
