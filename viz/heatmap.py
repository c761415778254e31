"""Heatmaps and their tables: one builder for every matrix the app shows.

Every heatmap has token labels on both axes (position-prefixed, so repeated words stay distinct),
exact values on hover, and the colour scale of its *kind*, so the same kind of tensor looks the
same on every page. `table` gives the exact numbers as a pandas DataFrame for beside the chart.
-inf (masked scores) is drawn as a grey cell and written "-inf".

Colour scales, chosen to stay readable for colour-blind readers (deuteranopia and protanopia, about 6 % of
men, confuse red with green; tritanopia is rare). Every scale is a ColorBrewer scale that ColorBrewer lists
as colour-blind safe, and each carries its information in lightness as well as hue:

- sequential (weights, probabilities): "Blues" and "Greens" run from white to a dark colour, one hue:
  lighter = smaller survives any loss of hue (and greyscale printing). Never red-to-green.
- diverging (scores, encodings, activations): "RdBu_r" (blue - white - red) and "PuOr_r" (orange - white -
  purple). Their two arms are blue vs red/orange, which deuteranopes and protanopes still tell apart
  (blue vs yellow-brown); the middle is white (0) and both ends are dark. "RdYlGn", "Spectral", "Jet" and
  "Rainbow" are not used: their ends collapse to the same olive under deuteranopia.
- the mask: white (0, may attend) and mid grey (-inf), plus the written "-inf".

tests/test_viz_colours.py checks the scales are these, and simulates deuteranopia and protanopia (Machado
et al. 2009) to check lightness stays monotonic along each arm and the diverging ends stay apart.

Cell labels: the value is written inside a cell (at CELL_FONT px, never shrunk to fit) only when the matrix
is small enough for the numbers to fit side by side in a half-width column (MAX_TEXT_CELLS, MAX_TEXT_COLUMNS);
otherwise the value is on hover and in the exact-numbers table, which keeps big pages light to draw.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd
import plotly.colors
import plotly.graph_objects as go
import torch

from viz.margins import text_width

# kind -> plotly colour settings. One kind per family of tensors.
SCALES: dict[str, dict] = {
    "weights": {"colorscale": "Blues", "zmin": 0.0, "zmax": 1.0},  # attention weights, softmax rows
    "probs": {"colorscale": "Greens", "zmin": 0.0, "zmax": 1.0},  # output probabilities
    "scores": {"colorscale": "RdBu_r", "zmid": 0.0},  # raw / scaled / masked scores (unbounded)
    "mask": {"colorscale": [[0.0, "#9e9e9e"], [1.0, "#ffffff"]], "zmin": 0.0, "zmax": 1.0},  # -inf grey, 0 white
    "encoding": {"colorscale": "RdBu_r", "zmin": -1.0, "zmax": 1.0},  # sin/cos positional encoding
    "activations": {"colorscale": "PuOr_r", "zmid": 0.0},  # embeddings, q/k/v, hidden states
    "share": {"colorscale": "RdBu_r", "zmin": -1.0, "zmax": 1.0},  # causal tracing: share restored / lost, 1 = all
}

FLAT_ROOM = 220  # px: column words lie flat only when all of them fit side by side in this (a half column's plot)
MAX_TEXT_CELLS = 64  # write the value inside each cell when the matrix is this small
MAX_TEXT_COLUMNS = 8  # ... and has at most this many columns (wider cells are too narrow for the numbers)
CELL_FONT = 12  # px: cell labels are never shrunk below a legible size
SEQUENTIAL = ("Blues", "Greens")  # colour-blind-safe scales (see the module docstring)
DIVERGING = ("RdBu_r", "PuOr_r")


def dims(n: int) -> list[str]:
    """Axis labels for vector dimensions: "d0", "d1", ..."""
    return [f"d{i}" for i in range(n)]


def as_array(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().to(torch.float64).numpy()
    return np.array(values, dtype=np.float64, copy=True)


def fmt(v: float, digits: int = 3) -> str:
    if math.isinf(v):
        return "-inf" if v < 0 else "inf"
    if math.isnan(v):
        return "nan"
    return f"{v:.{digits}f}"


def count(n: int, noun: str, plural: str | None = None) -> str:
    """count(1, "token") -> "1 token", count(3, "key") -> "3 keys" (`plural` for irregular nouns)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def x_angle(labels) -> int:
    """The column words' angle: flat (0) when they fit side by side in a half column's plot, else slanted (-45),
    which keeps neighbours apart in any column (flat words wider than their cells run into one another)."""
    return 0 if len(labels) * (max(map(text_width, labels), default=0.0) + 6) <= FLAT_ROOM else -45


