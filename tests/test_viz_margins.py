"""viz/margins.py: the room a heatmap's labels need, reserved before Chromium draws it.

The needs below were measured in Chromium (Plotly's own automargin, `_fullLayout._pushmargin`, Streamlit 1.67's
chart theme) on this app's pages, for the two benchmark sentences: each case rebuilds the same figure and checks
that the reserved margin is at least what Plotly measured (else Plotly draws the chart a second time) and not
much more (else the chart loses room for nothing).
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from viz.heads import head_figure
from viz.heatmap import heatmap
from viz.margins import ROW_PX, SAFETY, TITLE_LINE, fit_rows, reserve, text_width

SENTENCE = [
    "0 the",
    "1 animal",
    "2 didn't",
    "3 cross",
    "4 the",
    "5 street",
    "6 because",
    "7 it",
    "8 was",
    "9 too",
    "10 tired",
    "11 .",
    "12 <eos>",
]
FRENCH = ["0 <bos>", "1 les", "2 jeunes", "3 femmes", "4 ne", "5 sont", "6 pas", "7 effrayées"]
WASTE = 14  # px: the most a side may get beyond the measured need (the estimate's slack plus SAFETY)
# ... except the right side of slanted words without a colour bar: how far the last word reaches past the plot
# depends on its cell's width, which the server cannot know (the browser's column): room for the narrowest cell
WASTE_SLANTED_RIGHT = 24


def _scores(rows: int, cols: int, lim: float) -> np.ndarray:
    z = np.linspace(-lim, lim, rows * cols).reshape(rows, cols)
    return z


CASES = {
    # name: (figure, measured need {side: px})
    "encoder states, 128 units at -45 degrees, a colour bar of -1 .. 1": (
        lambda: heatmap(
            _scores(13, 128, 0.99997),
            [str(i) for i in range(128)],
            SENTENCE,
            "activations",
            x_title="hidden unit",
            y_title="encoder state h_i",
        ),
        {"l": 112.1, "r": 98.2, "t": 83.5, "b": 12.0},
    ),
    "a one-hot matrix, vocabulary words at -45 degrees, weights 0 .. 1": (
        lambda: heatmap(
            np.eye(13, 12),
            [
                "2 <eos>",
                "3 <unk>",
                "4 the",
                "8 because",
                "9 cross",
                "10 didn't",
                "11 it",
                "12 too",
                "13 was",
                "31 animal",
                "44 tired",
                "80 street",
            ],
            SENTENCE,
            "weights",
            x_title="vocabulary id",
            y_title="token",
        ),
        {"l": 112.1, "r": 91.7, "t": 106.1, "b": 12.0},
    ),
    "a head of the grid: words upright, no colour bar": (
        lambda: head_figure(np.full((13, 13), 1 / 13), SENTENCE, SENTENCE, head=0, off=False),
        {"l": 112.1, "r": 15.2, "t": 108.1, "b": 14.5},
    ),
    "decoder scores, flat French words with an accent, -16 .. 16": (
        lambda: heatmap(
            _scores(8, 8, 16.02), FRENCH, FRENCH, "scores", x_title="key (may be looked at)", y_title="query (looking)"
        ).update_layout(xaxis_tickangle=0),
        {"l": 115.8, "r": 94.4, "t": 72.6, "b": 12.0},
    ),
    "a padding mask: grey and white, no colour bar": (
        lambda: heatmap(
            np.zeros((2, 13)),
            [f"pos {i}" for i in range(13)],
            ["sentence 1", "sentence 2"],
            "mask",
            x_title="key position",
            y_title="sentence",
        ),
        {"l": 115.7, "r": 16.6, "t": 93.8, "b": 12.0},
    ),
    "gamma and beta, no y title": (
        lambda: heatmap(
            _scores(2, 128, 1.1316),
            [f"d{i}" for i in range(128)],
            ["γ (weight)", "β (bias)"],
            "activations",
            x_title="dimension",
        ),
        {"l": 78.0, "r": 97.6, "t": 88.2, "b": 12.0},
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_the_reserved_margins_hold_what_plotly_measured_and_little_more(name):
    build, need = CASES[name]
    fig = reserve(build())
    m = fig.layout.margin
    for side, px in need.items():
        got = getattr(m, side)
        assert got >= px, f"{name}: margin {side} = {got} px, Plotly needs {px} px: it would draw the chart twice"
        slanted_right = side == "r" and fig.layout.xaxis.tickangle == -45 and fig.data[0].showscale is False
        title = TITLE_LINE if side == "t" and fig.layout.title.text else 0  # its own line, above Plotly's need
        assert got <= px + title + (WASTE_SLANTED_RIGHT if slanted_right else WASTE), (
            f"{name}: margin {side} = {got} px for a need of {px} px: room lost"
        )


def test_text_width_follows_the_font():
    # Chromium, Source Sans at 12 px: "0 the" 24.96 px, "7 effrayées" 54.24 px (an accent does not widen a letter)
    assert text_width("0 the") == pytest.approx(24.96, abs=0.5)
    assert text_width("7 effrayées") == pytest.approx(text_width("7 effrayees"))
    assert text_width("7 effrayées", px=24) == pytest.approx(2 * text_width("7 effrayées"))
    # another script: a full em a character, more than any Latin letter (a label is never given less room)
    assert text_width("机器") == pytest.approx(24.0)
    assert text_width("机器") > text_width("mm")


def test_presenter_mode_reserves_more_room():
    plain = reserve(heatmap(np.eye(8), FRENCH, FRENCH, "weights", x_title="key", y_title="query"))
    big = reserve(heatmap(np.eye(8), FRENCH, FRENCH, "weights", x_title="key", y_title="query"), scale=1.3)
    for side in "ltb":
        assert getattr(big.layout.margin, side) > getattr(plain.layout.margin, side)


def test_a_longer_word_gets_more_room_and_the_margins_only_grow():
    short = reserve(heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "c"], "weights", x_title="key", y_title="query"))
    long = reserve(
        heatmap(
            np.eye(3),
            ["a", "b", "internationalisation"],
            ["a", "b", "internationalisation"],
            "weights",
            x_title="key",
            y_title="query",
        )
    )
    assert long.layout.margin.l > short.layout.margin.l + 80
    fig = heatmap(np.eye(3), ["a", "b", "c"], ["a", "b", "c"], "weights", title="a title")
    fig.update_layout(margin={"t": 300})
    assert reserve(fig).layout.margin.t == 300  # a margin set wider by its builder stays
    assert short.layout.margin.l == pytest.approx(text_width("a") + 21 + 41 + SAFETY, abs=1)


def test_other_figures_are_left_to_plotly():
    bars = go.Figure(go.Bar(x=["a", "b"], y=[1, 2]))
    assert reserve(bars).layout.margin.l is None
    two = heatmap(np.eye(3), list("abc"), list("abc"), "weights")
    two.add_trace(go.Heatmap(z=np.eye(3), xaxis="x2", yaxis="y2"))
    assert reserve(two).layout.margin.l == 10  # subplots: the builder's margin, untouched
    default_bar = heatmap(np.eye(3), list("abc"), list("abc"), "weights")
    default_bar.update_traces(colorbar_x=1.02)  # Plotly's own place for the bar: its room depends on the width
    assert reserve(default_bar).layout.margin.r == 10
    upright_left = heatmap(np.eye(3), list("abc"), list("abc"), "weights")
    upright_left.update_layout(xaxis_tickangle=-30)  # an angle the estimate was not measured on
    assert reserve(upright_left).layout.margin.t == 10


def test_column_words_lie_flat_only_when_they_fit_side_by_side():
    short = heatmap(np.eye(4), ["0 <bos>", "1 les", "2 ne", "3 pas"], list("abcd"), "weights")
    assert short.layout.xaxis.tickangle == 0
    # four words as wide as "2 machines" run into one another in a half column's heatmap (seen on the decoder page)
    longer = heatmap(np.eye(4), ["0 <bos>", "1 les", "2 machines", "3 pensantes"], list("abcd"), "weights")
    assert longer.layout.xaxis.tickangle == -45
    assert heatmap(np.eye(9), list("abcdefghi"), list("abcdefghi"), "weights").layout.xaxis.tickangle == 0
    assert heatmap(np.eye(20), [f"{i} w" for i in range(20)], list(range(20)), "weights").layout.xaxis.tickangle == -45


def test_rows_get_their_height_only_where_they_are_labelled():
    """fit_rows gives each labelled row at least ROW_PX; a heatmap whose y axis shows no labels keeps the height it
    asked for (the lesson's x beside W^Q: 128 unlabelled rows, once stretched to 2,800 px)."""
    labelled = reserve(heatmap(np.zeros((40, 4)), list("abcd"), [f"{i} w" for i in range(40)], "weights"))
    labelled.update_layout(height=300)
    assert fit_rows(labelled).layout.height >= 40 * ROW_PX
    bare = reserve(heatmap(np.zeros((128, 4)), list("abcd"), [f"d{i}" for i in range(128)], "weights"))
    bare.update_layout(height=300).update_yaxes(showticklabels=False)
    assert fit_rows(bare).layout.height == 300


def test_the_lessons_projection_step_is_no_taller_than_it_asks():
    """Lesson step "qkv" with the model's projection (x, W^Q, q side by side) keeps its own height once the chart's
    margins and rows are fitted as the page does (ui/widgets.chart)."""
    from model import checkpoint, pipeline
    from viz import lesson

    b = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(b, pipeline.prepare(b, "thinking machines"))
    view = lesson.view("qkv", lesson.context(a, b.tgt_vocab.itos, len(b.src_vocab), model=b.model, meta=b.meta))
    fig = view.figure
    assert [a.text for a in fig.layout.annotations][0].startswith("xᵀ [128, 1]")  # the projection's three panels
    asked = fig.layout.height
    assert asked and fit_rows(reserve(fig)).layout.height == asked <= 600
