"""The app's frame: navigation built from ui/page_list.py, and the guard every page calls first.

Why the guard (`enter`): Streamlit treats a folder named ``pages/`` next to the main script as an
old-style (v1) multipage app until the main script has called ``st.navigation`` once in the
process. So on a freshly started server (`streamlit run app.py`), the first visitor who arrives
through a deep link (a teacher's shared ``/positional?s=...``) gets the bare page file, without
app.py's sidebar and navigation. Every page therefore calls ``shell.enter(__file__)`` first: when it
finds itself run outside app.py's navigation on a server whose main script is app.py, it calls
``st.navigation`` (public API; this switches the server to app.py's navigation for good) and
``st.switch_page`` to itself with the same query parameters. The next run is app.py's own, with the
right page. This happens at most once per server process. A page run on its own (its file is the
main script, as in `AppTest.from_file("pages/x.py")`) runs as it is.

`/` is a hidden page that forwards to the overview's own address, so `/overview?s=...` is a link
like every other page's; a lesson's link (`/?lesson=...&step=N`) forwards to the guided lesson.

`run` runs the sidebar and the page; anything that still fails is logged on the server (with its
traceback) and the visitor gets a short apology and a link that starts the page afresh, never a
traceback or a server path (`client.showErrorDetails = "none"` in .streamlit/config.toml covers
what fails outside it). `admitted` is the optional access code of a class server (GLASS_ACCESS_CODE).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import threading
import time
import types
from collections.abc import Callable
from pathlib import Path

import streamlit as st
from streamlit.navigation.page import StreamlitPage

from ui.page_list import DEFAULT, ICON, PAGES, by_name

LESSON = by_name("lesson")

_local = threading.local()  # .inside: this script run goes through app.py's navigation
log = logging.getLogger("glass.pages")
ACCESS_CODE_ENV = "GLASS_ACCESS_CODE"


def _home() -> None:
    """`/` forwards to the overview, or to the guided lesson when the link is a lesson's (``?lesson=...&step=N``)."""
    qp = st.query_params.to_dict()
    st.switch_page(LESSON.file if "lesson" in qp or "step" in qp else DEFAULT.file, query_params=qp)


PAGES_KEY = "_glass_pages"  # st.session_state: this session's st.Page objects (built on its first run)


def _pages() -> dict[str, list[StreamlitPage]]:
    """The navigation's pages in sections. Built once per session: an st.Page resolves its file on the disk
    when it is made, and every run (a class's thirty followers: thirty runs a change) used to make them all
    again. Per session, not per process: st.navigation marks the page a run may call on the object itself."""
    ss = st.session_state
    if PAGES_KEY not in ss:
        by_file = {p.file: st.Page(p.file, title=p.title, icon=p.icon, url_path=p.url_path) for p in PAGES}
        sections: dict[str, list[StreamlitPage]] = {
            "": [st.Page(_home, title="Home", url_path="home", default=True, visibility="hidden")]
        }
        for p in PAGES:
            sections.setdefault(p.section, []).append(by_file[p.file])
        ss[PAGES_KEY] = sections, by_file
    return ss[PAGES_KEY][0]


def navigation(top: bool = False) -> StreamlitPage:
    """app.py's navigation; marks this script run as going through it. `top`: the pages in a bar above the page
    (a teacher's projector: the sidebar then starts with the class's controls), else listed in the sidebar."""
    _local.inside = True
    # every page listed (Streamlit folds more than 10)
    return st.navigation(_pages(), expanded=True, position="top" if top else "sidebar")


def linked() -> bool:
    """This run went through app.py's navigation: a link to a page is a page link (else plain text: a page run on
    its own). Part of the key of everything drawn once (ui/widgets.py `once`)."""
    return bool(getattr(_local, "inside", False)) and PAGES_KEY in st.session_state


def page_object(file: str) -> StreamlitPage | None:
    """The st.Page of `file` ("pages/x.py") when this run went through app.py's navigation (a link to it then
    needs no look-up of the file on the disk), else None."""
    if not getattr(_local, "inside", False) or PAGES_KEY not in st.session_state:
        return None
    return st.session_state[PAGES_KEY][1].get(file)


def run(page: StreamlitPage, sidebar: Callable[[], None]) -> None:
    """The sidebar, then the page; a failure is logged and apologised for, never shown as a traceback."""
    if guarded(page, sidebar):
        run_page(page)


