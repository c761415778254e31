"""Peer instruction's pictures: the first and second votes side by side, a click question's grid (values hidden)
and, after the reveal, the class's clicks beside the model's real weights. Pure builders (no Streamlit); labels
come from the class store, which refuses ``<`` and ``>``.
"""

from __future__ import annotations

from collections.abc import Sequence

import plotly.graph_objects as go

from viz.heatmap import SCALES, outline

FIRST, SECOND, RIGHT = "#9ecae1", "#08519c", "#2ca02c"
HIDDEN, ROW = "#f2f2f2", "#deebf7"


def rounds_figure(
    options: Sequence[str], first: Sequence[int], second: Sequence[int] | None, answer: int | None = None
) -> go.Figure:
    """A pair of bars per option: the first vote (light) and the second (dark), each with its count and share;
    with `answer` (the model's), its label says so."""
    labels = [f"{o}  ✓ model" if i == answer else o for i, o in enumerate(options)]
    fig = go.Figure()
    for name, counts, colour in (("First vote", first, FIRST), ("Second vote", second, SECOND)):
        if counts is None:
            continue
        total = sum(counts)
        fig.add_bar(
            x=list(counts),
            y=labels,
            orientation="h",
            name=name,
            marker={"color": colour},
            text=[f"{c} ({c / total:.0%})" if total else "0" for c in counts],
            textposition="auto",
            hovertemplate=f"{name}: %{{y}}: %{{x}}<extra></extra>",
        )
    top = max([*first, *(second or [])], default=0)
    fig.update_layout(
        barmode="group",
        height=90 + 56 * len(options),
        margin={"l": 10, "r": 10, "t": 30, "b": 10},
        legend={"orientation": "h", "y": 1.08, "x": 0},
        bargap=0.25,
        xaxis={"rangemode": "tozero", "dtick": max(1, (top + 4) // 5)},
        yaxis={"autorange": "reversed", "type": "category"},
    )
    return fig


def _cells(rows: Sequence[str], cols: Sequence[str]) -> tuple[list[str], list[str], list[int]]:
    xs, ys, ids = [], [], []
    for r, row in enumerate(rows):
        for c, col in enumerate(cols):
            xs.append(col)
            ys.append(row)
            ids.append(r * len(cols) + c)
    return xs, ys, ids


POINT = 8  # px: the selectable point at each cell's centre (a tap selects the nearest centre: the cell tapped)
ASKED = "#08519c"  # the asked row's frame


def click_grid(rows: Sequence[str], cols: Sequence[str], row: int | None, mine: int | None) -> go.Figure:
    """The grid a student clicks: the tensor's axes with its values hidden, the asked row shaded and framed, the
    student's own cell marked. Every cell is a small point at its centre (a selectable marker): a click or a tap
    selects the nearest centre, the cell under the finger (markers as wide as a desktop's cell overlapped on a
    phone, and the first of them won: walk finding D2). The student's cell and the frame are shapes: nothing to
    select. Column words stand upright past six columns, so they never overlap on a phone (D36)."""
    z = [[1.0 if r == row else 0.0 for _ in cols] for r in range(len(rows))]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=list(cols),
            y=list(rows),
            colorscale=[[0, HIDDEN], [1, ROW]],
            zmin=0,
            zmax=1,
            showscale=False,
            xgap=2,
            ygap=2,
            hoverinfo="skip",
        )
    )
    xs, ys, ids = _cells(rows, cols)
    fig.add_scatter(
        x=xs,
        y=ys,
        customdata=ids,
        mode="markers",
        name="cells",
        marker={"symbol": "square", "size": POINT, "color": "#1f77b4", "opacity": 0.02},
        selected={"marker": {"opacity": 0.02}},
        unselected={"marker": {"opacity": 0.02}},
        hovertemplate="row %{y}<br>column %{x}<br>click to choose this cell<extra></extra>",
    )
    if row is not None:
        outline(fig, (row, row), (0, len(cols) - 1), ASKED)
    if mine is not None:
        r, c = divmod(mine, len(cols))
        fig.add_shape(
            type="rect",
            xref="x",
            yref="y",
            x0=c - 0.45,
            x1=c + 0.45,
            y0=r - 0.45,
            y1=r + 0.45,
            fillcolor=SECOND,
            line={"width": 0},
            layer="above",
        )
        fig.add_annotation(x=cols[c], y=rows[r], text="you", showarrow=False, font={"color": "white", "size": 12})
    fig.update_layout(
        height=max(260, min(640, 80 + 34 * len(rows))),
        showlegend=False,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        plot_bgcolor="white",
        dragmode=False,
        hoverdistance=40,
        xaxis={"side": "top", "type": "category", "tickangle": -90 if len(cols) > 6 else 0, "fixedrange": True},
        yaxis={"autorange": "reversed", "type": "category", "fixedrange": True},
    )
    return fig


def _grid(z, rows: Sequence[str], cols: Sequence[str], answer: int | None, title: str, **trace) -> go.Figure:
    fig = go.Figure(go.Heatmap(z=z, x=list(cols), y=list(rows), showscale=False, xgap=1, ygap=1, **trace))
    if answer is not None:
        r, c = divmod(answer, len(cols))
        outline(fig, (r, r), (c, c), RIGHT)
    fig.update_layout(
        title={"text": title},
        height=max(300, min(660, 110 + 30 * len(rows))),
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        plot_bgcolor="white",
        xaxis={"type": "category", "side": "bottom", "tickangle": -90 if len(cols) > 6 else 0},
        yaxis={"type": "category", "autorange": "reversed"},
    )
    return fig


def clicks_figure(rows: Sequence[str], cols: Sequence[str], clicks: Sequence[int], answer: int | None) -> go.Figure:
    """The class's clicks: how many chose each cell (the model's cell framed once revealed)."""
    n = len(cols)
    counts = [[clicks[r * n + c] for c in range(n)] for r in range(len(rows))]
    return _grid(
        counts,
        rows,
        cols,
        answer,
        "The class's clicks",
        colorscale="Oranges",
        zmin=0,
        text=[[str(v) if v else "" for v in row] for row in counts],
        texttemplate="%{text}",
        hovertemplate="row %{y}<br>column %{x}<br>clicks: %{z}<extra></extra>",
    )


def weights_figure(
    rows: Sequence[str], cols: Sequence[str], weights: Sequence[Sequence[float]], answer: int | None
) -> go.Figure:
    """The model's real weights, its cell framed. A figure of its own beside the clicks (two columns: a phone
    stacks them, where two panels in one figure were squeezed and their titles clipped: D35)."""
    return _grid(
        [list(r) for r in weights],
        rows,
        cols,
        answer,
        "The model's weights",
        hovertemplate="row %{y}<br>column %{x}<br>weight: %{z:.3f}<extra></extra>",
        **SCALES["weights"],
    )
