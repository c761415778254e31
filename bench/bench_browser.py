"""Browser speed: what a reader waits for in real Chromium, per page, for one checkout or several.

For every page in the app's sidebar (found in the page itself, so an older checkout with other
addresses works too), with a 12-token sentence, median of --repeats of:

  nav       a click on the page's sidebar link (coming from a light page) -> the script run it
            triggered has finished (seen by its websocket messages: see Tab.settled), no placeholder
            skeleton is left, every chart in the DOM has drawn its SVG, and two animation frames have
            passed (the main thread is free to paint again);
  sentence  a new sentence typed into the sidebar + Enter -> the same;
  toggle    the sidebar's "Positional encoding" intervention switched (off, on, off, ...) -> the same.

Also per page: the charts (plotly + graphviz) and tables (st.dataframe, st.table) in the DOM after the
page has loaded, how many of the charts drew before the reader scrolls or opens anything (drawn
anywhere, and inside the first viewport), and the websocket bytes the browser received for the page
switch (playwright's page.on("websocket") + framereceived).

--cpu also traces each navigation (Chromium's tracing) and reports the time the page's main thread spent in its
tasks ("nav CPU"): less sensitive to other work on a shared machine than the wall time, which it slows a little.

--bare also measures, in the same run, a bare Streamlit app (nothing of ours: a paragraph and K Plotly heatmaps of
12 x 12 random numbers per page) on a page with as many charts as each page of ours draws, its navigation clicked
right after ours each time: per page, the median and the worst of (our nav / the bare page's nav) over the repeats
(goal: at most 1.3x).

--root PATH (repeatable) measures other checkouts (e.g. a git worktree of an older commit, which also
starts with `python -m streamlit run app.py`); every root gets its own server on 127.0.0.1 and a free
port, and the pages are measured in turn (page 1 on every root, page 2 on every root, ...), so that
BEFORE and AFTER see the same machine noise. Target on this 2-core machine: every median <= 1.0 s and
no page over 6 charts drawn before the reader does anything.

    .venv/bin/python -m bench.bench_browser [--root /work/wt/base --root .] [--repeats 5] [--pages tokens,...] [--bare]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from serving.processes import start_app
from tools.browser import IDLE_SELECTOR, RUN_COUNTER_JS, launch_chromium
from ui.page_list import ROOT

SENTENCES = (
    "the animal didn't cross the street because it was too tired.",  # 12 tokens (bench_pages's)
    "the young women are scared because the big cars are not green",
)  # 12 tokens
TOGGLE = "Positional encoding"
HOME = "Overview"  # the light page a "nav" click comes from (and "Tokens and embeddings" for the overview)
ALT_HOME = "Tokens and embeddings"
TARGET_S = 1.0
TARGET_CHARTS = 6
VIEWPORT = {"width": 1280, "height": 720}

CHARTS = '[data-testid="stPlotlyChart"], [data-testid="stGraphVizChart"]'
TABLES = '[data-testid="stDataFrame"], [data-testid="stTable"]'
DRAWN_JS = """() => {
  if (document.querySelector('[data-testid="stSkeleton"]')) return false;
  if (!document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]')) return false;
  return [...document.querySelectorAll('CHARTS')].every(c => c.querySelector('svg'));
}""".replace("CHARTS", CHARTS)
COUNTS_JS = """() => {
  const charts = [...document.querySelectorAll('CHARTS')];
  const drawn = charts.filter(c => c.querySelector('svg'));
  const h = window.innerHeight, w = window.innerWidth;
  const inView = drawn.filter(c => { const r = c.getBoundingClientRect();
                                     return r.width > 0 && r.height > 0 && r.top < h && r.bottom > 0 && r.left < w; });
  return {charts: charts.length, drawn: drawn.length, in_view: inView.length,
          tables: document.querySelectorAll('TABLES').length};
}""".replace("CHARTS", CHARTS).replace("TABLES", TABLES)
QUIET_S = 0.05  # no websocket frame for this long: the run's burst of messages is over (adds at most 50 ms)
FRAMES_JS = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


BARE_APP = """import numpy as np
import plotly.graph_objects as go
import streamlit as st

st.set_page_config(layout="wide")


def charts(k):
    def page():
        st.markdown("One paragraph, about as long as one of the app's, with **bold** and *italic* words: the page "
                    "holds nothing but this and its heatmaps.")
        for i in range(k):
            z = np.random.default_rng(i).random((12, 12))
            st.plotly_chart(go.Figure(go.Heatmap(z=z)), key=f"heatmap_{i}")
    return page


