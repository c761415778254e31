"""Figures built without plotly's checks (viz/heatmap.py `figure`) are the figures plotly's checks would build: the
same JSON reaches the browser, and a property plotly does not know still fails loudly, here."""

from __future__ import annotations

import json

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
import pytest

from viz import heatmap as vh
from viz import lesson_base as lb

WORDS = ["0:the", "1:animal", "2:didn't", "3:cross", "4:it"]


def sent(fig: go.Figure) -> dict:
    """What st.plotly_chart sends for `fig` (its spec), parsed."""
    return json.loads(pio.to_json(fig, validate=False))


def checked(fig: go.Figure) -> dict:
    """The same figure after plotly's checks of every property."""
    return sent(go.Figure(fig.to_dict()))


def masked() -> np.ndarray:
    z = np.random.default_rng(1).normal(size=(5, 5))
    z[np.triu_indices(5, 1)] = -np.inf
    return z


CASES = {
    "weights, small, titled": lambda: vh.heatmap(
        np.random.default_rng(0).random((5, 5)), WORDS, WORDS, "weights", title="Head 1", x_title="key", y_title="query"
    ),
    "scores with -inf": lambda: vh.heatmap(masked(), WORDS, WORDS, "scores"),
    "mask": lambda: vh.heatmap(masked(), WORDS, WORDS, "mask", height=300),
    "activations, wide": lambda: vh.heatmap(
        np.random.default_rng(2).normal(size=(5, 16)), vh.dims(16), WORDS, "activations", digits=2
    ),
    "all zero scores": lambda: vh.heatmap(np.zeros((2, 3)), ["a", "b", "c"], ["x", "y"], "scores"),
    **{kind: (lambda k=kind: vh.heatmap(np.eye(3), ["a", "b", "c"], ["x", "y", "z"], k)) for kind in vh.SCALES},
    "the lesson's bars": lambda: lb.bars(WORDS, [0.1, 0.5, 0.2, 0.15, 0.05], "weights", "weight", highlight=1),
    "the lesson's table": lambda: lb.plain_table({"word": ["je", "<eos>"], "probability": [0.9, 0.1]}),
    "the lesson's layout on bars": lambda: lb.layout(lb.bars(["a"], [1], "t", "y"), height=400, yaxis_title="p"),
}


@pytest.mark.parametrize("case", CASES)
def test_plotly_checks_change_nothing_in_a_figure(case):
    fig = CASES[case]()
    assert sent(fig) == checked(fig)


def test_a_heatmap_with_a_frame_is_still_what_plotly_checks_would_build():
    fig = CASES["weights, small, titled"]()
    vh.outline(fig, (1, 1), (0, 4))
    assert sent(fig)["layout"]["shapes"][0]["line"] == {"color": vh.MARKED, "width": 3}
    assert sent(fig) == checked(fig)


def test_named_scales_are_sent_as_their_stops():
    """plotly.js has scales of its own under some of plotly's names ("Blues" runs dark to light there): a name must
    never reach the browser."""
    for kind, settings in vh.SCALES.items():
        scale = sent(vh.heatmap(np.eye(2), ["a", "b"], ["x", "y"], kind))["data"][0]["colorscale"]
        assert isinstance(scale, list) and scale[0][0] == 0.0 and scale[-1][0] == 1.0, kind
        if isinstance(settings["colorscale"], str):
            assert scale[0][1] != scale[-1][1]
    assert sent(vh.heatmap(np.eye(2), ["a", "b"], ["x", "y"], "weights"))["data"][0]["colorscale"][0][1] == (
        "rgb(247,251,255)"  # ColorBrewer's Blues starts white
    )


def test_nothing_unset_is_sent():
    spec = sent(vh.heatmap(np.eye(2), ["a", "b"], ["x", "y"], "weights"))
    assert "title" not in spec["layout"] and "texttemplate" in spec["data"][0]  # 4 cells: written in
    assert "title" not in spec["layout"]["xaxis"]
    big = sent(vh.heatmap(np.zeros((12, 12)), [str(i) for i in range(12)], [str(i) for i in range(12)], "weights"))
    assert "texttemplate" not in big["data"][0]


def test_a_misspelt_property_fails_where_plotly_would_have_failed():
    fig = vh.figure([{"type": "heatmap", "z": [[1]], "colour": "red"}], {"height": 200})
    with pytest.raises(ValueError, match="colour"):
        checked(fig)


def test_what_a_caller_changes_afterwards_is_checked_as_before():
    fig = CASES["weights, small, titled"]()
    fig.update_traces(showscale=False, texttemplate=None)  # None unsets, as in a checked figure
    fig.update_layout(xaxis={"showticklabels": False})
    assert "texttemplate" not in sent(fig)["data"][0] and sent(fig)["data"][0]["showscale"] is False
    assert sent(fig) == checked(fig)
    with pytest.raises(ValueError, match="colour"):
        fig.update_traces(colour="red")


def test_every_lesson_steps_figure_is_what_plotly_checks_would_build():
    from model import checkpoint, pipeline
    from viz import lesson

    b = checkpoint.load(checkpoint.SHIPPED)
    a = pipeline.analyse(b, pipeline.prepare(b, "the animal didn't cross the street because it was too tired"))
    c = lesson.context(a, b.tgt_vocab.itos, len(b.src_vocab), meta=b.meta)
    for key in lesson.VIEWS:
        fig = lesson.view(key, c).figure
        assert sent(fig) == checked(fig), key
