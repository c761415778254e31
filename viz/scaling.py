"""Why divide by √d_k: Var(q·k) = d_k with random vectors, and the softmax saturating without the division;
the figures, tables and notice lines of that experiment (explain/experiments.py runs it)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from explain.experiments import SaturationRow, VarianceRow
from viz.heatmap import as_array


def histogram_figure(samples, divided, d_k: int, bins: int = 60) -> go.Figure:
    """Histogram of q·k (`samples`) and of q·k/√d_k (`divided`), pre-binned bars: the figure stays small."""
    s, scaled = as_array(samples), as_array(divided)
    lim = float(max(np.abs(s).max(), np.abs(scaled).max(), 1e-9))
    edges = np.linspace(-lim, lim, bins + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    fig = go.Figure()
    for values, name, colour in ((s, "q·k", "#d62728"), (scaled, "q·k / √d_k", "#1f77b4")):
        counts, _ = np.histogram(values, bins=edges)
        fig.add_trace(
            go.Bar(
                x=centres.tolist(),
                y=counts.tolist(),
                name=name,
                marker_color=colour,
                opacity=0.6,
                hovertemplate=f"{name}<br>around %{{x:.2f}}: %{{y}} pairs<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="overlay",
        bargap=0,
        height=320,
        xaxis_title="value",
        yaxis_title="pairs",
        title=f"{len(s)} random pairs, d_k = {d_k}",
        margin={"l": 10, "r": 10, "t": 40, "b": 10},
    )
    return fig


def variance_table(rows: list[VarianceRow]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "d_k": [r.d_k for r in rows],
            "Var(q·k) measured": [round(r.variance, 2) for r in rows],
            "theory (= d_k)": [r.d_k for r in rows],
            "Var(q·k/√d_k) measured": [round(r.variance_scaled, 3) for r in rows],
            "typical range of q·k (1%–99%)": [f"{r.low:.1f} … {r.high:.1f}" for r in rows],
        }
    )


def variance_figure(rows: list[VarianceRow]) -> go.Figure:
    d = [r.d_k for r in rows]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=d, y=d, mode="lines", name="theory: Var = d_k", line={"dash": "dash"}))
    fig.add_trace(go.Scatter(x=d, y=[r.variance for r in rows], mode="markers+lines", name="measured Var(q·k)"))
    fig.add_trace(
        go.Scatter(x=d, y=[r.variance_scaled for r in rows], mode="markers+lines", name="measured Var(q·k / √d_k)")
    )
    fig.update_layout(
        height=320,
        xaxis={"type": "log", "title": "d_k"},
        yaxis={"type": "log", "title": "variance"},
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
    )
    return fig


def saturation_figure(weights_raw, weights_scaled, labels: list[str]) -> go.Figure:
    """Softmax of the same scores without and with the division by √d_k."""
    fig = make_subplots(
        rows=1, cols=2, shared_yaxes=True, subplot_titles=("softmax(q·k): no scaling", "softmax(q·k / √d_k)")
    )
    for col, (w, colour) in enumerate(((weights_raw, "#d62728"), (weights_scaled, "#1f77b4")), start=1):
        fig.add_trace(
            go.Bar(
                x=list(labels),
                y=as_array(w).tolist(),
                marker_color=colour,
                showlegend=False,
                hovertemplate="%{x}: %{y:.4f}<extra></extra>",
            ),
            row=1,
            col=col,
        )
        fig.update_xaxes(type="category", row=1, col=col)
    fig.update_yaxes(range=[0, 1], title_text="weight", row=1, col=1)
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def saturation_table(rows: list[SaturationRow]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "d_k": [r.d_k for r in rows],
            "max weight, no scaling": [round(r.max_raw, 3) for r in rows],
            "max weight, ÷√d_k": [round(r.max_scaled, 3) for r in rows],
            "‖Jacobian‖, no scaling": [round(r.jacobian_raw, 4) for r in rows],
            "‖Jacobian‖, ÷√d_k": [round(r.jacobian_scaled, 4) for r in rows],
        }
    )


def range_notice(rows: list[VarianceRow]) -> str:
    """The widest 1%–99% range of q·k among the rows (the "scores of ±50 are ordinary" sentence, computed).
    Rule: "all-or-nothing" only when that range is at least 10 wide (e^10 ≈ 22,000 between its ends)."""
    r = max(rows, key=lambda r: r.d_k)
    mid = [x for x in rows if x.d_k >= 256] or [r]
    m = mid[0]
    out = (
        f"The range of the raw scores widens like √d_k (last column): at d_k = {m.d_k}, 98% of the scores lie "
        f"between {m.low:.0f} and {m.high:.0f}, at d_k = {r.d_k} between {r.low:.0f} and {r.high:.0f}"
    )
    # "all-or-nothing": two scores 10 apart already give the larger e^10 ≈ 22,000 times the weight of the smaller.
    return out + (", and the softmax of such numbers is all-or-nothing." if r.high - r.low >= 10 else ".")


def histogram_notice(samples, divided, d_k: int) -> str:
    """ "≈ √d_k" only when the measured standard deviation is within 15% of √d_k (else "against")."""
    s, scaled = as_array(samples), as_array(divided)
    near = "≈" if abs(s.std() - math.sqrt(d_k)) <= 0.15 * math.sqrt(d_k) else "against"
    return (
        f"Red: q·k spreads over ±{np.abs(s).max():.1f} (standard deviation {s.std():.2f} {near} √{d_k} = "
        f"{math.sqrt(d_k):.2f}); blue: divided by √d_k, standard deviation {scaled.std():.2f}."
    )


def saturation_notice(max_raw: float, max_scaled: float, d_k: int) -> str:
    """Rule: "spreads its weight more" only when the largest weight is smaller with scaling."""
    out = f"At d_k = {d_k} one key takes {max_raw:.2f} of the weight without scaling and {max_scaled:.2f} with it"
    if max_scaled < max_raw:
        return out + ": the scaled softmax spreads its weight more, so it is less saturated and its gradient larger."
    return out + ": at this d_k scaling changes little."