pages = [st.Page(lambda: st.markdown("A light page."), title="Bare home", url_path="home", default=True)]
pages += [st.Page(charts(k), title=f"Bare {k}", url_path=f"k{k}") for k in range(BARE_MAX + 1)]
st.navigation(pages, expanded=True).run()
"""
BARE_MAX = 16  # heatmaps on the bare app's last page


@dataclass
class PageFigures:
    nav: list[float] = field(default_factory=list)
    nav_cpu: list[float] = field(default_factory=list)  # --cpu: the main thread's task time per navigation
    sentence: list[float] = field(default_factory=list)
    toggle: list[float] = field(default_factory=list)
    bytes: list[int] = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    bare: list[float] = field(default_factory=list)  # --bare: the bare page's nav, right after each of ours
    error: str = ""

    def ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.nav, self.bare, strict=False) if b]

    def times(self) -> str:
        """The tables' three columns: the medians of a navigation, a new sentence and a toggle."""
        return f"{fmt_s(med(self.nav))} {fmt_s(med(self.sentence)):>8s} {fmt_s(med(self.toggle))}"

    def notes(self, error: str, bare: str) -> str:
        """What follows a row: the navigation's CPU time (--cpu), the error (after `error`), and the navigation
        against the bare page's (--bare; `bare` between "vs bare" and the ratios)."""
        ratios = self.ratios()
        return (
            (f"  nav CPU {med(self.nav_cpu):.3f}s" if self.nav_cpu else "")
            + (f"  {error}{self.error}" if self.error else "")
            + (f"  vs bare{bare}: median {statistics.median(ratios):.2f}x, worst {max(ratios):.2f}x" if ratios else "")
        )


class Tab:
    """One browser context + page on one server, counting the websocket bytes it receives."""

    def __init__(self, browser, url: str, timeout_s: float):
        self.context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
        self.context.add_init_script(RUN_COUNTER_JS)
        self.page = self.context.new_page()
        self.page.set_default_timeout(timeout_s * 1000)
        self.url = url
        self.timeout_ms = timeout_s * 1000
        self.received = 0
        self.frames = 0
        self.last_frame = 0.0
        self.page.on("websocket", self._on_ws)

    def _on_ws(self, ws) -> None:
        ws.on("framereceived", self._on_frame)

    def _on_frame(self, payload) -> None:
        self.received += len(payload)
        self.frames += 1
        self.last_frame = time.perf_counter()

    @property
    def sidebar(self):
        return self.page.locator('[data-testid="stSidebar"]')

    def titles(self) -> list[str]:
        """The pages' titles in the sidebar (a link's text also holds its icon's name, on a line of its own)."""
        links = self.sidebar.get_by_test_id("stSidebarNavLink").all_inner_texts()
        return [t.strip().splitlines()[-1].strip() for t in links]

    def settled(self, frames_before: int, start_timeout_s: float = 3.0) -> None:
        """The run the action triggered has finished, and the page is drawn and painted.

        A run is seen by its websocket frames, not by the app's "running" state: a fast run (the overview,
        about 15 ms) can start and end within one React render, so the state attribute never changes in the
        DOM. So: wait (up to `start_timeout_s`) for a frame after the action, then until the script is idle,
        every chart has drawn, two animation frames have passed, and no frame has arrived for QUIET_S (the
        run's messages come in one burst that ends with "script finished")."""
        deadline = time.perf_counter() + start_timeout_s
        while self.frames <= frames_before and time.perf_counter() < deadline:
            self.page.wait_for_timeout(5)
        deadline = time.perf_counter() + self.timeout_ms / 1000
        while True:
            self.page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=self.timeout_ms)
            self.page.wait_for_function(DRAWN_JS, timeout=self.timeout_ms)
            self.page.evaluate(FRAMES_JS)
            if time.perf_counter() - self.last_frame >= QUIET_S or time.perf_counter() > deadline:
                break
            self.page.wait_for_timeout(10)
        if self.page.locator('[data-testid="stException"]').count():
            raise RuntimeError("exception box: " + self.page.locator('[data-testid="stException"]').first.inner_text())

    def timed(self, action) -> tuple[float, int]:
        """(seconds, websocket bytes received) from `action()` to the page settled."""
        frames, received = self.frames, self.received
        t = time.perf_counter()
        action()
        self.settled(frames)
        return time.perf_counter() - t, self.received - received

    def traced(self, action) -> tuple[float, int, float]:
        """`timed(action)` under Chromium's tracing, plus the seconds the page's main thread spent in tasks (the
        renderer thread with the most task time; its thread time, not its wall time)."""
        browser = self.context.browser
        browser.start_tracing(
            page=self.page, categories=["devtools.timeline", "toplevel", "disabled-by-default-devtools.timeline"]
        )
        try:
            s, b = self.timed(action)
        finally:
            data = json.loads(browser.stop_tracing())
        busy: dict[int, float] = {}
        for e in data["traceEvents"] if isinstance(data, dict) else data:
            if e.get("name") == "RunTask" and e.get("ph") == "X":
                busy[e["tid"]] = busy.get(e["tid"], 0.0) + e.get("tdur", e.get("dur", 0)) / 1e6
        return s, b, max(busy.values(), default=0.0)

    def link(self, title: str):
        return self.sidebar.get_by_role("link", name=title, exact=True)

    def go(self, title: str) -> tuple[float, int]:
        return self.timed(self.link(title).click)

    def type_sentence(self, text: str) -> tuple[float, int]:
        box = self.sidebar.get_by_role("textbox", name="Your sentence", exact=True)
        box.fill(text)
        return self.timed(lambda: box.press("Enter"))

    def flip(self, label: str) -> tuple[float, int]:
        switch = self.page.get_by_role("switch", name=label, exact=True)  # `has=` is matched inside each box
        target = self.sidebar.get_by_test_id("stCheckbox").filter(has=switch).locator("label")
        return self.timed(target.click)

    def counts(self) -> dict:
        self.page.evaluate(
            "() => { const m = document.querySelector('[data-testid=\"stMain\"]'); if (m) m.scrollTop = 0; }"
        )
        return self.page.evaluate(COUNTS_JS)


