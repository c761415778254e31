"""A fragment's run stays on the page the session shows (ui/fragment_page.py).

The browser's side of the race (the teacher's move, its event back on the stream, the panel's ask naming the page left)
is walked in Chromium: tests/browser/test_classroom_browser.py `test_teacher_moves_between_pages`.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from streamlit.runtime.scriptrunner_utils.script_requests import (
    RerunData,
    ScriptRequest,
    ScriptRequests,
    ScriptRequestType,
)

from ui import fragment_page


@pytest.fixture
def shown(monkeypatch):
    """The session's last run drew page "lesson" with `?s=hello`."""
    ctx = SimpleNamespace(page_script_hash="lesson", query_string="s=hello")
    monkeypatch.setattr(fragment_page, "get_script_run_ctx", lambda suppress_warning=False: ctx)
    return ctx


def rerun(**data) -> ScriptRequest:
    return ScriptRequest(ScriptRequestType.RERUN, RerunData(**data))


def test_a_fragment_asked_for_under_the_page_left_runs_on_the_page_shown(shown):
    asked = rerun(page_script_hash="classroom", page_name="classroom", query_string="", fragment_id_queue=["panel"])
    taken = fragment_page.on_its_page(asked).rerun_data
    assert (taken.page_script_hash, taken.page_name, taken.query_string) == ("lesson", "", "s=hello")
    assert taken.fragment_id_queue == ["panel"]


@pytest.mark.parametrize(
    "asked",
    [
        rerun(page_script_hash="classroom"),  # a run of the whole app: a move, as the browser asked
        rerun(page_script_hash="lesson", query_string="s=x", fragment_id_queue=["panel"]),  # on the page shown
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
        assert taken.rerun_data.fragment_id_queue == ["panel"]
