"""Driving the app in Debian's Chromium with Playwright: launch, wait for a script run, screenshots.

Shared by the browser tests (tests/browser/), the screenshot script (assets/make_screenshots.py) and the
browser benchmarks (bench/). The app itself is started by `serving.processes.start_app`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
APP_SELECTOR = '[data-testid="stApp"]'
IDLE_SELECTOR = '[data-testid="stApp"][data-test-script-state="notRunning"]'
EXCEPTION_SELECTOR = '[data-testid="stException"]'


def require_chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(
            f"{CHROMIUM} is missing: browser tests need Debian's chromium. "
            "`./dev.sh test` installs it (or: apt-get update && apt-get install -y chromium)."
        )
    return CHROMIUM


def launch_chromium(playwright):
    """Debian's chromium through Playwright (Playwright's own browser download does not work here)."""
    return playwright.chromium.launch(executable_path=require_chromium(), args=CHROMIUM_ARGS)


# Installed in every page (context.add_init_script): counts the script runs the browser sees, so that
# `wait_idle` can tell "the run my action triggered has finished" from "no run has started yet".
RUN_COUNTER_JS = """
window.__glassRuns = 0;
new MutationObserver((records) => {
  for (const r of records) {
    const v = r.target.getAttribute('data-test-script-state');
    if (v === 'running' || v === 'rerunRequested') window.__glassRuns += 1;
  }
}).observe(document, {subtree: true, attributes: true,
                        attributeFilter: ['data-test-script-state']});
"""


def run_count(page) -> int:
    """How many script runs this page has started so far (needs RUN_COUNTER_JS installed)."""
    return int(page.evaluate("window.__glassRuns ?? -1"))


def wait_idle(page, since: int | None = None, timeout: float = 30_000, start_timeout: float = 1_500) -> None:
    """Wait until the script run triggered by the last action has finished; assert no exception box.

    The run may not have started yet when this is called. With `since` (a `run_count` taken before
    the action) wait until a run has started after it; without, give the script `start_timeout` ms
    to switch to "running". Either way, if nothing starts in time, carry on (the action may not need
    a run), then wait for "notRunning". No fixed sleeps.
    """
    page.wait_for_selector(APP_SELECTOR, state="attached", timeout=timeout)
    try:
        if since is not None and since >= 0:
            page.wait_for_function(f"(window.__glassRuns ?? 0) > {since}", timeout=start_timeout)
        else:
            page.wait_for_selector(
                f'{APP_SELECTOR}:not([data-test-script-state="notRunning"])', state="attached", timeout=start_timeout
            )
    except PlaywrightTimeout:
        pass
    page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=timeout)
    assert_no_exception(page)


def act(page, action, timeout: float = 30_000) -> None:
    """Do `action()` (a click, a key press), then wait for the run it triggers to finish."""
    before = run_count(page)
    action()
    wait_idle(page, since=before, timeout=timeout)


def assert_no_exception(page) -> None:
    boxes = page.locator(EXCEPTION_SELECTOR)
    if boxes.count():
        raise AssertionError(f"exception box on {page.url}:\n" + "\n---\n".join(boxes.all_inner_texts()))


# --- Train your own ------------------------------------------------------------------------------------------

STEP_JS = """() => {
    const m = /Step (\\d+) of \\d+/.exec(document.querySelector('[data-testid="stProgress"]')?.innerText || '');
    return m ? Number(m[1]) : 0;
}"""  # the step the training page's progress bar shows (0 before the first)


def start_training(page, settings, timeout: float = 30_000) -> None:
    """From any page of the app: open "Train your own" in the sidebar, type each (label, value) of `settings`
    into its number box (checking that the box took it) and press Start."""
    page.get_by_test_id("stSidebar").get_by_role("link", name="Train your own", exact=True).click()
    page.wait_for_url(re.compile(r"/training"), timeout=timeout)
    page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=timeout)
    main = page.get_by_test_id("stMain")
    for label, value in settings:
        box = main.get_by_role("spinbutton", name=label, exact=True)
        box.fill(str(value))
        box.press("Enter")
        page.wait_for_timeout(300)
        page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=timeout)
        assert box.input_value() == str(value), label
    main.get_by_role("button", name=re.compile("Start")).click()


def replica_cookie(ctx) -> str | None:
    """The app process the proxy sends this browser context to (HAProxy's sticky cookie), None before the first."""
    return next((c["value"] for c in ctx.cookies() if c["name"] == "GLASS_REPLICA"), None)


RENDERED_JS = """() => !document.querySelector('[data-testid="stSkeleton"]')
    && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')].every(c => c.querySelector('.main-svg'))"""


def wait_rendered(page, timeout: float = 30_000) -> None:
    """No placeholder skeletons left and every plotly chart drawn (charts and tables load lazily,
    when they come into view)."""
    page.wait_for_function(RENDERED_JS, timeout=timeout)


def content_height(page) -> int:
    """Height of the app's content in px. Streamlit scrolls its main container, not the document, and
    both the main container and the sidebar are at least as tall as the viewport: measure the bottom of
    their content instead."""
    return int(
        page.evaluate("""() => {
        const bottom = (sel) => {
            const el = document.querySelector(sel);
            if (!el) return 0;
            const scroller = el.closest('[data-testid="stMain"], [data-testid="stSidebarContent"]');
            return el.getBoundingClientRect().bottom + (scroller ? scroller.scrollTop : 0);
        };
        return Math.ceil(Math.max(bottom('[data-testid="stMainBlockContainer"]'),
                                  bottom('[data-testid="stSidebarUserContent"]'),
                                  bottom('[data-testid="stSidebarNav"]')));
    }""")
    )


def screenshot_full(page, path: str | Path | None = None, max_height: int = 6000) -> bytes:
    """The whole page, top to bottom (up to `max_height` px), as PNG bytes (also written to `path`).

    Playwright's `full_page=True` only sees the viewport (see `content_height`): grow the viewport to
    the content's height instead, let the newly visible charts draw, shoot, and restore the viewport.
    """
    size = page.viewport_size
    page.set_viewport_size(
        {"width": size["width"], "height": min(max(content_height(page), size["height"]), max_height)}
    )
    try:
        try:
            wait_rendered(page, timeout=10_000)
        except PlaywrightTimeout:
            pass  # a debugging picture with a placeholder is still worth keeping
        return page.screenshot(path=str(path) if path else None, full_page=False)
    finally:
        page.set_viewport_size(size)
