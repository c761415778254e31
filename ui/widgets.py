"""Streamlit pieces shared by the pages: the sentence header, pickers, matrices with their tables, escaping."""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st
from pandas.api.types import is_bool_dtype, is_float_dtype, is_numeric_dtype
from streamlit.errors import StreamlitPageNotFoundError

from classroom.rules import printable
from model.pipeline import Analysis
from ui import models, page_list, replay, shell
from ui.state import controls_are_mine
from ui.style import PRESENTER_SCALE, chart_font, presenter
from viz.heatmap import as_array, heatmap, outline, table
from viz.margins import fit_rows, reserve

NO_BAR = {"displayModeBar": False}
LAZY_KEYS = "_lazy_folds"  # session-state key: the keys of every lazy fold drawn so far (tests open them all)


def describe_figure(fig) -> str:
    """A one-line text alternative for a plotly figure without one: its title, its kind, its axes and size."""
    lay = fig.layout
    title = (lay.title.text or "").strip() if lay.title else ""
    if not title:  # subplots: their titles are annotations
        title = "; ".join(a.text for a in (lay.annotations or ())[:3] if a.text).strip()
    kinds = sorted({t.type for t in fig.data})
    parts = [title] if title else []
    parts.append(" and ".join(kinds) + " chart" if kinds else "chart")
    x = lay.xaxis.title.text if lay.xaxis and lay.xaxis.title else None
    y = lay.yaxis.title.text if lay.yaxis and lay.yaxis.title else None
    if x or y:
        parts.append(f"{y or 'rows'} by {x or 'columns'}")
    heat = next((t for t in fig.data if t.type == "heatmap" and t.z is not None), None)
    if heat is not None:
        z = heat.z
        parts.append(f"{len(z)} x {len(z[0]) if len(z) else 0} cells, values on hover")
    return ": ".join(parts[:1]) + (", " + ", ".join(parts[1:]) if len(parts) > 1 else "")


def chart(fig, *, key: str, alt: str | None = None, narrow: bool = False, **kw) -> None:
    """st.plotly_chart with a text alternative (`alt`, an aria-label a screen reader reads; described from the
    figure when not given), the base font of the current mode (presenter mode: larger; a `narrow` chart's long title
    on two lines), no mode bar, and a heatmap's margins reserved (viz/margins.py: Plotly then draws it without a
    second pass) with room for its rows."""
    scale = PRESENTER_SCALE if presenter() else 1.0
    fit_rows(reserve(chart_font(fig, narrow=narrow), scale), scale)
    kw.setdefault("config", NO_BAR)
    st.plotly_chart(fig, key=key, alt=(alt or describe_figure(fig))[:600], **kw)


def metrics_row():
    """A row of `st.metric`s side by side: `with metrics_row(): st.metric(...); st.metric(...)`. One horizontal
    container (it wraps on a narrow screen) instead of a column each: half the elements to send and to draw."""
    return st.container(horizontal=True)


@contextmanager
def fold(label: str, key: str, *, expanded: bool = False, **kw) -> Iterator[bool]:
    """A lazy expander: what is inside runs (and is sent to the browser) only while it is open.

        with fold("Exact numbers", key="p_numbers") as shown:
            if shown:
                st.dataframe(...)

    Opening or closing it reruns the page (Streamlit's `on_change="rerun"`); its state is `st.session_state[key]`.
    A page's tests open every fold through LAZY_KEYS (tests/apptest_util.py)."""
    ss = st.session_state
    ss.setdefault(LAZY_KEYS, set()).add(key)
    box = st.expander(label, expanded=expanded, key=key, on_change="rerun", **kw)
    with box:
        yield bool(box.open)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$])")
# A colon that opens a shortcode: Streamlit turns ":it:" into a flag ("7:it → 7:it: the same") and
# ":material/warning:" into an icon; an escaped colon is a colon. One at the end of the text is escaped too: the
# text it is put in may close it ("{md(label)}: the same").
_SHORTCODE = re.compile(r":(?=[A-Za-z0-9_+/\\\-]+(?::|$))")  # (after the escapes above: "\_" may be inside)


