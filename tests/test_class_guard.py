"""A class no visitor can disrupt: one client's flood waits its turn (serving/fair_share.py), and a lost Redis is a
clear state the class comes back from (a real redis-server stopped and started again, tests/services.py).
The store's own limits (presence, students per address, classes per client) are in tests/test_class_store_admission.py;
the long versions of these scenarios, with their figures, are `python -m bench.class_abuse`."""

from __future__ import annotations

import asyncio
import os
import time
import uuid

import pytest

import classroom
from classroom import RedisClassStore
from serving.fair_share import (
    ACTIVE_SECONDS,
    HEALTH,
    HTTP_COST,
    LEAD_SECONDS,
    MESSAGE_COST,
    InboundLimit,
    Ledger,
    RunSlots,
)
from serving.identity import browser_id
from serving.processes import running_app, stop
from serving.shared_redis import REDIS_URL_ENV
from tests.apptest_util import no_exception, run_app
from tests.services import Clock, redis_server, wait_for


# -- each client's share ------------------------------------------------------------------------------------
def test_a_client_over_its_share_waits_and_nobody_else_does():
    clock = Clock()
    ledger = Ledger(share=0.25, burst=1.0, clock=clock)
    alone = [ledger.spend("flooder", MESSAGE_COST) for _ in range(200)]  # alone on the server: the whole of it
    assert alone[39] == 0 and alone[40] == pytest.approx(MESSAGE_COST)  # its burst, then one per cost / 1.0
    assert max(alone) == pytest.approx(0.5)  # (alone, it waits at most its pace)
    assert ledger.spend("student", MESSAGE_COST) == 0  # a student clicks: not slowed at all
    waits = [ledger.spend("flooder", MESSAGE_COST) for _ in range(20)]  # the flooder is held to its share now
    assert waits[0] == pytest.approx(0.5 + MESSAGE_COST / 0.25)
    assert waits[9] - waits[0] == pytest.approx(9 * MESSAGE_COST / 0.25)
    assert ledger.spend("student", MESSAGE_COST) == 0  # the other client is not slowed at all
    ledger.charge("student", 5.0)  # a run is charged at most 1 s (a process's first run imports torch)
    assert ledger.spend("student", 0) == pytest.approx(2 * MESSAGE_COST / 0.25)  # 1.05 s: over its burst of 1 s
    assert ledger.spend("student", MESSAGE_COST) == pytest.approx(3 * MESSAGE_COST / 0.25)
    assert max(ledger.spend("flooder", 1.0) for _ in range(100)) == pytest.approx(10.0)  # its debt is capped
    clock.t += 60  # a minute later everything is paid back
    assert ledger.spend("flooder", MESSAGE_COST) == 0 and ledger.spend("student", MESSAGE_COST) == 0
    clock.t += 60  # plain HTTP is held to the share even alone (served on the web server's own thread, beside
    http = [ledger.spend("203.0.113.66", HTTP_COST, http=True) for _ in range(600)]  # every page's messages)
    assert ledger.active() == 1 and http[-1] == pytest.approx((600 * HTTP_COST - 1.0) / 0.25)  # (alone: / 1.0)


