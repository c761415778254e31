"""A classroom on one server: 30 browser sessions typing and switching pages while 2 models train.

Starts its own `streamlit run app.py` on 127.0.0.1 and a free port (loopback only), then drives one
Debian Chromium with Playwright's async API:

1. two "trainer" sessions open the training page and press Start with the page's default settings;
2. thirty "student" sessions (separate browser contexts = separate Streamlit sessions) open the app,
   then each does a fixed number of interactions, alternating: type its own sentence into the
   sidebar and press Enter, or switch to another page through the sidebar.

Measured per interaction: the time from the action (Enter, click) to the end of the script run it
triggered (a run must start after the action, then `data-test-script-state="notRunning"`). Errors:
exception boxes, timeouts, and pages that did not update (the sentence header still showing an older
sentence). Leak check: every student types sentences no other student types; after every
interaction the sentence box and the page's sentence header (tokens and translation, computed here
with the shipped model) must be the student's own, never another student's.

Bounded: --students (30), --interactions per student (5), first loads within --load-timeout (600 s),
then --deadline seconds for the interactions (300, counted from the moment every student has loaded;
no interaction starts after it), --timeout per interaction (60 s); the whole run is cut at the sum of
these + 180 s. Prints p50 / p95 / max latency, errors, the leak check, the trainings' progress and
the CPU seconds used by the server, the training workers, the browsers and this script.

--client ws: the students are no browsers but tools/ws_client.py's StreamlitSessions, which speak
Streamlit's websocket protocol directly and cost almost no CPU, so that the figures measure the server
alone (thirty Chromium renderers take most of a 2-core machine: 1-3 CPU-s per page). Same interactions,
timed from sending the rerun to the end of its run (script_finished); the same checks on the page's
text as the server sent it (the sentence header must be there after typing). The trainers stay
Chromium pages: their polling is the frontend's (st.fragment timers).

--root PATH runs the app of another checkout (e.g. a git worktree of an older commit, which also starts
with `python -m streamlit run app.py`) for a before/after figure, in the same spirit as bench_browser; the
students, the checks and the figures stay this script's. Run one checkout at a time: thirty Chromium
pages take the whole machine.

    .venv/bin/python -m bench.load_test [--client browser|ws] [--students 30] [--interactions 5] [--deadline 300]
                                         [--root /work/wt/base]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import random
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from model import checkpoint, pipeline  # noqa: E402
from model.data import load_dataset  # noqa: E402
from serving.processes import start_app
from tools.browser import (
    CHROMIUM_ARGS,
    EXCEPTION_SELECTOR,
    IDLE_SELECTOR,
    RUN_COUNTER_JS,
    require_chromium,
)
from tools.ws_client import StreamlitSession  # noqa: E402
from ui.page_list import PAGES

DEFAULT = "the animal didn't cross the street because it was too tired"  # ui.state.DEFAULT_SENTENCE
SWITCH_PAGES = [
    "Overview",
    "Tokens and embeddings",
    "Self-attention, step by step",
    "Decoder and masking",
    "Output and decoding",
]  # titles of app.py's st.Page entries the students visit, in turn


@dataclass
class Interaction:
    student: int
    kind: str  # "load", "type" or "switch"
    seconds: float | None  # None: it failed
    error: str = ""
    leak: str = ""


def cpu_seconds(server_pid: int) -> dict[str, float]:
    """CPU seconds used so far, by who: the server (with the training workers it has reaped), the live
    training workers, the browsers (Chromium) and this script (the ws clients run here)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {"server": 0.0, "training workers": 0.0, "browsers": 0.0, "this script": time.process_time()}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            pid = int(stat.parent.name)
            head, rest = stat.read_text().rsplit(")", 1)
            cmd = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue  # the process has gone meanwhile
        f = rest.split()
        own, reaped = (int(f[11]) + int(f[12])) / tick, (int(f[13]) + int(f[14])) / tick
        if pid == server_pid:  # its only children are the training workers
            out["server"] += own
            out["training workers"] += reaped
        elif b"training.run_process" in cmd:
            out["training workers"] += own
        elif "chrom" in head.rsplit("(", 1)[-1]:  # with the renderers of closed pages, reaped by their parent
            out["browsers"] += own + reaped
    return out


@dataclass
class Report:
    interactions: list[Interaction] = field(default_factory=list)
    cpu: dict[str, float] = field(default_factory=dict)
    trainers: list[str] = field(default_factory=list)


