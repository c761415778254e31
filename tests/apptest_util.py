"""Helpers for AppTest-based page tests: run the app or one page, read back what it shows."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
from streamlit.testing.v1 import AppTest

from ui.widgets import LAZY_KEYS

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 60  # the first run imports torch and loads the checkpoint


def run_app(page: str | None = None, query: dict[str, str] | None = None, timeout: float = TIMEOUT, **state) -> AppTest:
    """The whole app (sidebar included), optionally switched to pages/<page>.py, with state preset.

    With `query`, the first run is a visit through a link carrying that query string (to the page, when given).
    `timeout`: seconds a run may take (a large model's page takes longer).
    """
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=timeout)
    for key, value in state.items():
        at.session_state[key] = value
    if query is not None:
        at.query_params.update(query)
        if page:
            at.switch_page(f"pages/{page}.py")
        return open_folds(at.run())
    at.run()
    if page:
        at.switch_page(f"pages/{page}.py")
        at.run()
    return open_folds(at)


def open_folds(at: AppTest, rounds: int = 4) -> AppTest:
    """Open every lazy fold the page has drawn (ui.widgets.fold: its content runs only while open), as a reader
    clicking each one would, and rerun; folds inside folds take another round (at most `rounds`)."""
    for _ in range(rounds):
        if at.exception or LAZY_KEYS not in at.session_state:
            return at
        closed = [k for k in sorted(at.session_state[LAZY_KEYS]) if k in at.session_state and not at.session_state[k]]
        if not closed:
            return at
        for k in closed:
            at.session_state[k] = True
        at.run()
    return at


def run_page(page: str, **state) -> AppTest:
    """One page on its own (no sidebar): it must initialise the state it needs."""
    at = AppTest.from_file(str(ROOT / "pages" / f"{page}.py"), default_timeout=TIMEOUT)
    for key, value in state.items():
        at.session_state[key] = value
    return open_folds(at.run())


def figures(at: AppTest) -> list[dict]:
    """Every plotly chart on the page as its figure JSON (data arrays included)."""
    return [json.loads(el.proto.spec) for el in at.get("plotly_chart")]


def decode(values) -> np.ndarray:
    """A plotly JSON array as floats: a plain list (None -> NaN), or Plotly 7's typed array
    {"dtype", "bdata" (base64), "shape"}. The one reader of figure arrays for every test."""
    if isinstance(values, dict) and "bdata" in values:
        arr = np.frombuffer(base64.b64decode(values["bdata"]), dtype=np.dtype(values["dtype"]))
        shape = values.get("shape")
        return (arr.reshape([int(v) for v in str(shape).split(",")]) if shape else arr).astype(float)
    return np.asarray(values, dtype=float)


def chart_spec(at: AppTest, key: str) -> dict:
    """The figure JSON of the plotly chart drawn with widget key `key`."""
    for el in at.get("plotly_chart"):
        if el.proto.id.endswith("-" + key):
            return json.loads(el.proto.spec)
    raise AssertionError(f"no chart with key {key!r}; charts: {[e.proto.id for e in at.get('plotly_chart')]}")


def heatmap_z(fig: dict, trace: int = 0) -> np.ndarray:
    """The z matrix of a figure's heatmap trace (NaN where a cell is a gap, e.g. -inf)."""
    z = fig["data"][trace]["z"]
    if isinstance(z, list) and z and isinstance(z[0], dict):  # a list of typed rows
        return np.stack([decode(row) for row in z]).astype(float)
    return decode(z).astype(float) if isinstance(z, dict) else np.array(z, dtype=float)


def all_text(at: AppTest) -> str:
    """Markdown, captions, titles, headers, alerts and LaTeX of the page, joined (for asserting on text)."""
    parts = []
    for kind in (
        "markdown",
        "caption",
        "title",
        "header",
        "subheader",
        "latex",
        "info",
        "warning",
        "error",
        "success",
        "code",
        "metric",
        "text",
    ):
        for el in at.get(kind):
            parts.append(str(getattr(el, "value", "")) + " " + str(getattr(el, "label", "") or ""))
    return "\n".join(parts)


def title(at: AppTest) -> str:
    return at.title[0].value if at.title else ""


def state(at: AppTest, key: str, default=None):
    """The session's value of `key` (AppTest's session_state has no .get)."""
    try:
        return at.session_state[key]
    except KeyError:
        return default


def no_exception(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]


_RULE = re.compile(r"\|( *:?-+:? *\|)+")  # a markdown table's second line: | :--- | ---: |


def tables(node) -> list[pd.DataFrame]:
    """Every table under `node` (an AppTest, an expander, a column) in page order: st.dataframe's value, and each
    small table written as text (ui.widgets.small_table) read back: words unescaped (a short cell's no-break spaces as
    spaces), a column of numbers as numbers (as written: rounded), an empty first header as the index."""
    found = []
    for el in _elements(node.main if isinstance(node, AppTest) else node):
        if el.type == "dataframe":
            found.append(el.value)
        elif el.type == "markdown" and (df := read_table(el.value)) is not None:
            found.append(df)
    return found


def table_with(node, column: str, nth: int = 0) -> pd.DataFrame:
    """The `nth` table under `node` (`tables`, in page order) that has a column named `column`."""
    found = [df for df in tables(node) if column in df.columns]
    assert len(found) > nth, f"no table with column {column!r}" + (f" (number {nth})" if nth else "")
    return found[nth]


def _elements(node):
    children = getattr(node, "children", None)
    if children is None:
        yield node
        return
    for child in children.values():
        yield from _elements(child)


def read_table(text: str) -> pd.DataFrame | None:
    """A markdown table (the whole of `text`) as a DataFrame; None if `text` is not one."""
    lines = text.strip().splitlines()
    if len(lines) < 2 or not _RULE.fullmatch(lines[1].strip()):
        return None

    def cells(line: str) -> list[str]:
        return [
            re.sub(r"\\(.)", r"\1", c.strip()).replace("\u00a0", " ")
            for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]
        ]

    df = pd.DataFrame([cells(line) for line in lines[2:]], columns=cells(lines[0]))
    for i in range(len(df.columns)):
        try:
            df.isetitem(i, pd.to_numeric(df.iloc[:, i]))
        except (ValueError, TypeError):
            pass
    if df.columns[0] == "":
        df = df.set_index("")
        df.index.name = None
    return df
