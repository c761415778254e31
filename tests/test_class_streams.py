"""The class's event route under attack (ui/classroom/push.py `events`, serving/streams.py), on both back-ends: a
member, an address and the process hold a bounded number of streams, so a token replayed from a script cannot cut
the other classes off; a token that is not ASCII is refused like any wrong one (no 500, no traceback); a class that
ends says so on its streams once, and they close.

The route is driven as the web server drives it (an ASGI request whose response streams until the client hangs
up), on this test's event loop, with the process's hub over a real store (memory, or a redis-server started here).
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from urllib.parse import quote

import pytest
from starlette.requests import Request

from classroom import MemoryClassStore, RedisClassStore
from classroom.hub import EventHub
from serving.streams import StreamCaps
from tests.services import until
from ui.classroom import push

STATE = {"page": "overview", "sentence": "thinking machines", "model": "base"}


class Stream:
    """One GET of the events route: its status, the events it sent, and the client hanging up."""

    def __init__(self, code: str, tok: str, address: str = "203.0.113.5"):
        query = f"t={quote(tok.encode('utf-8', 'surrogateescape'))}".encode()
        self.scope = {
            "type": "http",
            "method": "GET",
            "path": f"/api/class/{code}/events",
            "path_params": {"code": code},
            "query_string": query,
            "headers": [(b"x-forwarded-for", address.encode())],
            "client": ("127.0.0.1", 40000),
        }
        self.status: int | None = None
        self.events: list[dict] = []
        self.body = b""
        self.task: asyncio.Task | None = None
        self._gone = asyncio.Event()

    async def _receive(self):
        await self._gone.wait()
        return {"type": "http.disconnect"}

    async def _send(self, message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        elif message["type"] == "http.response.body":
            self.body += message.get("body", b"")
            for line in message.get("body", b"").decode().splitlines():
                if line.startswith("data: "):
                    self.events.append(json.loads(line[6:]))

    async def open(self) -> Stream:
        response = await push.events(Request(self.scope, self._receive))
        self.task = asyncio.create_task(response(self.scope, self._receive, self._send))
        await until(lambda: self.status is not None, 10, "the response's start", every=0.01)
        return self

    async def close(self) -> None:
        self._gone.set()
        if self.task is not None:
            await asyncio.wait_for(self.task, 5)


@pytest.fixture(params=["memory", "redis"])
def hub_of(request, monkeypatch):
    """hub_of() -> (store, a started hub installed as this process's) on either back-end; the streams' caps are
    the test's own (`push.STREAMS`), and the proxy's address is trusted (every stream names its client)."""
    monkeypatch.setenv("GLASS_TRUST_PROXY", "1")
    monkeypatch.setattr(push, "STREAMS", StreamCaps(per_member=3, per_client=5, total=9))
    made = []

    async def make():
        if request.param == "memory":
            store = MemoryClassStore()
        else:
            store = RedisClassStore(request.getfixturevalue("redis_url"), prefix=f"test:{uuid.uuid4().hex[:8]}")
        hub = EventHub(store)
        hub.start(asyncio.get_running_loop())
        monkeypatch.setattr(push, "_hub", hub)
        made.append((store, hub))
        await asyncio.sleep(0.3 if request.param == "redis" else 0)  # (Redis: the subscription is confirmed)
        return store, hub

    yield make
    for store, hub in made:
        hub.stop()
        store.close()


def test_a_token_that_is_not_ascii_is_refused_like_any_wrong_one(hub_of, caplog):
    """`?t=é.<mac>` made `hmac.compare_digest` raise: 500 and a 57-line traceback in the log per request (a cheap
    log flood). Now: 403, as for every token that is not the class's, and nothing in the log."""

    async def run():
        store, _ = await hub_of()
        code, _ = store.create(STATE)
        mac = push.token(code, "student-0001").rpartition(".")[2]
        for tok in (f"é.{mac}", f"student-0001.{mac[:-1]}é", "\udcff.x", "é", "ü" * 300):
            assert push.member_of(code, tok) is None
            s = await Stream(code, tok).open()
            assert s.status == 403 and s.body == b"not a member of this class", tok
        assert (await Stream(code, push.token(code, "student-0001")).open()).status == 200

    with caplog.at_level(logging.INFO):
        asyncio.run(run())
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info], caplog.text


def test_a_replayed_token_holds_a_few_streams_and_every_other_class_still_follows(hub_of):
    """One student's valid token, replayed, held 1,999 of the process's 2,000 streams, and every other class's new
    pages were refused. Now a member holds at most `per_member` streams, an address `per_client`: the others are
    refused at once (429, no stream), and a student of another class, at another address, opens one and hears
    the teacher's change. Closed streams give their places back."""

    async def run():
        store, hub = await hub_of()
        code, secret = store.create(STATE)
        other, other_secret = store.create(STATE)
        tok = push.token(code, "student-0001")
        held = [await Stream(code, tok).open() for _ in range(5)]
        assert [s.status for s in held] == [200, 200, 200, 429, 429]  # a member: 3
        assert held[3].body.startswith(b"this member of the class already holds 3 streams")
        mates = [await Stream(code, push.token(code, f"student-000{i}")).open() for i in (2, 3, 4)]
        assert [s.status for s in mates] == [200, 200, 429]  # the address: 5 (3 of them the replayed token's)
        assert mates[2].body.startswith(b"this address already holds 5 streams")
        assert hub.connected(code) == {"student-0001": 3, "student-0002": 1, "student-0003": 1}

        newcomer = await Stream(other, push.token(other, "student-0009"), address="198.51.100.7").open()
        assert newcomer.status == 200 and newcomer.events[-1]["seq"] == 1
        store.set_state(other, other_secret, {**STATE, "sentence": "he is tired"})
        await until(lambda: newcomer.events[-1]["seq"] == 2, 10, lambda: f"it to follow: {newcomer.events}", every=0.01)

        for s in held[:3]:
            await s.close()
        again = await Stream(code, tok).open()
        assert again.status == 200 and hub.connected(code)["student-0001"] == 1
        for s in (again, *mates[:2], newcomer):
            await s.close()
        assert hub.listeners() == 0 and push.STREAMS.open == 0

    asyncio.run(run())


def test_a_class_that_ends_says_so_once_and_its_streams_close(hub_of):
    """The class ends: each of its streams sends the ended counters and the response ends (its page leaves the
    class, and its EventSource is not opened again); a stream opened afterwards says so at once and ends too."""

    async def run():
        store, hub = await hub_of()
        code, secret = store.create(STATE)
        streams = [await Stream(code, push.token(code, m)).open() for m in ("student-0001", "teacher")]
        store.end(code, secret)
        await until(
            lambda: all(s.task.done() for s in streams),
            10,
            lambda: f"the streams' end: {[s.events for s in streams]}",
            every=0.01,
        )
        assert all(s.events[-1]["ended"] is True for s in streams)
        late = await Stream(code, push.token(code, "student-0001")).open()
        await until(lambda: late.task.done(), 10, "the late stream's end", every=0.01)
        assert late.status == 200 and late.events[-1]["ended"] is True
        assert hub.listeners() == 0 and push.STREAMS.open == 0

    asyncio.run(run())
