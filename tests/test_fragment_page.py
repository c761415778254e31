"""A fragment's run stays on the page the session shows, with its own widgets' values only (ui/fragment_page.py).

The browser's side of the race (the teacher's move, its event back on the stream, the panel's ask with the page left
and the widgets' old values) is walked in Chromium: tests/browser/test_classroom_browser.py
`test_teacher_moves_between_pages` and `test_a_teachers_lesson_step_holds_when_the_run_reaches_the_browser_late`.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.runtime.scriptrunner_utils.script_requests import (
    RerunData,
    ScriptRequest,
    ScriptRequests,
    ScriptRequestType,
)

from ui import fragment_page

# the widgets the session's last run drew: the lesson's step picker (outside any fragment), the teacher's panel's
# event trigger (in fragment "panel"), a button of the follower's page (in fragment "page")
DRAWN_IN = {"lesson_jump": None, "class_sync": "panel", "explore": "page"}


@pytest.fixture
def shown(monkeypatch):
    """The session's last run drew page "lesson" at `?s=hello&step=3`, and the widgets of DRAWN_IN."""
    registry = {wid: SimpleNamespace(fragment_id=fragment) for wid, fragment in DRAWN_IN.items()}
    query = SimpleNamespace(_query_params={"s": "hello", "step": "3"})
    widgets = SimpleNamespace(widget_metadata=registry)
    state = SimpleNamespace(_state=SimpleNamespace(_new_widget_state=widgets, query_params=query))
    ctx = SimpleNamespace(page_script_hash="lesson", session_state=state)
    monkeypatch.setattr(fragment_page, "get_script_run_ctx", lambda suppress_warning=False: ctx)
    return ctx


def states(*ids: str) -> WidgetStates:
    out = WidgetStates()
    for wid in ids:
        out.widgets.add(id=wid, string_value="the browser's")
    return out


def rerun(**data) -> ScriptRequest:
    return ScriptRequest(ScriptRequestType.RERUN, RerunData(**data))


def test_a_fragment_asked_for_under_the_page_left_is_the_whole_page_shown(shown):
    """The browser is behind: the page the session shows, drawn whole with the session's values (a fragment's run
    alone left the page empty)."""
    asked = rerun(
        page_script_hash="classroom",
        page_name="classroom",
        query_string="",
        fragment_id_queue=["panel"],
        is_fragment_scoped_rerun=True,
        is_auto_rerun=True,
        widget_states=states("lesson_jump", "class_sync"),
    )
    taken = fragment_page.on_its_page(asked).rerun_data
    assert (taken.page_script_hash, taken.page_name, taken.query_string) == ("lesson", "", "s=hello&step=3")
    assert (taken.fragment_id, taken.fragment_id_queue, taken.is_fragment_scoped_rerun) == (None, [], False)
    assert not taken.is_auto_rerun
    assert taken.widget_states is None  # the session's values: the browser's are the page's it still shows


@pytest.mark.parametrize(
    "asked",
    [
        rerun(page_script_hash="classroom"),  # a run of the whole app: a move, as the browser asked
        rerun(page_script_hash="lesson", query_string="s=hello&step=3", fragment_id_queue=["panel"]),  # as shown
        rerun(
            page_script_hash="lesson",
            query_string="s=hello&step=3",
            fragment_id_queue=["panel"],
            widget_states=states("class_sync"),
        ),
        ScriptRequest(ScriptRequestType.STOP),
        None,
    ],
)
def test_other_requests_are_left_as_they_are(shown, asked):
    assert fragment_page.on_its_page(asked) is asked


def test_no_page_drawn_yet_leaves_the_request(monkeypatch):
    monkeypatch.setattr(fragment_page, "get_script_run_ctx", lambda suppress_warning=False: None)
    asked = rerun(page_script_hash="classroom", fragment_id_queue=["panel"])
    assert fragment_page.on_its_page(asked) is asked


def test_a_fragment_takes_only_its_own_widgets_values_from_the_browser(shown):
    """The step picker's value in a panel's ask is the browser's old one (the Next's run had not reached it): its
    callback would take the lesson back a step. A widget the session does not know is left out too."""
    asked = rerun(
        page_script_hash="lesson",
        query_string="s=hello&step=3",
        fragment_id_queue=["panel"],
        widget_states=states("lesson_jump", "class_sync", "explore", "unknown"),
    )
    taken = fragment_page.on_its_page(asked).rerun_data
    assert [w.id for w in taken.widget_states.widgets] == ["class_sync"]
    both = rerun(
        page_script_hash="lesson",
        query_string="s=hello&step=3",
        fragment_id_queue=["panel", "page"],
        widget_states=states("class_sync", "explore"),
    )
    assert fragment_page.on_its_page(both) is both  # (nothing to leave out: the same request)


def test_a_fragment_runs_at_the_address_the_session_shows(shown):
    """The browser's address in an ask sent before the Next's run reached it still says the step before: st.query_params
    in the fragment's run says the session's."""
    asked = rerun(page_script_hash="lesson", query_string="s=hello&step=2", fragment_id_queue=["panel"])
    assert fragment_page.on_its_page(asked).rerun_data.query_string == "s=hello&step=3"


def test_a_run_of_the_whole_app_takes_every_widgets_value(shown):
    asked = rerun(
        page_script_hash="lesson", query_string="step=2", widget_states=states("lesson_jump", "class_sync", "explore")
    )
    assert fragment_page.on_its_page(asked) is asked  # (the address too: a link, the browser's back button)


def test_installed_on_the_queue_the_script_thread_takes_its_runs_from(shown, monkeypatch):
    for name in ("on_scriptrunner_ready", "on_scriptrunner_yield"):
        monkeypatch.setattr(ScriptRequests, name, getattr(ScriptRequests, name))  # (undone after the test)
    fragment_page.install()
    fragment_page.install()  # twice: wrapped once
    assert not getattr(ScriptRequests.on_scriptrunner_ready.__wrapped__, "glass_on_its_page", False)
    # after a run (ready), and within one (yield: a fragment's own st.rerun, which may cut the run short)
    for take, scoped in (("on_scriptrunner_ready", False), ("on_scriptrunner_yield", True)):
        queue = ScriptRequests()
        asked = RerunData(page_script_hash="classroom", fragment_id="panel", is_fragment_scoped_rerun=scoped)
        assert queue.request_rerun(asked)
        taken = getattr(queue, take)()
        assert taken.type == ScriptRequestType.RERUN
        assert taken.rerun_data.page_script_hash == "lesson"
        assert taken.rerun_data.fragment_id_queue == []  # (asked under another page: the whole page)
