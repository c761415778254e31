"""Browser tests: the real app under `streamlit run`, driven in Debian's Chromium with Playwright.

Fixtures
--------
app_url   (session)  base URL of `streamlit run app.py` on 127.0.0.1 and a free port; the process
                     group is killed at the end of the session, also when tests fail.
browser   (module)   Debian's /usr/bin/chromium through Playwright's sync API (a missing chromium is
                     a failure with a clear message, never a skip: `./dev.sh test` installs it).
app       (test)     a fresh browser context and page, with helpers: `goto(path, **query)`,
                     `wait_idle()`, `act(fn)`, `shot(name)`, `main_text()`. Every visited page is
                     saved as a screenshot in tests/artifacts/ (gitignored): its first screen, or
                     the whole page with GLASS_FULL_SHOTS=1; a failing test's page always whole.

`wait_idle` waits for `[data-testid="stApp"][data-test-script-state="notRunning"]` after the run an
action triggered, instead of sleeping, and asserts that no `[data-testid="stException"]` is shown.
"""

from __future__ import annotations

import atexit
import os
import re
import urllib.parse
from pathlib import Path

import pytest
from playwright.sync_api import expect

from serving.processes import start_app
from tools.browser import (
    RUN_COUNTER_JS,
    act,
    assert_no_exception,
    launch_chromium,
    require_chromium,
    screenshot_full,
    wait_idle,
)

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
VIEWPORT = {"width": 1400, "height": 1000}
# One torch thread in the server, as in this process (tests/browser/test_browser.py): on 2 cores shared with
# Chromium and pytest, torch's second intra-op thread made page runs several times slower (bench/bench_pages.py
# --torch-threads 1 shows the difference), and equal thread counts give bit-identical numbers on both sides.
# Every browser test comes from 127.0.0.1, as a school behind one NAT address does: the class limits per address are
# raised as docs/operators.md tells such a school (the soak, the walks and the peer tests start a class each, within
# minutes, on this one server; the limits themselves are tested in tests/test_class_guard.py and
# tests/test_class_store_admission.py)
SERVER_ENV = {"OMP_NUM_THREADS": "1", "GLASS_CLASSES_PER_CLIENT": "100", "GLASS_CLASS_STARTS_PER_MINUTE": "100"}
# The waits fit a loaded shared machine, where a chart can take several seconds to draw (docs/contributors.md, "Test
# tiers"): every `expect` waits up to 15 s (Playwright's default is 5); a class's change reaches a student's page in
# about a second on an idle machine, and gets FOLLOW_MS.
expect.set_options(timeout=15_000)
FOLLOW_MS = 20_000
# Whole pages (GLASS_FULL_SHOTS=1) instead of the first screen: about twice the browser tests' time.
FULL_SHOTS = os.environ.get("GLASS_FULL_SHOTS", "") not in ("", "0")


@pytest.fixture(scope="session")
def app_url():
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server = start_app(log=ARTIFACTS / f"streamlit-{os.getpid()}.log", timeout=60, extra_env=SERVER_ENV)
    atexit.register(server.stop)  # belt and braces: a hard interrupt still leaves no server behind
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def browser():
    """Chromium for one test module. Not for the whole session: Playwright's sync API keeps an asyncio
    loop running in this thread while it is open, and later tests (the replicas, the classroom load) run
    their own loops with asyncio.run."""
    try:
        require_chromium()
    except RuntimeError as e:
        pytest.fail(str(e), pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p)
        try:
            yield b
        finally:
            b.close()


CLASS_LINK = re.compile(r"/classroom\?class=[A-Z0-9]{6}")  # the join link the class page shows


def expect_app_page(page, title: str, sentence: str) -> None:
    """The whole app answers on `title`: its sidebar with the sentence, that page marked current, no dialog."""
    sidebar = page.locator('[data-testid="stSidebar"]')
    box = sidebar.get_by_role("textbox", name="Your sentence", exact=True)
    # retrying assertions: the sidebar's inputs can show up a moment after the run has ended
    expect(box, "the page ran without app.py (no sidebar)").to_have_count(1)
    expect(box).to_have_value(sentence)
    expect(sidebar.get_by_role("link", name=title, exact=True)).to_have_attribute("aria-current", "page")
    expect(page.get_by_role("dialog"), "a dialog (e.g. 'Page not found') is open").to_have_count(0)
    expect(page.locator("h1").first).not_to_be_empty()


