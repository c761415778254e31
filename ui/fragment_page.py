"""A fragment's run redraws part of the page the session shows, from the values of its own widgets.

The browser asks for a fragment's run (the class's event stream reruns the teacher's sidebar panel, and a follower's
page: ui/classroom/push.py) with the page it believes it shows and the values of every widget it holds. Between a
change and the change's run reaching the browser, both can be old: the teacher clicked Next in the guided lesson, or the
lesson in the sidebar, and that very run published the move, whose event came back on the stream before the run's own
messages; or the class moved a follower with `st.switch_page`. Streamlit 1.67 took such an ask as it came:

- under the page left, the fragment's run was a move back: it dropped the new page's widget state (the lesson's
  sentence), and the browser then cleared the main area (the teacher's projector showed an empty page);
- the lesson's step picker, outside the fragment, still held the step before Next: its callback took the lesson back
  one step, and the teacher's next move published that step to the class.

`install()` (app.py, once per server process) holds every fragment run, as Streamlit's script thread takes it from
the session's queue, to the page and the address (query string) of the session's last run, and keeps from the browser
only the values of the widgets of the fragments that run. A widget elsewhere, the page and the address change in a
run of the whole app (Streamlit asks for one when they are used: a click outside the fragment, a link, the browser's
back button), never in a fragment's. A run of the whole app keeps what the browser sent.

A fragment asked for under another page than the session's becomes a run of the whole app on the session's page, with
the session's values (the browser's are those of the page it still shows; a click inside the fragment in that moment
is dropped and can be made again): the browser has not yet drawn the run that changed the page. A fragment's run in the
same burst of messages as that run made Streamlit's frontend take it for a page change, as it compared the page with
the one it was still drawing: it cleared the page, and the fragment's run drew only itself (the teacher's projector
stayed empty after the console's Next and a click in the sidebar). The run of the whole app draws the page again.
With the browser's values instead, the teacher's sentence was lost on a move (3 runs in 3); with the fragment's own
values only, a class stopped following the lesson's steps (2 runs in 3).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace
from urllib import parse

from streamlit.proto.WidgetStates_pb2 import WidgetStates
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequest, ScriptRequests, ScriptRequestType

_log = logging.getLogger("glass.fragments")


def on_its_page(request: ScriptRequest | None) -> ScriptRequest | None:
    """`request`, when it runs fragments: at the address of the session's last run, with the browser's values of those
    fragments' widgets only; asked for under another page, a run of the whole app on the session's page, with the
    session's values."""
    if request is None or request.type != ScriptRequestType.RERUN or not request.rerun_data.fragment_id_queue:
        return request  # (no run, or a run of the whole app)
    ctx = get_script_run_ctx(suppress_warning=True)
    if ctx is None or not ctx.page_script_hash:
        return request  # (nothing drawn yet)
    data, page, changes = request.rerun_data, ctx.page_script_hash, {}
    query = address(ctx)
    if data.query_string != query:
        changes["query_string"] = query
    if data.page_script_hash != page:  # the browser is behind: the whole app, on the session's page
        _log.info("a fragment run asked for page %s; the session shows %s", data.page_script_hash[:8], page[:8])
        changes.update(
            page_script_hash=page,
            page_name="",
            fragment_id=None,
            fragment_id_queue=[],
            is_fragment_scoped_rerun=False,
            is_auto_rerun=False,
            widget_states=None,
        )
    else:
        own = own_widgets(data.widget_states, set(data.fragment_id_queue), ctx)
        if own is not data.widget_states:
            changes["widget_states"] = own
    return ScriptRequest(request.type, replace(data, **changes)) if changes else request


def address(ctx) -> str:
    """The query string of the session's page, as its last run left it (what the browser's address shows once that
    run has reached it)."""
    return parse.urlencode(ctx.session_state._state.query_params._query_params, doseq=True)  # (Streamlit 1.67's)


def own_widgets(states: WidgetStates | None, fragments: set[str], ctx):
    """`states` less the widgets not last drawn in one of `fragments` (the same object when none is left out)."""
    if states is None:
        return None
    drawn = ctx.session_state._state._new_widget_state.widget_metadata  # Streamlit 1.67's (pinned) bookkeeping
    own = [w for w in states.widgets if (meta := drawn.get(w.id)) is not None and meta.fragment_id in fragments]
    if len(own) == len(states.widgets):
        return states
    kept = WidgetStates()
    kept.widgets.extend(own)
    return kept


def install() -> None:
    """Wrap the two places Streamlit's script thread takes its next run from (idempotent)."""
    for name in ("on_scriptrunner_ready", "on_scriptrunner_yield"):
        taken = getattr(ScriptRequests, name)
        if getattr(taken, "glass_on_its_page", False):
            continue

        @functools.wraps(taken)
        def take(self, _taken=taken):
            return on_its_page(_taken(self))

        take.glass_on_its_page = True  # type: ignore[attr-defined]
        setattr(ScriptRequests, name, take)