def test_an_idle_page_elsewhere_holds_back_no_class_and_a_teacher_never_waits():
    """A school behind one NAT address, the teacher and thirty students, makes its class's redraws (each a message
    and a run of the address) far past a quarter of the process. An outsider's page that sends nothing holds it
    back not at all (before: one idle page made the class contended, and its changes waited up to 10 s); while
    an outsider does use the server, the class is held to its share, for as long as that lasts; the teacher's
    own messages never wait, whatever the class owes."""
    clock = Clock()
    ledger = Ledger(share=0.25, burst=3.0, clock=clock)
    school, outsider = "203.0.113.7", "198.51.100.99"
    for _ in range(20):  # twenty changes, two seconds apart, each 31 runs of 30 ms and 31 messages
        assert all(ledger.spend(school, MESSAGE_COST) == 0 for _ in range(31))
        ledger.charge(school, 31 * 0.03)
        clock.t += 2.0
    assert ledger.active() == 0  # (between two changes; the outsider's page is open, and idle: it never spends)
    assert ledger.spend(outsider, MESSAGE_COST) == 0  # the outsider clicks: it uses the server now
    waits = [ledger.spend(school, MESSAGE_COST) for _ in range(100)]  # three changes at once
    assert waits[0] == 0 and waits[-1] > 1.0  # held to its share, once what its quiet spells saved is spent
    ledger.lead("teacher's browser")
    assert ledger.spend(school, MESSAGE_COST, lead=ledger.leads("teacher's browser")) == 0  # never waits
    assert not ledger.leads("a student's browser") and not ledger.leads(None)
    clock.t += ACTIVE_SECONDS + 0.01  # the outsider went quiet: the school is alone again
    assert ledger.active() == 0
    clock.t += 2.0
    assert ledger.spend(school, MESSAGE_COST) <= 0.5 and ledger.active() == 1  # alone: what it owed waits out no one
    clock.t += 1.0
    assert ledger.spend(school, MESSAGE_COST) == 0
    clock.t += LEAD_SECONDS
    assert not ledger.leads("teacher's browser")  # (renewed by each of the teacher's runs)


def test_runs_take_turns_and_a_teacher_never_waits():
    """`RunSlots(1)`: a second run waits for the first (in turn, not all at once); a teacher's run (`lead`) goes
    at once; a run never waits longer than `wait` (a slow run delays the others by at most that)."""
    import threading

    slots = RunSlots(1, wait=60.0)  # (no run goes ahead by `wait` in this part, however slow the machine)
    order: list[str] = []
    first_in, release = threading.Event(), threading.Event()

    def first():
        with slots.slot():
            order.append("first in")
            first_in.set()
            release.wait(60)
            order.append("first out")

    def second():
        with slots.slot():
            order.append("second in")

    a = threading.Thread(target=first)
    a.start()
    assert first_in.wait(5)
    b = threading.Thread(target=second)
    b.start()
    wait_for(lambda: slots.waited == 1, 10, "the second run to wait its turn")
    with slots.slot(lead=True):  # the teacher's run: no turn to wait for
        order.append("teacher")
    release.set()
    a.join(5)
    b.join(5)
    assert order == ["first in", "teacher", "first out", "second in"] and slots.waited == 1
    first_in.clear()
    release.clear()
    a = threading.Thread(target=first)
    a.start()
    assert first_in.wait(5)
    slots.wait = 0.5
    t = time.monotonic()
    with slots.slot():  # the slot stays taken: this run goes ahead after `wait`...
        waited, ahead = time.monotonic() - t, order[-1] == "first in"  # ...while the first holds it (until `release`)
    release.set()
    a.join(5)
    assert ahead and slots.waited == 2  # it went ahead of a run still in its slot, after waiting its turn
    assert waited >= 0.5 - 1e-3  # for `wait` at least (no bound above: a busy machine wakes it late)
    waited = slots.waited
    with slots.slot(), slots.slot():  # a fragment's turn inside its app's run (panels.question_panel): one turn
        with slots.slot():
            assert slots.waited == waited
    with RunSlots(0).slot():  # 0: no limit
        pass


def test_a_clients_runs_take_turns_and_another_clients_run_goes_first():
    """Eight tabs of one address rerunning at once: their runs come one after the other (none goes ahead of the
    others after `wait`, which would run them all at once under one interpreter lock), and a run of another
    client, arriving last, is served next."""
    import threading

    slots = RunSlots(1, wait=1.0)
    order: list[str] = []
    inside: list[int] = []

    def run(name: str, client: str, seconds: float) -> None:
        with slots.slot(client=client):
            inside.append(1)
            order.append(name)
            assert sum(inside) == 1  # never two runs at once
            time.sleep(seconds)
            inside.pop()

    first = threading.Thread(target=run, args=("flood 0", "203.0.113.66", 0.6))
    first.start()
    time.sleep(0.05)
    floods = [threading.Thread(target=run, args=(f"flood {i}", "203.0.113.66", 0.1)) for i in range(1, 4)]
    for t in floods:
        t.start()
        time.sleep(0.02)
    student = threading.Thread(target=run, args=("student", "198.51.100.20", 0.05))
    student.start()
    for t in (first, *floods, student):
        t.join(10)
    assert order == ["flood 0", "student", "flood 1", "flood 2", "flood 3"], order


