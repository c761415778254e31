"""Classroom mode under load: follow latency, throughput of 1 vs 2 app processes, a process killed mid-class.

Every client is tools/ws_client.py's StreamlitSession (Streamlit's websocket protocol, no browser), which
also does what the page's class component does in a browser (ui/classroom/push.py): it listens to the
class's event stream and reruns its page when the class moved past what the page shows.

    .venv/bin/python -m bench.classroom_load follow --students 30 100 [--changes 6] [--processes 2] [--page lesson]
                                                   [--browsers 6]
    .venv/bin/python -m bench.classroom_load throughput [--students 24] [--seconds 40]
    .venv/bin/python -m bench.classroom_load failover [--students 20]
    .venv/bin/python -m bench.classroom_load chaos [--students 40]
    .venv/bin/python -m bench.classroom_load votes [--students 100] [--processes 2]

follow: one `streamlit run app.py` (the memory store), or --processes N behind HAProxy (Redis). A teacher
(ws) starts a class, N students join with the link and follow; the teacher types a new sentence `--changes`
times (a pause between); per change and student, the time from the teacher sending the sentence to the end
of the student's run that shows it (its sidebar's sentence box). p50 / p95 / max, and how many students
never showed it within --timeout. Also the time until the change's event reached each student's event stream:
the event's own way (store, hub, proxy), apart from the redraws (it showed HAProxy holding each event 0.2 s).
With --browsers N, N more students follow in real Chromium (each its own context, every third a phone): the time
until each page shows the change, and how many dropped out of follow mode (the websocket clients never did; real
browsers did, until issue 36's fix: a page's late request re-ran its callbacks).

throughput: the same N students, each typing its own sentences one after the other without a pause (a
saturated server), for --seconds, through HAProxy in front of 1 and then 2 app processes (serving/replicas.py,
Redis): completed interactions per second, and the ratio; and where the machine's CPU went meanwhile (the
app processes, the clients in this script, everything else: on a shared machine other people's work
takes cores the second process would use).

failover: 2 app processes behind HAProxy with Redis; a teacher on app1, students spread over both; a
question is open and half the class answered; app2 is killed (SIGKILL). Its students reconnect through the
proxy with the address and widget values they had (as a browser's reconnect does) and land on app1: they
must be in the class again (following, the teacher's sentence), the question and its counts unchanged, and
they follow the teacher's next change. One of them explores on its own and has just typed a sentence when
its process dies: it must come back exploring, with the sentence it typed. Each student sends a browser's
XSRF cookie, so the moved students must come back as the same students: the class's count of students is
unchanged and those who had answered see their answer as their own.

Bounded: every wait has a timeout, every loop a count or a deadline; servers on 127.0.0.1 and free ports,
stopped at the end (process groups).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import websockets

from serving.processes import Child, start_app
from serving.replicas import Cluster
from tools.class_soak import dropped as dropped_out
from tools.ws_client import StreamlitSession
from ui.widgets import md

SENTENCES = [
    "i am a student",
    "thinking machines",
    "she is a student",
    "we are students",
    "the cat is big",
    "he is tired",
    "the animal didn't cross the street because it was too tired",
    "you are a teacher",
]
# Every simulated student comes from 127.0.0.1: the class is a school behind one address, which raises the
# per-address limit of students (docs/operators.md, "Every setting").
ONE_ADDRESS = {"GLASS_STUDENTS_PER_ADDRESS": "1000"}
CODE = re.compile(r"classroom\?class=([23456789A-HJKMNP-Z]{6})")  # the join link on the teacher's page


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


def summary(xs: list[float]) -> dict:
    return {
        "n": len(xs),
        "p50": statistics.median(xs) if xs else float("nan"),
        "p95": pct(xs, 0.95),
        "max": max(xs, default=float("nan")),
    }


def xsrf_cookie() -> str:
    """A browser's `_streamlit_xsrf` cookie as Streamlit sets it (version 2: mask, token XOR mask, time):
    what names the browser, and so its student, on every app process (serving.identity.browser_id)."""
    mask, token = os.urandom(4), os.urandom(32)
    return f"2|{mask.hex()}|{bytes(b ^ mask[i % 4] for i, b in enumerate(token)).hex()}|{int(time.time())}"


class Cookie(StreamlitSession):
    """A session that sends HAProxy's cookie (the process it sticks to), and with `xsrf` a browser's XSRF
    cookie, as a browser does."""

    def __init__(self, url: str, cookie: str | None = None, timeout: float = 60, xsrf: str | None = None):
        super().__init__(url, timeout)
        self.cookie = cookie
        self.xsrf = xsrf

    def extra_headers(self) -> dict[str, str]:
        return {"Cookie": f"GLASS_REPLICA={self.cookie}"} if self.cookie else {}

    async def reconnect(self) -> None:
        """What Streamlit's frontend does when its websocket drops: a new one (through the proxy: the same
        process, or another when that one is gone), and no run; the page keeps what it shows (its class
        component included, which asks for a run when the class moved)."""

        with contextlib.suppress(Exception):
            await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
        await self._open(*([self.session_id] if self.session_id else []))
        self._tries, self._asked = 0, 0.0
        self._check()

    def upgrade_headers(self) -> dict[str, str]:
        pairs = (("GLASS_REPLICA", self.cookie), ("_streamlit_xsrf", self.xsrf))
        cookies = "; ".join(f"{k}={v}" for k, v in pairs if v)
        return {"Cookie": cookies} if cookies else {}

    async def _open(self, *protocols: str) -> None:
        await super()._open(*protocols)
        self.replica = self._ws.response.headers.get("X-Glass-Replica")


async def start_class(url: str, cookie: str | None = None, page: str = "overview") -> tuple[StreamlitSession, str]:
    """A teacher: opens the class page, starts a class, goes to `page` (the overview). (session, code)."""
    teacher = Cookie(url, cookie, timeout=120)
    await teacher.connect("classroom")
    await teacher.click("class_start")
    m = CODE.search(teacher.text())
    if not m:
        raise RuntimeError(f"no class code on the teacher's page:\n{teacher.text()[:500]}")
    await teacher.switch_page(page)
    return teacher, m[1]


async def join(
    url: str, code: str, cookie: str | None = None, timeout: float = 120, xsrf: str | None = None
) -> StreamlitSession:
    s = Cookie(url, cookie, timeout=timeout, xsrf=xsrf)
    await s.connect("classroom", f"class={code}")
    if f"Following class {code}" not in s.text(1):
        raise RuntimeError(f"the student did not join: {s.text(1)[:300]!r} {s.exceptions()}")
    return s


def shows(s: StreamlitSession, sentence: str) -> bool:
    """The page shows `sentence`: in its sentence box, or (a student who follows) in the teacher's line above it."""
    try:
        return s.widget_value("Your sentence") == sentence
    except KeyError:
        line = f"sentence “{md(sentence)}”"
        return any(el.WhichOneof("type") == "markdown" and line in el.markdown.body for _, el in s.elements.values())


