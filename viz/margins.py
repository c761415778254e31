"""Room for a heatmap's labels, reserved before the browser draws it.

Plotly grows a chart's margins to fit its tick labels, colour bar and axis titles (automargin), and it learns
how much only by drawing: it draws the axes, measures them, grows the margins and draws everything again.
Streamlit draws a chart twice already (on arrival, and again when its theme is applied), and each of those draws
paid the extra pass: a heatmap's axes were drawn six times instead of four. Reserving the room took a sixth to
two fifths off the browser's work for a page of heatmaps (Chromium's main thread per navigation, medians of 5,
`python -m bench.bench_browser --cpu`: decoder page 0.52 -> 0.31 s, multi-head 0.47 -> 0.36 s, tokens 0.44 ->
0.36 s).

`reserve(fig)` gives a heatmap the margins its labels will need, from the width of each character in Streamlit's
font, so Plotly's first pass already fits and nothing is drawn again. Automargin stays on: a label wider than
estimated still gets its room (at the price of the extra pass), never a clipped label. Only figures of one pair of
axes holding heatmaps are measured (every matrix of the app); bars and curves keep Plotly's own measuring.

The sizes below are those of Streamlit's chart theme (1.67: tick labels 12 px, axis titles 14 px with their
standoff) and of Plotly's colour bar (30 px, padded 16 px on each side by viz/heatmap.py), measured in Chromium on
this app's heatmaps; in presenter mode the theme's sizes grow with the root font size, the bar's do not.
tests/test_viz_margins.py checks the estimate against those measurements; tests/browser/test_chart_margins.py
checks in Chromium that no heatmap's margin grew.
"""

from __future__ import annotations

import functools
import math
import unicodedata

import plotly.graph_objects as go

# Advance widths of Source Sans (Streamlit's font), in hundredths of its size, for " " (32) to "~" (126).
_ASCII = (
    20,
    29,
    43,
    50,
    50,
    82,
    61,
    25,
    30,
    30,
    42,
    50,
    25,
    31,
    25,
    35,
    50,
    50,
    50,
    50,
    50,
    50,
    50,
    50,
    50,
    50,
    25,
    25,
    50,
    50,
    50,
    42,
    85,
    54,
    59,
    57,
    61,
    53,
    49,
    62,
    65,
    26,
    48,
    58,
    49,
    73,
    65,
    66,
    57,
    66,
    57,
    53,
    54,
    64,
    51,
    79,
    51,
    48,
    54,
    30,
    35,
    30,
    50,
    50,
    54,
    50,
    55,
    46,
    55,
    50,
    29,
    50,
    54,
    25,
    25,
    49,
    25,
    83,
    55,
    54,
    55,
    55,
    35,
    42,
    34,
    54,
    47,
    72,
    45,
    47,
    42,
    30,
    24,
    30,
    50,
)
_OTHER = 100  # any other character (another script, a symbol): a full em, wider than any Latin letter
_MINUS = 50  # Plotly writes negative ticks with U+2212, as wide as a digit

TICK_PX = 12.0  # Streamlit's theme: tick labels (and the colour bar's)
LINE_PX = 15.0  # one line of tick labels, lying flat
TITLE_ROOM = 41.0  # an axis title and its standoff
LABEL_PAD = 21.0  # between the plot and its y labels, and the margin's own padding
TOP_PAD = 15.0  # above the x labels on top
TITLE_LINE = 26.0  # the figure's title, on a line of its own at the top (viz/heatmap.py puts it there)
COLORBAR = 75.0  # the colour bar with its padding on both sides, beside its labels' width
BOTTOM = 12.0  # the last row's label reaches a little below the plot
SAFETY = 4.0  # px on every side: a little more than the estimate's error, so the first pass fits


@functools.lru_cache(maxsize=4096)
def _units(c: str) -> int:
    """A character's width in hundredths of the font size: an accented Latin letter as its base letter."""
    base = unicodedata.normalize("NFKD", c)[:1] or c
    return _ASCII[ord(base) - 32] if 32 <= ord(base) < 127 else _OTHER


def text_width(text: str, px: float = TICK_PX) -> float:
    """The width in px of `text` written in Streamlit's font at `px`."""
    return sum(map(_units, text)) * px / 100


def _widest(labels, px: float) -> float:
    return max((text_width(str(s), px) for s in labels), default=0.0)


