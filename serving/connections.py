"""What one visitor's connections may hold on the one-process recipe (`streamlit run app.py`, no proxy in front).

Two limits the web server itself did not have, measured by a slow-client attack (issue 37; figures in bench/README.md,
"A hostile visitor against a class"):

- **A request's head has `GLASS_HEAD_TIMEOUT` seconds** (default 10, as HAProxy's `timeout http-request` in
  deploy/haproxy.cfg.in) to arrive, from the moment the connection opens or its previous answer was sent; a
  connection whose head has begun and is not complete by then gets `408 Request Timeout` and is closed; one that
  sent nothing (an idle kept-alive connection) is closed silently, as a proxy that reuses connections expects
  (a 408 there was read as the answer to the proxy's next request). uvicorn, as Streamlit
  starts it, waits forever (1,000 unfinished heads stayed open 152 s and more) and has no setting for it: Streamlit
  hands uvicorn a fixed set of options. So `install` wraps five methods of uvicorn's HTTP protocol (httptools', the
  one `streamlit run` uses with the pinned "performance" extra): the connection opens or an answer ends (a timer),
  the head is complete or the connection is lost (no timer),
  bytes arrive (a head has begun). A request's body and a websocket are not timed.
- **The process's open-file limit is raised to its hard limit**: with the usual soft limit of 1,024, 1,100 such
  connections made every health check and page load fail; every connection is a file descriptor, and so is every
  page's event stream.

`install` is called by app.py as the web server imports it, before the server accepts its first connection
(uvicorn loads the app, then listens); it does nothing in a script run. Only the standard library (and uvicorn,
when it is the server).
"""

from __future__ import annotations

import asyncio
import logging
import os
import resource
from typing import TYPE_CHECKING, cast

from serving.settings import env_number

if TYPE_CHECKING:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class _Timed(HttpToolsProtocol):
        """uvicorn's protocol with what `time_out_heads` adds to it."""

        _glass_head_seconds: float
        _glass_timed: bool
        _glass_head: asyncio.TimerHandle | None
        _glass_begun: bool


HEAD_TIMEOUT = 10.0  # seconds a request's head may take: $GLASS_HEAD_TIMEOUT
_log = logging.getLogger("glass.serving")
_REPLY = b"HTTP/1.1 408 Request Timeout\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def head_timeout() -> float:
    return env_number("GLASS_HEAD_TIMEOUT", float, HEAD_TIMEOUT, 0.5)


def raise_file_limit() -> tuple[int, int]:
    """The open-file limit raised to the hard limit (as far as the system lets this process); (soft, hard) now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError) as e:
            _log.warning("the open-file limit stays at %s (%s)", soft, e)
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def time_out_heads(seconds: float | None = None) -> bool:
    """Give every request's head `seconds` (default: $GLASS_HEAD_TIMEOUT) in uvicorn's httptools protocol (see the
    module's docstring); False when that protocol is not there (then uvicorn's h11 protocol serves, untimed)."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
    except ImportError:  # pragma: no cover - httptools is pinned with Streamlit's "performance" extra
        return False
    Protocol = cast("type[_Timed]", HttpToolsProtocol)  # (the same class: the attributes it gets here, declared)
    Protocol._glass_head_seconds = head_timeout() if seconds is None else seconds
    if getattr(Protocol, "_glass_timed", False):
        return True
    made, complete, answered, lost, received = (
        Protocol.connection_made,
        Protocol.on_headers_complete,
        Protocol.on_response_complete,
        Protocol.connection_lost,
        Protocol.data_received,
    )

    def arm(self: _Timed) -> None:
        disarm(self)
        self._glass_head = self.loop.call_later(self._glass_head_seconds, too_slow, self)

    def disarm(self: _Timed) -> None:
        timer = getattr(self, "_glass_head", None)
        if timer is not None:
            timer.cancel()
            self._glass_head = None

    def too_slow(self: _Timed) -> None:
        self._glass_head = None
        if self.transport is not None and not self.transport.is_closing():
            if getattr(self, "_glass_begun", False):  # a head begun and not finished: say why
                self.transport.write(_REPLY)
            self.transport.close()  # an idle kept-alive connection closes silently (a proxy retries on another)

    def data_received(self: _Timed, data: bytes) -> None:
        self._glass_begun = True
        received(self, data)

    def connection_made(self: _Timed, transport: asyncio.Transport) -> None:
        made(self, transport)
        arm(self)

    def on_headers_complete(self: _Timed) -> None:
        disarm(self)
        complete(self)

    def on_response_complete(self: _Timed) -> None:
        answered(self)
        self._glass_begun = False
        if self.transport is not None and not self.transport.is_closing():
            arm(self)  # (the next request on this connection: its head has as long)

    def connection_lost(self: _Timed, exc: Exception | None) -> None:
        disarm(self)
        lost(self, exc)

    # (setattr: a method of uvicorn's class replaced, which the type checker would refuse as an assignment)
    for name, method in (
        ("connection_made", connection_made),
        ("on_headers_complete", on_headers_complete),
        ("on_response_complete", on_response_complete),
        ("connection_lost", connection_lost),
        ("data_received", data_received),
    ):
        setattr(Protocol, name, method)
    Protocol._glass_timed = True
    return True


class OneLine(logging.Filter):
    """A refusal of something a visitor sent, logged as one line: without the traceback the web server attaches to it
    (a garbage websocket frame wrote 5 lines of traceback each, a cheap way to flood the log)."""

    MESSAGES = ("Error deserializing back message",)  # Streamlit's websocket handler, on a frame that is no BackMsg

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and str(record.msg).startswith(self.MESSAGES):
            record.msg = f"{record.msg} ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
            record.exc_info = record.exc_text = None
        return True


def install() -> None:
    """The web server's limits on slow clients (see the module's docstring), and a visitor's refused frames logged
    in one line (`OneLine`)."""
    raise_file_limit()
    if not os.environ.get("GLASS_REPLICA"):  # behind the recipe's HAProxy (it times heads out itself), a 408 on a
        time_out_heads()  # connection it keeps for reuse made it send a visitor with one process's cookie elsewhere
    logging.getLogger("streamlit.web.server.starlette.starlette_websocket").addFilter(OneLine())