def half_drawn(s: StreamlitSession, since: float) -> int:
    """How many full runs since `since` this client saw start and never saw end: the next run started first
    (Streamlit dropped the end of the page: the race ui/classroom/panels.py repairs with its mark)."""
    count, open_full = 0, False
    for _, kind, what in (r for r in s.runs if r[0] >= since and r[1] in ("new_session", "script_finished")):
        if kind == "new_session":
            count += open_full
            open_full = not what  # a full run has no fragment ids
        else:
            open_full = False
    return count


@dataclass
class Follow:
    students: int
    latencies: list[float] = field(default_factory=list)
    events: list[float] = field(default_factory=list)  # teacher change -> its event on a student's event stream
    missed: int = 0
    half_drawn: int = 0
    full_runs: int = 0  # the students' full runs of the app during the changes
    pages_alone: int = 0  # the students' pages redrawn alone (the fragment that holds a follower's page)
    join_seconds: float = 0.0
    idle_cpu: float = float("nan")  # the app processes' CPU-s per second while every student waits, no change
    change_cpu: list[float] = field(default_factory=list)  # the app processes' CPU-s from one change to the next
    client_cpu: list[float] = field(default_factory=list)  # this process's (the simulated students') CPU-s, the same
    machine_cpu: list[float] = field(default_factory=list)  # the whole machine's busy CPU-s, the same
    browsers: int = 0  # students in real Chromium besides the websocket clients (--browsers)
    browser_latencies: list[float] = field(default_factory=list)  # teacher change -> a Chromium student shows it
    browser_missed: int = 0
    browser_dropouts: int = 0  # Chromium students found exploring (or on an empty sentence) after a change


