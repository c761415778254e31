"""Why attention: the paper's Table 1 as a calculator, the n x n memory, and Table 2 as charts.

`layer_costs` evaluates the formulas inside the big-O of Table 1 for given n, d, k, r (the constant
factors are dropped, as in the table: these are orders of growth, not exact FLOP counts).
The paper's figures themselves live in `explain.paper`.
"""

from __future__ import annotations

import math

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain.paper import BLEU_TABLE, TABLE1

TYPES = tuple(t.name for t in TABLE1)  # Self-attention, Recurrent, Convolutional, Self-attention (restricted)
FORMULAS = ("n²·d", "n·d²", "k·n·d²", "r·n·d")


def path_length_conv(n: int, k: int) -> int:
    """Layers of width-k convolutions (dilated) needed to connect any two of n positions: ⌈log_k n⌉ (≥ 1)."""
    if n <= 1:
        return 1
    if k <= 1:
        return n  # a width-1 kernel never mixes positions; treat as the sequential worst case
    steps, reach = 0, 1
    while reach < n:  # integer arithmetic: no floating-point surprises at exact powers
        reach *= k
        steps += 1
    return max(1, steps)


def layer_costs(n: int, d: int, k: int, r: int) -> pd.DataFrame:
    """Table 1 evaluated: operations per layer, sequential operations and maximum path length."""
    if min(n, d, k, r) < 1:
        raise ValueError("n, d, k and r must be positive integers")
    r = min(r, n)
    ops = (n * n * d, n * d * d, k * n * d * d, r * n * d)
    sequential = (1, n, 1, 1)
    paths = (1, n, path_length_conv(n, k), math.ceil(n / r))
    return pd.DataFrame(
        {
            "layer type": TYPES,
            "operations per layer": FORMULAS,
            "count": ops,
            "sequential operations": sequential,
            "maximum path length": paths,
        }
    )


def cheaper_than_recurrence(n: int, d: int) -> bool:
    """Self-attention (n²·d) costs less than a recurrent layer (n·d²) exactly when n < d."""
    return n < d


def costs_notice(costs: pd.DataFrame, d: int) -> str:
    """Self-attention against a recurrent layer at the calculator's n and d: operations and sequential steps.
    Rule: "cheaper" only when its operation count is the smaller (exactly when n < d)."""
    attn, rnn = (int(costs["count"][i]) for i in (0, 1))
    n = int(costs["sequential operations"][1])
    verdict = (
        f"n = {n} < d = {d}, so self-attention is cheaper: {attn:,} operations against a recurrent layer's "
        f"{rnn:,} (the recurrent layer needs {rnn / attn:.3g}× as many)"
        if attn < rnn
        else f"n = {n} ≥ d = {d}, so self-attention costs at least as much: {attn:,} operations against a "
        f"recurrent layer's {rnn:,} (self-attention needs {attn / rnn:.3g}× as many)"
    )
    return (
        f"{verdict}. And self-attention takes 1 sequential step where the recurrent layer takes {n}, "
        "each waiting for the one before."
    )


def costs_figure(costs: pd.DataFrame) -> go.Figure:
    """Operations per layer for each layer type, as bars on a log axis."""
    fig = go.Figure(
        go.Bar(
            x=list(costs["layer type"]),
            y=[float(v) for v in costs["count"]],
            text=[f"{v:.3g}" for v in costs["count"]],
            textposition="outside",
            customdata=list(costs["operations per layer"]),
            hovertemplate="%{x}<br>%{customdata} = %{y:,.0f}<extra></extra>",
            marker_color=["#1f77b4", "#d62728", "#2ca02c", "#9467bd"],
        )
    )
    fig.update_layout(
        height=360,
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        yaxis={"type": "log", "dtick": 1, "title": "operations per layer (log scale)"},
        xaxis={"type": "category"},
    )
    return fig


def attention_matrix_bytes(n: int, heads: int, layers: int, bytes_per_value: int = 4, n_keys: int | None = None) -> int:
    """Memory of the attention weights: one n x n_keys matrix per head and per attention layer."""
    return n * (n if n_keys is None else n_keys) * heads * layers * bytes_per_value


def stored_bytes(t) -> int:
    """Bytes a tensor's values take in memory (e.g. one layer's recorded attention weights)."""
    return t.numel() * t.element_size()