def heatmap(
    values,
    x_labels: list[str],
    y_labels: list[str],
    kind: str,
    title: str | None = None,
    x_title: str | None = None,
    y_title: str | None = None,
    digits: int = 3,
    height: int | None = None,
) -> go.Figure:
    """A [rows, cols] matrix as a heatmap with rows top-to-bottom in the order given."""
    z = as_array(values)
    if z.ndim != 2 or z.shape != (len(y_labels), len(x_labels)):
        raise ValueError(f"matrix of shape {z.shape} does not fit {len(y_labels)} x {len(x_labels)} labels")
    text = [[fmt(v, digits) for v in row] for row in z]
    if kind == "mask":
        z = np.where(np.isneginf(z), 0.0, 1.0)
    else:
        z = np.where(np.isfinite(z), z, np.nan)  # -inf cells: drawn as gaps on a grey background
    settings = dict(SCALES[kind])
    if "zmid" in settings and np.isfinite(z).any():  # symmetric range so 0 is always the middle colour
        lim = float(np.nanmax(np.abs(z))) or 1.0
        settings.update(zmin=-lim, zmax=lim)
        settings.pop("zmid")
    n_rows = len(y_labels)
    trace = {
        "type": "heatmap",
        "z": z,
        "x": list(x_labels),
        "y": list(y_labels),
        "text": text,
        "texttemplate": "%{text}" if z.size <= MAX_TEXT_CELLS and z.shape[1] <= MAX_TEXT_COLUMNS else None,
        "textfont": {"size": CELL_FONT},
        "hovertemplate": f"{y_title or 'row'}: %{{y}}<br>{x_title or 'column'}: %{{x}}<br>"
        "value: %{text}<extra></extra>",
        "showscale": kind != "mask",
        "xgap": 1,
        "ygap": 1,
        **settings,
        # the colour bar starts at the plot's edge (Plotly's 1.02 is 2 % of the plot's width past it, which a margin
        # reserved in advance cannot know: viz/margins.py), 16 px from it
        "colorbar": {"x": 1.0, "xpad": 16},
    }
    layout = {
        # a title stands at the figure's top, above the column words and their axis title (viz/margins.py
        # reserves its line)
        "title": {"text": title, "y": 1, "yref": "container", "yanchor": "top", "pad": {"t": 6}} if title else None,
        "height": height or max(220, min(720, 60 + 34 * n_rows)),
        "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        "plot_bgcolor": "#9e9e9e",
        "xaxis": {"title": _text(x_title), "side": "top", "type": "category", "tickangle": x_angle(x_labels)},
        "yaxis": {"title": _text(y_title), "autorange": "reversed", "type": "category"},
    }
    return figure([trace], layout)


def _text(title: str | None) -> dict | None:
    return {"text": title} if title else None


def _set(d: dict) -> dict:
    """`d` without its None values, at every depth (None is plotly's "not set")."""
    return {k: _set(v) if isinstance(v, dict) else v for k, v in d.items() if v is not None}


def figure(traces: list[dict], layout: dict) -> go.Figure:
    """A figure from plain dicts, without plotly's checks of every property (three quarters of the cost of building
    a heatmap, paid again for every new sentence, setting and model). What plotly's checks would add is done here:
    None values dropped, colour scales given by name resolved to their stops (plotly.js knows other scales by some
    of the same names, "Blues" among them). Only the construction skips the checks: later changes are checked.
    tests/test_viz_figure.py and tests/test_drawn_once.py hold that plotly's checks change nothing in what is sent."""
    traces = [_set(t) for t in traces]
    for t in traces:
        if isinstance(t.get("colorscale"), str):
            t["colorscale"] = _scale(t["colorscale"])
    fig = go.Figure(data=traces, layout=_set(layout), _validate=False)
    # what a caller changes afterwards (update_traces, add_annotation, ...) is checked as in any figure
    fig._validate = fig.layout._validate = True
    for trace in fig.data:
        trace._validate = True
    return fig


@functools.cache
def _scale(name: str) -> tuple:
    return tuple(tuple(stop) for stop in plotly.colors.get_colorscale(name))


MARKED = "#d62728"  # the frame of the row a notice talks about


def outline(fig: go.Figure, rows: tuple[int, int], cols: tuple[int, int], color: str = MARKED) -> None:
    """A frame of `color` around the cells of rows rows[0]..rows[1] and columns cols[0]..cols[1] (both ends
    included, counted from 0 as the heatmap's categories)."""
    fig.add_shape(
        type="rect",
        xref="x",
        yref="y",
        x0=cols[0] - 0.5,
        x1=cols[1] + 0.5,
        y0=rows[0] - 0.5,
        y1=rows[1] + 0.5,
        line={"color": color, "width": 3},
    )


def table(values, x_labels: list[str], y_labels: list[str], digits: int = 4) -> pd.DataFrame:
    """The exact numbers of a matrix, labelled like the heatmap (-inf stays -inf)."""
    z = as_array(values)
    if z.ndim == 1:
        z = z[None, :]
    return pd.DataFrame(np.round(z, digits), index=list(y_labels), columns=list(x_labels))


def shape_text(t, names: str) -> str:
    """shape_text(x, "B,T,D") -> "[1, 7, 128]  (B, T, D)"."""
    shape = tuple(t.shape) if hasattr(t, "shape") else tuple(np.shape(t))
    return f"[{', '.join(str(s) for s in shape)}]  ({names})"