class ChromiumStudents:
    """Students in real Chromium (Playwright's async API, Debian's chromium), each its own browser context, who join
    by the link and follow: the witness the websocket clients are not (they missed students dropping out of follow
    mode). Nothing is clicked on their side."""

    STATUS = """() => ({main: document.querySelector('[data-testid="stMain"]')?.innerText || '',
                        side: document.querySelector('[data-testid="stSidebar"]')?.textContent || '',
                        url: location.href})"""

    def __init__(self, n: int):
        self.n, self.pages, self._pw, self._browser = n, [], None, None

    async def start(self, url: str, code: str, timeout: float = 120) -> None:
        from playwright.async_api import async_playwright

        from tools.browser import CHROMIUM_ARGS, require_chromium  # (only for --browsers)

        self._pw = await async_playwright().start()
        self._browser = await self._pw.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
        for i in range(self.n):
            phone = i % 3 == 1  # every third a phone
            context = await self._browser.new_context(
                viewport={"width": 390, "height": 844} if phone else {"width": 1280, "height": 800},
                is_mobile=phone,
                has_touch=phone,
            )
            page = await context.new_page()
            await page.goto(f"{url}/classroom?class={code}", wait_until="domcontentloaded")
            self.pages.append(page)
        deadline = time.perf_counter() + timeout
        for page in self.pages:
            while f"Following class {code}" not in (await page.evaluate(self.STATUS))["side"]:
                if time.perf_counter() > deadline:
                    raise RuntimeError("a Chromium student did not join")
                await asyncio.sleep(0.2)

    async def wait(self, sentence: str, t0: float, timeout: float) -> tuple[list[float], int, int]:
        """Each page until it shows the teacher's `sentence`: (seconds from t0 of those that did, missed, dropped)."""
        line = f"sentence “{sentence}”"
        seen: dict[int, float] = {}
        dropped: set[int] = set()
        deadline = t0 + timeout
        while len(seen) + len(dropped) < self.n and time.perf_counter() < deadline:
            for i, page in enumerate(self.pages):
                if i in seen or i in dropped:
                    continue
                st = await page.evaluate(self.STATUS)
                if dropped_out(st) is not None:
                    dropped.add(i)
                elif line in st["main"]:
                    seen[i] = time.perf_counter() - t0
            await asyncio.sleep(0.05)
        return list(seen.values()), self.n - len(seen) - len(dropped), len(dropped)

    async def close(self) -> None:
        if self._browser is not None:
            await self._browser.close()
        if self._pw is not None:
            await self._pw.stop()


