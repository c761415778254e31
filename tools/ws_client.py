"""A browserless Streamlit session: speaks the app's websocket protocol directly (asyncio + `websockets`).

Used by bench/load_test.py (`--client ws`) to measure the server alone: thirty of these cost almost no
CPU, where thirty Chromium renderers take most of a small machine.

The protocol, as Streamlit 1.67's server (web/server/starlette/starlette_websocket.py) and frontend
bundle (static/js/index.*.js) speak it:

* One websocket per session: `ws://host:port/_stcore/stream`. The server creates a new AppSession for
  every connection (`runtime.connect_session`); nothing else identifies a session (no cookie).
* The Sec-WebSocket-Protocol header is repurposed: `["streamlit", <xsrf token>, <old session id>]`.
  The server selects the first entry; the token only gates reading the auth cookie (st.user), so the
  frontend's own fallback "PLACEHOLDER_AUTH_TOKEN" is enough; the third entry (reconnects) is left out.
  No Origin header: allowed for non-browser clients. Frames are binary protobufs both ways.
* The client starts every run: `BackMsg(rerun_script=ClientState(...))` with the query string, the
  widget states, and the page: on a first load `page_script_hash=""` and `page_name` = the URL path
  ("" = the default page); afterwards the current page's hash, or the target page's on a nav click.
  `cached_message_hashes` stays empty, so the server never answers with `ref_hash` references.
* The server answers with ForwardMsgs: `new_session` (a run starts; its metadata names the run),
  `delta`s (element protos, placed by `metadata.delta_path`: [root container (0 main, 1 sidebar), ...],
  each tagged with the `active_script_hash` that drew it: app.py or the page), `navigation` (the
  st.navigation pages and the page being run), `page_info_changed` (the new query string), `auto_rerun`
  (fragment timers: `poll_fragments` runs them as the frontend does) and `script_finished` with a status:
  FINISHED_SUCCESSFULLY, FINISHED_WITH_COMPILE_ERROR, FINISHED_EARLY_FOR_RERUN (st.rerun(): another run
  follows) or FINISHED_FRAGMENT_RUN_SUCCESSFULLY.
* A class member's page ends with a Custom Component ("glass_class_sync", ui/classroom/push.py) whose data
  names the page's event stream, the counter it watches and the value its run drew. `follow_class` does
  what its JavaScript does: one server-sent event stream (plain HTTP/1.1, chunked), and when the class's
  counter passes the drawn one, a rerun whose widget states carry the component's trigger
  (`$$STREAMLIT_INTERNAL_KEY_<component id>__events`, a JSON list of {"event", "value"}), asked again after
  2.5, 5 and 10 s until a run draws that value.
* Widget states: the frontend gives every widget a state as soon as it is drawn (its default, or the
  value the server pushed with `set_value`), sends all of them on every rerun, drops the states of
  widgets the last run did not draw, and on a page change sends only the widgets drawn by the main
  script (app.py's sidebar). This client does the same for the widget types it knows (`_widget_state`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import time
from urllib.parse import urlparse

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.Element_pb2 import Element
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.NumberInput_pb2 import NumberInput
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates
from websockets.asyncio.client import connect

MAIN, SIDEBAR = 0, 1  # root containers (first entry of a delta_path)
DONE = {ForwardMsg.FINISHED_SUCCESSFULLY, ForwardMsg.FINISHED_WITH_COMPILE_ERROR}  # the run chain's last run


def _get(msg, name: str):
    """A field's value, or None when it is an unset `optional` field."""
    try:
        if not msg.HasField(name):
            return None
    except ValueError:  # not an optional field: always has a value
        pass
    return getattr(msg, name)


