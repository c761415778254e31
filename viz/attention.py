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


def score_name(query: int, key: int) -> str:
    """"q2·k1": the dot product of query `query` and key `key` (0-based in, 1-based out, as in the book)."""
    return f"q{query + 1}·k{key + 1}"


def textbook_table(s: WordSteps, key_labels: list[str], query: int = 0) -> pd.DataFrame:
    """The seeds' layout: one column per word, rows Score / Divide by √d_k / Softmax (rounded as printed)."""
    return pd.DataFrame(
        {label: [f"{score_name(query, j)} = {float(s.scores[j]):g}", f"{float(s.scaled[j]):g}",
                 f"{float(s.weights[j]):.2f}"]
         for j, label in enumerate(key_labels)},
        index=["Score", f"Divide by {s.sqrt_dk:g} (√d_k)", "Softmax"])


def textbook_line(s: WordSteps, query: int, book: bool) -> str:
    """The worked numbers in one line, saying whose they are (the Illustrated Transformer's or this app's)."""
    source = ("From the Illustrated Transformer" if book else
              "This app's own construction (the Illustrated Transformer prints only the query of “Thinking”)")
    scores = ", ".join(f"{score_name(query, j)} = {float(s.scores[j]):g}" for j in range(len(s.scores)))
    return (f"{source}: {scores} → ÷ √{s.d_k} = {s.sqrt_dk:g} → "
            f"{', '.join(f'{float(x):g}' for x in s.scaled)} → softmax → "
            f"{', '.join(f'{float(x):.2f}' for x in s.weights)}")


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


# --- Notices: one computed sentence per figure, saying what to look at --------------------------

PARKING = ("<eos>", ".", ",", "!", "?", ";", ":")  # tokens a head with nothing useful to read parks on
PARKING_WHY = ("A head that finds nothing useful to read for this word parks its weight on <eos> (or a punctuation "
               "mark): that token is in every sentence and carries little, so reading it changes the word little.")


def word_of(label: str) -> str:
    """"11 <eos>" -> "<eos>": the token of a position-prefixed axis label."""
    head, _, rest = label.partition(" ")
    return rest if head.isdigit() and rest else label


def is_parking(label: str) -> bool:
    return word_of(label) in PARKING


def row_notice(weights, key_labels: list[str], query_label: str) -> str:
    """One query's weights [Tk]: the biggest weight and where it goes, the runner-up, and why when it is <eos>."""
    w = as_array(weights).reshape(-1)
    order = np.argsort(-w, kind="stable")
    j = int(order[0])
    out = f"“{query_label}” gives its largest weight, {w[j]:.2f}, to “{key_labels[j]}”"
    if key_labels[j] == query_label:
        out += " (itself)"
    if len(w) > 1:
        out += f"; next comes “{key_labels[int(order[1])]}” with {w[int(order[1])]:.2f}"
    out += "."
    if is_parking(key_labels[j]):
        out += " " + PARKING_WHY
    return out


def keys_notice(s: WordSteps, key_labels: list[str], query_label: str) -> str:
    """The keys [Tk, d_k]: the one that points most the way q points (the largest q·k), and the one least."""
    qk = as_array(s.scores)
    j, m = int(qk.argmax()), int(qk.argmin())
    return (f"The key of “{key_labels[j]}” matches q of “{query_label}” best (q·k = {qk[j]:.2f}), the key of "
            f"“{key_labels[m]}” least ({qk[m]:.2f}): a key matches by its direction and its length.")


def values_notice(s: WordSteps, key_labels: list[str]) -> str:
    """The values [Tk, d_k]: what each word would pass on; the longest and shortest."""
    n = as_array(s.v.norm(dim=-1))
    j, m = int(n.argmax()), int(n.argmin())
    if np.isclose(n[j], n[m]):
        return f"What each word would pass on, if chosen: every value has the same length here (‖v‖ = {n[j]:.2f})."
    return (f"What each word would pass on, if chosen: the longest value is “{key_labels[j]}”'s (‖v‖ = {n[j]:.2f}), "
            f"the shortest “{key_labels[m]}”'s ({n[m]:.2f}).")