async def follow(
    url: str,
    n: int,
    changes: int,
    pause: float,
    timeout: float,
    pids: list[int] | None = None,
    idle: float = 10.0,
    page: str = "overview",
    browsers: int = 0,
    on_start=None,
) -> Follow:
    """Teacher changes -> every following student's page updated: latencies; and the app processes' CPU while
    the class waits (`idle` seconds) and per change. The teacher (and so the class) is on `page`. `browsers`: as
    many students in real Chromium besides (their latencies and drop-outs reported apart). `on_start()` is called
    once every student has joined (bench/follower_profile.py starts its sampler then)."""
    out = Follow(n, browsers=browsers)
    teacher, code = await start_class(url, page=page)
    t = time.perf_counter()
    students: list[StreamlitSession] = []
    for i in range(0, n, 10):  # arrive ten at a time
        students += await asyncio.gather(*(join(url, code) for _ in range(min(10, n - i))))
    out.join_seconds = time.perf_counter() - t
    chromium = ChromiumStudents(browsers)
    if browsers:
        await chromium.start(url, code)
    for s in students:
        s.start_following()
    pollers = [asyncio.create_task(s.poll_fragments(changes * (pause + timeout) + 30)) for s in students]
    try:
        await asyncio.sleep(2)
        if on_start is not None:
            on_start()
        cpu0 = cpu_seconds(pids or [])
        await asyncio.sleep(idle)
        out.idle_cpu = (cpu_seconds(pids or []) - cpu0) / idle
        for k in range(changes):
            sentence = SENTENCES[k % len(SENTENCES)]
            seen: dict[int, float] = {}
            done = asyncio.Event()

            def hook(s, i, sentence=sentence, seen=seen, done=done):
                if i not in seen and shows(s, sentence):
                    seen[i] = time.perf_counter()
                    if len(seen) == n:
                        done.set()

            for i, s in enumerate(students):
                s.on_full_run = lambda s, i=i, hook=hook: hook(s, i)
            runs0 = sum(s.full_runs for s in students), sum(s.page_runs for s in students)
            seqs0 = [max(s.event_at, default=0) for s in students]
            cpu0, client0, busy0 = cpu_seconds(pids or []), time.process_time(), machine_busy()
            t0 = time.perf_counter()
            await teacher.type_sentence(sentence)
            watching = asyncio.create_task(chromium.wait(sentence, t0, timeout)) if browsers else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout)
            if watching is not None:  # (the Chromium pages were watched meanwhile)
                shown, missed_b, dropped_b = await watching
                out.browser_latencies += shown
                out.browser_missed += missed_b
                out.browser_dropouts += dropped_b
            out.latencies += [seen[i] - t0 for i in seen]
            out.events += [
                min(t for q, t in s.event_at.items() if q > q0) - t0
                for s, q0 in zip(students, seqs0, strict=True)
                if max(s.event_at, default=0) > q0
            ]
            out.missed += n - len(seen)
            out.full_runs += sum(s.full_runs for s in students) - runs0[0]
            out.pages_alone += sum(s.page_runs for s in students) - runs0[1]
            await asyncio.sleep(pause)  # (the pause before the next change: runs that follow this one end)
            out.change_cpu.append(cpu_seconds(pids or []) - cpu0)
            out.client_cpu.append(time.process_time() - client0)
            out.machine_cpu.append(machine_busy() - busy0)
            half = sum(half_drawn(s, t0) for s in students)
            out.half_drawn += half
            missed = [s for i, s in enumerate(students) if i not in seen]
            if missed:  # what those students show: exploring? an old sentence? a dropped connection?
                why = {}
                for s in missed:
                    badge = next((line for line in s.text(1).splitlines() if "class" in line), "no badge")
                    try:
                        box = repr(s.widget_value("Your sentence"))
                    except KeyError:
                        box = "no sentence box (a run under way)"
                    key = f"{getattr(s, 'replica', None)}: {badge[:40]} / {box}"
                    why[key] = why.get(key, 0) + 1
                runs = [r for r in missed[0].runs if r[0] >= t0 - 2][:30]
                print(f"    not updated: {why}; the runs of one since the change (t0 {t0:.2f}): {runs}", flush=True)
            print(
                f"  change {k + 1}: {len(seen)}/{n} students updated, p50 "
                f"{statistics.median([seen[i] - t0 for i in seen]) if seen else float('nan'):.2f} s, "
                f"full runs {sum(s.full_runs for s in students) - runs0[0]}, pages redrawn alone "
                f"{sum(s.page_runs for s in students) - runs0[1]}, redraws whose end was lost {half}",
                flush=True,
            )
    finally:
        for p in pollers:
            p.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)
        await chromium.close()
    return out