def _widget_state(kind: str, w, pushed: bool) -> WidgetState | None:
    """The state the frontend keeps for widget `w` (an element of type `kind`): the value the server
    pushed (`pushed`, i.e. set_value) or else the widget's default. None: a type this client does not
    model (buttons, uploaders...: they have no state until clicked) or a widget without a value."""
    s = WidgetState(id=w.id)
    if kind in ("text_input", "text_area"):
        v = _get(w, "value" if pushed else "default")
        if v is None:
            return None
        s.string_value = v
    elif kind == "checkbox":  # st.checkbox and st.toggle
        s.bool_value = w.value if pushed else w.default
    elif kind in ("radio", "selectbox"):  # the formatted option
        v = _get(w, "raw_value") if pushed else _get(w, "default")
        if v is None:
            return None
        s.string_value = v if pushed else w.options[v]
    elif kind == "multiselect":
        s.string_array_value.data.extend(w.raw_values if pushed else [w.options[i] for i in w.default])
    elif kind == "slider" and w.options:  # st.select_slider: formatted options; default holds indices
        s.string_array_value.data.extend(w.raw_value if pushed else [w.options[int(i)] for i in w.default])
    elif kind == "slider":
        s.double_array_value.data.extend(w.value if pushed else w.default)
    elif kind == "number_input":
        v = _get(w, "value" if pushed else "default")
        if v is None:
            return None
        if w.data_type == NumberInput.INT:
            s.int_value = int(v)
        else:
            s.double_value = v
    else:
        return None
    return s


def markdown_text(body: str) -> str:
    """Roughly the text a browser shows for a Streamlit markdown string: `:blue-background[x]` -> x,
    `:material/icon:` dropped, emphasis stars dropped, backslash escapes undone (enough to read the page)."""
    body = re.sub(r":material/\w+:", "", body)
    body = re.sub(r":[\w-]+\[((?:\\.|[^\]\\])*)\]", r"\1", body)
    body = re.sub(r"(?<!\\)\*+", "", body)
    return re.sub(r"\\(.)", r"\1", body)


