"""Start the app with `streamlit run` on a free loopback port, and stop it without leaving processes.

Shared by the browser tests (tests/browser/conftest.py), the screenshot script
(assets/make_screenshots.py) and the page benchmark (bench/bench_pages.py).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from playwright.sync_api import TimeoutError as PlaywrightTimeout

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
APP_SELECTOR = '[data-testid="stApp"]'
IDLE_SELECTOR = '[data-testid="stApp"][data-test-script-state="notRunning"]'
EXCEPTION_SELECTOR = '[data-testid="stException"]'


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    log: Path
    started: float  # time.perf_counter() just before the process was spawned

    def stop(self) -> None:
        stop_process_group(self.proc)

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def stop_process_group(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM the process group started for `proc`, then SIGKILL whatever is left."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
    try:  # the group may outlive its leader (a child that ignored SIGTERM)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    if proc.poll() is None:
        proc.wait(timeout=timeout)


def launch_command() -> list[str]:
    """How the README starts the app: the standard `streamlit run app.py`."""
    return [sys.executable, "-m", "streamlit", "run", "app.py"]


def start_server(log: Path | None = None, timeout: float = 60, extra_env: dict[str, str] | None = None,
                 root: Path | None = None) -> Server:
    """Start the app from the repo root (or another checkout's `root`, e.g. a git worktree of an older commit
    for a before/after benchmark) on a free loopback port; return once /_stcore/health answers "ok"."""
    port = free_port()
    log = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"glass-streamlit-{port}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    cmd = [*launch_command(), "--server.headless", "true", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false", "--server.address", "127.0.0.1", "--server.port", str(port)]
    env = {**os.environ, "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "STREAMLIT_SERVER_HEADLESS": "true",
           **(extra_env or {})}
    out = open(log, "wb")  # noqa: SIM115 - the child owns it; closed below
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(cmd, cwd=root or ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    finally:
        out.close()
    server = Server(proc, f"http://127.0.0.1:{port}", log, started)
    try:
        wait_healthy(server, timeout)
    except BaseException:
        server.stop()
        raise
    return server


def wait_healthy(server: Server, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {server.proc.returncode}:\n{server.log_tail()}")
        try:
            with urllib.request.urlopen(server.url + "/_stcore/health", timeout=2) as r:
                if r.status == 200 and r.read().strip() == b"ok":
                    return
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            pass
        time.sleep(0.1)
    raise RuntimeError(f"streamlit did not answer /_stcore/health within {timeout:.0f} s:\n{server.log_tail()}")


@contextmanager
def running_server(log: Path | None = None, timeout: float = 60, extra_env: dict[str, str] | None = None,
                   root: Path | None = None):
    server = start_server(log, timeout, extra_env, root)
    try:
        yield server
    finally:
        server.stop()


def require_chromium() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        raise RuntimeError(f"{CHROMIUM} is missing: browser tests need Debian's chromium. "
                           "`./dev.sh test` installs it (or: apt-get update && apt-get install -y chromium).")
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
            page.wait_for_selector(f'{APP_SELECTOR}:not([data-test-script-state="notRunning"])', state="attached",
                                   timeout=start_timeout)
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
    return int(page.evaluate("""() => {
        const bottom = (sel) => {
            const el = document.querySelector(sel);
            if (!el) return 0;
            const scroller = el.closest('[data-testid="stMain"], [data-testid="stSidebarContent"]');
            return el.getBoundingClientRect().bottom + (scroller ? scroller.scrollTop : 0);
        };
        return Math.ceil(Math.max(bottom('[data-testid="stMainBlockContainer"]'),
                                  bottom('[data-testid="stSidebarUserContent"]'),
                                  bottom('[data-testid="stSidebarNav"]')));
    }"""))


def screenshot_full(page, path: str | Path | None = None, max_height: int = 6000) -> bytes:
    """The whole page, top to bottom (up to `max_height` px), as PNG bytes (also written to `path`).

    Playwright's `full_page=True` only sees the viewport (see `content_height`): grow the viewport to
    the content's height instead, let the newly visible charts draw, shoot, and restore the viewport.
    """
    size = page.viewport_size
    page.set_viewport_size({"width": size["width"],
                            "height": min(max(content_height(page), size["height"]), max_height)})
    try:
        try:
            wait_rendered(page, timeout=10_000)
        except PlaywrightTimeout:
            pass  # a debugging picture with a placeholder is still worth keeping
        return page.screenshot(path=str(path) if path else None, full_page=False)
    finally:
        page.set_viewport_size(size)
