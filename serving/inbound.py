"""One client's flood cannot stall the others: each client's share of the server, enforced on what it sends.

Every click, keystroke or rerun of a Streamlit page is one message on the page's websocket, and each starts a
script run, which shares the process's one interpreter lock with every other session's run. Eight tabs of one
visitor pressing buttons sixty times a second, or rerunning a page without a pause, thus left nobody else any
time (another student's run took 12 s and more).

`LEDGER` keeps, per client (`serving.identity.client_address`: the address, or behind GLASS_TRUST_PROXY proxies
the one they saw), what the client cost the server: each message it sends costs `MESSAGE_COST` seconds, and
each script run of its sessions the CPU time the run took (the app tells: `charge`). A client may spend
`share` seconds per second, and `burst` seconds at once after a quiet spell. `InboundLimit`, a plain ASGI
middleware (app.py hands it to `st.App`, Streamlit's public ASGI app), holds back a client's next websocket
message until the client is within its share again. Nothing is dropped: the client's own pages answer at the
pace it is allowed (its websocket's buffers fill and the sender waits). A client within its share never
waits, and a client alone on the server (the only address with a page open on this process: one machine, or a school
behind one NAT with nobody else) is never held back. The share is per app process (each has its own
interpreter).

Settings (per address): `GLASS_CLIENT_SHARE` (default 0.25: a quarter of the interpreter) and
`GLASS_CLIENT_BURST` (default 3 seconds). A school whose students share one address while others use the
server too raises the share towards 1 (the school then gets as much as the whole server).

`RUNS` (`RunSlots`) lets one script run of the process go at a time and the others wait their turn
(`GLASS_RUN_SLOTS`, default 1): a class's redraws come out one after the other instead of all at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import time
from collections import Counter

from serving.identity import client_address, trusted_proxies

CLIENT_SHARE = 0.25  # seconds of the server a client may use per second: $GLASS_CLIENT_SHARE
CLIENT_BURST = 3.0  # seconds it may use at once after a quiet spell: $GLASS_CLIENT_BURST
MESSAGE_COST = 0.025  # what one message costs (a share of 0.25 passes 10 messages a second)
MAX_RUN_CHARGE = 1.0  # a run costs at most this much (the first run of a process imports torch)
MAX_WAIT = 10.0  # a client's debt is capped: its next message waits at most this long


def _setting(name: str, default: float) -> float:
    try:
        return max(0.01, float(os.environ.get(name, "") or default))
    except ValueError:
        return default


class Ledger:
    """What each client cost lately, as the time (`due`) at which it would be even with its share."""

    def __init__(self, share: float | None = None, burst: float | None = None, clock=time.monotonic):
        self.share = share or _setting("GLASS_CLIENT_SHARE", CLIENT_SHARE)
        self.burst = burst or _setting("GLASS_CLIENT_BURST", CLIENT_BURST)
        self._clock = clock
        self._due: dict[str, float] = {}
        self.connected: Counter[str] = Counter()  # client -> open websockets
        self._lock = threading.Lock()  # (charge comes from script threads, the rest from the server's loop)
        self.held = 0  # messages that had to wait

    def contended(self, client: str) -> bool:
        """Some other client has a page open (else nobody waits for this one). (Asked for every message: O(1).)"""
        n = len(self.connected)
        return n > 1 or (n == 1 and client not in self.connected)

    def spend(self, client: str, seconds: float) -> float:
        """Book `seconds` of the server for `client`: how long it should wait before its next request."""
        with self._lock:
            now = self._clock()
            if not self.contended(client):
                self._due.pop(client, None)  # alone on the server: no debt is kept
                return 0.0
            due = max(self._due.get(client, 0.0), now - self.burst / self.share) + seconds / self.share
            due = min(due, now + MAX_WAIT)
            self._due[client] = due
            if len(self._due) > 10_000:  # clients even with their share are forgotten
                self._due = {c: d for c, d in self._due.items() if d > now - self.burst / self.share}
            return due - now if due - now > 1e-6 else 0.0

    def charge(self, client: str, cpu_seconds: float) -> None:
        """A script run of `client` took `cpu_seconds` of CPU (its next message pays for it)."""
        self.spend(client, min(max(cpu_seconds, 0.0), MAX_RUN_CHARGE))

    def open(self, client: str) -> None:
        with self._lock:
            self.connected[client] += 1

    def close(self, client: str) -> None:
        with self._lock:
            self.connected[client] -= 1
            if self.connected[client] <= 0:
                del self.connected[client]


LEDGER = Ledger()


def charge(client: str, cpu_seconds: float) -> None:
    LEDGER.charge(client, cpu_seconds)


RUN_SLOTS = 1  # script runs of this process under way at once: $GLASS_RUN_SLOTS (0: no limit)
SLOT_WAIT = 2.0  # a run waits at most this long for its turn, then runs anyway


class RunSlots:
    """At most `n` script runs of this process at once; the others wait their turn (first come, first served).

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
    `SLOT_WAIT` goes ahead anyway, so a slow run delays the others by at most that. A fragment's run takes a turn
    only where it charges its client's share (`ui.session_info.fair_share`: the question panel's answers); the
    other fragments (a page's local pickers, the training page's live figures) do not.
    """

    def __init__(self, n: int | None = None, wait: float = SLOT_WAIT):
        if n is None:
            try:
                n = int(os.environ.get("GLASS_RUN_SLOTS", "") or RUN_SLOTS)
            except ValueError:
                n = RUN_SLOTS
        self.n, self.wait = max(0, n), wait
        self._slots = threading.Semaphore(self.n) if self.n else None
        self._inside = threading.local()  # .depth: this thread's run is in its turn already (a nested `slot`)
        self.waited = 0  # runs that found every slot taken

    def nested(self) -> bool:
        """This thread is inside a `slot` already (a fragment called by a full run)."""
        return getattr(self._inside, "depth", 0) > 0

    @contextlib.contextmanager
    def slot(self, lead: bool = False):
        depth = getattr(self._inside, "depth", 0)
        got = False
        if self._slots is not None and not lead and depth == 0:
            got = self._slots.acquire(blocking=False)
            if not got:
                self.waited += 1
                got = self._slots.acquire(timeout=self.wait)
        self._inside.depth = depth + 1
        try:
            yield
        finally:
            self._inside.depth = depth
            if got:
                self._slots.release()


RUNS = RunSlots()


def scope_client(scope) -> str:
    """The client of an ASGI connection, as `ui.session_info.current_identity` names it in a script run."""
    headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
    ip = (scope.get("client") or (None, None))[0]
    if ip in ("127.0.0.1", "::1"):  # (Streamlit's st.context.ip_address says None for this machine)
        ip = None
    return client_address(ip, headers.get("x-forwarded-for"), trusted_proxies())


class InboundLimit:
    """ASGI middleware: a client's websocket messages wait while the client is over its share (`LEDGER`);
    everything else passes untouched."""

    def __init__(self, app, ledger: Ledger | None = None):
        self.app = app
        self.ledger = ledger or LEDGER

    async def __call__(self, scope, receive, send):
        if scope.get("type") != "websocket":
            return await self.app(scope, receive, send)
        client = scope_client(scope)
        ledger = self.ledger

        async def limited_receive():
            message = await receive()
            if message.get("type") == "websocket.receive":
                wait = ledger.spend(client, MESSAGE_COST)
                if wait > 0:
                    ledger.held += 1
                    await asyncio.sleep(wait)
            return message

        ledger.open(client)
        try:
            return await self.app(scope, limited_receive, send)
        finally:
            ledger.close(client)
