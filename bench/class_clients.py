"""The clients classroom load benchmarks share: a teacher and students over Streamlit's websocket protocol.

The simulated class (tools/ws_client.py's StreamlitSession with HAProxy's and a browser's XSRF cookie: `Cookie`),
starting a class and joining it, what a page shows, students in real Chromium (`ChromiumStudents`), the figures
(`pct`, `summary`, `Follow`), CPU counters, and the class's server. The scenarios that use them are in
bench/classroom_load.py and bench/class_chaos.py; bench/class_abuse.py, class_models.py, class_share.py,
class_streams.py and follower_profile.py use them too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

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


def button_states(s: StreamlitSession, key: str) -> list[bool]:
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