def test_the_middleware_holds_back_only_the_flooding_clients_websocket_messages():
    ledger = Ledger(share=0.25, burst=0.25)
    limit = InboundLimit(None, ledger)
    got: dict[str, list[float]] = {"203.0.113.5": [], "198.51.100.7": []}

    def scope(ip: str) -> dict:
        return {"type": "websocket", "client": (ip, 5000), "headers": []}

    async def app(scope, receive, send):  # a websocket endpoint: the flooder sends 40 messages at once, the student
        flooder = scope["client"][0] == "203.0.113.5"  # one every 0.4 s (it uses the server all along)
        for _ in range(40 if flooder else 8):
            await receive()
            got[scope["client"][0]].append(time.perf_counter())
            if not flooder:
                await asyncio.sleep(0.4)
        if flooder:
            done.set()
        await done.wait()  # the student's page stays open meanwhile

    done: asyncio.Event

    async def main() -> float:
        nonlocal done
        limit.app = app
        gate, done = asyncio.Event(), asyncio.Event()

        async def receive():
            await gate.wait()
            await asyncio.sleep(0)  # (the two clients' messages arrive interleaved)
            return {"type": "websocket.receive", "bytes": b"x"}

        spend = limit.ledger.spend

        def spent(client: str, seconds: float, lead: bool = False, http: bool = False) -> float:
            wait = spend(client, seconds, lead=lead, http=http)
            waits.setdefault(client, []).append(wait)
            return wait

        limit.ledger.spend = spent
        t0 = time.perf_counter()
        tasks = [asyncio.create_task(limit(scope(ip), receive, None)) for ip in got]
        await asyncio.sleep(0.05)  # both connected
        gate.set()
        await asyncio.gather(*tasks)
        return t0

    waits: dict[str, list[float]] = {}  # each message's wait as the ledger gave it, by client
    t0 = asyncio.run(main())
    flooder = max(got["203.0.113.5"]) - t0
    assert waits["198.51.100.7"] == [0.0] * 8  # a client within its share: none of its messages waits
    assert flooder > (40 - 0.25 / MESSAGE_COST) * MESSAGE_COST / 0.25 * 0.9  # the flooder's paced: ~3 s
    assert limit.ledger.held >= 20


def test_plain_http_is_charged_to_the_same_share_and_a_proxys_health_check_never_waits():
    """Sixteen loops of plain HTTP requests from one address used up to half a core against a share of a quarter:
    the ledger never saw them. Each request now costs HTTP_COST and the CPU time serving it took, and a client over
    its share waits before its next one is served; a health check from this machine (a proxy's, the launcher's)
    is never held."""
    ledger = Ledger(share=0.25, burst=0.05)
    served: list[str] = []

    async def app(scope, receive, send):  # serving a request takes 3 ms of CPU
        served.append(scope["path"])
        t = time.thread_time()
        while time.thread_time() - t < 0.003:
            pass

    limit = InboundLimit(app, ledger)

    def scope(path: str, address: str | None) -> dict:
        headers = [(b"x-forwarded-for", address.encode())] if address else []
        return {"type": "http", "path": path, "client": ("127.0.0.1", 5000), "headers": headers}

    async def main() -> tuple[float, float]:
        await limit(scope("/", "198.51.100.7"), None, None)  # another student uses the server: two are active
        t = time.perf_counter()
        for _ in range(60):
            await limit(scope("/", "203.0.113.66"), None, None)
        flood, held = time.perf_counter() - t, ledger.held
        for _ in range(60):
            await limit(scope(HEALTH, None), None, None)
        return flood, ledger.held - held

    os.environ["GLASS_TRUST_PROXY"] = "1"
    try:
        flood, health = asyncio.run(main())
    finally:
        del os.environ["GLASS_TRUST_PROXY"]
    assert len(served) == 121
    paced = (60 * (HTTP_COST + 0.003) - 0.05) / 0.25  # what 60 requests cost at its share, less the burst
    assert flood > 0.8 * paced and ledger.held > 0, (flood, ledger.held)
    assert health == 0  # (a check from this machine: never held)