def weighted_notice(s: WordSteps, key_labels: list[str]) -> str:
    """The weight × v rows: which row is largest, and how much of z the big-weight rows make up."""
    norms = as_array(s.weighted.norm(dim=-1))
    j = int(norms.argmax())
    small = int((as_array(s.weights) < 0.01).sum())
    out = f"The row of “{key_labels[j]}” is the largest (‖weight × v‖ = {norms[j]:.2f})"
    if small:
        return out + (f"; the {small} of {len(key_labels)} rows with weight under 0.01 are nearly blank, so z is "
                      "made of the words that got weight.")
    return out + f"; every one of the {len(key_labels)} rows has weight 0.01 or more: z is a broad mix."


def z_notice(s: WordSteps) -> str:
    """Σ weight × v beside the model's own z: the largest difference (0 up to rounding)."""
    if s.z_model is None:
        return "z is the sum of the rows above."
    diff = float((s.z_sum - s.z_model).abs().max())
    if not float(s.z_model.abs().max()):
        return ("The model's z is 0 (the head is switched off); the sum above is what the head would have passed "
                "on.")
    return f"Adding the rows up by hand gives the model's own z: largest difference {diff:.1e} (float rounding)."


def scores_notice(scores, labels: list[str], scaled=None, sqrt_dk: float | None = None) -> str:
    """A [Tq, Tk] score matrix: its range and largest entry; with `scaled`, the range after ÷√d_k."""
    z = as_array(scores)
    finite = np.where(np.isfinite(z), z, np.nan)
    i, j = np.unravel_index(int(np.nanargmax(finite)), z.shape)
    out = (f"Scores run from {np.nanmin(finite):.1f} to {np.nanmax(finite):.1f}; the largest is “{labels[i]}” → "
           f"“{labels[j]}”.")
    if scaled is not None and sqrt_dk:
        s = np.where(np.isfinite(as_array(scaled)), as_array(scaled), np.nan)
        out += (f" Divided by √d_k = {sqrt_dk:.3g} they run from {np.nanmin(s):.2f} to {np.nanmax(s):.2f}: same "
                "pattern, gentler numbers for the softmax.")
    return out


def matrix_notice(weights, q_labels: list[str], k_labels: list[str]) -> str:
    """A [Tq, Tk] weight matrix: the biggest weight, the diagonal, and how many rows park on <eos>/punctuation."""
    w = np.nan_to_num(as_array(weights))
    i, j = np.unravel_index(int(w.argmax()), w.shape)
    out = f"The biggest weight, {w[i, j]:.2f}, goes from “{q_labels[i]}” to “{k_labels[j]}”."
    if w.shape[0] == w.shape[1] and q_labels == k_labels:
        diag = np.diag(w)
        self_rows = int((w.argmax(1) == np.arange(len(w))).sum())
        out += (f" The diagonal (each word to itself) holds {diag.mean():.2f} of a row on average; {self_rows} of "
                f"{len(w)} words look most at themselves.")
    rows = [i for i, label in enumerate(q_labels) if not is_parking(label)]  # <eos> looking at itself is no parking
    parked = int(sum(is_parking(k_labels[int(w[i].argmax())]) for i in rows))
    if parked:
        out += (f" {parked} of {len(rows)} words put their largest weight on <eos> or punctuation: nothing better "
                "to read there.")
    return out


