"""ui/replay.py: a section drawn once per process is replayed as messages, in its place, in any session."""

from __future__ import annotations

import uuid

from streamlit.testing.v1 import AppTest

TIMEOUT = 60


def section_script():
    import pandas as pd
    import plotly.graph_objects as go
    import streamlit as st

    from ui import replay

    ss = st.session_state

    def draw() -> None:
        ss["calls"] = ss.get("calls", 0) + 1
        st.markdown(f"**{ss['salt']}**")
        c1, c2 = st.columns(2)
        c1.caption("left")
        c2.plotly_chart(go.Figure(go.Heatmap(z=[[1, 2], [3, 4]])), key="replayed_chart")
        with st.expander("The numbers"):
            st.dataframe(pd.DataFrame({"x": [1, 2]}))
        if ss.get("widget"):
            st.checkbox("mine", key="mine")

    st.markdown("before")
    if ss.get("page"):  # the same section on another page (a follower's page runs under the page's hash)
        from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

        with get_script_run_ctx().run_with_active_hash(ss["page"]):
            replay.section(("test", ss["salt"], ss.get("widget")), draw)
    elif ss.get("inside"):  # another place on the page: inside a column, after other elements
        _, box = st.columns(2)
        with box:
            st.caption("first in the column")
            replay.section(("test", ss["salt"], ss.get("widget")), draw)
    else:
        replay.section(("test", ss["salt"], ss.get("widget")), draw)
    st.markdown("after")


def session(salt: str, **state) -> AppTest:
    at = AppTest.from_function(section_script, default_timeout=TIMEOUT)
    at.session_state["salt"] = salt
    for k, v in state.items():
        at.session_state[k] = v
    return at.run()


def elements(at, root) -> list[str]:
    """The elements under `root` in page order, as text (blocks by their children)."""
    out = []
    for child in root.children.values() if hasattr(root, "children") else []:
        out.append(child.type)
        out += elements(at, child)
    return out


def test_a_section_is_drawn_once_then_replayed_in_another_session_in_its_place():
    salt = uuid.uuid4().hex
    first = session(salt)
    assert first.session_state["calls"] == 1 and not first.exception
    other = session(salt)  # another session: the same elements, and the section's code did not run
    assert "calls" not in other.session_state and not other.exception
    assert elements(other, other.main) == elements(first, first.main)
    assert [m.value for m in other.markdown] == ["before", f"**{salt}**", "after"]
    assert [c.proto.spec for c in other.get("plotly_chart")] == [c.proto.spec for c in first.get("plotly_chart")]
    assert other.dataframe[0].value["x"].tolist() == [1, 2]
    moved = session(salt, inside=True)  # replayed inside a column, below another element: every piece there
    assert "calls" not in moved.session_state and not moved.exception
    col = moved.columns[1]
    assert [c.value for c in col.caption] == ["first in the column", "left"]
    assert [m.value for m in col.markdown] == [f"**{salt}**"]
    assert len(col.get("plotly_chart")) == 1 and col.dataframe[0].value["x"].tolist() == [1, 2]
    assert [m.value for m in moved.markdown][-1] == "after"  # the page goes on after the replayed section


def test_a_section_with_a_widget_is_drawn_every_time():
    salt = uuid.uuid4().hex
    at = session(salt, widget=True)
    assert at.session_state["calls"] == 1 and at.checkbox[0].label == "mine"
    again = session(salt, widget=True)
    assert again.session_state["calls"] == 1 and again.checkbox[0].label == "mine"  # drawn, not replayed
    again.checkbox[0].check().run()  # the widget is the session's own, and works
    assert again.session_state["mine"] is True and again.session_state["calls"] == 2


def test_a_replayed_chart_keeps_its_key():
    """A chart drawn with a key registers its id; its replay does too (a second element with that key in the same
    run is refused, as Streamlit refuses it when drawing)."""
    from ui import replay

    salt = uuid.uuid4().hex
    session(salt)
    [rec] = [r for k, r in replay._recordings.items() if k[0] == ("test", salt, None)]
    assert len(rec.ids) == 1 and next(iter(rec.ids)).endswith("replayed_chart")
    other = session(salt, page="another page's hash")  # recorded again there: its chart's id is that page's
    assert other.session_state["calls"] == 1 and not other.exception
    ids = [r.ids for k, r in replay._recordings.items() if k[0] == ("test", salt, None)]
    assert len(ids) == 2 and ids[0] != ids[1] and all(next(iter(i)).endswith("replayed_chart") for i in ids)
    again = session(salt, page="another page's hash")  # and replayed there with that page's id
    assert "calls" not in again.session_state and not again.exception


def test_the_recordings_are_bounded_in_number_and_bytes(monkeypatch):
    """Per process and least recently used first out: a server up for a term keeps at most MAX_SECTIONS recordings
    of at most MAX_BYTES in all."""
    from ui import replay

    replay.clear()
    monkeypatch.setattr(replay, "MAX_SECTIONS", 3)
    monkeypatch.setattr(replay, "MAX_BYTES", 1000)
    for i in range(5):
        replay._keep(i, replay.Recording([], 0, 100, frozenset()))
    assert list(replay._recordings) == [2, 3, 4] and replay._bytes == 300
    replay._keep("big", replay.Recording([], 0, 900, frozenset()))  # 1,200 bytes: the oldest go until it fits
    assert list(replay._recordings) == [4, "big"] and replay._bytes == 1000
    replay.clear()
    assert not replay._recordings and replay._bytes == 0