class StreamlitSession:
    """One app session over one websocket. `await connect()` first, then `type_sentence` / `switch_page`
    (each returns the seconds from sending the rerun to the end of the server's answer), `close()`.

    State kept from the messages (the latest complete run wins):
    `elements`: delta_path -> (active_script_hash, Element) of the current run;
    `widgets`: widget id -> WidgetState as it will be sent; `pages`: page title and url path -> hash;
    `page_hash`, `main_hash`, `query_string`.
    """

    def __init__(self, base_url: str, timeout: float = 60):
        u = urlparse(base_url)
        self.ws_url = f"{'wss' if u.scheme == 'https' else 'ws'}://{u.netloc}{u.path.rstrip('/')}/_stcore/stream"
        self.page_url = base_url.rstrip("/")
        self.timeout = timeout
        self.elements: dict[tuple[int, ...], tuple[str, Element]] = {}
        self.widgets: dict[str, WidgetState] = {}
        self.pages: dict[str, str] = {}
        self.page_hash = self.main_hash = self.query_string = ""
        self._ws = None
        self._reader: asyncio.Task | None = None
        self._waiter: asyncio.Future | None = None  # set while a rerun waits for its answer
        self._started = False  # a run has started (new_session) since the rerun was sent
        self._in_run = False  # a run's new_session came and its script_finished has not
        # The run the rerun started never said it ended: Streamlit drops a finished runner's last events when a
        # request (here a fragment's, the class's event) reaches the session between that run's end and its runner's
        # shutdown, and the request's own runner (a fragment run) then ends the chain.
        self._end_dropped = False
        self._full = False  # the run going on is a full run (not a fragment's)
        self.fragments: dict[str, float] = {}  # fragment id -> its run_every (auto_rerun messages)
        self.on_full_run = None  # called with this session after every run that redrew its page: a full run, or the
        # run of the fragment that holds a following student's page (the class's sync element ends it)
        self.full_runs = 0
        self.page_runs = 0  # runs of a following student's page alone (that fragment's)
        self._page_fragment = False  # the fragment run going on redrew the class's sync element
        self.running = False  # a run is under way (between new_session and its script_finished)
        # what happened, for a report on a stuck session: (time, "new_session" / "script_finished", fragment ids /
        # status), and (time, "navigation" / "query" / "toast", the page's hash / the address's query / the text)
        self.runs: list[tuple] = []
        self.session_id = ""  # the server's id of this session (a reconnect asks for it again)
        self.sync: dict | None = None  # the class component's data: url, watch, drawn (and its element id)
        self.sync_frame: dict | None = None  # a follower's frame component (its trigger reruns the whole app)
        self.latest: dict | None = None  # the class's counters, as its event stream last said
        self.event_at: dict[int, float] = {}  # seq -> when the event stream first announced it (perf_counter)
        self.asks = 0  # triggers sent (every ask, first or repeated)
        self.stream_opens = 0
        self._asked, self._tries, self._timer = 0.0, 0, None
        self._events: asyncio.Task | None = None
        self.follow_events = False  # follow_class() sets it: the component's JavaScript runs

    # -- connection -----------------------------------------------------------------------------
    async def connect(self, page: str = "", query: str = "") -> float:
        """Open the websocket and do the first run of `page` (a url path; "" = default page) with
        query string `query`, as a browser opening `base_url/page?query` does. Returns its seconds."""
        t = time.perf_counter()
        await self._open()
        self.query_string = query
        await self._rerun(ClientState(page_script_hash="", page_name=page.strip("/")), t)
        return time.perf_counter() - t

    def upgrade_headers(self) -> dict[str, str]:
        """The headers of the websocket's upgrade request (a browser's cookies, a proxy's address): none here."""
        return {}

    async def _open(self, *protocols: str) -> None:
        """Open the websocket (`protocols`: more entries after the two the frontend sends) and start reading it."""
        # max_size: a page's charts can exceed websockets' 1 MiB default message size. No protocol pings:
        # a browser sends none, and a busy server answering one late would cut the session.
        self._ws = await connect(
            self.ws_url,
            subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN", *protocols],
            max_size=None,
            ping_interval=None,
            open_timeout=self.timeout,
            additional_headers=self.upgrade_headers() or None,
        )
        self._reader = asyncio.create_task(self._read())

    async def close(self) -> None:
        self.follow_events = False
        if self._events is not None:
            self._events.cancel()
            await asyncio.gather(self._events, return_exceptions=True)
        if self._ws is not None:
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    # -- interactions ---------------------------------------------------------------------------
    async def type_sentence(self, text: str, label: str = "Your sentence") -> float:
        """Type `text` into the text input `label` and press Enter: a rerun with that widget's new
        value and every other widget's current one. Returns the seconds to the end of the run."""
        wid = self.widget_id(label)
        self.widgets[wid] = WidgetState(id=wid, string_value=text)
        return await self._rerun(ClientState(page_script_hash=self.page_hash))

    async def switch_page(self, title_or_url_path: str) -> float:
        """Click the nav link of a page (by title or url path): a rerun with the target page's hash and
        only the main script's widgets, as the frontend sends. Returns the seconds to the end of the run."""
        target = self.pages[title_or_url_path.strip("/")]
        keep = {w.widget_id for h, el in self.elements.values() if h == self.main_hash and (w := _Widget(el)).widget_id}
        return await self._rerun(ClientState(page_script_hash=target), only=keep)

    async def click(self, key: str) -> float:
        """Click the button whose key is `key` (st.button(..., key=key)): a rerun whose widget states say
        so (a trigger: true for this run only). Returns the seconds to the end of the run."""
        wid = next(
            (
                w.widget_id
                for _, (_, el) in self.elements.items()
                if (w := _Widget(el)).widget_id and w.widget_id.endswith(f"-{key}")
            ),
            None,
        )
        if wid is None:
            raise KeyError(f"no button with key {key!r} on the page")
        state = ClientState(page_script_hash=self.page_hash)
        t = time.perf_counter()
        self.widgets[wid] = WidgetState(id=wid, trigger_value=True)
        try:
            return await self._rerun(state, t)
        finally:
            self.widgets.pop(wid, None)

    async def rerun(self) -> float:
        """A full rerun of the current page with the current widget states (what a fragment's
        st.rerun(scope="app") or a browser's reconnect does). Returns its seconds."""
        return await self._rerun(ClientState(page_script_hash=self.page_hash))

    async def poll_fragments(self, seconds: float) -> None:
        """Run the page's fragment timers (st.fragment(run_every=...)) for `seconds`, as the frontend does
        (a `setInterval` per fragment, whatever the script is doing): a fragment rerun each interval, without
        waiting for its answer (a full run it causes is counted in `full_runs` and reported to
        `on_full_run`)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end and self._ws is not None:
            for fid in list(self.fragments):  # also while a run is under way, as the frontend's timers do
                state = ClientState(
                    page_script_hash=self.page_hash, fragment_id=fid, is_auto_rerun=True, query_string=self.query_string
                )
                state.widget_states.CopyFrom(WidgetStates(widgets=self._values()))
                state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
                state.context_info.url = self.page_url
                try:
                    await self._ws.send(BackMsg(rerun_script=state).SerializeToString())
                except Exception:  # noqa: BLE001 - the connection is gone: the caller reconnects
                    return
            await asyncio.sleep(min(self.fragments.values(), default=1.0))

    # -- a class's event stream (ui/classroom/push.py), as the page's component follows it ------------------
    WAIT = (0.0, 2.5, 5.0, 10.0, 10.0)  # before each ask for one value (the component's WAIT, in seconds)

    def start_following(self) -> None:
        """Run the class component's JavaScript from now on (until close)."""
        self.follow_events = True
        self._sync_changed()

    def extra_headers(self) -> dict[str, str]:
        return {}

    def _sync_changed(self) -> None:
        """The component's data arrived (a run's end): open its stream if its url changed, compare."""
        if not self.follow_events or self.sync is None:
            return
        url = self.sync.get("url")
        if url != getattr(self, "_stream_url", None):
            self._stream_url = url
            if self._events is not None:
                self._events.cancel()
            self._events = asyncio.get_running_loop().create_task(self._stream(url)) if url else None
            self.latest = None
        self._check()

    def _check(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self.follow_events or self.sync is None or self.latest is None or self._ws is None:
            return
        names = str(self.sync["watch"]).split("+")  # one counter, or a sum ("seq+tally"), as the component reads it
        want = None if any(self.latest.get(n) is None for n in names) else sum(self.latest[n] for n in names)
        drawn = self.sync.get("drawn")
        if want is None or drawn is None or want <= drawn:
            self._tries, self._asked = 0, 0.0
            return
        if self._tries >= len(self.WAIT):
            return
        due = self._asked + self.WAIT[self._tries] - time.monotonic() if self._asked else 0.0
        loop = asyncio.get_running_loop()
        if due > 0:
            self._timer = loop.call_later(due, self._check)
            return
        self._asked, self._tries = time.monotonic(), self._tries + 1
        self.asks += 1
        loop.create_task(self._trigger(f"{want}.{self._tries}"))
        if self._tries < len(self.WAIT):
            self._timer = loop.call_later(self.WAIT[self._tries], self._check)

    async def _trigger(self, value: str) -> None:
        """setTriggerValue("sync", value): a rerun with every widget's state and the trigger's; of the fragment the
        component is in (a follower's page) on a first ask, of the whole app (its frame's trigger) on an ask
        again, as the component's script does."""
        sync = self.sync_frame if self._tries > 1 and self.sync_frame is not None else self.sync
        wid = f"$$STREAMLIT_INTERNAL_KEY_{sync['id']}__events"
        state = ClientState(
            page_script_hash=self.page_hash, query_string=self.query_string, fragment_id=sync.get("fragment", "")
        )
        trigger = WidgetState(id=wid, json_trigger_value=json.dumps([{"event": "sync", "value": value}]))
        state.widget_states.CopyFrom(WidgetStates(widgets=[*self._values(), trigger]))
        state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
        state.context_info.url = self.page_url
        with contextlib.suppress(Exception):  # the websocket is gone: the next ask (or a reconnect) repairs it
            await self._ws.send(BackMsg(rerun_script=state).SerializeToString())

    async def _stream(self, path: str) -> None:
        """The page's EventSource: reads `data:` events, reconnects after a second (as the server's `retry`
        says) when the connection drops or is refused."""
        u = urlparse(self.page_url)
        host, port = u.hostname, u.port or 80
        while self.follow_events:
            writer = None
            try:
                reader, writer = await asyncio.open_connection(host, port)
                head = [
                    f"GET {path} HTTP/1.1",
                    f"Host: {u.netloc}",
                    "Accept: text/event-stream",
                    *(f"{k}: {v}" for k, v in self.extra_headers().items()),
                ]
                writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
                status = (await reader.readline()).decode()
                if " 200 " not in status:
                    raise ConnectionError(status.strip())
                while (await reader.readline()) not in (b"\r\n", b""):
                    pass
                self.stream_opens += 1
                buf = ""
                while True:  # chunked: size line, chunk, CRLF
                    size = int((await reader.readline()).strip() or b"0", 16)
                    if size == 0:
                        break
                    buf += (await reader.readexactly(size + 2))[:-2].decode()
                    while "\n\n" in buf:
                        event, buf = buf.split("\n\n", 1)
                        data = "".join(line[5:].strip() for line in event.split("\n") if line.startswith("data:"))
                        if data:
                            c = json.loads(data)
                            if "seq" in c:
                                self.event_at.setdefault(c["seq"], time.perf_counter())
                                self.latest = c
                                if self._tries >= len(self.WAIT):
                                    self._tries = 1
                                self._check()
            except (OSError, ConnectionError, ValueError, asyncio.IncompleteReadError):
                pass
            finally:
                if writer is not None:
                    writer.close()
            await asyncio.sleep(1.0 + random.random() * 0.5)

    def _values(self) -> list[WidgetState]:
        """Every widget's state less a click's pending trigger: a trigger is true for the one request that carries
        it, as the frontend sends it (a fragment's request crossing a click must not click again)."""
        triggers = ("trigger_value", "json_trigger_value")
        return [w for w in self.widgets.values() if w.WhichOneof("value") not in triggers]

    async def _rerun(self, state: ClientState, t: float | None = None, only: set[str] | None = None) -> float:
        """Send a rerun and wait until a run started after it ends the chain (FINISHED_SUCCESSFULLY or a
        compile error; a FINISHED_EARLY_FOR_RERUN run is followed by another run). A chain whose full run's end
        Streamlit dropped (`_end_dropped`) may also have lost that run's last elements: a second full run, without
        the click's trigger, redraws the page (as the next event would in a browser)."""
        state.query_string = self.query_string
        state.widget_states.CopyFrom(
            WidgetStates(widgets=[w for i, w in self.widgets.items() if only is None or i in only])
        )
        state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
        state.context_info.url = self.page_url
        t = time.perf_counter() if t is None else t
        for _ in range(2):
            self._waiter, self._started = asyncio.get_running_loop().create_future(), False
            self._end_dropped = False
            await self._ws.send(BackMsg(rerun_script=state).SerializeToString())
            try:
                ended = await asyncio.wait_for(self._waiter, self.timeout)
            finally:
                self._waiter = None
            if ended != ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
                break
            state.widget_states.CopyFrom(WidgetStates(widgets=self._values()))
        return time.perf_counter() - t

    # -- what the page shows --------------------------------------------------------------------
    def widget_id(self, label: str) -> str:
        """The id of the first widget (main area, then sidebar) with this label in the current run."""
        for _, (_, el) in sorted(self.elements.items()):
            w = _Widget(el)
            if w.widget_id and w.label == label:
                return w.widget_id
        raise KeyError(f"no widget labelled {label!r} on the page")

    def widget_value(self, label: str):
        """The value the widget `label` holds (what the browser's input box would show)."""
        s = self.widgets.get(self.widget_id(label))
        return getattr(s, s.WhichOneof("value")) if s is not None and s.WhichOneof("value") else None

    def text(self, root: int = MAIN) -> str:
        """The text of the markdown, headings, texts, alerts and code of one root container, one element
        a line, in page order."""
        lines = []
        for path, (_, el) in sorted(self.elements.items()):
            kind = el.WhichOneof("type")
            if path[0] != root:
                continue
            if kind in ("markdown", "heading", "text", "alert"):
                body = getattr(el, kind).body
                lines.append(markdown_text(body) if kind != "text" else body)
            elif kind == "code":
                lines.append(el.code.code_text)
        return "\n".join(lines)

    def exceptions(self) -> list[str]:
        """The exception boxes on the page (any container): "Type: message"."""
        return [
            f"{el.exception.type}: {el.exception.message}"
            for _, el in self.elements.values()
            if el.WhichOneof("type") == "exception"
        ]

    # -- the message reader ---------------------------------------------------------------------
    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                self._handle(msg)
        except Exception as e:  # noqa: BLE001 - handed to the waiting rerun
            self._fail(e)
        self._fail(ConnectionError("the server closed the websocket"))

    def _fail(self, e: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(e)

    def _handle(self, msg: ForwardMsg) -> None:
        kind = msg.WhichOneof("type")
        if kind in ("new_session", "script_finished"):  # the last few runs, for a report on a stuck session
            self.runs.append(
                (
                    round(time.perf_counter(), 2),
                    kind,
                    msg.script_finished if kind == "script_finished" else list(msg.metadata.run.fragment_ids),
                )
            )
            del self.runs[:-120]
        if kind == "new_session":
            if self._in_run and self._started:  # the run before this one never ended: its end was dropped
                self._end_dropped = True
            self.running = self._in_run = True
            ns = msg.new_session
            if ns.HasField("initialize") and ns.initialize.session_id:
                self.session_id = ns.initialize.session_id  # a reconnect names it, as the frontend does
            self.main_hash, self.page_hash = ns.main_script_hash, ns.page_script_hash
            for p in ns.app_pages:  # pages known at the start of the run (st.navigation's follow)
                self.pages.setdefault(p.page_name, p.page_script_hash)
                self.pages.setdefault(p.url_pathname, p.page_script_hash)
            if not msg.metadata.run.fragment_ids:  # a full run redraws the whole page
                self.elements.clear()
                self.fragments.clear()
                self._started = self._full = True
        elif kind == "delta" and msg.delta.WhichOneof("type") == "new_element":
            el = msg.delta.new_element
            self.elements[tuple(msg.metadata.delta_path)] = (msg.metadata.active_script_hash, el)
            if el.WhichOneof("type") == "toast":
                self.runs.append((round(time.perf_counter(), 2), "toast", el.toast.body[:80]))
            if el.WhichOneof("type") == "bidi_component" and el.bidi_component.component_name == "glass_class_sync":
                b = el.bidi_component
                # (inside a fragment, a follower's page: its trigger reruns that fragment, as the frontend's does)
                data = {**json.loads(b.json or b.mixed.json or "{}"), "id": b.id, "fragment": msg.delta.fragment_id}
                if data.get("frame"):
                    self.sync_frame = data
                else:
                    self.sync = data
                    self._page_fragment = bool(msg.delta.fragment_id)
                    if self.follow_events:
                        self._tries, self._asked = 0, 0.0
                        self._sync_changed()
            w = _Widget(el)
            if w.widget_id and (w.pushed or w.widget_id not in self.widgets):
                s = _widget_state(el.WhichOneof("type"), w.proto, w.pushed)
                if s is not None:
                    self.widgets[w.widget_id] = s
        elif kind == "navigation":
            for p in msg.navigation.app_pages:
                self.pages[p.page_name] = self.pages[p.url_pathname] = p.page_script_hash
            self.page_hash = msg.navigation.page_script_hash
            self.runs.append((round(time.perf_counter(), 2), "navigation", self.page_hash[:8]))
        elif kind == "page_info_changed":
            self.query_string = msg.page_info_changed.query_string
            self.runs.append((round(time.perf_counter(), 2), "query", self.query_string[:40]))
        elif kind == "ref_hash":  # only sent for hashes the client said it has cached; we list none
            self._fail(RuntimeError("unexpected ref_hash message"))
        elif kind == "auto_rerun":
            self.fragments[msg.auto_rerun.fragment_id] = msg.auto_rerun.interval
        elif kind == "script_finished":
            self.running = msg.script_finished == ForwardMsg.FINISHED_EARLY_FOR_RERUN  # another run follows
            self._in_run = False
            page_alone = msg.script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY and self._page_fragment
            if (msg.script_finished in DONE and self._full) or page_alone:
                if page_alone:
                    self.page_runs += 1
                else:
                    self.full_runs += 1
                self._full = self._page_fragment = False
                if self.on_full_run is not None:
                    self.on_full_run(self)
            ends = msg.script_finished in DONE or (
                self._end_dropped and msg.script_finished == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY
            )
            if ends and self._started:
                self._end_dropped = False
                active = {w.widget_id for _, el in self.elements.values() if (w := _Widget(el)).widget_id}
                self.widgets = {i: s for i, s in self.widgets.items() if i in active}  # drop stale widgets
                if self._waiter is not None and not self._waiter.done():
                    self._waiter.set_result(msg.script_finished)
        # anything else (session_status_changed,
        # page_config_changed, logo, session_event...) is ignored


class _Widget:
    """The widget inside an Element, if it is one: its proto, id, label, and whether the server pushed
    a value (`set_value`)."""

    def __init__(self, el: Element):
        kind = el.WhichOneof("type")
        self.proto = getattr(el, kind) if kind else None
        self.widget_id = getattr(self.proto, "id", "") if kind not in (None, "exception") else ""
        self.label = getattr(self.proto, "label", "")
        self.pushed = bool(getattr(self.proto, "set_value", False))
