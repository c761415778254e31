"""classroom/hub.py (a process's class events, handed to the connections listening there) on both back-ends,
and through a Redis restart: every listener ends on the class's latest counters without anyone asking."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from classroom import Counters, MemoryClassStore, RedisClassStore
from classroom.hub import EventHub
from serving.processes import stop
from tests.services import redis_server, until, wait_for

STATE = {"page": "overview", "sentence": "thinking machines", "model": "base"}


async def _follow_changes(store, other) -> None:
    hub = EventHub(other)
    hub.start()
    try:
        await asyncio.sleep(0.3)  # (Redis: the subscription is confirmed)
        code, secret = store.create(STATE)
        assert await hub.listen("ZZZZZZ", "student-1") is None  # no such class
        a, b = await hub.listen(code, "student-1"), await hub.listen(code, "student-2")
        a2 = await hub.listen(code, "student-1")  # a second tab of the same student
        t = await hub.listen(code, "teacher")
        assert a.latest == Counters(1, 0, 0) and a.up
        assert hub.connected(code) == {"student-1": 2, "student-2": 1, "teacher": 1}
        # every app process can tell who has a page of the class open (the teacher is no student)
        await until(lambda: store.connected(code) == {"student-1", "student-2"}, 10, "the record", every=0.02)
        for i in range(10):  # a burst: each listener wakes, and ends on the last counters
            store.set_state(code, secret, {**STATE, "sentence": f"i am a student {i}"})
        await until(lambda: all(x.latest == Counters(11, 0, 0) for x in (a, b, a2)), 10, "the burst", every=0.02)
        # what a page's run asks at its end instead of the store (ui/classroom/panels.py end_of_run)
        assert hub.latest(code) == Counters(11, 0, 0) and hub.latest("ZZZZZZ") is None
        assert a.changed.is_set()
        a.changed.clear()
        hub.unlisten(a2)
        hub.unlisten(t)
        assert hub.connected(code) == {"student-1": 1, "student-2": 1}
        hub.unlisten(b)  # a student's last page closed: gone from the record at once
        await until(lambda: store.connected(code) == {"student-1"}, 10, "student-2 to leave", every=0.02)
        b = await hub.listen(code, "student-2")
        store.join(code, "203.0.113.9", "student-0003")  # the teacher's counts move: so does the tally
        await until(lambda: a.latest == Counters(11, 0, 1) and a.changed.is_set(), 10, "the tally", every=0.02)
        hub.unlisten(a)
        hub.unlisten(b)
        assert hub.connected(code) == {} and hub.listeners() == 0
        assert hub.latest(code) is None  # nobody listens here: not kept (a run reads the store)
        await until(lambda: store.connected(code) == set(), 10, "an empty record", every=0.02)
        assert store.connected("ZZZZZZ") == set()
    finally:
        hub.stop()


@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_the_hub_hands_every_change_to_the_connections_of_its_class(kind):
    if kind == "memory":
        store = MemoryClassStore()
        asyncio.run(_follow_changes(store, store))
        return
    with redis_server() as url:
        prefix = f"test:{uuid.uuid4().hex[:8]}"
        store, other = RedisClassStore(url, prefix=prefix), RedisClassStore(url, prefix=prefix)  # two processes
        try:
            asyncio.run(_follow_changes(store, other))
        finally:
            store.close()
            other.close()


def test_a_redis_restart_is_told_and_the_listeners_catch_up():
    """Redis stops (its listeners hear up=False: their page says "reconnecting"), a change is made while this
    process's subscription is still away, Redis is back: every listener is up again, on the latest counters."""

    async def run(server, store, other) -> None:
        hub = EventHub(other)
        hub.start()
        try:
            await asyncio.sleep(0.3)
            code, secret = store.create(STATE)
            listener = await hub.listen(code, "student-1")
            stop(server.child)
            await until(lambda: not hub.up and not listener.up, 15, "up=False", every=0.02)
            assert hub.latest(code) is None  # the events are interrupted: a run reads the store (and waits)
            server.start()
            store.set_state(code, secret, {**STATE, "sentence": "i am a student"})  # (maybe before we resubscribe)
            await until(
                lambda: hub.up and listener.up and listener.latest.seq == 2,
                20,
                lambda: f"up again on seq 2: {listener.latest}",
                every=0.02,
            )
            store.set_state(code, secret, {**STATE, "sentence": "he is tired"})  # and events flow again
            await until(lambda: listener.latest.seq == 3, 10, "seq 3", every=0.02)
            assert hub.latest(code) == listener.latest
        finally:
            hub.stop()

    with redis_server(server=True) as server:
        prefix = f"test:{uuid.uuid4().hex[:8]}"
        store, other = RedisClassStore(server.url, prefix=prefix), RedisClassStore(server.url, prefix=prefix)
        try:
            asyncio.run(run(server, store, other))
        finally:
            store.close()
            other.close()


def test_chaos_leaves_no_student_on_a_stale_state():
    """The short version of `python -m bench.classroom_load chaos`: 6 students on 2 app processes behind HAProxy
    (Redis, every part supervised as `python -m serving.replicas` runs them), teacher bursts of 5 changes while
    students click as their redraws end, every event stream and a third of the websockets cut, Redis killed,
    HAProxy killed, an app process killed (its students' pages reconnect through the proxy and start new sessions
    from their addresses): after each, every student's page shows the teacher's latest sentence by itself (their
    class component asked for the runs), none is left on a stale state."""
    from bench.class_chaos import chaos
    from serving.replicas import Cluster
    from tests.services import require_tool

    for tool in ("redis-server", "haproxy"):
        require_tool(tool)
    lines: list[str] = []
    with Cluster(replicas=2, timeout=90, workers=0, supervise=True) as cluster:
        result = asyncio.run(asyncio.wait_for(chaos(cluster, 6, timeout=40, burst=5, log=lines.append), 400))
    assert result["stale"] == 0, "\n".join(lines)
    assert len(result["phases"]) == 7 and result["clicks_at_run_ends"] > 0, result


