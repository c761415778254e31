"""Classroom mode when parts fail: failover (an app process killed mid-class) and chaos (bursts, killed
connections, Redis, HAProxy and an app process killed and restarted). Run by `python -m bench.classroom_load
failover|chaos` (its docstring says what each measures).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import websockets

from bench.class_clients import SENTENCES, Cookie, join, shows, start_class, summary, xsrf_cookie
from serving.replicas import Cluster


async def failover(cluster: Cluster, n: int, timeout: float) -> dict:
    """A class on 2 processes; kill app2; its students come back through the proxy and rejoin."""
    from classroom import RedisClassStore

    teacher, code = await start_class(cluster.url, "app1")
    await teacher.type_sentence("thinking machines")
    browsers = [xsrf_cookie() for _ in range(n)]  # each student a browser (a cookie that outlives its process)
    students = list(
        await asyncio.gather(*(join(cluster.url, code, f"app{1 + i % 2}", xsrf=browsers[i]) for i in range(n)))
    )
    where = [s.replica for s in students]
    store = RedisClassStore(cluster.redis_url)
    try:
        await teacher.switch_page("classroom")
        await teacher.click("class_ask")  # the default question: attention, from the teacher's sentence
        q = store.snapshot(code).question
        await asyncio.gather(*(s.rerun() for s in students))  # their poll: the question shows
        for s in students[: n // 2]:  # half the class answers
            await s.click(f"class_answer_{q.id}_0")
        dead = [i for i, r in enumerate(where) if r == "app2"]
        explorer = students[dead[0]]  # one of them explores on its own, its own sentence
        await explorer.click("class_detach")
        await explorer.type_sentence("she is a student")
        before, votes_before = store.snapshot(code), store.votes(code)
        if teacher.replica != "app1":  # (the proxy found app1 down as the class began: its log says why)
            raise RuntimeError(f"the teacher asked for app1 and is on {teacher.replica}:\n{cluster.logs(20)}")
        cluster.kill_app(1)
        t0 = time.perf_counter()
        back: dict[int, float] = {}

        async def reconnect(i: int) -> None:
            """As a browser does: its address (the class code and the state of its last completed run in it)
            and its widgets' values. (A sentence whose Enter met the dead process itself is not kept: the new
            session starts from the address; reading the widget values a reconnect sends would need Streamlit's
            private state.)"""
            old = students[i]
            with contextlib.suppress(Exception):
                await old.close()
            deadline = time.perf_counter() + timeout
            for attempt in range(20):  # as Streamlit's page does: a connection that fails is tried again
                s = Cookie(cluster.url, "app2", timeout=timeout, xsrf=browsers[i])
                s.widgets = dict(old.widgets)
                try:
                    await s.connect("", old.query_string)
                    break
                except (OSError, ConnectionError, websockets.exceptions.WebSocketException, TimeoutError):
                    # (the proxy had not yet seen app2 die, and sent this connection there: a busy machine)
                    with contextlib.suppress(Exception):
                        await s.close()
                    if time.perf_counter() > deadline:
                        raise
                    await asyncio.sleep(min(0.5 * 2**attempt, 3.0))
            students[i] = s
            ok = (
                f"Exploring · class {code}" in s.text(1) and shows(s, "she is a student")
                if old is explorer
                else f"Following class {code}" in s.text(1) and shows(s, "thinking machines")
            )
            if ok:
                back[i] = time.perf_counter() - t0

        await asyncio.gather(*(reconnect(i) for i in dead))
        after, votes_after = store.snapshot(code), store.votes(code)
        # the same students: not counted twice, and those who answered still see their own answer
        answered_moved = [i for i in dead if i < n // 2]
        kept = sum(f"Your answer: {q.options[0]}" in students[i].text() for i in answered_moved)
        same = (after.state, after.question, after.counts, after.version) == (
            before.state,
            before.question,
            before.counts,
            before.version,
        )
        # the teacher goes on: every student, moved or not, follows
        await teacher.switch_page("overview")
        await teacher.type_sentence("i am a student")
        await asyncio.gather(*(s.rerun() for s in students))  # each one's poll
        followed = sum(shows(s, "i am a student") for s in students)
        explorer_kept = shows(students[dead[0]], "she is a student")
        return {
            "students": n,
            "on_killed_process": len(dead),
            "rejoined": len(back),
            "rejoin_seconds": summary(list(back.values())),
            "class_state_unchanged": same,
            "answers_before": list(votes_before.voted),
            "answers_after": list(votes_after.voted),
            "students_before": before.students,
            "students_after": after.students,
            "moved_who_answered": len(answered_moved),
            "moved_answer_kept": kept,
            "followed_next_change": followed,
            "explorer_kept_own_sentence": explorer_kept,
            "now_on": sorted({s.replica for s in students if s.replica}),
        }
    finally:
        store.close()
        await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)


async def chaos(cluster: Cluster, n: int, timeout: float, burst: int = 10, clickers: float = 0.2, log=print) -> dict:
    """A class on 2 processes behind HAProxy (Redis) through everything that can go wrong, each phase ending
    with every student's page on the teacher's latest sentence, or counted stale:

    1. bursts: the teacher types `burst` sentences within about a second, twice, while a share of the
       students (`clickers`) click as each of their redraws ends (a rerun request right at a run's end: what
       makes Streamlit drop the end of a run);
    2. killed connections: every student's event stream is cut, and a third of their websockets (the page
       reconnects as Streamlit's frontend does, with no run), then a change;
    3. Redis killed (SIGKILL) and started again by the cluster's supervisor, with its data (a change the
       teacher makes meanwhile is refused and typed again);
    4. HAProxy killed and started again: every connection through it drops at once, then a change;
    5. an app process killed: its students' pages reconnect through the proxy, then a change.
    (`cluster` must supervise its parts, as `python -m serving.replicas` does.)
    """
    import random

    rng = random.Random(7)
    teacher, code = await start_class(cluster.url, "app1")
    students: list[Cookie] = []
    for i in range(0, n, 10):
        students += await asyncio.gather(
            *(join(cluster.url, code, timeout=timeout, xsrf=xsrf_cookie()) for _ in range(min(10, n - i)))
        )
    clicks = 0

    def click_at_end(s) -> None:  # a student who clicks something as their redraw ends
        nonlocal clicks
        if s.clicker and rng.random() < 0.5 and s._ws is not None:
            clicks += 1
            asyncio.get_running_loop().create_task(s._trigger("click"))

    for i, s in enumerate(students):
        s.clicker = i < clickers * n
        s.on_full_run = click_at_end
        s.start_following()
    phases: dict[str, dict] = {}
    latest = ["thinking machines"]

    async def revive() -> None:
        """Pages whose websocket dropped reconnect (Streamlit's frontend does, every few hundred ms)."""
        for _ in range(3):
            dead = [s for s in [teacher, *students] if s._reader is None or s._reader.done()]
            if not dead:
                return
            results = await asyncio.gather(*(s.reconnect() for s in dead), return_exceptions=True)
            if all(not isinstance(r, Exception) for r in results):
                return
            await asyncio.sleep(1.0)

    async def settle(name: str, t0: float) -> None:
        want = latest[0]
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline and not all(shows(s, want) for s in students):
            await asyncio.sleep(0.1)
        stale = [s for s in students if not shows(s, want)]
        phases[name] = {"stale": len(stale), "seconds": round(time.perf_counter() - t0, 2)}
        log(
            f"  {name}: {n - len(stale)}/{n} students on the teacher's latest state after "
            f"{phases[name]['seconds']:.1f} s ({len(stale)} stale)"
        )
        if stale:
            seen = [
                (
                    s.replica,
                    s.sync and s.sync.get("watch"),
                    s.sync and s.sync.get("drawn"),
                    s.latest,
                    next((x for x in s.text(1).splitlines() if "class" in x), ""),
                    [el.toast.body[:60] for _, el in s.elements.values() if el.WhichOneof("type") == "toast"],
                    s.query_string[:40],
                )
                for s in stale[:5]
            ]
            log(f"    stale: {seen}")
            for s in stale[:3]:
                log(f"    runs of one: {s.runs[-70:]}")
                log(f"    its page: {s.text()[:300]!r} / sidebar {s.text(1)[:300]!r}")

    from classroom import ClassStoreError, RedisClassStore

    store = RedisClassStore(cluster.redis_url)

    def published() -> str | None:
        with contextlib.suppress(ClassStoreError):
            return store.snapshot(code).state.get("sentence")
        return None

    async def type_(text: str) -> None:
        """The teacher types `text` (again, until the class has it: a change refused while Redis is away)."""
        for _ in range(40):
            try:
                await teacher.type_sentence(text)
            except Exception:  # noqa: BLE001 - the teacher's own page reconnects, then types again
                await revive()
            if published() == text:
                latest[0] = text
                return
            await asyncio.sleep(0.5)
        raise RuntimeError("the teacher could not publish")

    try:
        await teacher.type_sentence(latest[0])
        await settle("start", time.perf_counter())
        for b in range(2):
            t0 = time.perf_counter()
            for k in range(burst):
                await type_(f"{SENTENCES[k % len(SENTENCES)]} {b}{k}" if k % 3 else SENTENCES[k % len(SENTENCES)])
            await settle(f"burst {b + 1} ({burst} changes in {time.perf_counter() - t0:.1f} s)", t0)
        t0 = time.perf_counter()
        for s in students:  # every event stream cut
            if s._events is not None:
                s._events.cancel()
                s._stream_url = None
        for s in students[::3]:  # a third of the websockets cut
            with contextlib.suppress(Exception):
                await s._ws.close()
        await asyncio.sleep(0.5)
        await revive()
        for s in students:
            s._sync_changed()
        await type_("we are students")
        await settle("killed connections", t0)
        t0 = time.perf_counter()
        cluster.kill("redis")
        with contextlib.suppress(Exception):  # refused while Redis is away (the teacher types it again)
            await asyncio.wait_for(teacher.type_sentence("the cat is big"), 10)
        await type_("the cat is big")
        await settle("Redis killed and restarted", t0)
        t0 = time.perf_counter()
        cluster.kill("haproxy")
        await asyncio.sleep(1.0)
        await revive()
        await type_("he is tired")
        await settle("HAProxy killed and restarted", t0)
        t0 = time.perf_counter()
        on_app2 = sum(s.replica == "app2" for s in students)
        cluster.kill("app2")
        await asyncio.sleep(0.5)
        await revive()
        await type_("you are a teacher")
        await settle(f"app process killed ({on_app2} students on it)", t0)
    finally:
        store.close()
        await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)
    return {
        "students": n,
        "clicks_at_run_ends": clicks,
        "phases": phases,
        "stale": sum(p["stale"] for p in phases.values()),
        "asks": sum(s.asks for s in students),
    }
