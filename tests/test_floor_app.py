"""bench/streamlit_floor.py's bare app: the floor a follower's redraw is compared with must send what it says."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from bench.follower_profile import COUNTED
from bench.streamlit_floor import WIDGETS, bare_app


def test_the_bare_app_draws_its_paragraphs_and_each_kind_of_widget(tmp_path):
    """Every widget kind the follower hook counts (bench/follower_profile.py) has a line in the bare app, and the
    app draws as many of each as asked, with its paragraphs, and no exception."""
    assert set(WIDGETS) == set(COUNTED)
    widgets = {kind: 2 for kind in WIDGETS}
    (tmp_path / "app.py").write_text(bare_app(3, widgets))
    at = AppTest.from_file(str(tmp_path / "app.py"), default_timeout=60).run()
    assert not at.exception
    assert sum("Paragraph" in m.value for m in at.markdown) == 3
    counts = {
        "button": len(at.button),
        "selectbox": len(at.selectbox),
        "radio": len(at.radio),
        "text_input": len(at.text_input) - 1,  # (the sidebar's sentence box)
        "checkbox": len(at.checkbox),
        "slider": len(at.slider),
        "number_input": len(at.number_input),
        "multiselect": len(at.multiselect),
        "expander": len(at.expander),
    }
    assert counts == widgets
