"""A fragment's run redraws part of the page the session shows, never another page.

The browser asks for a fragment's run (the class's event stream reruns the teacher's sidebar panel, and a follower's
page: ui/classroom/push.py) with the page it believes it shows. Between a move to another page and the new page's first
message reaching the browser, such an ask still names the page left: the teacher clicked the guided lesson in the
sidebar, and that very run published the move, whose event came back on the stream before the run's own messages; or
the class moved a follower with `st.switch_page`. Streamlit 1.67 ran that fragment as a move back to the old page: it
dropped the new page's widget state (the lesson's sentence) and the browser then cleared the main area, so the
teacher's projector showed an empty page until the next click.

`install()` (app.py, once per server process) holds every fragment run to the page of the session's last run, as
Streamlit's script thread takes it from the session's queue: the page's hash and its query string are the last run's.
A run of the whole app keeps the page the browser asked for.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import replace

from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequest, ScriptRequests, ScriptRequestType

_log = logging.getLogger("glass.fragments")


def on_its_page(request: ScriptRequest | None) -> ScriptRequest | None:
    """`request`, with a fragment run's page made the page of the session's last run (when it named another)."""
    if request is None or request.type != ScriptRequestType.RERUN or not request.rerun_data.fragment_id_queue:
        return request  # (no run, or a run of the whole app)
    data = request.rerun_data
    ctx = get_script_run_ctx(suppress_warning=True)
    page = ctx.page_script_hash if ctx is not None else ""
    if not page or data.page_script_hash == page:
        return request
    _log.info("a fragment run asked for page %s; the session shows %s", data.page_script_hash[:8], page[:8])
    held = replace(data, page_script_hash=page, page_name="", query_string=ctx.query_string)
    return ScriptRequest(request.type, held)


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
