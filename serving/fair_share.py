"""One client's flood cannot stall the others: each client's share of the server, enforced on what it sends.

Every click, keystroke or rerun of a Streamlit page is one message on the page's websocket, and each starts a
script run, which shares the process's one interpreter lock with every other session's run. Eight tabs of one
visitor pressing buttons sixty times a second, or rerunning a page without a pause, thus left nobody else any
time (another student's run took 12 s and more); sixteen loops of plain HTTP requests took half a core.

`LEDGER` keeps, per client (`serving.identity.client_address`: the address, or behind GLASS_TRUST_PROXY proxies
the one they saw), what the client cost the server: each websocket message costs `MESSAGE_COST` seconds, each
HTTP request (a page's files, a health check, a class's event stream) `HTTP_COST` and the CPU time the process
spent serving it (`Metered`), and each script run of its sessions the CPU time the run took (the app tells:
`charge`). A client may spend its share of seconds per second, and `burst` seconds at once after a quiet spell.
`InboundLimit`, a plain ASGI middleware (app.py hands it to `st.App`, Streamlit's public ASGI app), holds back a
client's next websocket message, or its next HTTP request, until the client is within its share again. Nothing is
dropped: the client's own pages answer at the pace it is allowed.

Fairness protects a class from an outsider, not an outsider from a class:

- only clients that used the server lately contend (spent something in the last `ACTIVE_SECONDS`, a second): an
  idle page somewhere else holds nobody back, so a school behind one NAT address, its teacher and thirty students,
  is as fast beside an outsider's open page as alone (before, one idle page made the class wait up to 10 s);
- a client alone among the active ones may use the whole interpreter (a share of 1), and no more: a flood that
  runs alone is paced too, so the process still answers at once when a student clicks (a flood let loose while
  alone left a pile of reruns and a busy interpreter lock, and the student's first click took 1.5-6 s), while a
  school alone on the server has all of it, and what it owed from a moment with others waits out no one. Plain
  HTTP requests are held to the share even then: they are served on the web server's own thread, beside every
  other page's messages, and a page's own files (a load, then its browser's cache) fit in the burst;
- a teacher's own messages never wait (`lead`: the browser of a class's teacher, as its runs tell), whoever
  else shares the teacher's address; the teacher's runs still count for it.

Settings (per address): `GLASS_CLIENT_SHARE` (default 0.25: a quarter of the interpreter) and
`GLASS_CLIENT_BURST` (default 3 seconds). The share is per app process (each has its own interpreter). Two schools
that use one server at the same time, each behind its own address, each get their share while both are active: raise
it towards 0.5 there.

`RUNS` (`RunSlots`) lets one script run of the process go at a time and the others wait their turn
(`GLASS_RUN_SLOTS`, default 1): a class's redraws come out one after the other instead of all at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Coroutine, Generator, Hashable, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from serving.identity import XSRF_COOKIE, browser_id, client_address, trusted_proxies
from serving.settings import env_number

if TYPE_CHECKING:
    from starlette.types import Message, Receive, Scope, Send

    # An ASGI app whose call is a coroutine (an `async def`): `Metered` steps through it.
    App = Callable[[Scope, Receive, Send], Coroutine[Any, Any, None]]

_T = TypeVar("_T")

CLIENT_SHARE = 0.25  # seconds of the server a client may use per second: $GLASS_CLIENT_SHARE
CLIENT_BURST = 3.0  # seconds it may use at once after a quiet spell: $GLASS_CLIENT_BURST
MESSAGE_COST = 0.025  # what one websocket message costs (a share of 0.25 passes 10 messages a second)
HTTP_COST = 0.002  # what one HTTP request costs outside the app (parsing, a file read in a thread); plus its CPU
MAX_RUN_CHARGE = 1.0  # a run costs at most this much (the first run of a process imports torch)
MAX_WAIT = 10.0  # a client's debt is capped: its next message waits at most this long
ACTIVE_SECONDS = 1.0  # a client that spent nothing this long contends with nobody
ALONE_WAIT = 0.5  # a client alone among the active ones waits at most this long (its pace), whatever it owed
LEAD_SECONDS = 120.0  # a teacher's browser leads this long after its last run as the class's teacher
HEALTH = "/_stcore/health"  # the process's health check: from this machine (a proxy's checks), never held


class Ledger:
    """What each client cost lately, as the time (`due`) at which it would be even with its share; which clients
    used the server lately (`active`); which browsers lead a class (`lead`)."""

    def __init__(
        self, share: float | None = None, burst: float | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.share = share or env_number("GLASS_CLIENT_SHARE", float, CLIENT_SHARE, 0.01)
        self.burst = burst or env_number("GLASS_CLIENT_BURST", float, CLIENT_BURST, 0.01)
        self._clock = clock
        self._due: dict[str, float] = {}
        self._recent: OrderedDict[str, float] = OrderedDict()  # client -> when it last spent, oldest first
        self._leads: dict[str, float] = {}  # browser -> until when it leads
        self._lock = threading.Lock()  # (charge comes from script threads, the rest from the server's loop)
        self.held = 0  # messages and requests that had to wait

    def active(self) -> int:
        """How many clients used the server in the last ACTIVE_SECONDS."""
        with self._lock:
            self._forget(self._clock())
            return len(self._recent)

    def _forget(self, now: float) -> None:  # under the lock: clients quiet for ACTIVE_SECONDS leave `_recent`
        while self._recent:
            client, last = next(iter(self._recent.items()))
            if last > now - ACTIVE_SECONDS:
                break
            del self._recent[client]

    def spend(self, client: str, seconds: float, lead: bool = False, http: bool = False) -> float:
        """Book `seconds` of the server for `client`: how long its request should wait (0 for a `lead`, whose
        cost still counts for its client; `http`: a plain HTTP request, held to the share even when its client is
        alone). (Asked for every message: O(1) but for a rare clean-up.)"""
        with self._lock:
            now = self._clock()
            self._forget(now)
            self._recent[client] = now
            self._recent.move_to_end(client)
            alone = len(self._recent) == 1 and not http
            share = 1.0 if alone else self.share  # alone: the whole interpreter, and no more
            floor = now - self.burst / share  # (what a quiet spell saves up is `burst` seconds at most)
            due = max(self._due.get(client, floor), floor) + seconds / share
            due = min(due, now + (ALONE_WAIT if alone else MAX_WAIT))  # (alone, an old debt waits out no one)
            self._due[client] = due
            if len(self._due) > 10_000:  # clients even with their share are forgotten
                self._due = {c: d for c, d in self._due.items() if d > now - self.burst / self.share}
            return 0.0 if lead or due - now <= 1e-6 else due - now

    def charge(self, client: str, cpu_seconds: float, http: bool = False) -> None:
        """A script run (or with `http`, an HTTP request) of `client` took `cpu_seconds` of CPU (its next message
        pays for it)."""
        self.spend(client, min(max(cpu_seconds, 0.0), MAX_RUN_CHARGE), http=http)

    def lead(self, browser: str, seconds: float = LEAD_SECONDS) -> None:
        """`browser` runs a class as its teacher: its messages never wait (for `seconds`, renewed by its runs)."""
        with self._lock:
            now = self._clock()
            self._leads[browser] = now + seconds
            if len(self._leads) > 1000:
                self._leads = {b: t for b, t in self._leads.items() if t > now}

    @property
    def leading(self) -> bool:
        """Some browser leads a class on this process."""
        return bool(self._leads)

    def leads(self, browser: str | None) -> bool:
        if browser is None or not self._leads:
            return False
        return self._leads.get(browser, 0.0) > self._clock()


LEDGER = Ledger()


def charge(client: str, cpu_seconds: float) -> None:
    LEDGER.charge(client, cpu_seconds)


RUN_SLOTS = 1  # script runs of this process under way at once: $GLASS_RUN_SLOTS (0: no limit)
SLOT_WAIT = 2.0  # a run waits at most this long for its turn, then runs anyway


class RunSlots:
    """At most `n` script runs of this process at once; the others wait their turn: first the runs of the clients
    with fewest runs under way or waiting, then first come, first served.

    Thirty students following a teacher start thirty runs at the same moment, and the process's one interpreter
    lock ran them all a few milliseconds at a time: each ended near the end of all of them, and switching between
    thirty threads cost CPU of its own. In turns, the first students are drawn at once and the last sooner than
    before (`python -m bench.classroom_load follow --students 30 --changes 30 --pause 2`, one process, two runs
    each on an idle machine: no limit p50 0.57/0.58 s, p95 0.95/0.84 s, 0.65/0.68 CPU-s a change; 2 slots 0.29 s,
    0.52/0.48 s, 0.50/0.49 CPU-s; 1 slot 0.24 s, 0.43 s, 0.40/0.42 CPU-s). Students exploring on their own gain
    too (`throughput --students 24 --replicas 1 --seconds 30`: 55.7 interactions/s, p95 0.66 s with no limit;
    73.8/s, p95 0.43 s with 1 slot; 69.4/s with 2). Hence one slot: torch's work on this small model is short,
    and most of a run holds the interpreter lock anyway.

    A waiting run holds nothing (not the interpreter, not a cache's lock). Who leads (a class's teacher) never
    waits: the class's next change is not queued behind the redraws of the last one. A run that waited
    `SLOT_WAIT` goes ahead anyway, so a slow run delays the others by at most that, unless its client has a run
    under way already: a client's runs (eight tabs rerunning at once, a class's thirty redraws) come one after the
    other, and a run of another client is served first. So a student who clicks while a flood of one address's
    reruns is under way waits for one run of it, not for all of them. A fragment's run takes a turn only where it
    charges its client's share (`ui.session_info.fair_share`: the question panel's answers); the other fragments
    (a page's local pickers, the training page's live figures) do not.
    """

    def __init__(self, n: int | None = None, wait: float = SLOT_WAIT):
        if n is None:
            n = env_number("GLASS_RUN_SLOTS", int, RUN_SLOTS, 0)
        self.n, self.wait = max(0, n), wait
        self._lock = threading.Lock()
        self._busy = 0  # slots taken
        self._running: Counter[Hashable] = Counter()  # client -> its runs under way (in a slot or not)
        # (arrival, client) -> what wakes that run, in order of arrival
        self._waiting: dict[tuple[int, Hashable], threading.Condition] = {}
        self._arrivals = itertools.count()
        self._inside = threading.local()  # .depth: this thread's run is in its turn already (a nested `slot`)
        self.waited = 0  # runs that found every slot taken
        self.wakeups = 0  # times a waiting run woke (a turn, its wait's end, or in vain)

    def nested(self) -> bool:
        """This thread is inside a `slot` already (a fragment called by a full run)."""
        return getattr(self._inside, "depth", 0) > 0

    def _next(self) -> tuple[int, Hashable]:
        # under the lock: whose turn it is (the client with fewest runs, then the first)
        pending = Counter(client for _, client in self._waiting)
        return min(self._waiting, key=lambda w: (self._running[w[1]] + pending[w[1]], w[0]))

    def _wake(self, client: Hashable | None = None) -> None:
        """Under the lock: a free slot wakes the one run whose turn it is, and `client`'s runs ending wakes its
        first waiting run (which may go ahead after `wait`). One thread is woken, not all: with thirty followers
        waiting, waking them all at each turn cost each student about 1 ms of CPU (bench.follower_profile)."""
        if self._waiting and self._busy < self.n:
            self._waiting[self._next()].notify()
        if client is not None:
            first = next((w for w in self._waiting if w[1] == client), None)
            if first is not None:
                self._waiting[first].notify()

    def _take(self, client: Hashable) -> bool:
        """Wait for this run's turn (see the class's docstring); True when it took a slot."""
        with self._lock:
            if self._busy < self.n and not self._waiting:
                self._busy += 1
                self._running[client] += 1
                return True
            self.waited += 1
            me = (next(self._arrivals), client)
            woken = self._waiting[me] = threading.Condition(self._lock)
            deadline = time.monotonic() + self.wait
            try:
                while True:
                    if self._busy < self.n:
                        if self._next() == me:
                            self._busy += 1
                            self._running[client] += 1
                            return True
                        self._wake()  # (a free slot that is not this run's: whose it is must know)
                    left = deadline - time.monotonic()
                    first = next(w for w in self._waiting if w[1] == client) == me
                    if left <= 0 and first and not self._running[client]:
                        self._running[client] += 1  # waited long enough, its client's first: it goes ahead anyway
                        return False
                    woken.wait(left if left > 0 else None)
                    self.wakeups += 1
            finally:
                del self._waiting[me]
                self._wake()

    def _give_back(self, client: Hashable, slot: bool) -> None:
        with self._lock:
            self._busy -= slot
            self._running[client] -= 1
            if self._running[client] <= 0:
                del self._running[client]
            self._wake(client)

    @contextlib.contextmanager
    def slot(self, lead: bool = False, client: str | None = None) -> Iterator[None]:
        """This run's turn (`client`: whose run it is; `lead`: a teacher's, which never waits)."""
        depth = getattr(self._inside, "depth", 0)
        taken = self.n > 0 and not lead and depth == 0
        who: Hashable = client if client is not None else object()  # (a run nobody can name is a client of its own)
        got = self._take(who) if taken else False
        self._inside.depth = depth + 1
        try:
            yield
        finally:
            self._inside.depth = depth
            if taken:
                self._give_back(who, got)


RUNS = RunSlots()


def scope_client(scope: Scope) -> str:
    """The client of an ASGI connection, as `ui.session_info.current_identity` names it in a script run."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
    ip = (scope.get("client") or (None, None))[0]
    if ip in ("127.0.0.1", "::1"):  # (Streamlit's st.context.ip_address says None for this machine)
        ip = None
    return client_address(ip, headers.get("x-forwarded-for"), trusted_proxies())


