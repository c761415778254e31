"""A class's changes pushed to its pages: an event stream per page, and the hidden element that reruns it.

The path of a change (ui/classroom/session.py explains the rest of the class):

1. The store bumps the class's counters in the same atomic step as the change and announces them
   (classroom/store.py `Counters`, `watch`; with Redis a PUBLISH inside the change's Lua script).
2. This process's hub (classroom/hub.py) hands them to every page of that class connected here, on the web
   server's event loop: `GET /api/class/CODE/events?t=TOKEN` is a server-sent event stream (a custom route of
   the app's `st.App`, app.py), one per open page; it sends the counters as they are when it opens, then
   every change, a comment every 15 s, and `"up": false` while the store's events are interrupted.
3. `sync(watch, drawn)` is the last element of a class member's run: a Custom Component (no iframe: it runs
   in the page) that keeps the page's one EventSource. It compares the counter its page watches with the one
   its last complete run drew (`drawn`: the component is drawn last, so its data arriving means the whole run
   arrived) and, when they differ, sets a trigger value, which reruns the app as a click does. Until the two
   match it asks again (2.5 s, 5 s, then every 10 s, at most 5 times per value): a run whose end Streamlit
   dropped, a websocket that was down, a trigger lost on the way, are all repaired by the next ask.
   A follower's page is a fragment (ui/classroom/panels.py `followed_page`) with this component at its end: its
   trigger reruns the page alone. The full run also draws `sync_frame` outside the fragment, whose trigger
   reruns the whole app: the first ask for a value reruns the fragment, an ask again the app.
   A page out of sight (`document.visibilityState` "hidden": another tab in front, a laptop's lid closed) asks
   nothing until it is seen again, then at once: in a lecture hall a student taking notes in another tab costs
   the server no redraw until they come back.

No timer runs on a page: an idle class costs the server one open connection per page.

The token names the class and the member (`token`, an HMAC with the server's cookie secret, which every app
process shares): a stream tells nothing but a few counters, and only to a member of the class. The hub's
`connected(code)` is the class's presence: which students have a page open now. A member, an address and the
process each hold a bounded number of streams (serving/streams.py: one token replayed cannot take the process's
streams from every other class), and a class that ends says so on its streams once; they then close, and its
pages do not open them again.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import hmac
import json
import logging
from contextlib import asynccontextmanager

import streamlit as st
from starlette.requests import Request
from starlette.responses import PlainTextResponse, StreamingResponse
from starlette.routing import Route
from streamlit.runtime.scriptrunner import get_script_run_ctx

from classroom import get_store, normalize_code
from classroom.hub import EventHub
from serving.fair_share import scope_client
from serving.streams import StreamCaps

_log = logging.getLogger("glass.classroom")
EVENTS_PATH = "/api/class/{code}/events"
HEARTBEAT_SECONDS = 15.0
STREAMS = StreamCaps()  # streams per member, per address and per process: beyond them one is refused (429; its page
# asks again a few seconds later)

_hub: EventHub | None = None


def hub() -> EventHub | None:
    """This process's hub, when the app runs as its `st.App` (None: AppTest, or a script run on its own)."""
    return _hub


@asynccontextmanager
async def lifespan(_app):
    """The app's lifespan (app.py's `st.App`): the hub lives as long as the web server."""
    global _hub
    _hub = EventHub(get_store())
    _hub.start(asyncio.get_running_loop())
    try:
        yield
    finally:
        _hub.stop()
        _hub = None


# -- who may listen -----------------------------------------------------------------------------------------
def token(code: str, member: str) -> str:
    """The token of `member` (a student id, or "teacher") in class `code`: "member.mac"."""
    return _token(str(st.get_option("server.cookieSecret")), code, member)


@functools.lru_cache(maxsize=4096)  # (every run of a class member's page draws its url)
def _token(secret: str, code: str, member: str) -> str:
    key = hashlib.sha256(b"glass-class-events|" + secret.encode()).digest()
    return f"{member}.{hmac.new(key, f'{code}|{member}'.encode(), 'sha256').hexdigest()[:32]}"


def member_of(code: str, tok: str) -> str | None:
    """The member a token names, if it is a token of class `code` (anything but a short ASCII string is none: a
    token is only ever ASCII, and `hmac.compare_digest` refuses to compare other text)."""
    tok = str(tok)
    if len(tok) > 200 or not tok.isascii():
        return None
    member, _, mac = tok.rpartition(".")
    if not member:
        return None
    return member if hmac.compare_digest(token(code, member).encode(), tok.encode()) else None


def events_url(code: str, member: str) -> str:
    return EVENTS_PATH.format(code=code) + "?t=" + token(code, member)


