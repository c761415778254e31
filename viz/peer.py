"""Peer instruction's pictures: the first and second votes side by side, a click question's grid (values hidden)
and, after the reveal, the class's clicks beside the model's real weights. Pure builders (no Streamlit); labels
come from the class store, which refuses ``<`` and ``>``.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from viz.heatmap import SCALES, x_angle

FIRST, SECOND, RIGHT = "#9ecae1", "#08519c", "#2ca02c"
HIDDEN, ROW = "#f2f2f2", "#deebf7"


def rounds_figure(options: Sequence[str], first: Sequence[int], second: Sequence[int] | None,
                  answer: int | None = None) -> go.Figure:
    """A pair of bars per option: the first vote (light) and the second (dark), each with its count and share;
    with `answer` (the model's), its label says so."""
    labels = [f"{o}  ✓ model" if i == answer else o for i, o in enumerate(options)]
    fig = go.Figure()
    for name, counts, colour in (("First vote", first, FIRST), ("Second vote", second, SECOND)):
        if counts is None:
            continue
        total = sum(counts)
        fig.add_bar(x=list(counts), y=labels, orientation="h", name=name, marker={"color": colour},
                    text=[f"{c} ({c / total:.0%})" if total else "0" for c in counts], textposition="auto",
                    hovertemplate=f"{name}: %{{y}}: %{{x}}<extra></extra>")
    top = max([*first, *(second or [])], default=0)
    fig.update_layout(barmode="group", height=90 + 56 * len(options), margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      legend={"orientation": "h", "y": 1.08, "x": 0}, bargap=0.25,
                      xaxis={"rangemode": "tozero", "dtick": max(1, (top + 4) // 5)},
                      yaxis={"autorange": "reversed", "type": "category"})
    return fig


def _cells(rows: Sequence[str], cols: Sequence[str]) -> tuple[list[str], list[str], list[int]]:
    xs, ys, ids = [], [], []
    for r, row in enumerate(rows):
        for c, col in enumerate(cols):
            xs.append(col)
            ys.append(row)
            ids.append(r * len(cols) + c)
    return xs, ys, ids


def click_grid(rows: Sequence[str], cols: Sequence[str], row: int | None, mine: int | None) -> go.Figure:
    """The grid a student clicks: the tensor's axes with its values hidden, the asked row shaded, the student's
    own cell marked. Every cell is a point (a selectable marker): a click selects it."""
    z = [[1.0 if r == row else 0.0 for _ in cols] for r in range(len(rows))]
    size = max(14, min(44, 520 // max(len(cols), 1)))
    fig = go.Figure(go.Heatmap(z=z, x=list(cols), y=list(rows), colorscale=[[0, HIDDEN], [1, ROW]], zmin=0, zmax=1,
                               showscale=False, xgap=2, ygap=2, hoverinfo="skip"))
    xs, ys, ids = _cells(rows, cols)
    fig.add_scatter(x=xs, y=ys, customdata=ids, mode="markers", name="cells",
                    marker={"symbol": "square", "size": size, "color": "#1f77b4", "opacity": 0.02},
                    selected={"marker": {"opacity": 0.02}}, unselected={"marker": {"opacity": 0.02}},
                    hovertemplate="row %{y}<br>column %{x}<br>click to choose this cell<extra></extra>")
    if mine is not None:
        r, c = divmod(mine, len(cols))
        fig.add_scatter(x=[cols[c]], y=[rows[r]], mode="markers+text", text=["you"], textposition="middle center",
                        textfont={"color": "white", "size": 12}, name="your cell", hoverinfo="skip",
                        marker={"symbol": "square", "size": size, "color": SECOND})
    fig.update_layout(height=max(260, min(640, 80 + size * len(rows))), showlegend=False,
                      margin={"l": 10, "r": 10, "t": 10, "b": 10}, plot_bgcolor="white", dragmode=False,
                      xaxis={"side": "top", "type": "category", "tickangle": x_angle(cols),
                             "fixedrange": True},
                      yaxis={"autorange": "reversed", "type": "category", "fixedrange": True})
    return fig


def clicks_and_weights(rows: Sequence[str], cols: Sequence[str], clicks: Sequence[int],
                       weights: Sequence[Sequence[float]] | None, answer: int | None) -> go.Figure:
    """The class's clicks (how many chose each cell) beside the model's real weights, the model's cell marked
    on both."""
    n = len(cols)
    panels = 2 if weights is not None else 1
    fig = make_subplots(rows=1, cols=panels, horizontal_spacing=0.12,
                        subplot_titles=["The class's clicks", "The model's weights"][:panels])
    counts = [[clicks[r * n + c] for c in range(n)] for r in range(len(rows))]
    fig.add_heatmap(z=counts, x=list(cols), y=list(rows), colorscale="Oranges", zmin=0, showscale=False, xgap=1,
                    ygap=1, text=[[str(v) if v else "" for v in row] for row in counts], texttemplate="%{text}",
                    hovertemplate="row %{y}<br>column %{x}<br>clicks: %{z}<extra></extra>", row=1, col=1)
    if weights is not None:
        fig.add_heatmap(z=[list(r) for r in weights], x=list(cols), y=list(rows), showscale=False, xgap=1, ygap=1,
                        hovertemplate="row %{y}<br>column %{x}<br>weight: %{z:.3f}<extra></extra>",
                        row=1, col=2, **SCALES["weights"])
    if answer is not None:
        r, c = divmod(answer, n)
        for k in range(1, panels + 1):
            fig.add_scatter(x=[cols[c]], y=[rows[r]], mode="markers", hoverinfo="skip", showlegend=False,
                            marker={"symbol": "square-open", "size": 26, "color": RIGHT, "line": {"width": 3}},
                            row=1, col=k)
    fig.update_layout(height=max(300, min(660, 110 + 30 * len(rows))), margin={"l": 10, "r": 10, "t": 60, "b": 10},
                      plot_bgcolor="white")
    fig.update_annotations(yshift=12)  # the panels' titles clear of their grids
    fig.update_xaxes(type="category", side="bottom", tickangle=-45 if n > 6 else 0)
    fig.update_yaxes(type="category", autorange="reversed")
    return fig