def _tick_labels(lo: float, hi: float) -> list[str]:
    """Every label a colour bar over [lo, hi] may carry, for each step Plotly may pick (1, 2, 5 x 10^k with 2 to
    12 ticks): the widest of them bounds the labels Plotly will write."""
    span = hi - lo
    if not (math.isfinite(span) and span > 0):
        return [f"{lo:g}"]
    labels = []
    for k in range(math.floor(math.log10(span / 12)), math.ceil(math.log10(span / 2)) + 1):
        for m in (1, 2, 5):
            step = m * 10.0**k
            if not 2 <= span / step <= 12:
                continue
            decimals = max(0, -math.floor(math.log10(step) + 1e-9))
            first = math.ceil(lo / step - 1e-9)
            labels += [f"{i * step:.{decimals}f}" for i in range(first, math.floor(hi / step + 1e-9) + 1)]
    return labels or [f"{lo:g}", f"{hi:g}"]


def _colorbar_width(trace: go.Heatmap, px: float) -> float:
    lo, hi = trace.zmin, trace.zmax
    if lo is None or hi is None:
        flat = [v for row in trace.z for v in row if v is not None and math.isfinite(v)]
        lo, hi = (min(flat), max(flat)) if flat else (0.0, 1.0)
    units = max(sum(_MINUS if c == "-" else _ASCII[ord(c) - 32] for c in s) for s in _tick_labels(lo, hi))
    return units * px / 100


def _angle(axis) -> float | None:
    """The angle of an axis's tick labels: None when Plotly would choose it (it turns labels that overlap)."""
    return axis.tickangle if isinstance(axis.tickangle, int | float) else None


def reserve(fig: go.Figure, scale: float = 1.0) -> go.Figure:
    """Give a heatmap figure the margins its labels need (in place; returns it). `scale`: presenter mode's
    root font size (Streamlit's chart sizes follow it). Other figures are returned unchanged."""
    lay = fig.layout
    if (
        not fig.data
        or any(t.type != "heatmap" for t in fig.data)
        or any((t.xaxis or "x") != "x" or (t.yaxis or "y") != "y" for t in fig.data)
    ):
        return fig
    x, y = lay.xaxis, lay.yaxis
    angle = _angle(x)
    if x.side != "top" or angle not in (0, -45, -90) or y.side not in (None, "left"):
        return fig  # a layout this estimate was not measured on: Plotly measures it itself
    px = TICK_PX * scale
    trace = fig.data[0]
    x_labels = [str(v) for v in (trace.x or ())] if x.showticklabels is not False else []
    y_labels = [str(v) for v in (trace.y or ())] if y.showticklabels is not False else []
    titled = {a: bool(ax.title.text) for a, ax in (("x", x), ("y", y))}

    left = _widest(y_labels, px) + LABEL_PAD * scale + TITLE_ROOM * scale * titled["y"]
    wide, last = _widest(x_labels, px), text_width(x_labels[-1], px) if x_labels else 0.0
    if angle == 0:
        extent, right = LINE_PX * scale if x_labels else 0.0, last / 2 + 10 * scale
    elif angle == -45:
        extent, right = (0.707 * wide + 13.5 * scale) if x_labels else 0.0, 0.707 * last + 10 * scale
    else:  # -90: the words stand upright
        extent, right = wide, LINE_PX * scale + 2
    top = TOP_PAD * scale + TITLE_ROOM * scale * titled["x"] + extent + TITLE_LINE * scale * bool(lay.title.text)
    if any(t.showscale is not False for t in fig.data):
        if any(t.colorbar.x != 1 for t in fig.data):
            return fig  # Plotly's own place for the bar: its room depends on the plot's width
        right = max(right, COLORBAR + _colorbar_width(trace, px))  # the bar's own size is in px

    m = lay.margin
    fig.update_layout(
        margin={
            side: math.ceil(max(getattr(m, side) or 0, need + SAFETY))
            for side, need in (("l", left), ("r", right), ("t", top), ("b", BOTTOM * scale))
        }
    )
    return fig


ROW_PX = 22.0  # the least height of one row of a heatmap, at the theme's size (more in presenter mode)


def fit_rows(fig: go.Figure, scale: float = 1.0) -> go.Figure:
    """A heatmap whose margins are reserved (`reserve`) gets at least `ROW_PX` (times `scale`) per row between them:
    a fixed height minus the margins of larger labels (presenter mode) once left a 4-row mask 55 px tall. In
    place; other figures unchanged, and so is a heatmap whose rows have no labels to read (its y axis shows none:
    the lesson's 128 rows of xᵀ beside W^Q were once drawn 2,800 px tall)."""
    lay = fig.layout
    if not fig.data or any(t.type != "heatmap" for t in fig.data) or lay.margin.t is None or lay.margin.b is None:
        return fig
    if lay["yaxis" + (fig.data[0].yaxis or "y")[1:]].showticklabels is False:
        return fig
    rows = len(fig.data[0].y) if fig.data[0].y is not None else len(fig.data[0].z or ())
    need = math.ceil(lay.margin.t + lay.margin.b + rows * ROW_PX * scale)
    if (lay.height or 450) < need:
        fig.update_layout(height=need)
    return fig