class Metered(Generic[_T]):
    """Awaits a coroutine and adds up the CPU time of its own steps (`cpu`), not of the other tasks that run while
    it waits: what serving one HTTP request took this process's thread."""

    __slots__ = ("coro", "cpu")

    def __init__(self, coro: Coroutine[Any, Any, _T]) -> None:
        self.coro, self.cpu = coro, 0.0

    def __await__(self) -> Generator[Any, Any, _T]:
        value: Any = None
        error: BaseException | None = None
        while True:
            t = time.thread_time()
            try:
                step = self.coro.throw(error) if error is not None else self.coro.send(value)
            except StopIteration as done:
                self.cpu += time.thread_time() - t
                return cast(_T, done.value)  # (the coroutine's result)
            except BaseException:
                self.cpu += time.thread_time() - t
                raise
            self.cpu += time.thread_time() - t
            value, error = None, None
            try:
                value = yield step
            except GeneratorExit:
                self.coro.close()
                raise
            except BaseException as e:  # (a cancellation, thrown in by the event loop: the coroutine gets it)
                error = e


def scope_browser(scope: Scope) -> str | None:
    """The browser of an ASGI connection (its XSRF cookie, as `serving.identity.browser_id` names it), or None."""
    for name, value in scope.get("headers") or []:
        if name.lower() == b"cookie":
            for part in value.decode("latin-1").split(";"):
                key, _, cookie = part.strip().partition("=")
                if key == XSRF_COOKIE:
                    return browser_id(cookie)
    return None