def guarded(page: StreamlitPage, draw: Callable[[], None]) -> bool:
    """`draw()` (the sidebar, or the page); a failure is logged and apologised for, and ends the run's page
    (False)."""
    try:
        draw()
        return True
    except Exception:  # Streamlit's rerun/stop signals are BaseExceptions and pass through
        log.exception("page %r failed (query %r)", page.url_path, st.query_params.to_dict())
        apologise(page.url_path)
        _local.inside = False
        return False


_CODE: dict[str, object] = {}  # a page file's compiled code, per process (the files do not change while it runs)


def run_page(page: StreamlitPage, alone: bool = False) -> None:
    """The page (a failure apologised for, as `run`): `page.run()` in the run that went through app.py's
    navigation; `alone`, in a rerun of a fragment that holds the page (a class's follower: ui/classroom/panels.py),
    where Streamlit lets no page run without its navigation, the page's file is executed as `page.run()` does it:
    a fresh `__main__` module, under the page's own script hash.

    The hash matters: Streamlit makes it part of every widget's id. Executed under app.py's hash, the page's
    widgets had other ids in a fragment's rerun than in a full run, so each switch between the two looked to
    Streamlit like a widget that appeared with the browser's value: its callback fired with no click (the
    lesson's sentence box wrote an empty sentence, and the student silently left follow mode: issue 36,
    finding D1). `tests/test_shell.py` checks the ids are the same both ways."""
    if alone:
        _local.inside = True  # (its links may use the session's page objects)
    try:
        guarded(page, (lambda: _exec_page(page)) if alone else page.run)
    finally:
        _local.inside = False


def _exec_page(page: StreamlitPage) -> None:
    try:
        path = str(by_name(page.url_path).path)
    except KeyError:  # the hidden home page: a function
        _home()
        return
    code = _CODE.get(path)
    if code is None:
        code = _CODE[path] = compile(Path(path).read_text(encoding="utf-8"), path, "exec")
    module = types.ModuleType("__main__")
    module.__dict__["__file__"] = path
    ctx = st.runtime.scriptrunner.get_script_run_ctx()
    with ctx.run_with_active_hash(page._script_hash) if ctx else contextlib.nullcontext():  # as page.run() does
        exec(code, module.__dict__)  # noqa: S102 - the app's own page file


def apologise(url_path: str) -> None:
    st.error(
        "Sorry: something went wrong on this page. It has been noted on the server. Starting the page "
        "afresh usually helps (the link drops the settings that came with the address).",
        icon=":material/sentiment_dissatisfied:",
    )
    st.link_button("Start this page afresh", f"./{url_path}", icon=":material/restart_alt:")


def admitted() -> bool:
    """True when no access code is set, or this session has entered it (draws the form otherwise).

    A light barrier for a class server (the code is shared with the class); a wrong code costs the
    session a growing wait. Use TLS in front of it (docs/operators.md, "Serving a class")."""
    code = os.environ.get(ACCESS_CODE_ENV, "")
    ss = st.session_state
    if not code or ss.get("_admitted"):
        return True
    st.title("Glass Transformer")
    with st.form("access"):
        given = st.text_input("Access code for this class", type="password", max_chars=200)
        sent = st.form_submit_button("Enter", type="primary")
    if sent:
        if hmac.compare_digest(given.encode(), code.encode()):
            ss["_admitted"] = True
            st.rerun()
        ss["_wrong_codes"] = ss.get("_wrong_codes", 0) + 1
        time.sleep(min(2.0 ** ss["_wrong_codes"] / 4, 8.0))
        st.error("That is not this class's access code.")
    return False


def enter(page_file: str) -> None:
    """Call first in every page: re-enters through app.py when Streamlit ran the page bare (see above)."""
    if getattr(_local, "inside", False):
        return
    ctx = st.runtime.scriptrunner.get_script_run_ctx()
    main = Path(ctx.main_script_path).resolve() if ctx else None
    if main is None or main == Path(page_file).resolve():
        return  # the page is the main script: it runs on its own
    # the app's own icon first: a navigation before it makes the browser fetch the page's Material icon from
    # fonts.gstatic.com as the tab's icon (nothing outside the server is ever asked for)
    st.set_page_config(page_title="Glass Transformer", page_icon=str(ICON), layout="wide")
    st.navigation(_pages(), position="hidden")
    st.switch_page(
        Path(page_file).resolve().relative_to(main.parent).as_posix(), query_params=st.query_params.to_dict()
    )