# -- the stream ---------------------------------------------------------------------------------------------
def _message(listener) -> str:
    data = listener.latest.as_dict() if listener.latest is not None else {}
    return f"data: {json.dumps({**data, 'up': listener.up})}\n\n"


async def events(request: Request):
    h, code = _hub, normalize_code(request.path_params.get("code"))
    if h is None or not h.running:
        return PlainTextResponse("class events are not served by this process", status_code=503)
    member = member_of(code, request.query_params.get("t", "")) if code else None
    if member is None:
        return PlainTextResponse("not a member of this class", status_code=403)
    who, client = (code, member), scope_client(request.scope)
    refused = STREAMS.admit(who, client)  # per member, per address, per process (serving/streams.py)
    if refused is not None:
        return PlainTextResponse(refused, status_code=429, headers={"Retry-After": "5"})
    try:
        listener = await h.listen(code, member)
    except BaseException:
        STREAMS.release(who, client)
        raise
    if listener is None:
        STREAMS.release(who, client)
        return PlainTextResponse("no such class", status_code=404)

    async def stream():
        try:
            yield "retry: 1000\n\n" + _message(listener)
            while not ended(listener):  # an ended class's stream says so once and closes (its page leaves it)
                listener.changed.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(listener.changed.wait(), HEARTBEAT_SECONDS)
                yield _message(listener) if listener.changed.is_set() else ": ping\n\n"
        finally:
            h.unlisten(listener)
            STREAMS.release(who, client)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


def ended(listener) -> bool:
    """The listener's class has ended (its stream has nothing more to tell)."""
    return listener.latest is not None and listener.latest.ended


def routes() -> list[Route]:
    return [Route(EVENTS_PATH, events, methods=["GET"])]


# -- the page's end ---------------------------------------------------------------------------------------------
_JS = """
// One per page (the module is imported once per page load and survives reruns).
const S = {url: null, es: null, latest: null, up: true, watch: null, drawn: null, set: null, asked: 0, tries: 0,
           timer: null, root: null, mount: 0, pending: null, setFull: null, frameMount: 0, view: null};
const WAIT = [0, 2500, 5000, 10000, 10000];  // before each ask for one value; then wait for the next event
// A tab out of sight (another tab in front, a closed lid) hears the class but redraws nothing: its page catches up
// at once when it is looked at again, and meanwhile costs the server none of the class's redraws.
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "hidden") return;
  if (S.pending) { const v = S.pending; S.pending = null; redraw(v); }
  check();
});

function redraw(value) {  // rerun the page once (the service went away or came back: its badge says so)
  if (document.visibilityState === "hidden") { S.pending = value; return; }
  const set = S.setFull || S.set;  // (a whole run: the badge is in the sidebar)
  if (set) set("sync", value);
}

function show() {
  if (S.root) S.root.textContent = S.up ? "" : "The class service is unreachable: reconnecting…";
}

function value(counters, watch) {  // one counter ("seq"), or a sum of counters ("seq+tally": each only grows)
  let sum = 0;
  for (const name of String(watch).split("+")) {
    if (counters[name] === undefined) return undefined;
    sum += counters[name];
  }
  return sum;
}

function check() {
  clearTimeout(S.timer);
  if (!S.set || !S.latest || S.drawn === null || !S.url) return;
  const want = value(S.latest, S.watch);
  if (want === undefined || want <= S.drawn) { S.tries = 0; S.asked = 0; return; }
  if (document.visibilityState === "hidden") return;        // out of sight: asked when looked at again
  if (S.tries >= WAIT.length) return;                       // the next event starts again
  const due = S.asked + WAIT[S.tries] - Date.now();
  if (due > 0) { S.timer = setTimeout(check, due); return; }
  S.asked = Date.now();
  S.tries += 1;
  // A follower's page is a fragment: the first ask reruns it alone; an ask again reruns the whole app (the
  // frame's trigger), which also repairs a session that no longer knows the fragment (a new session after a lost
  // connection, a run cut short before it reached the fragment)
  (S.tries > 1 && S.setFull ? S.setFull : S.set)("sync", want + "." + S.tries);
  S.timer = setTimeout(check, S.tries < WAIT.length ? WAIT[S.tries] : 0);
}

function open(url) {
  if (S.es) S.es.close();
  S.es = null; S.url = url; S.latest = null;
  if (!url) return;
  const es = new EventSource(url);
  S.es = es;
  es.onmessage = (m) => {
    const c = JSON.parse(m.data);
    // The class service went away, or came back: redraw once (spread over 2 s), so the page's own badge says so
    const flip = (S.up === false) !== (c.up === false);
    S.up = c.up !== false;
    if (flip) setTimeout(() => redraw((S.up ? "back." : "away.") + Date.now()), Math.random() * 2000);
    if (c.seq !== undefined) {
      if (!S.latest || c.seq !== S.latest.seq || c.q !== S.latest.q || c.tally !== S.latest.tally) S.tries = 0;
      S.latest = c;
    }
    if (c.ended) es.close();  // the class ended: its stream closes, and is not opened again (the page leaves it)
    show();
    check();
  };
  es.onerror = () => {
    if (S.latest && S.latest.ended) return;
    S.up = false; show();
    if (es.readyState === EventSource.CLOSED)  // refused (a process gone, a full server): open it again
      setTimeout(() => { if (S.es === es) open(url); }, 2000 + Math.random() * 2000);
  };
}

export default function (component) {
  const {data, setTriggerValue, parentElement} = component;
  if (data.frame) {  // the frame of a follower's page (drawn by full runs, outside the page's fragment)
    const frame = ++S.frameMount;
    S.setFull = setTriggerValue;
    if (data.url !== S.url) open(data.url);
    return () => { if (S.frameMount === frame) S.setFull = null; };
  }
  const mount = ++S.mount;
  // A view the class moved this tab to (another page, another lesson step: a stop, a projected snapshot) opens at
  // its top, not where the last one was scrolled to (Streamlit keeps the main area's scroll across pages).
  const view = location.pathname + "|" + (data.view || "");
  if (S.view !== null && S.view !== view) {
    const main = document.querySelector('[data-testid="stMain"]');
    if (main) main.scrollTo({top: 0});
  }
  S.view = view;
  S.root = parentElement.querySelector(".glass-sync") || parentElement;
  S.set = setTriggerValue;
  S.watch = data.watch;
  if (data.drawn !== S.drawn) { S.tries = 0; S.asked = 0; }  // a complete run arrived
  S.drawn = data.drawn;
  if (data.url !== S.url) open(data.url);
  show();
  check();
  // Unmounted (a run that stopped early draws no end): the stream stays open, so the page still hears the
  // class; a run of a page that left its class draws this with no url, which closes it.
  return () => { if (S.mount === mount) S.root = null; };
}
"""