def cpu_seconds(pids: list[int]) -> float:
    """CPU seconds used so far by these processes (user + system)."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(OSError):
            f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return total


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy so far (all processes, every core)."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(x) for x in f]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # minus idle and iowait


async def saturate(url: str, n: int, seconds: float, pids: list[int] | None = None) -> dict:
    """n sessions, each typing its own sentences back to back for `seconds`: interactions per second, and
    where the machine's CPU went meanwhile (the app processes, this script's clients, everything)."""
    sessions = [StreamlitSession(url, timeout=120) for _ in range(n)]
    for i in range(0, n, 8):
        await asyncio.gather(*(s.connect("overview") for s in sessions[i : i + 8]))
    done, errors, times = 0, 0, []
    cpu0, mine0, busy0 = cpu_seconds(pids or []), time.process_time(), machine_busy()
    start = time.perf_counter()
    end = start + seconds

    async def one(i: int, s: StreamlitSession) -> None:
        nonlocal done, errors
        k = 0
        while time.perf_counter() < end:
            sentence = f"{SENTENCES[(i + k) % len(SENTENCES)]}"
            sentence = sentence if k % 2 else sentence + " ."  # every interaction a new value
            k += 1
            try:
                times.append(await s.type_sentence(sentence))
                done += 1
            except Exception:  # noqa: BLE001 - counted
                errors += 1
                return

    await asyncio.gather(*(one(i, s) for i, s in enumerate(sessions)))
    wall = time.perf_counter() - start
    cpu = {
        "apps": cpu_seconds(pids or []) - cpu0,
        "clients": time.process_time() - mine0,
        "machine": machine_busy() - busy0,
    }
    cpu["others"] = cpu["machine"] - cpu["apps"] - cpu["clients"]  # HAProxy, Redis, and whatever else runs here
    await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
    return {
        "interactions": done,
        "seconds": wall,
        "per_second": done / wall,
        "errors": errors,
        **summary(times),
        "cpu_seconds": cpu,
        "per_app_cpu_second": done / cpu["apps"] if cpu["apps"] else float("nan"),
    }


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


async def votes(url: str, n: int, timeout: float, rounds: int = 2) -> dict:
    """Peer instruction under load: a teacher asks a question; `n` students vote at once, half of them changing
    their vote at once too; the teacher locks the vote and opens the second; everyone votes again. Per round:
    how long the burst took, when the teacher's event stream said the last vote was stored (its `tally`), when
    the teacher's screen showed every vote (the sidebar's count, redrawn by that event), and whether the
    teacher's count and distribution (the console's chart, "not on the projector") are exact."""
    from plotly.io import from_json

    teacher = Cookie(url, timeout=120)
    await teacher.connect("classroom")
    await teacher.click("class_start")
    m = CODE.search(teacher.text())
    if not m:
        raise RuntimeError(f"no class code on the teacher's page:\n{teacher.text()[:500]}")
    code = m[1]
    await teacher.click("class_ask")  # the default kind: which word does a word attend to most
    students: list[StreamlitSession] = []
    for i in range(0, n, 10):
        students += await asyncio.gather(*(join(url, code, timeout=timeout) for _ in range(min(10, n - i))))
    # what the teacher's page watches: seq + tally (ui/classroom/panels.py TEACHER_WATCH); every vote moves the tally
    stream: list[tuple[float, int]] = []  # (when, seq + tally) as the teacher's event stream said
    shown: list[tuple[float, int]] = []  # (when, seq + tally, answers) as the teacher's screen showed

    check = teacher._check

    def watched(c: dict) -> int:
        return int(c.get("seq", 0)) + int(c.get("tally", 0))

    def watch_stream() -> None:
        if teacher.latest is not None and (not stream or watched(teacher.latest) != stream[-1][1]):
            stream.append((time.perf_counter(), watched(teacher.latest)))
        check()

    def watch_screen(t: StreamlitSession) -> None:  # what the teacher's page drew: its counters, and its count
        hit = re.search(r"Question: (\d+) answers?", t.text(1))
        if hit and t.sync and t.sync.get("watch") == "seq+tally":
            shown.append((time.perf_counter(), int(t.sync["drawn"]), int(hit[1])))

    teacher._check, teacher.on_full_run = watch_stream, watch_screen
    teacher.start_following()
    for s in students:
        s.start_following()
    out: dict = {"students": n, "rounds": []}
    await students[0].rerun()
    k = sum(1 for o in range(6) if _button(students[0], f"class_answer_1_{o}"))  # the question's options
    for r in range(1, rounds + 1):
        suffix = "" if r == 1 else "_r2"
        for s in students:  # every page shows the open vote (the event reruns it; a late one is asked again)
            for _ in range(3):
                if _button(s, f"class_answer_1_0{suffix}"):
                    break
                await s.rerun()
        final = {i: (i % 10 // 3 + r) % k for i in range(n)}  # an uneven spread (3:3:3:1), moved each round
        changers = {i for i in range(n) if i % 2 == 0}  # first another option, then their final one

        async def one(i: int, s: StreamlitSession, final=final, changers=changers, suffix=suffix) -> int:
            options = ([(final[i] + 1) % k] if i in changers else []) + [final[i]]
            for option in options:
                key = f"class_answer_1_{option}{suffix}"
                for _ in range(int(timeout / 0.05)):  # a redraw under way (an event's) has not drawn it yet
                    if not s.running and _button(s, key):
                        break
                    await asyncio.sleep(0.05)
                await s.click(key)
            return len(options)

        shown.clear()
        t0 = time.perf_counter()
        sent = sum(await asyncio.gather(*(one(i, s) for i, s in enumerate(students))))
        t_done = time.perf_counter()
        deadline = t_done + timeout
        await asyncio.sleep(0.5)
        top = max(c for _, c in stream)  # seq + tally after the last vote (every vote and change moves the tally)
        t_stored = next(t for t, c in stream if c == top)  # the last vote stored and announced
        while time.perf_counter() < deadline and not any(d >= top for _, d, _ in shown):
            await asyncio.sleep(0.05)
        t_shown, _, count = next(((t, d, c) for t, d, c in shown if d >= top), (float("nan"), 0, 0))
        # the teacher's console, "not on the projector": the distribution, read from its chart
        wid = teacher.widget_id("Show the votes and the suggested next move (not on the projector)")
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        teacher.widgets[wid] = WidgetState(id=wid, bool_value=True)
        await teacher.rerun()
        spec = next(
            el.plotly_chart.spec
            for _, (_, el) in teacher.elements.items()
            if el.WhichOneof("type") == "plotly_chart" and "First vote" in el.plotly_chart.spec
        )
        bars = [[int(x) for x in trace.x] for trace in from_json(spec).data]
        want = [sum(1 for v in final.values() if v == o) for o in range(k)]
        out["rounds"].append(
            {
                "round": r,
                "clicks": sent,
                "burst_seconds": t_done - t0,
                "teacher_shown_after_stored": t_shown - t_stored,
                "teacher_shown_after_last_click": t_shown - t_done,
                "count_exact": count == n,
                "distribution": bars[r - 1],
                "expected": want,
                "distribution_exact": bars[r - 1] == want,
            }
        )
        print(
            f"  round {r}: {n} students, {sent} clicks ({len(changers)} changed their vote) in "
            f"{t_done - t0:.2f} s; the teacher's screen showed all {count} votes {t_shown - t_stored:.2f} s "
            f"after the last was stored ({t_shown - t_done:+.2f} s after the last student's page finished); "
            f"distribution {bars[r - 1]} (expected {want}): {'exact' if bars[r - 1] == want else 'WRONG'}",
            flush=True,
        )
        teacher.widgets[wid] = WidgetState(id=wid, bool_value=False)
        if r < rounds:
            await teacher.rerun()
            await teacher.click("class_lock_vote")
            await teacher.click("class_revote")
    await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)
    return out


def _button(s: StreamlitSession, key: str) -> list[bool]:
    return [
        True
        for _, (_, el) in s.elements.items()
        if el.WhichOneof("type") == "button" and el.button.id.endswith(f"-{key}")
    ]


def class_server(processes: int, log: str) -> Child | Cluster:
    """The class's server: one `streamlit run app.py` (memory store), or `processes` app processes behind HAProxy
    with Redis; one address may hold every simulated student."""
    if not processes:
        return start_app(log=Path("/tmp") / log, timeout=120, extra_env=ONE_ADDRESS)
    return Cluster(replicas=processes, timeout=120, workers=0, env=ONE_ADDRESS).start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("follow", "throughput", "failover", "chaos", "votes"))
    ap.add_argument("--students", type=int, nargs="+", default=None)
    ap.add_argument("--changes", type=int, default=6, help="follow: the teacher's changes")
    ap.add_argument("--pause", type=float, default=3.0, help="follow: seconds between two changes")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a student may take to show a change")
    ap.add_argument("--seconds", type=float, default=40.0, help="throughput: seconds of load per run")
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2], help="throughput: app processes to compare")
    ap.add_argument(
        "--processes",
        type=int,
        default=0,
        help="follow: 0 = one `streamlit run app.py` (memory store); N = N processes behind HAProxy, Redis",
    )
    ap.add_argument("--idle", type=float, default=10.0, help="follow: seconds the class waits before the first change")
    ap.add_argument("--page", default="overview", help="follow: the page the teacher (and the class) is on")
    ap.add_argument(
        "--browsers",
        type=int,
        default=0,
        help="follow: as many students in real Chromium beside the websocket clients (every third a phone)",
    )
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    out: dict = {"what": args.what}
    if args.what == "follow":
        server = class_server(args.processes, "glass-classroom-load.log")
        pids = [server.proc.pid] if not args.processes else [a.proc.pid for a in server.apps]
        out["processes"] = args.processes or "one streamlit run app.py (memory store)"
        try:
            for n in args.students or [30, 100]:
                print(f"follow: {n} students, {args.changes} changes on the {args.page} page", flush=True)
                f = asyncio.run(
                    asyncio.wait_for(
                        follow(
                            server.url,
                            n,
                            args.changes,
                            args.pause,
                            args.timeout,
                            pids,
                            args.idle,
                            args.page,
                            args.browsers,
                        ),
                        n * 5 + args.browsers * 20 + args.changes * (args.pause + 2 * args.timeout) + 120,
                    )
                )
                out[f"follow_{n}"] = {
                    **summary(f.latencies),
                    "missed": f.missed,
                    "half_drawn": f.half_drawn,
                    "join_seconds": f.join_seconds,
                    "idle_cpu_per_second": f.idle_cpu,
                    "cpu_per_change": statistics.median(f.change_cpu),
                }
                s = out[f"follow_{n}"]
                print(
                    f"{n} students: teacher change -> student page updated p50 {s['p50']:.2f} s, "
                    f"p95 {s['p95']:.2f} s, max {s['max']:.2f} s; {f.missed} missed of {n * args.changes}; "
                    f"{f.half_drawn} redraws whose end was lost; all joined in {f.join_seconds:.1f} s",
                    flush=True,
                )
                if f.browsers:  # the real-browser witness beside the websocket clients
                    b = summary(f.browser_latencies)
                    s["chromium"] = {**b, "missed": f.browser_missed, "dropouts": f.browser_dropouts}
                    print(
                        f"{f.browsers} Chromium students: teacher change -> page shows it p50 {b['p50']:.2f} s, "
                        f"p95 {b['p95']:.2f} s, max {b['max']:.2f} s; {f.browser_dropouts} drop-outs, "
                        f"{f.browser_missed} missed of {f.browsers * args.changes}",
                        flush=True,
                    )
                if f.events:  # where the time goes: the event's way (store, hub, proxy) or the redraws
                    e = summary(f.events)
                    s["event"] = e
                    print(
                        f"{n} students: teacher change -> its event on the student's stream p50 {e['p50']:.3f} s, "
                        f"p95 {e['p95']:.3f} s",
                        flush=True,
                    )
                print(
                    f"{n} students: app processes' CPU while the class waits {f.idle_cpu:.3f} CPU-s per second "
                    f"({f.idle_cpu * 100:.1f}% of a core); per change (median) {s['cpu_per_change']:.2f} CPU-s = "
                    f"{s['cpu_per_change'] / n * 1000:.1f} ms per student",
                    flush=True,
                )
                print(
                    f"{n} students: per change (median) the simulated students (this process) used "
                    f"{statistics.median(f.client_cpu):.2f} CPU-s, the whole machine "
                    f"{statistics.median(f.machine_cpu):.2f} CPU-s ({os.cpu_count()} cores)",
                    flush=True,
                )
        finally:
            server.stop()
    elif args.what == "votes":
        server = class_server(args.processes, "glass-classroom-votes.log")
        out["processes"] = (
            f"{args.processes} app processes behind HAProxy, Redis"
            if args.processes
            else "one streamlit run app.py (memory store)"
        )
        try:
            for n in args.students or [100]:
                print(f"votes: {n} students vote and vote again at once ({out['processes']})", flush=True)
                res = asyncio.run(asyncio.wait_for(votes(server.url, n, args.timeout), n * 10 + 300))
                out[f"votes_{n}"] = res
                lags = [x["teacher_shown_after_stored"] for x in res["rounds"]]
                exact = all(x["count_exact"] and x["distribution_exact"] for x in res["rounds"])
                print(
                    f"{n} students: teacher's counts {'exact' if exact else 'NOT exact'} in every round; shown "
                    f"{', '.join(f'{x:.2f}' for x in lags)} s after the last vote was stored",
                    flush=True,
                )
        finally:
            server.stop()
    elif args.what == "throughput":
        n = (args.students or [24])[0]
        for r in args.replicas:
            with Cluster(replicas=r, timeout=120) as c:
                print(f"throughput: {n} students, {r} app process(es) behind HAProxy, {args.seconds:.0f} s", flush=True)
                asyncio.run(asyncio.wait_for(saturate(c.url, n, 5), 300))  # warm-up: imports, first analyses
                pids = [a.proc.pid for a in c.apps]
                res = asyncio.run(asyncio.wait_for(saturate(c.url, n, args.seconds, pids), args.seconds + 300))
                out[f"replicas_{r}"] = res
                cpu = res["cpu_seconds"]
                print(
                    f"  {res['interactions']} interactions in {res['seconds']:.1f} s = {res['per_second']:.2f}/s "
                    f"(p50 {res['p50']:.2f} s, p95 {res['p95']:.2f} s), errors {res['errors']}; CPU-s: app "
                    f"processes {cpu['apps']:.1f}, clients {cpu['clients']:.1f}, everything else on the machine "
                    f"{cpu['others']:.1f} (of {2 * res['seconds']:.0f} on 2 cores)",
                    flush=True,
                )
        if len(args.replicas) == 2:
            a, b = (out[f"replicas_{r}"]["per_second"] for r in args.replicas)
            out["ratio"] = b / a
            print(f"{args.replicas[1]} processes vs {args.replicas[0]}: {b / a:.2f}x (target >= 1.6x)")
    elif args.what == "chaos":
        n = (args.students or [40])[0]
        with Cluster(replicas=2, timeout=120, workers=0, supervise=True, env=ONE_ADDRESS) as c:
            print(f"chaos: {n} students on 2 processes behind HAProxy (Redis)", flush=True)
            res = asyncio.run(asyncio.wait_for(chaos(c, n, args.timeout), 900))
        out["chaos"] = res
        print(
            f"chaos: {res['stale']} students left on a stale state ({n} students, {len(res['phases'])} phases, "
            f"{res['clicks_at_run_ends']} clicks at run ends, {res['asks']} asks)",
            flush=True,
        )
    else:
        n = (args.students or [20])[0]
        with Cluster(replicas=2, timeout=120, env=ONE_ADDRESS) as c:
            res = asyncio.run(asyncio.wait_for(failover(c, n, args.timeout * 4), 600))
        out["failover"] = res
        print(json.dumps(res, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