def test_a_teachers_websocket_never_waits_though_the_class_at_its_address_is_over_its_share():
    """The teacher and the class share one address (one NAT), whose runs are far over its share while an outsider
    is active: the students' messages wait their turn, the teacher's (its browser, by its XSRF cookie, leads
    the class: `Ledger.lead`) never do. Counted, not timed: each message's wait as the ledger gave it (on a clock
    that stands still, so the class's debt is the same however slow the machine), and the messages held."""
    ledger = Ledger(share=0.25, burst=0.1, clock=Clock())
    teacher_cookie = "2|0a0b0c0d|" + bytes(b ^ 0x0A for b in b"teacher-token-0123456789").hex() + "|1700000000"
    ledger.lead(browser_id(teacher_cookie))
    got: dict[str, int] = {}
    waits: dict[str, list[float]] = {"teacher": [], "student": []}  # each message's wait, by whose it was

    def scope(cookie: str | None) -> dict:
        headers = [(b"x-forwarded-for", b"203.0.113.7")] + (
            [(b"cookie", f"_streamlit_xsrf={cookie}".encode())] if cookie else []
        )
        return {"type": "websocket", "client": ("127.0.0.1", 5000), "headers": headers}

    async def main():
        ledger.spend("198.51.100.99", MESSAGE_COST)  # the outsider is active
        ledger.charge("203.0.113.7", 1.0)  # the class's redraws: far over its burst
        spend = ledger.spend

        def spent(client: str, seconds: float, lead: bool = False, http: bool = False) -> float:
            wait = spend(client, seconds, lead=lead, http=http)
            waits["teacher" if lead else "student"].append(wait)  # (one address: the teacher's browser leads)
            return wait

        ledger.spend = spent

        async def receive():
            await asyncio.sleep(0)
            return {"type": "websocket.receive", "bytes": b"x"}

        async def app(scope, receive, send):  # the teacher sends 5 messages, the student 1 (held about 4 s)
            who = "teacher" if len(scope["headers"]) == 2 else "student"
            for _ in range(5 if who == "teacher" else 1):
                await receive()
                got[who] = got.get(who, 0) + 1

        await asyncio.gather(
            InboundLimit(app, ledger)(scope(teacher_cookie), receive, None),
            InboundLimit(app, ledger)(scope(None), receive, None),
        )

    os.environ["GLASS_TRUST_PROXY"] = "1"
    try:
        asyncio.run(main())
    finally:
        del os.environ["GLASS_TRUST_PROXY"]
    assert got == {"teacher": 5, "student": 1}
    assert waits["teacher"] == [0.0] * 5  # the teacher's messages: none waits...
    assert len(waits["student"]) == 1 and waits["student"][0] > 3.6, waits  # ...the student's waits out the debt
    assert ledger.held == 1  # (the student's message was held, none of the teacher's)