TOKENS: dict[str, str] = {}  # sentence -> its tokens as the sentence header shows them
TRANSLATIONS: dict[str, str] = {}  # sentence -> the shipped model's translation
OWNER: dict[str, int] = {}  # sentence -> the student who types it


def sentences(n: int) -> list[tuple[str, str]]:
    """n distinct toy-set sentences with distinct translations by the shipped model: (sentence, translation)."""
    bundle = checkpoint.load(checkpoint.SHIPPED)
    TOKENS[DEFAULT] = " ".join(pipeline.prepare(bundle, DEFAULT).tokens)
    out, seen = [], set()
    for p in load_dataset()["train"]:
        if len(out) == n:
            break
        if p.src in seen:
            continue
        tr = pipeline.analyse(bundle, pipeline.prepare(bundle, p.src)).translation
        if tr in {t for _, t in out}:
            continue
        seen.add(p.src)
        TOKENS[p.src] = " ".join(pipeline.prepare(bundle, p.src).tokens)
        out.append((p.src, tr))
    return out


async def run_count(page) -> int:
    return int(await page.evaluate("window.__glassRuns ?? 0"))


async def wait_run(page, before: int, timeout: float) -> None:
    """Wait until a script run started after `before` has finished (ms timeout for both halves).

    Every measured action (a new sentence, another page) triggers a run, so a run that never starts
    is a timeout, not a pass: reading the page before the server answered would measure nothing.
    """
    await page.wait_for_function(f"(window.__glassRuns ?? 0) > {before}", timeout=timeout, polling=50)
    await page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=timeout)


def check_text(
    student: int, own: str, own_translation: str, exception: str, value: str, text: str, require_header: bool = False
) -> tuple[str, str]:
    """(error, leak) after an interaction, from the page's first exception box ("" if none), the
    sentence box's value and the main area's text.

    The sentence box must hold the student's own sentence. Where a page shows the sentence header
    ("Source tokens: ... <eos>", then "Translation: ..."), its tokens and translation must be the
    student's own: another student's sentence there is a leak; anything else (the default sentence,
    an earlier one) is an error, a page that did not update. Other "Translation:" lines on a page
    may belong to fixed examples and are not checked. With `require_header`, a page without the
    header is an error too.
    """
    error = leak = ""
    if exception:
        error = "exception box: " + exception[:200]
    if value != own:
        owner = OWNER.get(value)
        if owner is not None and owner != student:
            leak = f"sentence box shows student {owner}'s {value!r}"
        else:
            error = error or f"stale sentence box: {value!r}, typed {own!r}"
    header = re.search(r"Source tokens:\s*(.*?)\s*<eos>(.*?)(?:^Translation: (.*?)$|\Z)", text, flags=re.M | re.S)
    if header:
        tokens = " ".join(header.group(1).split())
        if tokens != TOKENS[own]:
            owner = next((OWNER[s] for s, t in TOKENS.items() if t == tokens and s in OWNER), None)
            if owner is not None and owner != student:
                leak = f"page shows student {owner}'s sentence {tokens!r}; own {own!r}"
            else:
                error = error or f"stale page: shows {tokens!r}, own sentence {own!r}"
        elif header.group(3) is not None and header.group(3).strip() != own_translation:
            shown = header.group(3).strip()
            owner = next((OWNER[s] for s, t in TRANSLATIONS.items() if t == shown), None)
            if owner is not None and owner != student:
                leak = f"page shows student {owner}'s translation {shown!r}; own {own!r}"
            else:
                error = error or f"wrong translation {shown!r} for {own!r} (expected {own_translation!r})"
    elif require_header:
        error = error or f"no sentence header on the page after typing {own!r}"
    return error, leak


SENTENCE_BOX = '[data-testid="stSidebar"] input[aria-label="Your sentence"]'


async def open_app(page, url: str, timeout_ms: float) -> None:
    """Load the app and wait until its first run has drawn the sidebar and finished."""
    await page.goto(url, wait_until="domcontentloaded", timeout=timeout_ms)
    await page.wait_for_selector(SENTENCE_BOX, state="visible", timeout=timeout_ms)
    await page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=timeout_ms)