def md(text: str) -> str:
    """Escape user text for st.markdown: shown literally, never interpreted (no HTML, no formatting), and always
    sendable (a lone surrogate from a JSON escape is written as its escape: `classroom.rules.printable`)."""
    return _SHORTCODE.sub(r"\\:", _MD_SPECIAL.sub(r"\\\1", printable(text).replace("\n", " ")))


SMALL_TABLE = (20, 12)  # at most this many rows and columns: a table drawn as text (small_table)


def small_table(df: pd.DataFrame, *, hide_index: bool = False, digits: int = 4, **grid) -> None:
    """A table the reader reads (a word per row, a few numbers), drawn as a plain HTML table: in Chromium it costs
    about a quarter of st.dataframe's grid (docs/contributors.md), it grows with presenter mode's text, and a
    screen reader reads its cells. One bigger than SMALL_TABLE stays a scrolling grid; so do the matrices of exact
    numbers (`exact_numbers`), which a reader scrolls rather than reads. `digits`: the decimals of a column of floats
    not rounded (markdown_table); `grid`: the grid's options (st.dataframe's), when the table is too big to be text."""
    rows, cols = SMALL_TABLE
    if len(df) > rows or not 0 < len(df.columns) + (not hide_index) <= cols:
        st.dataframe(df, hide_index=hide_index, **grid)
    else:
        st.markdown(markdown_table(df, index=not hide_index, digits=digits))


def markdown_table(df: pd.DataFrame, *, index: bool = True, digits: int = 4) -> str:
    """`df` as a markdown table: words escaped (md); numbers right-aligned, a column of floats with the decimals it
    was rounded to (its table's choice: 2 for a variance, 6 for weights shown equal), else `digits` (4: the grid's
    precision); a non-zero number those decimals would write as 0 in scientific notation (1.2e-06). The index, when
    shown, is the first column, under the index's name or an empty header."""
    if index:
        df = df.reset_index(names=str(df.index.name or ""), allow_duplicates=True)
    columns = [df.iloc[:, i] for i in range(len(df.columns))]
    numeric = [is_numeric_dtype(c) and not is_bool_dtype(c) for c in columns]
    places = [_places(c, digits) for c in columns]
    lines = [
        "| " + " | ".join(md(str(c)) for c in df.columns) + " |",
        "| " + " | ".join("---:" if n else ":---" for n in numeric) + " |",
    ]
    lines += [
        "| " + " | ".join(_cell(v, d) for v, d in zip(row, places, strict=True)) + " |"
        for row in df.itertuples(index=False)
    ]
    return "\n".join(lines)


def _places(column: pd.Series, digits: int) -> int:
    """The decimals (1 to 6) a column of floats was rounded to; `digits` if it was not."""
    if not is_float_dtype(column):
        return digits
    v = column.to_numpy(dtype=float)
    v = v[np.isfinite(v)]
    return next((d for d in range(1, 7) if np.allclose(v, np.round(v, d), rtol=1e-7, atol=1e-9)), digits)


def _cell(v, digits: int) -> str:
    if isinstance(v, (bool, np.bool_)) or v is None:
        return md(str(v if v is not None else ""))
    if isinstance(v, (int, np.integer)):
        return str(v)
    if isinstance(v, (float, np.floating)):
        v = float(v)
        if math.isnan(v):
            return ""
        if math.isinf(v):
            return str(v)  # "-inf", as a heatmap writes it
        return f"{v + 0.0:.{digits}f}" if v == 0 or abs(v) >= 0.5 * 10**-digits else f"{v:.1e}"  # (no "-0.0000")
    text = md(str(v))
    return text.replace(" ", NBSP) if len(str(v)) <= KEEP_WHOLE else text  # "[1, 4, 128]" is not cut in two


NBSP, KEEP_WHOLE = "\u00a0", 16  # a cell this short keeps to one line (its spaces do not break)