def test_a_text_frame_or_a_client_gone_while_its_message_waits_ends_the_websocket_quietly():
    """What made Streamlit's handler write a traceback to the log: a text frame (it speaks binary only), and a
    client that closed while its message was held (its sender failed, then its handler called `close` on a
    closed websocket). The middleware closes a text frame's websocket itself and hands the handler a disconnect;
    a client gone during a hold is a disconnect at once, and nothing is sent on a closed websocket."""
    ledger = Ledger(share=0.25, burst=0.01)

    async def main():
        sent: list[dict] = []
        ledger.spend("198.51.100.99", MESSAGE_COST)  # another client is active
        ledger.charge("203.0.113.66", 10.0)  # this one is in debt: its next message would wait about 40 s

        async def send(message):
            sent.append(message)

        async def app(scope, receive, send):
            first = await receive()
            await send({"type": "websocket.send", "bytes": b"after"})  # (dropped after a close)
            return first

        frames = iter([{"type": "websocket.receive", "text": "hello"}])
        scope = {"type": "websocket", "client": ("203.0.113.66", 1), "headers": []}
        got = await InboundLimit(app, ledger)(scope, lambda: _next(frames), send)
        assert got == {"type": "websocket.disconnect", "code": 1003}
        assert sent == [{"type": "websocket.close", "code": 1003}]

        frames = iter([{"type": "websocket.receive", "bytes": b"x"}, {"type": "websocket.disconnect", "code": 1001}])
        t = time.perf_counter()
        got = await InboundLimit(lambda *a: app(*a), ledger)(scope, lambda: _next(frames, 0.2), send)
        assert got == {"type": "websocket.disconnect", "code": 1001} and time.perf_counter() - t < 20  # not 40

    async def _next(frames, pause=0.0):
        await asyncio.sleep(pause)
        return next(frames)

    asyncio.run(main())


def test_eight_tabs_flooding_answers_do_not_stall_another_student():
    """The short version of `python -m bench.class_abuse flood`: on a real `streamlit run app.py`, eight sessions
    of one address press answer buttons 60 times a second each while another student reruns their page and
    follows the teacher (before: that student's reruns stalled for good)."""
    from bench.class_abuse import flood

    with running_app(extra_env={"GLASS_TRUST_PROXY": "1"}, timeout=120) as server:
        r = asyncio.run(
            asyncio.wait_for(flood(server.url, server.proc.pid, "answers", 8, 60, 3, rounds=1, timeout=10), 240)
        )
    assert r["sent"] > 400  # (the flood did flood)
    assert r["during"]["missed"] == 0 and len(r["during"]["rerun"]) == 3 and len(r["during"]["follow"]) == 3
    assert max(r["during"]["rerun"]) < 3.0 and max(r["during"]["follow"]) < 8.0


# -- presence through the hub --------------------------------------------------------------------------------
def test_a_student_with_a_page_open_stays_in_the_count_and_leaves_it_after_the_grace(monkeypatch):
    """The hub of the process a student's page is connected to reports it (here every 0.3 s): that student
    stays counted past the grace, a student without a page leaves; when the page closes, that student leaves
    too, and the teacher's tally moves so that the console redraws its count. The store runs on a clock the test
    moves (the grace passes at once, exactly); the hub's reports come in real time. (The presence rule's real-time
    test on Redis is tests/test_class_store_admission.py's.)"""
    import classroom.hub as hub_module
    from classroom import MemoryClassStore
    from classroom.hub import EventHub

    monkeypatch.setattr(hub_module, "MARK_SECONDS", 0.3)
    clock = Clock()
    store = MemoryClassStore(presence_seconds=1.0, clock=clock)
    reports: list[list[str]] = []
    mark = store.mark_connected
    monkeypatch.setattr(
        store,
        "mark_connected",
        lambda code, where, students, seconds: (reports.append(sorted(students)), mark(code, where, students, seconds)),
    )

    async def grace_passes(seconds: float) -> list[str]:
        """The store's clock moves `seconds`; then the hub reports once more, by itself (the students it named)."""
        n = len(reports)
        clock.t += seconds
        for _ in range(100):  # 10 s at most: the hub reports every 0.3 s
            if len(reports) > n:
                return reports[-1]
            await asyncio.sleep(0.1)
        raise AssertionError("the hub did not report again")

    async def run() -> None:
        hub = EventHub(store)
        hub.start()
        try:
            code, _ = store.create({})
            store.join(code, "192.0.2.1", "student-0001")
            store.join(code, "192.0.2.2", "student-0002")
            await hub.listen(code, "teacher")  # the teacher's console
            page = await hub.listen(code, "student-0001")  # only student 1 has a page of the class open
            assert await grace_passes(1.6) == ["student-0001"]
            assert store.snapshot(code).students == 1
            tally = store.counters(code).tally
            hub.unlisten(page)
            assert await grace_passes(1.6) == []
            assert store.snapshot(code).students == 0 and store.counters(code).tally > tally
        finally:
            hub.stop()

    asyncio.run(run())