class AppPage:
    """One browser tab on the app, with the waits and screenshots every test needs."""

    def __init__(self, page, base_url: str, test_name: str):
        self.page = page
        self.base_url = base_url
        self.test_name = re.sub(r"[^\w.-]+", "_", test_name)
        self.shots: list[Path] = []

    def url(self, path: str = "", **query) -> str:
        qs = urllib.parse.urlencode(query, quote_via=urllib.parse.quote)
        return f"{self.base_url}/{path.lstrip('/')}" + (f"?{qs}" if qs else "")

    def goto(self, path: str = "", **query) -> None:
        self.page.goto(self.url(path, **query), wait_until="domcontentloaded")
        self.wait_idle()
        self.shot(path or "root")

    def wait_idle(self, since: int | None = None) -> None:
        wait_idle(self.page, since=since)

    def act(self, action) -> None:
        act(self.page, action)

    def shot(self, name: str, full: bool = FULL_SHOTS) -> Path:
        """Save what the tab shows (the whole page with `full`, slower) in tests/artifacts/."""
        safe = re.sub(r"[^\w.-]+", "_", name)
        path = ARTIFACTS / f"{self.test_name}-{len(self.shots):02d}-{safe}.png"
        if full:
            screenshot_full(self.page, path)
        else:
            self.page.screenshot(path=str(path))
        self.shots.append(path)
        return path

    @property
    def sidebar(self):
        return self.page.locator('[data-testid="stSidebar"]')

    @property
    def main(self):
        return self.page.locator('[data-testid="stMain"]')

    def main_text(self) -> str:
        return self.main.inner_text()

    def picker(self, label: str):
        """The main area's selectbox labelled `label` (its value: the option it shows)."""
        return self.main.get_by_role("combobox", name=label, exact=True)

    def choose(self, label: str, option: str) -> None:
        """Choose `option` in the main area's selectbox `label` as a reader does with the keyboard: click it, type
        the option, Enter (the first option the typed text matches). A click on the open list could miss it when a
        run redrew the page under it (a teacher's page reruns at every class event)."""

        def typed() -> None:
            self.picker(label).click()
            self.page.keyboard.type(option)
            self.page.keyboard.press("Enter")

        self.act(typed)

    def no_exception(self) -> None:
        assert_no_exception(self.page)

    def start_class(self, **query) -> tuple[str, str]:
        """As a teacher: open the class page (with `query`), press Start a class; the join link and the code."""
        self.goto("classroom", **query)
        self.act(lambda: self.main.get_by_role("button", name="Start a class").click())
        link = re.search(r"(http\S+)", self.main.get_by_text(CLASS_LINK).first.inner_text())[1]
        return link, re.search(r"class=([A-Z0-9]{6})", link)[1]


class HeldDownstream:
    """The app's websocket to this tab, whose messages from the server can be held back a while (a slow network, a
    busy laptop): what the page asks in between, it asks with the widget values it had."""

    def __init__(self, page):
        self.on, self.frames, self.ws = False, [], None
        page.route_web_socket("**/_stcore/stream", self.route)

    def route(self, ws) -> None:
        self.ws = ws
        ws.connect_to_server().on_message(lambda m: self.frames.append(m) if self.on else ws.send(m))

    def release(self) -> None:
        self.on = False
        while self.frames:
            self.ws.send(self.frames.pop(0))

    def during(self, tab: AppPage, action, ms: int = 2_000) -> None:
        """Do `action()` (clicks) with the messages held back, for `ms` more (the runs end, their events come back on
        the class's stream, the page asks); then let them through and wait for the tab's runs to end."""
        self.on = True
        action()
        tab.page.wait_for_timeout(ms)
        self.release()
        tab.wait_idle()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "call":
        item.call_failed = report.failed


@pytest.fixture
def app(request, browser, app_url):
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1)
    context.set_default_timeout(30_000)
    context.add_init_script(RUN_COUNTER_JS)
    page = context.new_page()
    ap = AppPage(page, app_url, request.node.name)
    try:
        yield ap
    finally:
        if getattr(request.node, "call_failed", False):
            try:
                ap.shot("FAILED", full=True)
            except Exception:  # noqa: BLE001 - the screenshot is a debugging aid only
                pass
        context.close()