async def trainer(browser, url: str, report: Report, status: dict) -> None:
    """Open the training page and press Start with the default settings."""
    ctx = await browser.new_context(viewport={"width": 1400, "height": 1000})
    page = await ctx.new_page()
    await open_app(page, url, 120_000)  # app.py first (a deep link on a fresh server misses the navigation)
    await open_app(page, url + "/training", 120_000)
    await page.locator('[data-testid="stMain"]').get_by_role("button", name=re.compile("Start")).click()
    await page.wait_for_selector('[data-testid="stMain"] [data-testid="stProgress"]', timeout=120_000)
    status[id(page)] = page
    report.trainers.append("started")


class Phase:
    """The interactions start when every student has loaded the app (or failed to): a class settles in first."""

    def __init__(self, students: int, seconds: float, think: float = 0.0):
        self.left, self.seconds, self.think = students, seconds, think
        self.all_loaded = asyncio.Event()
        self.deadline = math.inf
        self.started = math.nan

    def arrive(self) -> None:
        self.left -= 1
        if self.left == 0:
            self.started = time.monotonic()
            print(f"every session has loaded the app; interactions for at most {self.seconds:.0f} s", flush=True)
            self.deadline = self.started + self.seconds
            self.all_loaded.set()

    async def pause(self, rng: random.Random) -> None:
        """A student reads the page before the next interaction: uniform in [0, 2 * think] seconds."""
        if self.think > 0:
            await asyncio.sleep(rng.uniform(0, 2 * self.think))


class BrowserStudent:
    """A student in a Chromium page (its own browser context, so its own Streamlit session)."""

    require_header = False  # the browser check reads what is drawn; a page may legitimately lack the header

    def __init__(self, browser, url: str, timeout: float):
        self.browser, self.url, self.timeout = browser, url, timeout

    async def load(self, load_timeout: float) -> float:
        self.ctx = await self.browser.new_context(viewport={"width": 1280, "height": 900})
        await self.ctx.add_init_script(RUN_COUNTER_JS)
        self.page = await self.ctx.new_page()
        self.sidebar = self.page.locator('[data-testid="stSidebar"]')
        t0 = time.perf_counter()
        await open_app(self.page, self.url, load_timeout * 1000)
        return time.perf_counter() - t0

    async def _timed(self, act, prepare=None) -> float:
        """`prepare()` if given, then `act()` timed until the script run it triggered has finished."""
        before = await run_count(self.page)
        if prepare is not None:
            await prepare()
        t = time.perf_counter()
        await act()
        await wait_run(self.page, before, self.timeout * 1000)
        return time.perf_counter() - t

    async def type_sentence(self, text: str) -> float:
        box = self.sidebar.get_by_role("textbox", name="Your sentence", exact=True)
        return await self._timed(lambda: box.press("Enter"), prepare=lambda: box.fill(text))

    async def switch_page(self, title: str) -> float:
        link = self.sidebar.get_by_role("link", name=title, exact=True)
        return await self._timed(link.click)

    async def observe(self) -> tuple[str, str, str]:
        """(first exception box or "", the sentence box's value, the main area's text)."""
        boxes = self.page.locator(EXCEPTION_SELECTOR)
        exception = await boxes.first.inner_text() if await boxes.count() else ""
        box = self.sidebar.get_by_role("textbox", name="Your sentence", exact=True)
        text = await self.page.locator('[data-testid="stMain"]').inner_text()
        return exception, await box.input_value(), text

    async def close(self) -> None:
        if getattr(self, "ctx", None) is not None:
            await self.ctx.close()


class WsStudent:
    """A student without a browser: a StreamlitSession does the same interactions over the websocket."""

    require_header = True  # after typing, the server's answer must carry the sentence header

    def __init__(self, url: str, timeout: float):
        self.session, self.timeout = StreamlitSession(url), timeout

    async def load(self, load_timeout: float) -> float:
        self.session.timeout = load_timeout
        seconds = await self.session.connect()
        self.session.timeout = self.timeout
        return seconds

    async def type_sentence(self, text: str) -> float:
        return await self.session.type_sentence(text)

    async def switch_page(self, title: str) -> float:
        return await self.session.switch_page(title)

    async def observe(self) -> tuple[str, str, str]:
        exceptions = self.session.exceptions()
        return exceptions[0] if exceptions else "", self.session.widget_value("Your sentence"), self.session.text()

    async def close(self) -> None:
        await self.session.close()