_CSS = ".glass-sync:empty {display: none} .glass-sync {font-size: 0.875rem; padding: 0.25rem 0}"
_component = st.components.v2.component(
    "glass_class_sync", html='<div class="glass-sync" role="status"></div>', css=_CSS, js=_JS
)


def counter(counters, watch: str) -> int:
    """The value a page watches (`sync`'s `watch`): one counter ("seq"), or the sum of several ("seq+tally": each only
    grows, so the sum moves when any of them does)."""
    return sum(getattr(counters, name) for name in watch.split("+"))


SYNC_RUN = "_class_sync_run"  # the run the class's component asked for (its trigger), as `_this_run` names it


def _this_run() -> object | None:
    """An object Streamlit makes anew for every run of this session (the run context's fragment coordinator): the
    same object only within one run."""
    ctx = get_script_run_ctx()
    return ctx.parallel_coordinator if ctx is not None else None


def _asked() -> None:
    """Callback of the class's components: their trigger (an ask of the page's stream) started this run."""
    st.session_state[SYNC_RUN] = _this_run()


def asked_by_class() -> bool:
    """This run was asked for by the class's component, not by the student: the widget values it carries are the
    ones the page had when it asked (a request that crossed a move of the class), never the student's new choice
    (a click or a link sends its own request)."""
    run = _this_run()
    return run is not None and st.session_state.get(SYNC_RUN) is run


def sync_frame(url: str) -> None:
    """Drawn by a full run of a follower whose page is a fragment (ui/classroom/panels.py `followed_page`), outside
    it: its trigger reruns the whole app, which the page's end uses when asking once did not bring the page up
    to date."""
    _component(
        key="class_sync_frame",
        data={"url": url, "frame": True},
        on_sync_change=_asked,
        width="stretch",
        height="content",
    )


def sync(url: str | None, watch: str, drawn: int | None, view: str | None = None) -> None:
    """The last element of a class member's run (nothing may be drawn after it): the page's event stream
    `url` (None closes it), the counter the page shows (`watch`: "seq", "q", "tally", or a sum such as
    "seq+tally") and its value; `view` names what the page shows (its page and lesson step): when the class moves
    the page to another view, it opens at its top."""
    _component(
        key="class_sync",
        data={"url": url, "watch": watch, "drawn": drawn, "view": view},
        on_sync_change=_asked,
        width="stretch",
        height="content",
    )