def charts_on(tab: Tab, title: str) -> int:
    """The charts `title` draws before the reader does anything."""
    tab.go(ALT_HOME if title == HOME else HOME)
    tab.go(title)
    return tab.counts()["drawn"]


def measure_page(tab: Tab, title: str, repeats: int, cpu: bool = False, bare: Tab | None = None) -> PageFigures:
    f = PageFigures()
    home = ALT_HOME if title == HOME else HOME
    try:
        k = min(charts_on(tab, title), BARE_MAX) if bare is not None else 0
        if bare is not None:  # (its first visit: the bare server's imports)
            bare.go(f"Bare {k}")
        for _ in range(repeats):
            tab.go(home)
            if cpu:
                s, b, c = tab.traced(tab.link(title).click)
                f.nav_cpu.append(c)
            else:
                s, b = tab.go(title)
            f.nav.append(s)
            f.bytes.append(b)
            if bare is not None:  # the bare page with as many charts, at once (the same moment's machine)
                bare.go("Bare home")
                f.bare.append(bare.go(f"Bare {k}")[0])
        f.counts = tab.counts()
        for i in range(repeats):
            f.sentence.append(tab.type_sentence(SENTENCES[(i + 1) % 2])[0])
        tab.type_sentence(SENTENCES[0])
        for _ in range(repeats):
            f.toggle.append(tab.flip(TOGGLE)[0])
        if repeats % 2:
            tab.flip(TOGGLE)  # back on
    except Exception as e:  # noqa: BLE001 - a page that fails is reported, the others still measured
        f.error = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    return f