async def student(
    i: int,
    client: BrowserStudent | WsStudent,
    mine: list[tuple[str, str]],
    n: int,
    phase: Phase,
    report: Report,
    delay: float,
    load_timeout: float,
) -> None:
    """Arrive after `delay`, load the app, wait for the class, then n interactions: type / switch in turn."""
    await asyncio.sleep(delay)
    try:
        try:
            report.interactions.append(Interaction(i, "load", await client.load(load_timeout)))
        except Exception as e:  # noqa: BLE001 - a failed load is a measured error
            report.interactions.append(Interaction(i, "load", None, f"load: {type(e).__name__}"))
            phase.arrive()
            return
        phase.arrive()
        await phase.all_loaded.wait()
        own, own_translation = DEFAULT, None
        typed = 0
        rng = random.Random(i)
        for k in range(n):
            if k:
                await phase.pause(rng)
            if time.monotonic() > phase.deadline:
                break
            kind = "type" if k % 2 == 0 else "switch"
            try:
                if kind == "type":
                    own, own_translation = mine[typed % len(mine)]
                    typed += 1
                    seconds = await client.type_sentence(own)
                else:
                    seconds = await client.switch_page(SWITCH_PAGES[(i + k) % len(SWITCH_PAGES)])
                error, leak = "", ""
                if own_translation:
                    error, leak = check_text(
                        i,
                        own,
                        own_translation,
                        *await client.observe(),
                        require_header=client.require_header and kind == "type",
                    )
                report.interactions.append(Interaction(i, kind, seconds if not error else None, error, leak))
            except Exception as e:  # noqa: BLE001
                report.interactions.append(Interaction(i, kind, None, f"{kind}: {type(e).__name__}: {str(e)[:120]}"))
    finally:
        await client.close()


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