def section(title: str, text: str | None = None, *, level: int = 2) -> None:
    """A heading (level 2: as `st.header`, 3: as `st.subheader`) and the paragraph under it, drawn as one element
    (a page's title stays `st.title`: it names the page). Each element costs the server a message to each browser,
    and a teacher's change redraws a follower's page in a hundred browsers at once (ui/classroom/panels.py):
    about 70 µs of the server's CPU per element and browser (bench/README.md, "Classroom mode")."""
    st.markdown(f"{'#' * level} {title}" + (f"\n\n{text}" if text else ""))


def sentence_header(a: Analysis, show_translation: bool = True) -> None:
    """The sentence as the model sees it: tokens and translation (one element), unknown words flagged,
    truncation noted."""
    p = a.prepared
    chips = " ".join(
        f":red-background[{md(t)} ⚠]" if t in p.unknown else f":blue-background[{md(t)}]" for t in p.tokens
    )
    lines = f"**Source tokens:** {chips} :gray-background[<eos>]"
    if show_translation:
        lines += f"\n\n**Translation:** {md(a.translation) or '*(empty)*'}"
    st.markdown(lines)
    if p.unknown:
        st.warning("Not in the model's vocabulary, fed as <unk>: " + ", ".join(f"**{md(w)}**" for w in p.unknown))
    if p.truncated:
        st.info(
            f"The sentence was cut to the model's limit of {len(p.tokens)} tokens ({p.truncated} token(s) dropped)."
        )


def opening(title: str, about: str | Callable[[Analysis], str], translation: bool = True) -> Analysis:
    """The top of a page that follows the app's sentence: its title, its introduction (`about`, or made from the
    analysis), the sentence through the current model (or the prompt for one, and the page ends there), and the
    sentence's header. Returns the analysis."""
    a = models.analysis()
    st.title(title)
    intro(about(a) if callable(about) else about)
    require_sentence(a)
    sentence_header(a, show_translation=translation)
    return a


def require_sentence(a: Analysis) -> None:
    """Stop the page with a friendly prompt when there is nothing to show."""
    if a.prepared.empty:
        st.info(
            "Type a sentence in the sidebar (for example *i am a student*) to follow it through the model."
            if controls_are_mine()
            else "Your teacher's sentence is empty: the page shows it when they type one."
        )
        st.stop()


# -- heatmaps, drawn once per content --------------------------------------------------------------------
# A class of thirty follows its teacher: thirty sessions draw the same figures at the same moment. A heatmap is
# drawn once per content in this process and replayed as messages after that (ui/replay.py), keyed on what the
# figure shows (a digest of the numbers, the labels, the settings, the key, the mode's font): the first session
# builds the figure and its JSON, every other one gets copies of its message (no plotly).
def _heatmap(
    z,
    x_labels: tuple,
    y_labels: tuple,
    kind: str,
    settings: tuple,
    mark_row: int | None,
    key: str,
    alt: str,
    presenter_mode: bool,
) -> None:
    fig = heatmap(z, list(x_labels), list(y_labels), kind, **dict(settings))
    if mark_row is not None:
        outline(fig, (mark_row, mark_row), (0, len(x_labels) - 1))
    scale = PRESENTER_SCALE if presenter_mode else 1.0
    fit_rows(reserve(chart_font(fig, presenter_mode), scale), scale)
    st.plotly_chart(fig, key=key, alt=alt[:600], config=NO_BAR)


def heatmap_chart(
    values, x_labels, y_labels, kind: str, *, key: str, alt: str, mark_row: int | None = None, **settings
) -> None:
    """`viz.heatmap.heatmap(values, ...)` drawn with `chart`, once per content in this process (also inside a
    `once` section)."""
    z, mode = as_array(values), presenter()
    args = (tuple(x_labels), tuple(y_labels), kind, tuple(sorted(settings.items())), mark_row, key, alt, mode)
    digest = hashlib.blake2b(z.tobytes(), digest_size=16).hexdigest()
    replay.section(("heatmap", z.shape, str(z.dtype), digest, *args), lambda: _heatmap(z, *args))


def shape_of(values) -> str:
    """A matrix's shape as the figures write it: "[7, 64]"."""
    return f"[{', '.join(map(str, np.shape(values)))}]"


