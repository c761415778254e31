"""Who runs this Streamlit script: the Streamlit half of `serving.identity`.

`current_identity()` reads the request behind the current script run (its XSRF cookie, its address, the
proxy's header) and hands it to `serving.identity`, which decides who the browser and the client are;
`streamlit_session_alive` tells a service whether a session is still connected (the training service is
handed it, so that no service imports Streamlit); `fair_share` runs a script run in its turn and charges its
CPU time to its client (serving/fair_share.py).
"""

from __future__ import annotations

import contextlib
import time

from serving.fair_share import LEDGER, RUNS, InboundLimit, charge
from serving.identity import XSRF_COOKIE, Identity, browser_id, client_address, trusted_proxies


def current_identity() -> Identity:
    """This script run's identity (outside a Streamlit server: client "local", no browser, no session)."""
    session = current_session_id()
    try:
        import streamlit as st

        ctx = st.context
        cookies, headers = ctx.cookies, ctx.headers
        cookie = cookies.get(XSRF_COOKIE) if cookies is not None else None
        forwarded = headers.get("X-Forwarded-For") if headers is not None else None
        ip = ctx.ip_address
    except Exception:  # noqa: BLE001 - no server (AppTest, scripts): nobody to ask
        cookie = forwarded = ip = None
    cookie, forwarded, ip = (v if isinstance(v, str) else None for v in (cookie, forwarded, ip))  # AppTest: mocks
    return Identity(client_address(ip, forwarded, trusted_proxies()), browser_id(cookie), session)


def streamlit_session_alive(session_id: str | None) -> bool:
    """True while the browser session is connected (always True outside a Streamlit server)."""
    if session_id is None:
        return True
    try:
        from streamlit.runtime import Runtime
    except ImportError:  # pragma: no cover - streamlit is a dependency of the app
        return True
    if not Runtime.exists():
        return True  # AppTest, scripts, tests: nobody to ask
    return Runtime.instance().is_active_session(session_id)


def current_session_id() -> str | None:
    """The id of the Streamlit session running this script (None outside Streamlit)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover
        return None
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


@contextlib.contextmanager
def fair_share(lead: bool = False):
    """Run this script run in its turn (`serving.fair_share.RUNS`; `lead`: a teacher's, which never waits) and charge
    its CPU time to its client (`serving.fair_share`: a client over its share of the server waits before its next
    message is taken in). A teacher's run also marks its browser as leading: its messages are never held."""
    outer = not RUNS.nested()  # (a fragment called by a full run: that run's time counts it already)
    who = None
    if outer:
        with contextlib.suppress(Exception):
            who = current_identity()
    with RUNS.slot(lead, who.client if who is not None else None):
        started = time.thread_time()
        try:
            yield
        finally:
            if who is not None:
                with contextlib.suppress(Exception):
                    charge(who.client, time.thread_time() - started)
                    if lead and who.browser is not None:  # a teacher's messages never wait (serving/fair_share.py)
                        LEDGER.lead(who.browser)


def limit_connections() -> None:
    """The web server's limits on slow clients and its one-line refusals (`serving.connections.install`): called by
    app.py as the web server imports it, before the first connection."""
    from serving import connections

    connections.install()


def middleware() -> list:
    """The web server's middleware (app.py's `st.App`): `serving.fair_share.InboundLimit`, which holds back the
    websocket messages of a client over its share of the server."""
    from starlette.middleware import Middleware

    return [Middleware(InboundLimit)]
