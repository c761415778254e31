"""Figures and tables drawn once per content (ui.widgets.once) are the figures of the state that shows them.

A replay keyed on too little would show one class's sentence (or model, or switched-off head, or presenter font) to
another. For each page that replays, every state below is drawn from an empty cache (the truth), then all of them
again one after the other in new sessions without clearing it (each replays or records): every session must show
exactly what its own state drew from scratch, and the states must differ from each other (or the test proves
nothing).
"""

from __future__ import annotations

import json

import plotly.graph_objects as go
import plotly.io as pio
import pytest
import streamlit as st

from tests.apptest_util import run_app
from ui import replay

TM, TIRED = "thinking machines", "the animal didn't cross the street because it was too tired"
STATES = {  # each a link's query (ui/state.py): what a student's page opens on
    "sentence": {"s": TM},
    "another sentence": {"s": TIRED},
    "another model": {"s": TM, "m": "no_mask"},
    "a head off": {"s": TM, "off": "dec.1.cross_attn:0,enc.0.self_attn:1"},
    "scale off": {"s": TM, "scale": "0"},
    "presenter mode": {"s": TM, "presenter": "1"},
}
# page -> what else its links say (the lesson: step 18, encoder-decoder attention, which every state changes)
PAGES = {
    "lesson": {"step": "18"},
    "overview": {},
    "encoder": {},
    "output": {},
    "multi_head": {},
    "before": {},
    "positional": {},
    "why_attention": {},
    "self_attention": {},
    "tokens": {},
    "cross_attention": {},
    "decoder": {},
}


def shown(at) -> list:
    """What the page's replayable elements show: plotly figures, tables, notices, captions and the text around them."""
    out = [("plotly", c.proto.spec) for c in at.get("plotly_chart")]
    out += [("table", t.value.to_json()) for t in at.table]
    out += [("dataframe", d.value.to_json()) for d in at.dataframe]
    out += [("link", e.proto.page, e.proto.label) for e in at.get("page_link")]
    out += [
        (kind, e.value)
        for kind in (
            "info",
            "warning",
            "success",
            "caption",
            "markdown",
            "latex",
            "metric",
            "title",
            "header",
            "subheader",
        )
        for e in getattr(at, kind)
    ]
    return out


@pytest.mark.parametrize("page", PAGES)
def test_a_replayed_element_is_its_own_states(page):
    states = {
        name: {**state, **PAGES[page], **({"lesson": state["s"]} if page == "lesson" else {})}
        for name, state in STATES.items()
    }
    truth = {}
    for name, state in states.items():
        replay.clear()  # (the figures and sections drawn once per content)
        st.cache_data.clear()  # (and the results computed once per content, e.g. the encoder's span check)
        st.cache_resource.clear()
        at = run_app(page, query=state)
        assert not at.exception, (name, at.exception)
        truth[name] = shown(at)
        for spec in (e.proto.spec for e in at.get("plotly_chart")):  # viz/heatmap.py `figure` skips these checks
            assert json.loads(pio.to_json(go.Figure(json.loads(spec)), validate=False)) == json.loads(spec), name
    # (states that show the same elements on this page, e.g. a model-only page, only need to agree)
    assert len({repr(v) for v in truth.values()}) >= 2, "every state looks the same here: nothing is tested"
    for _ in range(2):  # the first round records what the cache has not seen, the second replays everything
        for name, state in states.items():
            assert shown(run_app(page, query=state)) == truth[name], name