# -- other elements, drawn once per content ---------------------------------------------------------------
def once(what: str, key: tuple | None, draw: Callable[[], None]) -> None:
    """`draw()` the first time this process meets (`what`, `key`); after that its messages are replayed
    (ui/replay.py: no page code, no plotly figure, no pandas frame built, no Arrow written). `key` must name everything
    `draw` shows (a model's cache key names its weights and its record); `draw` draws elements only, no widget (a
    section with a widget is drawn every time). Cheap keys only: hashing a DataFrame costs more than drawing it
    (measured). The presenter mode is part of every key, and so is whether a page link can be one (`shell.linked`).
    `key` None (nothing names the content, e.g. the textbook example): `draw()` is simply called."""
    if key is None:
        draw()
    else:
        replay.section(("once", what, key, presenter(), shell.linked()), draw)


def intro(text: str) -> None:
    """A page's introduction, under its title. In presenter mode (a projector) it is folded into one line, "About
    this page": the teacher tells it, and the first screen keeps room for the stop's caption and the page's figure
    (at 1280 x 800 the introductions of four stop pages pushed every figure below the fold)."""
    with projector_fold("About this page", ":material/info:"):
        st.markdown(text)


def projector_fold(label: str, icon: str):
    """A block read in place, folded into the one line `label` in presenter mode (`intro`'s rule, for what comes
    before a page's figure: the multi-head page's formulas and shapes table kept its grid of heads off the
    projector's first screen). Use as `with projector_fold(...):`."""
    return st.expander(label, icon=icon) if presenter() else st.container()


def notice(text: str) -> None:
    """The figure's "notice" line: what to look at, computed from the tensors it draws (escaped, never HTML)."""
    st.info(f"**Notice:** {md(text)}", icon=":material/visibility:")


def figure(
    values,
    x_labels: list[str],
    y_labels: list[str],
    kind: str,
    *,
    title: str,
    shape: str | None = None,
    key: str,
    note: str | Callable[[], str | None] | None = None,
    numbers: bool = True,
    mark_row: int | None = None,
    content: tuple | None = None,
    **kw,
) -> None:
    """A heatmap with its title and shape on one line above it, its notice line under it, and its exact numbers one
    click away (a collapsed table; `numbers` False: none). `mark_row`: a row to outline (the row the notice talks
    about). `content`: what the figure is drawn from (it must name everything the figure shows, as `once`'s key):
    the title, the chart and the notice are then drawn once per content in this process, and `note` may be a
    function, called only then. `shape`: `values`' own unless given. `kw` goes to the heatmap (`x_title`,
    `y_title`, `digits`, ...)."""
    shape = shape or shape_of(values)

    def draw() -> None:
        text = note() if callable(note) else note
        axes = f"{kw['y_title']} by {kw['x_title']}, " if kw.get("x_title") and kw.get("y_title") else ""
        alt = f"{title}, shape {shape}, {axes}a heatmap. " + (text or "Values on hover.")
        st.markdown(f"**{title}** · shape `{shape}`")
        heatmap_chart(values, x_labels, y_labels, kind, key=key, alt=alt, mark_row=mark_row, **kw)
        if text:
            notice(text)

    once(f"figure.{key}", content, draw)
    if numbers:
        exact_numbers(f"Exact numbers · {shape}", f"{key}_numbers", [(values, x_labels, y_labels)])


def exact_numbers(label: str, key: str, matrices: Sequence[tuple], **kw) -> None:
    """The exact numbers of one or more matrices ((values, x_labels, y_labels) each), in a lazy fold."""
    with fold(label, key) as shown:
        if shown:
            for values, x_labels, y_labels in matrices:
                st.dataframe(table(values, x_labels, y_labels), **kw)


def page_link(page: str, label: str, icon: str = ":material/arrow_forward:") -> None:
    """A link to another page of the app (plain text when the page runs on its own, without navigation)."""
    try:
        st.page_link(shell.page_object(page) or page, label=label, icon=icon)
    except StreamlitPageNotFoundError:
        st.markdown(f"→ {label}")