class InboundLimit:
    """ASGI middleware: a client's websocket messages and HTTP requests wait while the client is over its share
    (`LEDGER`); a teacher's messages never do. Also, for the websocket, what Streamlit's own handler would turn
    into a traceback in the log: a text frame (Streamlit speaks binary only) closes the websocket, and a client
    that left while its message waited is let go at once (its held message is dropped, and nothing is sent
    on a websocket that is gone)."""

    def __init__(self, app: App, ledger: Ledger | None = None) -> None:
        self.app = app
        self.ledger = ledger or LEDGER

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind == "websocket":
            return await self._websocket(scope, receive, send)
        if kind != "http":
            return await self.app(scope, receive, send)
        client = scope_client(scope)
        if client == "local" and scope.get("path") == HEALTH:  # (a proxy's checks come from this machine)
            return await self.app(scope, receive, send)
        wait = self.ledger.spend(client, HTTP_COST, http=True)
        if wait > 0:
            self.ledger.held += 1
            await asyncio.sleep(wait)
        request = Metered(self.app(scope, receive, send))
        try:
            return await request
        finally:
            self.ledger.charge(client, request.cpu, http=True)  # what serving it took (a page: 1-2 ms)

    async def _websocket(self, scope: Scope, receive: Receive, send: Send) -> None:
        client, ledger = scope_client(scope), self.ledger
        browser: list[str | None] = []  # (named once, and only when some teacher leads on this process)
        ahead: asyncio.Future[Message] | None = None  # the next message, read while a held one waits
        closed, gone = False, False  # closed here (a text frame); the client gone (a send failed)

        def leads() -> bool:
            if not ledger.leading:
                return False
            if not browser:
                browser.append(scope_browser(scope))
            return ledger.leads(browser[0])

        async def limited_receive() -> Message:
            nonlocal ahead, closed
            if ahead is not None:
                message, ahead = await ahead, None
            else:
                message = await receive()
            if message.get("type") != "websocket.receive":
                return message
            if message.get("bytes") is None:  # a text frame: Streamlit raises (a traceback); close it here
                closed = True
                await send({"type": "websocket.close", "code": 1003})
                return {"type": "websocket.disconnect", "code": 1003}
            wait = ledger.spend(client, MESSAGE_COST, lead=leads())
            if wait > 0:
                ledger.held += 1
                deadline = asyncio.get_running_loop().time() + wait
                ahead = asyncio.ensure_future(receive())  # the client may leave while this message waits
                await asyncio.wait({ahead}, timeout=wait)
                if ahead.done() and ahead.result().get("type") == "websocket.disconnect":
                    message, ahead = ahead.result(), None
                    return message  # gone: the held message is dropped
                await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))
            if gone:  # (a send failed while it waited: the websocket is gone)
                return {"type": "websocket.disconnect", "code": 1006}
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal gone
            if closed and message.get("type") in ("websocket.send", "websocket.close"):
                return
            try:
                await send(message)
            except OSError:
                gone = True
                raise

        try:
            return await self.app(scope, limited_receive, guarded_send)
        finally:
            if ahead is not None:
                ahead.cancel()