def z_matrix_notice(z, weights, v, labels: list[str]) -> str:
    """Z = weights · V: where one weight dominates a row, that row of Z is close to the chosen word's v."""
    zz, w, vv = as_array(z), np.nan_to_num(as_array(weights)), as_array(v)
    i = int(w.max(1).argmax())
    j = int(w[i].argmax())
    cos = float(zz[i] @ vv[j] / max(np.linalg.norm(zz[i]) * np.linalg.norm(vv[j]), 1e-12))
    return (f"Each row of Z is a weighted average of V's rows. “{labels[i]}” puts {w[i, j]:.2f} on “{labels[j]}”, "
            f"so its row of Z points almost where v of “{labels[j]}” points (cosine {cos:.2f}).")


def plain_notice(plain_weights, learned_weights, labels: list[str]) -> str:
    """softmax(XXᵀ) against a learned head: how much each puts on the diagonal."""
    p, lw = np.nan_to_num(as_array(plain_weights)), np.nan_to_num(as_array(learned_weights))
    n = len(labels)
    p_self = int((p.argmax(1) == np.arange(n)).sum())
    l_self = int((lw.argmax(1) == np.arange(n)).sum())
    return (f"Without learned weights, {p_self} of {n} words look most at themselves (diagonal {np.diag(p).mean():.2f} "
            f"on average): a vector matches itself best. The learned head: {l_self} of {n} (diagonal "
            f"{np.diag(lw).mean():.2f}).")


# --- The coreference sentence: which head links "it" to the noun that decides il / elle ---------

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


# --- Multi-head: what each head does, concat and W_O ---------------------------------------------

def head_pattern(weights, labels: list[str]) -> str:
    """A few words on what one head [Tq, Tk] (self-attention) mostly does, from its average weights."""
    w = np.nan_to_num(as_array(weights))
    n = len(w)
    cands = {"itself": float(np.diag(w).mean()) if w.shape[0] == w.shape[1] else 0.0}
    if w.shape[0] == w.shape[1] and n > 1:
        cands["the previous word"] = float(np.diag(w, -1).sum() / n)
        cands["the next word"] = float(np.diag(w, 1).sum() / n)
    col = w.mean(0)
    j = int(col.argmax())
    cands[f"“{labels[j]}”"] = float(col[j])
    what, share = max(cands.items(), key=lambda kv: kv[1])
    return f"{what} ({share:.2f} of a row on average)"


def heads_notice(weights, labels: list[str], off=()) -> str:
    """All heads of a layer [H, Tq, Tk] (self-attention): one phrase per head."""
    w = as_array(weights)
    parts = [f"head {h}{' (off)' if h in off else ''} → {head_pattern(w[h], labels)}" for h in range(len(w))]
    return "Mostly: " + "; ".join(parts) + "."


def word_heads_notice(rows: np.ndarray, x_labels: list[str], word_label: str) -> str:
    """One word's weights in every head [H, Tk]: the head that is most certain, and where the heads disagree."""
    top = rows.argmax(1)
    h = int(rows.max(1).argmax())
    distinct = len(set(int(j) for j in top))
    return (f"“{word_label}”: head {h} is the most focused, {rows[h].max():.2f} on “{x_labels[int(top[h])]}”; "
            f"the {len(rows)} heads look most at {distinct} different word{'s' if distinct != 1 else ''}.")


def concat_notice(concat, n_heads: int, off=()) -> str:
    """Concat [T, D]: each block of d_k columns is one head's Z; its share of the total size."""
    c = as_array(concat)
    d_k = c.shape[1] // n_heads
    sq = np.array([float((c[:, h * d_k:(h + 1) * d_k] ** 2).sum()) for h in range(n_heads)])
    share = sq / max(sq.sum(), 1e-12)
    h = int(share.argmax())
    out = (f"Block h holds head h's Z, untouched: {n_heads} blocks of d_k = {d_k} columns. Head {h} contributes the "
           f"most ({share[h]:.0%} of the sum of squares)")
    if off:
        out += f"; switched-off heads {', '.join(map(str, off))} are all zeros ({share[list(off)].sum():.0%})"
    return out + "."