# -- Redis away ---------------------------------------------------------------------------------------------
def test_the_class_service_away_is_a_clear_state_and_the_class_resumes(monkeypatch):
    """Redis stopped mid-class: the teacher's console and the student's page say the class service is
    unreachable (once, no rerun loop, no traceback); started again (its append-only file), the class is there
    and the student follows the teacher's next change."""
    from ui.classroom.session import UNREACHABLE_TEXT

    with redis_server(server=True) as redis:
        monkeypatch.setenv(REDIS_URL_ENV, redis.url)
        store = RedisClassStore(
            redis.url, prefix=f"test:{uuid.uuid4().hex[:8]}", classes_per_client=1000, class_starts_per_minute=1000
        )
        monkeypatch.setitem(classroom._stores, redis.url, store)
        try:
            teacher = run_app("classroom")
            teacher.button(key="class_start").click().run()
            teacher.button(key="class_ask").click().run()
            code = teacher.session_state["class_code"]
            student = run_app(query={"class": code})
            no_exception(student)
            assert student.session_state["class_following"] and store.snapshot(code).students == 1

            stop(redis.child)
            student.run()
            no_exception(student)
            assert UNREACHABLE_TEXT in [t.value for t in student.toast]  # said once ...
            assert any(UNREACHABLE_TEXT in c.value for c in student.sidebar.caption)  # ... and shown on the badge
            student.run()
            assert not student.toast and any(UNREACHABLE_TEXT in c.value for c in student.sidebar.caption)
            assert student.session_state["class_code"] == code  # still in the class
            t = time.perf_counter()
            teacher.run()  # the console's answers: "unreachable" (before: a rerun of the app, again and again)
            no_exception(teacher)
            assert time.perf_counter() - t < 30
            assert any(UNREACHABLE_TEXT in c.value for c in teacher.caption)
            assert teacher.session_state["class_code"] == code  # still the teacher

            redis.start()  # its append-only file: the class, its question and its student are back
            snap = store.snapshot(code)
            assert snap is not None and snap.question is not None and snap.students == 1
            teacher.switch_page("pages/overview.py").run()
            teacher.text_input(key="sentence").set_value("the class is back").run()
            no_exception(teacher)
            student.run()  # (in a browser: the page's event stream reruns it)
            no_exception(student)
            assert student.session_state["sentence"] == "the class is back"
            assert not any(UNREACHABLE_TEXT in c.value for c in student.sidebar.caption)
        finally:
            store.close()


def test_thirty_waiting_runs_are_woken_one_at_a_time():
    """A class's thirty redraws wait for one slot: each turn wakes the one run whose turn it is, not all of them
    (waking all thirty at each turn cost each student about 1 ms of CPU). Every run gets its slot, in turn, one
    at a time, and the runs of another client still go first."""
    import threading

    slots = RunSlots(1, wait=30.0)
    inside: list[int] = []
    order: list[str] = []
    gate = threading.Event()

    def run(name: str, client: str) -> None:
        with slots.slot(client=client):
            inside.append(1)
            assert sum(inside) == 1
            order.append(name)
            gate.wait(5)
            inside.pop()

    threads = [threading.Thread(target=run, args=(f"follower {i}", "class")) for i in range(30)]
    threads[0].start()
    time.sleep(0.05)  # (the first holds the slot until the gate opens)
    for t in threads[1:]:
        t.start()
    other = threading.Thread(target=run, args=("other", "elsewhere"))
    time.sleep(0.2)
    other.start()
    time.sleep(0.2)
    gate.set()
    for t in (*threads, other):
        t.join(10)
    assert len(order) == 31 and order[:2] == ["follower 0", "other"], order
    assert slots.waited == 30
    assert slots.wakeups <= 2 * 30, slots.wakeups  # (waking every waiter at each turn: about 30 * 30 / 2)