def human_bytes(n: int) -> str:
    """1536 -> "1.5 KiB"."""
    value = float(n)
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} bytes" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} bytes"  # pragma: no cover


def bleu_frame() -> pd.DataFrame:
    """Table 2 of the paper as a DataFrame (NaN where the paper reports nothing)."""
    return pd.DataFrame(
        {
            "model": [r.model for r in BLEU_TABLE],
            "BLEU EN-DE": [r.bleu_en_de for r in BLEU_TABLE],
            "BLEU EN-FR": [r.bleu_en_fr for r in BLEU_TABLE],
            "training FLOPs EN-DE": [r.cost_en_de for r in BLEU_TABLE],
            "training FLOPs EN-FR": [r.cost_en_fr for r in BLEU_TABLE],
        }
    ).astype({c: "float64" for c in ("BLEU EN-DE", "BLEU EN-FR", "training FLOPs EN-DE", "training FLOPs EN-FR")})


def bleu_display(frame: pd.DataFrame) -> pd.DataFrame:
    """The same table written like the paper: "-" for missing, costs as 2.3e19."""
    out = frame.copy()
    for col in ("BLEU EN-DE", "BLEU EN-FR"):
        out[col] = [("-" if pd.isna(v) else f"{v:g}") for v in frame[col]]
    for col in ("training FLOPs EN-DE", "training FLOPs EN-FR"):
        out[col] = [("-" if pd.isna(v) else f"{v:.1e}".replace("e+", "e")) for v in frame[col]]
    return out


def bleu_notice(frame: pd.DataFrame) -> str:
    """The best BLEU of each task, and what the best model's training cost compared with the best earlier one."""
    parts = []
    for pair in ("EN-DE", "EN-FR"):
        b, c = frame[f"BLEU {pair}"], frame[f"training FLOPs {pair}"]
        i = int(b.idxmax())
        earlier = frame[~frame["model"].str.startswith("Transformer")]
        j = int(earlier[f"BLEU {pair}"].idxmax())
        cost = (
            f", with {c[j] / c[i]:.2g}× less training ({c[i]:.1e} vs {c[j]:.1e} FLOPs)"
            if pd.notna(c[i]) and pd.notna(c[j])
            else ""
        )
        parts.append(
            f"{pair}: {frame['model'][i]} scores {b[i]:g} BLEU, {b[i] - b[j]:.2f} above the best earlier "
            f"model ({frame['model'][j]}, {b[j]:g}){cost}".replace("e+", "e")
        )
    return "; ".join(parts) + "."


def bleu_figure(frame: pd.DataFrame) -> go.Figure:
    """Two panels: BLEU (grouped bars, EN-DE and EN-FR) and training cost (log axis)."""
    fig = make_subplots(
        rows=1,
        cols=2,
        horizontal_spacing=0.12,
        subplot_titles=(
            "BLEU on newstest2014 (higher is better)",
            "Training cost in FLOPs (log scale, lower is better)",
        ),
    )
    colours = {"EN-DE": "#1f77b4", "EN-FR": "#ff7f0e"}
    models = list(frame["model"])
    # the panel's column, the frame's column, the bars' name, their opacity, the hover's number
    panels = ((1, "BLEU", "BLEU", None, "%{y}"), (2, "training FLOPs", "FLOPs", 0.6, "%{y:.1e}"))
    for pair in ("EN-DE", "EN-FR"):
        for col, column, name, opacity, number in panels:
            fig.add_trace(
                go.Bar(
                    name=f"{name} {pair}",
                    x=models,
                    y=[None if pd.isna(v) else float(v) for v in frame[f"{column} {pair}"]],
                    marker_color=colours[pair],
                    opacity=opacity,
                    legendgroup=pair,
                    hovertemplate=f"%{{x}}<br>{name} {pair}: {number}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_layout(
        barmode="group",
        height=460,
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
        legend={"orientation": "h", "y": -0.45},
    )
    fig.update_xaxes(type="category", tickangle=-40)
    fig.update_yaxes(title_text="BLEU", range=[0, 45], row=1, col=1)  # from 0: bar heights compare honestly
    fig.update_yaxes(title_text="FLOPs", type="log", dtick=1, row=1, col=2)  # powers of ten only: no small 2, 5 labels
    return fig
