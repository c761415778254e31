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
"""

from __future__ import annotations

import asyncio
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
        """Some other client has a page open (else nobody waits for this one)."""
        return any(c != client for c in self.connected)

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
