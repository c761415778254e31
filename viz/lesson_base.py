"""The guided lesson's shared pieces: what a step is given (`Context`), what it gives back (`View`), and the
small figure helpers every step uses. Pure: plotly, pandas, plain strings; no Streamlit."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from explain import lesson
from model.pipeline import Analysis, label_word
from viz.heatmap import figure, heatmap

BLUE, GREEN, GREY, ORANGE = "#1f77b4", "#2ca02c", "#9e9e9e", "#ff7f0e"
CONFIG = {"displayModeBar": False}


def repeated(label: str, among: Sequence[str]) -> bool:
    """Does the word of `label` ("5 the") stand more than once in `among` (the labels of a figure's axis)?"""
    word = label_word(label)
    return sum(label_word(x) == word for x in among) > 1


def q(label: str, among: Sequence[str] = ()) -> str:
    """A word for a notice: “the”; “the” (position 5) when the word stands more than once in `among`, so that the
    notice names the bar or cell a reader finds on the axis ("5 the"), not its twin."""
    where = f" (position {label.partition(' ')[0]})" if repeated(label, among) else ""
    return f"“{label_word(label)}”{where}"


def q_at(labels: Sequence[str], i: int) -> str:
    """Word `i` of an axis for a notice (`q`: with its position when the axis holds the word twice)."""
    return q(labels[i], labels)


@dataclass(frozen=True)
class Context:
    """Everything a step needs: the analysis, what the lesson follows, the French vocabulary."""

    a: Analysis
    f: lesson.Focus
    itos: list[str]  # target vocabulary, id -> word
    src_vocab: int  # size of the English vocabulary
    model: Any = None  # the Transformer (read-only: its W^Q for the x·W^Q step); None: that product is not shown
    meta: dict | None = None  # the checkpoint's record (how it was trained), for the training steps
    decide: Callable[[str], Any] | None = None  # text -> explain.pronoun.Story | None (the app caches it)
    hidden: tuple[str, int] | None = None  # a lesson plan's mystery head (module, head): never named or drawn


def context(
    a: Analysis,
    itos: list[str],
    src_vocab: int,
    model: Any = None,
    meta: dict | None = None,
    decide: Callable[[str], Any] | None = None,
    hidden: tuple[str, int] | None = None,
    f: lesson.Focus | None = None,
) -> Context:
    """`f`: what the lesson follows in `a` when the caller has it already (`explain.lesson.focus`)."""
    return Context(a, f or lesson.focus(a), list(itos), src_vocab, model, meta, decide, hidden)


PARKING_WHY = (
    "Weight a head has no better use for lands on <eos>: that token is in every sentence and carries little, so "
    "reading it changes the word little."
)


def parks(labels) -> bool:
    """Is any of these labels the <eos> token (the notice then explains parking)?"""
    return any(label_word(lab) == "<eos>" for lab in labels)


@dataclass(frozen=True)
class View:
    figure: go.Figure
    notice: str
    table: pd.DataFrame  # the exact numbers behind the figure
    textbook: str | None = None  # the Illustrated Transformer's numbers, labelled as such
    warning: str | None = None  # when a sidebar intervention changes what this step shows


# --- small figure helpers -------------------------------------------------------------------------


def _layout(height: int = 320, legend: bool = False, **kw) -> dict:
    """The lesson's figure layout, as `figure` takes it (the layout's own keys: no "yaxis_title" paths)."""
    return {"height": height, "margin": {"l": 10, "r": 10, "t": 30, "b": 10}, "showlegend": legend, **kw}


def layout(fig: go.Figure, height: int = 320, **kw) -> go.Figure:
    fig.update_layout(_layout(height, kw.pop("legend", False)), **kw)
    return fig


def bars(
    labels: list[str],
    values,
    title: str,
    y_title: str,
    colour: str = BLUE,
    highlight: int | None = None,
    digits: int = 3,
) -> go.Figure:
    values = [float(v) for v in values]
    colours = [ORANGE if i == highlight else colour for i in range(len(values))]
    bar = {
        "type": "bar",
        "x": list(labels),
        "y": values,
        "marker": {"color": colours},
        "text": [f"{v:.{digits}f}" for v in values],
        "textposition": "outside",
        "cliponaxis": False,
        "hovertemplate": "%{x}: %{y:.4f}<extra></extra>",
    }
    return figure(
        [bar], _layout(320, title={"text": title}, yaxis={"title": {"text": y_title}}, xaxis={"type": "category"})
    )


ROW = 26  # px, plain_table's row height


def plain_table(columns: dict[str, list], height: int | None = None) -> go.Figure:
    """A small table drawn as a figure, every row ROW px high. Plotly reads "<eos>" in a cell as an HTML tag (an
    escaped &lt; too) and makes that row taller, so the columns' rows stopped lining up: the brackets of special
    tokens are drawn with the look-alike angle quotes ‹ › (U+2039, U+203A)."""

    def text(v):
        return v.replace("<", "\u2039").replace(">", "\u203a") if isinstance(v, str) else v

    table = {
        "type": "table",
        "header": {"values": list(columns), "align": "left", "fill": {"color": "#e8eef7"}, "height": ROW},
        "cells": {"values": [[text(v) for v in col] for col in columns.values()], "align": "left", "height": ROW},
    }
    n = max((len(v) for v in columns.values()), default=1)
    return figure([table], _layout(height or min(520, 60 + 28 * n)))


def indices(n: int) -> list[str]:
    """Category labels "0", "1", ... for a vector's numbers or a layer's units (the pages' dimension axes say "d0":
    `viz.heatmap.dims`)."""
    return [str(i) for i in range(n)]


def vectors(x, labels: list[str], x_title: str, y_title: str, **kw) -> go.Figure:
    """A [rows, d] matrix of vectors as a heatmap: one row a label (a token, a position), its d numbers as columns."""
    return heatmap(x, indices(x.shape[1]), labels, "activations", x_title=x_title, y_title=y_title, **kw)