async def main_async(args) -> Report:
    from playwright.async_api import async_playwright

    report = Report()
    pool = sentences(args.students * ((args.interactions + 1) // 2))
    per = (args.interactions + 1) // 2
    mine = [pool[s * per : (s + 1) * per] for s in range(args.students)]
    for s, sentences_of_s in enumerate(mine):
        for sentence, translation in sentences_of_s:
            OWNER[sentence], TRANSLATIONS[sentence] = s, translation
    root = Path(args.root).resolve() if args.root else None
    server = start_app(log=Path("/tmp") / "glass-load-test.log", timeout=120, root=root)
    print(
        f"server {server.url} (log {server.log}), app of {root or 'this checkout'}; students: {args.client} client",
        flush=True,
    )
    cpu0 = cpu_seconds(server.proc.pid)
    try:
        async with contextlib.AsyncExitStack() as stack:
            browser = None  # Chromium for the trainers, and for the students with --client browser
            if args.client == "browser" or args.trainings:
                p = await stack.enter_async_context(async_playwright())
                browser = await p.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)
                stack.push_async_callback(browser.close)
            trainers: dict = {}
            t0 = time.perf_counter()
            await asyncio.gather(*(trainer(browser, server.url, report, trainers) for _ in range(args.trainings)))
            print(f"{len(trainers)} trainings started in {time.perf_counter() - t0:.1f} s", flush=True)
            phase = Phase(args.students, args.deadline, args.think)
            clients = [
                WsStudent(server.url, args.timeout)
                if args.client == "ws"
                else BrowserStudent(browser, server.url, args.timeout)
                for _ in range(args.students)
            ]
            tasks = [
                student(i, c, mine[i], args.interactions, phase, report, i * args.stagger, args.load_timeout)
                for i, c in enumerate(clients)
            ]
            limit = args.load_timeout + args.students * args.stagger + args.deadline + 180
            try:
                await asyncio.wait_for(asyncio.gather(*tasks), timeout=limit)
            except TimeoutError:
                report.interactions.append(Interaction(-1, "all", None, "overall time limit reached"))
            for page in trainers.values():  # how far the trainings got meanwhile
                try:
                    bar = page.locator('[data-testid="stProgress"]').first
                    text = await bar.inner_text(timeout=10_000) if await bar.count() else ""
                    main = await page.locator('[data-testid="stMain"]').inner_text()
                    state = next(
                        (
                            s
                            for s in (
                                "Training finished",
                                "Training stopped",
                                "Waiting for a free slot",
                                "Training diverged",
                            )
                            if s in main
                        ),
                        "running",
                    )
                    report.trainers.append(f"{state}: {' '.join(text.split())[:80]}")
                except Exception as e:  # noqa: BLE001
                    report.trainers.append(f"unknown ({type(e).__name__})")
            cpu1 = cpu_seconds(server.proc.pid)
            report.cpu = {k: cpu1[k] - cpu0[k] for k in cpu0}
    finally:
        server.stop()
    return report


def summarise(report: Report, args) -> dict:
    ok = [x for x in report.interactions if x.kind in ("type", "switch") and x.seconds is not None]
    loads = [x.seconds for x in report.interactions if x.kind == "load" and x.seconds is not None]
    errors = [x for x in report.interactions if x.error]
    leaks = [x for x in report.interactions if x.leak]
    out = {
        "client": args.client,
        "think": args.think,
        "students": args.students,
        "trainings": args.trainings,
        "interactions_done": len(ok),
        "interactions_planned": args.students * args.interactions,
        "errors": len(errors),
        "leaks": len(leaks),
    }
    if ok:
        secs = [x.seconds for x in ok]
        out.update(p50=statistics.median(secs), p95=pct(secs, 0.95), max=max(secs))
        for kind in ("type", "switch"):
            ks = [x.seconds for x in ok if x.kind == kind]
            if ks:
                out[f"{kind}_p50"], out[f"{kind}_p95"] = statistics.median(ks), pct(ks, 0.95)
    if loads:
        out.update(load_p50=statistics.median(loads), load_p95=pct(loads, 0.95))
    out["error_samples"] = [x.error for x in errors[:5]]
    out["leak_samples"] = [x.leak for x in leaks[:5]]
    out["trainers"] = report.trainers
    out["cpu_seconds"] = report.cpu
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--client",
        choices=("browser", "ws"),
        default="browser",
        help="the students: Chromium pages, or tools/ws_client.py's browserless websocket sessions",
    )
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--trainings", type=int, default=2)
    ap.add_argument("--interactions", type=int, default=5, help="per student, alternating type / switch")
    ap.add_argument("--deadline", type=float, default=300, help="seconds; no interaction starts after it")
    ap.add_argument("--timeout", type=float, default=60, help="seconds per interaction")
    ap.add_argument("--load-timeout", type=float, default=600, help="seconds for a session's first load of the app")
    ap.add_argument("--stagger", type=float, default=0.5, help="seconds between two students' arrivals")
    ap.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="mean seconds a student reads a page before the next interaction (uniform in [0, 2x]); "
        "0: the next one at once, which measures a saturated server",
    )
    ap.add_argument("--json", help="also write the figures to this file")
    ap.add_argument(
        "--root",
        help="run the app of this checkout instead (default: this one); its sidebar must "
        "have the pages the students visit",
    )
    args = ap.parse_args(argv)
    if not set(SWITCH_PAGES) <= {p.title for p in PAGES}:
        print(f"app.py lacks some of the pages {SWITCH_PAGES}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    report = asyncio.run(main_async(args))
    s = summarise(report, args)
    s["wall_seconds"] = time.perf_counter() - t0
    print(
        f"{s['interactions_done']} of {s['interactions_planned']} interactions by {args.students} {args.client} "
        f"sessions while "
        f"{args.trainings} models trained ({s['wall_seconds']:.0f} s in all; {args.client} client, mean think time "
        f"{args.think:g} s)"
    )
    if "p50" in s:
        print(
            f"interaction -> updated page: p50 {s['p50']:.2f} s, p95 {s['p95']:.2f} s, max {s['max']:.2f} s "
            f"(typing: p50 {s.get('type_p50', float('nan')):.2f} / p95 {s.get('type_p95', float('nan')):.2f} s; "
            f"page switch: p50 {s.get('switch_p50', float('nan')):.2f} / p95 {s.get('switch_p95', float('nan')):.2f}"
            f" s); target p95 <= 2 s: {'met' if s['p95'] <= 2 else 'NOT met'}"
        )
    if "load_p50" in s:
        print(f"first load of the app: p50 {s['load_p50']:.1f} s, p95 {s['load_p95']:.1f} s")
    print(f"errors: {s['errors']} {s['error_samples'] or ''}")
    print(f"cross-session leaks: {s['leaks']} {s['leak_samples'] or ''}")
    print("trainings: " + " | ".join(s["trainers"]))
    if s["cpu_seconds"]:  # where the machine's time went: the browsers' share is not the server's latency
        print("CPU seconds used: " + ", ".join(f"{k} {v:.0f}" for k, v in s["cpu_seconds"].items()))
    if args.json:
        Path(args.json).write_text(
            json.dumps({**s, "interactions": [asdict(x) for x in report.interactions]}, indent=1)
        )
    return 0 if not s["errors"] and not s["leaks"] else 1


if __name__ == "__main__":
    sys.exit(main())
