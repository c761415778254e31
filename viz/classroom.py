"""Classroom mode's pictures: the distribution of a class's answers, and the join link as a QR code.

Pure builders (no Streamlit). Option labels come from the class store, which refuses ``<`` and ``>``,
so plotly (which reads a few HTML tags in labels) only ever gets plain text.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import plotly.graph_objects as go
import segno

ANSWER, OTHER, PENDING = "#2ca02c", "#9e9e9e", "#1f77b4"


def answers_figure(options: Sequence[str], counts: Sequence[int], answer: int | None = None) -> go.Figure:
    """A horizontal bar per option, its count and share written on it; once `answer` (the model's) is
    given, its bar is green and the others grey (before: all blue, so nothing gives it away)."""
    total = sum(counts)
    colours = [PENDING if answer is None else ANSWER if i == answer else OTHER for i in range(len(options))]
    text = [f"{c} ({c / total:.0%})" if total else "0" for c in counts]
    labels = [f"{o}  ✓ model" if i == answer else o for i, o in enumerate(options)]
    fig = go.Figure(go.Bar(x=list(counts), y=labels, orientation="h", marker={"color": colours}, text=text,
                           textposition="auto", hovertemplate="%{y}: %{x}<extra></extra>"))
    fig.update_layout(height=70 + 48 * len(options), margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      title={"text": f"{total} answer{'s' if total != 1 else ''}", "font": {"size": 14}},
                      xaxis={"title": None, "rangemode": "tozero", "dtick": max(1, (max(counts, default=0) + 4) // 5)},
                      yaxis={"autorange": "reversed", "type": "category"}, showlegend=False)
    return fig


def qr_png(text: str, scale: int = 8) -> bytes:
    """`text` (the join link) as a QR code, PNG bytes (error correction M: readable from a projector)."""
    buf = io.BytesIO()
    segno.make(text, error="m").save(buf, kind="png", scale=scale, border=2)
    return buf.getvalue()