def layer_and_head(layer_label: str, n_layers: int, n_heads: int, keys: tuple[str, str]) -> tuple[int, int]:
    """A layer and a head of it, side by side as radio buttons (layer 0, head 0 first)."""
    c1, c2 = st.columns(2)
    with c1:
        layer = pick(layer_label, range(n_layers), keys[0], 0, style="radio", format_func=lambda i: f"layer {i}")
    with c2:
        head = pick("Head", range(n_heads), keys[1], 0, style="radio", format_func=lambda i: f"head {i}")
    return layer, head


def next_link(page_file: str) -> None:
    """The "Next: ..." link at the bottom of a walkthrough page, in walkthrough order (ui/page_list.py)."""
    nxt = page_list.next_page(Path(page_file).stem)
    if nxt is not None:
        st.divider()
        page_link(nxt.file, f"Next: **{nxt.title}**: {nxt.summary[0].lower()}{nxt.summary[1:]}")


def keep_valid(key: str, options: Sequence, default) -> None:
    """Reset a widget's remembered choice to `default` when it is no longer among its options (another
    sentence or model). Call before drawing the widget."""
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = default


def pick(
    label: str,
    options: Sequence,
    key: str,
    default=None,
    *,
    style: str = "select",
    format_func: Callable[[Any], str] = str,
    **kw,
) -> Any:
    """Choose one of `options`, remembered under `key` across reruns and pages.

    A remembered choice that is no longer an option (a shorter sentence, another model) falls back to
    `default` (or the first option). `style` is "select" (a selectbox), "radio" (horizontal buttons) or
    "slider" (a select_slider; with a single option, a caption instead of a slider).
    """
    options = list(options)
    default = default if default in options else options[0]
    keep_valid(key, options, default)
    st.session_state.setdefault(key, default)
    if style == "radio":
        return st.radio(label, options, key=key, format_func=format_func, horizontal=True, **kw)
    if style == "slider":
        if len(options) == 1:
            st.caption(f"{label}: {format_func(options[0])} (the only one)")
            return options[0]
        return st.select_slider(label, options, key=key, format_func=format_func, **kw)
    return st.selectbox(label, options, key=key, format_func=format_func, **kw)


def reference_box(label: str, key: str, sentence: str, default: Callable[[], str], help: str) -> str:
    """A text box for a reference translation, filled with `default()` whenever the sentence changes (the
    sentence it was filled for is kept under `<key>_for`); what the user types stays until then."""
    ss = st.session_state
    if ss.get(f"{key}_for") != sentence or key not in ss:
        ss[key] = default()
        ss[f"{key}_for"] = sentence
    return st.text_input(label, key=key, help=help)


def operator(symbol: str) -> None:
    """A big +, =, → between two matrices."""
    st.markdown(
        f"<div style='text-align:center;font-size:2.6rem;padding-top:7rem'>{symbol}</div>", unsafe_allow_html=True
    )


def four_steps(s, labels: list[str], titles: list[str], shapes: list[str], keys: list[str], **kw) -> None:
    """scaled + mask = masked -> softmax -> weights (a viz.decoder.MaskSteps), as a 2 x 2 grid with the
    operators between."""
    g1, g2, g3 = st.columns([10, 1, 10])
    with g1:
        figure(s.scaled, labels, labels, "scores", title=titles[0], shape=shapes[0], key=keys[0], numbers=False, **kw)
    with g2:
        operator("+")
    with g3:
        figure(s.mask, labels, labels, "mask", title=titles[1], shape=shapes[1], key=keys[1], numbers=False, **kw)
    g1, g2, g3 = st.columns([10, 1, 10])
    with g1:
        st.markdown("<div style='font-size:2.2rem;line-height:1'>=</div>", unsafe_allow_html=True)
        figure(s.masked, labels, labels, "scores", title=titles[2], shape=shapes[2], key=keys[2], numbers=False, **kw)
    with g2:
        operator("→")
    with g3:
        st.markdown("<div style='font-size:1.3rem;line-height:1.7'>softmax, row by row</div>", unsafe_allow_html=True)
        figure(s.weights, labels, labels, "weights", title=titles[3], shape=shapes[3], key=keys[3], numbers=False, **kw)