def med(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def fmt_s(x: float | None) -> str:
    return f"{x:6.2f}s" if x is not None else "     -"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", action="append", default=[], help="a checkout to measure (repeatable; default: this one)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--pages",
        default="",
        help="comma list of words; a page is measured when its title or "
        "address contains one (default: every page of the sidebar)",
    )
    ap.add_argument("--timeout", type=float, default=90, help="seconds per wait")
    ap.add_argument("--cpu", action="store_true", help="also the main thread's task time per navigation (traced)")
    ap.add_argument("--bare", action="store_true", help="also a bare Streamlit page with as many heatmaps (see above)")
    args = ap.parse_args()
    roots = [Path(r).resolve() for r in args.root] or [ROOT]
    names = [r.name if r != ROOT else f"{r.name} (this)" for r in roots]
    wanted = [w.strip().lower() for w in args.pages.split(",") if w.strip()]

    from playwright.sync_api import sync_playwright

    print(
        f"Chromium {VIEWPORT['width']}x{VIEWPORT['height']}, median of {args.repeats}, load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; sentences {SENTENCES}"
    )
    servers = []
    bare_dir = tempfile.TemporaryDirectory() if args.bare else None
    try:
        for r in roots:
            servers.append(start_app(timeout=120, extra_env={"OMP_NUM_THREADS": "1"}, root=r))
        if bare_dir is not None:
            d = Path(bare_dir.name)
            (d / "app.py").write_text(BARE_APP.replace("BARE_MAX", str(BARE_MAX)))
            bare_server = start_app(timeout=120, extra_env={"OMP_NUM_THREADS": "1"}, root=d)
        with sync_playwright() as p:
            browser = launch_chromium(p)
            bare = None
            if bare_dir is not None:
                bare = Tab(browser, bare_server.url, args.timeout)
                bare.page.goto(bare_server.url, wait_until="domcontentloaded")
                bare.settled(-1)
            tabs = []
            for s in servers:
                tab = Tab(browser, s.url, args.timeout)
                tab.page.goto(f"{s.url}/?s={SENTENCES[0].replace(' ', '%20')}", wait_until="domcontentloaded")
                tab.settled(-1)
                tabs.append(tab)
            titles = []
            for tab in tabs:  # every page of every root, in the first root's order
                titles += [t for t in tab.titles() if t not in titles]
            results: dict[str, list[PageFigures | None]] = {}
            for title in titles:
                if wanted and not any(w in title.lower() or w in title.lower().replace(" ", "_") for w in wanted):
                    continue
                row = []
                for tab in tabs:
                    if tab.link(title).count() == 0:
                        row.append(None)
                        continue
                    row.append(measure_page(tab, title, args.repeats, args.cpu, bare))
                results[title] = row
                print_row(title, row, names)
            browser.close()
    finally:
        for s in servers:
            s.stop()
        if bare_dir is not None:
            with contextlib.suppress(NameError):
                bare_server.stop()
            bare_dir.cleanup()
    print_summary(results, names)


def print_row(title: str, row: list[PageFigures | None], names: list[str]) -> None:
    print(f"\n{title}")
    print(f"  {'checkout':24s} {'nav':>7s} {'sentence':>8s} {'toggle':>7s}  charts drawn in-view tables    ws KB")
    for name, f in zip(names, row, strict=True):
        if f is None:
            print(f"  {name:24s} {'n/a':>7s} {'n/a':>8s} {'n/a':>7s}  (no such page in this checkout)")
            continue
        c = f.counts
        kb = med([b / 1000 for b in f.bytes])
        print(
            f"  {name:24s} {f.times()}  "
            f"{c.get('charts', '-'):>6} {c.get('drawn', '-'):>5} {c.get('in_view', '-'):>7} "
            f"{c.get('tables', '-'):>6} "
            f"{kb if kb is None else round(kb):>8}"
            + f.notes("ERROR ", f" ({c.get('drawn')} heatmaps)")
            + (f" (bare nav {med(f.bare):.2f}s)" if f.ratios() else ""),
            flush=True,
        )


def print_summary(results: dict[str, list[PageFigures | None]], names: list[str]) -> None:
    print(
        f"\nSummary (seconds, median; OK = every interaction <= {TARGET_S:.1f} s and <= {TARGET_CHARTS} charts drawn)"
    )
    for i, name in enumerate(names):
        print(f"\n  {name}")
        print(f"  {'page':30s} {'nav':>7s} {'sentence':>8s} {'toggle':>7s} {'drawn':>6s}")
        for title, row in results.items():
            f = row[i]
            if f is None:
                print(f"  {title:30s} {'n/a':>7s} {'n/a':>8s} {'n/a':>7s} {'n/a':>6s}  (no such page)")
                continue
            worst = max((m for m in (med(f.nav), med(f.sentence), med(f.toggle)) if m is not None), default=None)
            ok = not f.error and worst is not None and worst <= TARGET_S and f.counts.get("drawn", 99) <= TARGET_CHARTS
            print(
                f"  {title:30s} {f.times()} {f.counts.get('drawn', '-'):>6}  {'OK' if ok else 'SLOW'}" + f.notes("", "")
            )


if __name__ == "__main__":
    main()