def test_a_class_behind_the_proxy_follows_every_change():
    """The short version of `python -m bench.classroom_load follow --processes 2`: 4 students on 2 app processes
    behind HAProxy (Redis) follow 3 of the teacher's changes; every student's page shows each one, and each
    change's event reached every student's event stream (what the benchmark times apart from the redraws), and
    each redraw was of the page alone."""
    from bench.class_clients import ONE_ADDRESS
    from bench.classroom_load import follow
    from serving.replicas import Cluster
    from tests.services import require_tool

    for tool in ("redis-server", "haproxy"):
        require_tool(tool)
    with Cluster(replicas=2, timeout=90, workers=0, env=ONE_ADDRESS) as cluster:
        f = asyncio.run(asyncio.wait_for(follow(cluster.url, 4, 3, pause=1.0, timeout=30, idle=1.0), 300))
    assert f.missed == 0 and len(f.latencies) == 12, f
    assert len(f.events) == 12 and all(0 < e < 30 for e in f.events), f.events
    # every student's page was redrawn alone (the fragment that holds a follower's page), not by a full run
    assert f.pages_alone >= 12 and f.full_runs <= 2, f  # (a full run: an ask again, after a lost first one)


def test_a_class_wide_read_is_made_once_a_process_until_the_class_moves():
    """A hundred followers woken by one change read the same record, pace and teacher's run: this process reads
    them once (classroom/reads.py `ClassReads`), until the class's next event (a change made by another
    process), which drops them before anyone hears it; a student with a question open reads their own answer;
    nothing is kept while this process hears no events, nor longer than `KEEP_SECONDS`."""
    from classroom.reads import KEEP_SECONDS, ClassReads

    with redis_server() as url:
        prefix = f"test:{uuid.uuid4().hex[:8]}"
        other, here = RedisClassStore(url, prefix=prefix), RedisClassStore(url, prefix=prefix)  # two processes
        clock = [0.0]
        here.reads = ClassReads(clock=lambda: clock[0])
        calls = {"snapshot": 0, "hmget": 0}
        snapshot_script, hmget = here._scripts["snapshot"], here._r.hmget

        def counted_snapshot(*a, **kw):
            calls["snapshot"] += 1
            return snapshot_script(*a, **kw)

        def counted_hmget(*a, **kw):
            calls["hmget"] += 1
            return hmget(*a, **kw)

        here._scripts["snapshot"], here._r.hmget = counted_snapshot, counted_hmget
        heard = []
        try:
            code, secret = other.create(STATE)
            other.join(code, "203.0.113.1", "student-1")
            other.set_pace(code, secret, paused=True)
            here.snapshot(code, student_id="student-1")
            here.snapshot(code, student_id="student-1")
            assert calls["snapshot"] == 2  # no events heard here yet: every read goes to Redis
            here.watch(lambda c, counters: heard.append(counters))
            wait_for(lambda: here.reads.up, 10, "the reads to hear events", every=0.01)
            for _ in range(5):
                snap = here.snapshot(code, student_id="student-1")
                assert here.pace(code)["paused"] is True and here.class_run(code) is None
            assert calls == {"snapshot": 3, "hmget": 2} and snap.state == STATE
            snap.state["sentence"] = "changed by one reader"  # each reader parses its own copy
            assert here.snapshot(code, student_id="student-1").state == STATE
            other.set_state(code, secret, {**STATE, "sentence": "the cat sat"})  # another process's change
            wait_for(lambda: len(heard) == 1, 10, "the first event", every=0.01)
            snap = here.snapshot(code, student_id="student-1")
            assert snap.state["sentence"] == "the cat sat" and snap.seq == heard[0].seq and calls["snapshot"] == 4
            here.snapshot(code, student_id="student-2")
            assert calls["snapshot"] == 4  # the same record for every student
            other.set_pace(code, secret, paused=False)
            wait_for(lambda: len(heard) == 2, 10, "the pace's event", every=0.01)
            assert here.pace(code)["paused"] is False
            qid = other.ask(code, secret, "Which word?", ["le", "chat"], 1)
            wait_for(lambda: len(heard) == 3, 10, "the question's event", every=0.01)
            other.answer(code, "student-1", qid, 1)
            wait_for(lambda: len(heard) == 4, 10, "the answer's event", every=0.01)
            assert here.snapshot(code, student_id="student-1").my_answer == 1  # their own answer, read for them
            assert here.snapshot(code, student_id="student-2").my_answer is None
            n = calls["snapshot"]
            here.snapshot(code)  # (the class's part was read once since the answer's event)
            assert calls["snapshot"] == n
            clock[0] += KEEP_SECONDS + 0.01  # kept no longer than this
            here.snapshot(code)
            here.snapshot(code)
            assert calls["snapshot"] == n + 1
            here._event = lambda data: None  # (no event heard here from now on)
            here.ask(code, secret, "And now?", ["yes", "no"], 0)  # a change made in this process (the teacher's)
            assert here.snapshot(code).question.text == "And now?"  # read back at once, event or not
            here.reads.status(False)  # the events are away (as when Redis restarts)
            n = calls["snapshot"]
            here.snapshot(code)
            here.snapshot(code)
            assert calls["snapshot"] == n + 2
        finally:
            here.close()
            other.close()