def out_notice(concat, out, labels: list[str]) -> str:
    """Concat · W_O [T, D]: every output column mixes all heads; which word's vector is longest."""
    c, o = as_array(concat), as_array(out)
    norms = np.linalg.norm(o, axis=1)
    i = int(norms.argmax())
    ratio = float(norms.mean() / max(np.linalg.norm(c, axis=1).mean(), 1e-12))
    return (f"No block borders any more: each of the {o.shape[1]} output columns mixes every head. “{labels[i]}” gets "
            f"the longest output vector (‖out‖ = {norms[i]:.2f}); on average ‖out‖ is {ratio:.2f} × ‖concat‖.")


# --- Why scale: the demos -----------------------------------------------------------------------

def range_notice(rows: list[VarianceRow]) -> str:
    """The widest 1%–99% range of q·k among the rows (the "scores of ±50 are ordinary" sentence, computed)."""
    r = max(rows, key=lambda r: r.d_k)
    mid = [x for x in rows if x.d_k >= 256] or [r]
    m = mid[0]
    return (f"The range of the raw scores widens like √d_k (last column): at d_k = {m.d_k}, 98% of the scores lie "
            f"between {m.low:.0f} and {m.high:.0f}, at d_k = {r.d_k} between {r.low:.0f} and {r.high:.0f}, and the "
            "softmax of such numbers is all-or-nothing.")


def histogram_notice(samples, d_k: int) -> str:
    s = as_array(samples)
    return (f"Red: q·k spreads over ±{np.abs(s).max():.1f} (standard deviation {s.std():.2f} ≈ √{d_k} = "
            f"{math.sqrt(d_k):.2f}); blue: divided by √d_k, standard deviation {(s / math.sqrt(d_k)).std():.2f}.")


def saturation_notice(max_raw: float, max_scaled: float, d_k: int) -> str:
    return (f"At d_k = {d_k} one key takes {max_raw:.2f} of the weight without scaling and {max_scaled:.2f} with it: "
            "the scaled softmax still spreads its weight, so its gradient stays alive.")


# --- The projection: x · W^Q + b^Q = q ------------------------------------------------------------

@dataclass(frozen=True)
class Projection:
    """One word's query, key and value computed from its input vector and the head's weights."""

    x: torch.Tensor  # [D] the word's vector entering the attention
    W: dict[str, torch.Tensor]  # "q"/"k"/"v" -> [D, d_k] this head's columns of W^Q, W^K, W^V (x · W convention)
    b: dict[str, torch.Tensor]  # "q"/"k"/"v" -> [d_k] biases
    traced: dict[str, torch.Tensor]  # "q"/"k"/"v" -> [d_k] what the model recorded for this word

    def computed(self, which: str) -> torch.Tensor:
        return self.x @ self.W[which] + self.b[which]  # [1, D]·[D, d_k] + [d_k] = [d_k]

    def error(self, which: str) -> float:
        return float((self.computed(which) - self.traced[which]).abs().max())


def projection(trace: Trace, module: str, head: int, word: int, x: torch.Tensor, weights: dict,
               biases: dict) -> Projection:
    """x [D] of `word`, this head's W [D, d_k] and b [d_k] per "q"/"k"/"v", and the traced q, k, v of the word."""
    traced = {w: trace[f"{module}.{w}"][0, head, word] for w in ("q", "k", "v")}
    return Projection(x.double(), {w: m.double() for w, m in weights.items()},
                      {w: b.double() for w, b in biases.items()}, {w: t.double() for w, t in traced.items()})


def projection_notice(p: Projection) -> str:
    q = p.computed("q")
    return (f"x has {p.x.numel()} numbers, q has {q.numel()}: W^Q squeezes the word into this head's smaller space. "
            f"x · W^Q + b^Q computed here equals the model's q to {p.error('q'):.1e} (k: {p.error('k'):.1e}, v: "
            f"{p.error('v'):.1e}).")
