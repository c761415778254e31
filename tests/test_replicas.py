"""Several app processes behind HAProxy, end to end with real processes (serving/replicas.py): two
`streamlit run app.py`, HAProxy and a redis-server, all on 127.0.0.1 and free ports, all stopped at the
end (process groups), also when a test fails.

Checks: HTTP and Streamlit's websocket work through the proxy; a client keeps to one process (the
proxy's cookie); after one process is killed, a client that was on it is served by the other at once
(a page, then a new websocket session), new clients too, and a Chromium tab that was open on it
reconnects to the other by itself. Two processes of a tiny script share a class through Redis and see
the client's real address; `python -m serving.replicas` starts and stops everything.

The tests of this module share one cluster and run in order (the last one kills a process).
"""

from __future__ import annotations

import asyncio
import http.client
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from http.cookies import SimpleCookie
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright
from streamlit.proto.ClientState_pb2 import ClientState
from websockets.asyncio.client import connect

from classroom import RedisClassStore
from serving.processes import Child, free_port, stop
from serving.replicas import Cluster, render_haproxy
from tests.services import require_tool, wait_for
from tools.browser import IDLE_SELECTOR, assert_no_exception, launch_chromium
from tools.ws_client import StreamlitSession

COOKIE = "GLASS_REPLICA"
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"


@pytest.fixture(scope="module")
def cluster():
    require_tool("haproxy")
    require_tool("redis-server")
    c = Cluster(replicas=2, timeout=90, workers=0)  # no training here: no queue workers
    try:
        c.start()
    except BaseException:
        c.stop()
        raise
    try:
        yield c
    finally:
        logs = c.logs(40)
        c.stop()
        ARTIFACTS.mkdir(exist_ok=True)
        (ARTIFACTS / "replicas.log").write_text(logs)  # the processes' last lines, for a failing run


def get(cluster: Cluster, path: str = "/", cookie: str | None = None) -> tuple[int, str | None, str | None, bytes]:
    """GET through the proxy: (status, the process that answered, the GLASS_REPLICA cookie set, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", cluster.port, timeout=10)
    try:
        conn.request("GET", path, headers={"Cookie": f"{COOKIE}={cookie}"} if cookie else {})
        r = conn.getresponse()
        body = r.read()
        return r.status, r.getheader("X-Glass-Replica"), set_cookie(r.getheaders()), body
    finally:
        conn.close()


def set_cookie(headers) -> str | None:
    for name, value in headers:
        if name.lower() == "set-cookie":
            c = SimpleCookie()
            c.load(value)
            if COOKIE in c:
                return c[COOKIE].value
    return None


class CookieSession(StreamlitSession):
    """tools/ws_client.py's browserless session, sending a cookie with the websocket upgrade (as a browser
    sends the proxy's cookie) and noting which process the proxy chose."""

    def __init__(self, base_url: str, cookie: str | None, timeout: float = 60, headers: dict | None = None):
        super().__init__(base_url, timeout)
        self.cookie = cookie
        self.headers = {**(headers or {}), **({"Cookie": f"{COOKIE}={cookie}"} if cookie else {})}
        self.replica: str | None = None
        self.new_cookie: str | None = None

    async def connect(self, page: str = "", query: str = "") -> float:
        t = time.perf_counter()
        self._ws = await connect(
            self.ws_url,
            subprotocols=["streamlit", "PLACEHOLDER_AUTH_TOKEN"],
            additional_headers=self.headers or None,
            max_size=None,
            ping_interval=None,
            open_timeout=self.timeout,
        )
        headers = self._ws.response.headers
        self.replica = headers.get("X-Glass-Replica")
        self.new_cookie = set_cookie(headers.raw_items())
        self._reader = asyncio.create_task(self._read())
        self.query_string = query
        await self._rerun(ClientState(page_script_hash="", page_name=page.strip("/")), t)
        return time.perf_counter() - t


async def open_page(cluster: Cluster, cookie: str | None, sentence: str | None = None) -> CookieSession:
    s = CookieSession(cluster.url, cookie)
    await s.connect("overview")
    assert s.exceptions() == []
    assert s.text(), "the page drew nothing"
    if sentence is not None:
        await s.type_sentence(sentence)  # a second run in the same session: the same process
        assert s.exceptions() == [] and s.widget_value("Your sentence") == sentence
    return s


def test_http_through_the_proxy_sets_a_sticky_cookie(cluster):
    status, replica, cookie, body = get(cluster)
    assert status == 200 and b"<html" in body.lower()
    assert replica in ("app1", "app2") and cookie == replica
    for _ in range(10):  # with the cookie: always the same process, and no new cookie
        status, again, new_cookie, _ = get(cluster, "/_stcore/health", cookie)
        assert (status, again, new_cookie) == (200, replica, None)
    for name in ("app1", "app2"):  # each process answers its own cookie
        assert get(cluster, "/_stcore/health", name)[:2] == (200, name)
    # new clients are spread over the processes
    assert {get(cluster)[1] for _ in range(8)} == {"app1", "app2"}


def test_websocket_session_through_the_proxy_sticks(cluster):
    async def run():
        for name in ("app1", "app2"):
            s = await open_page(cluster, name, sentence=f"i am a student of {name}"[:40])
            try:
                assert s.replica == name and s.new_cookie is None
            finally:
                await s.close()
        s = await open_page(cluster, None)  # a first visit: the proxy picks a process and says so
        try:
            assert s.replica in ("app1", "app2") and s.new_cookie == s.replica
        finally:
            await s.close()

    asyncio.run(asyncio.wait_for(run(), 60))


def test_replicas_share_one_cookie_secret_and_the_redis(cluster):
    def env(pid: int) -> dict[str, str]:
        raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        return dict(item.decode().split("=", 1) for item in raw if b"=" in item)

    e1, e2 = (env(a.proc.pid) for a in cluster.apps)
    assert e1["STREAMLIT_SERVER_COOKIE_SECRET"] == e2["STREAMLIT_SERVER_COOKIE_SECRET"]
    assert len(e1["STREAMLIT_SERVER_COOKIE_SECRET"]) >= 32
    assert e1["GLASS_REDIS_URL"] == e2["GLASS_REDIS_URL"] == cluster.redis_url
    store = RedisClassStore(cluster.redis_url)
    try:
        code, _ = store.create({"page": "overview"})
        assert store.snapshot(code).state == {"page": "overview"}
    finally:
        store.close()


@pytest.fixture
def probe():
    """Two processes of tests/replica_probe_app.py (no torch: starts in seconds) behind the proxy."""
    require_tool("haproxy")
    with Cluster(replicas=2, timeout=60, script="tests/replica_probe_app.py", workers=0) as c:
        yield c


def test_processes_share_classes_and_see_the_real_client_address(probe):
    """A class created in one process is joined in the other (GLASS_REDIS_URL reaches both); the client
    address a page sees is the one the proxy saw, whatever X-Forwarded-For the client sends."""

    async def run():
        teacher = CookieSession(probe.url, "app1")
        await teacher.connect("", "create=1")
        text = teacher.text()
        assert "replica=app1" in text and "store=RedisClassStore" in text, text
        code = re.search(r"code=(\w+)", text)[1]
        student = CookieSession(probe.url, "app2", headers={"X-Forwarded-For": "203.0.113.66"})
        await student.connect("", f"code={code}")
        text = student.text()
        assert "replica=app2" in text and "sentence=i am a student" in text, text
        assert "ip=None" in text, text  # 127.0.0.1 (the proxy saw this machine), not the forged address
        # the header matters: straight to a process from 127.0.0.1 (trusted as a proxy) it is believed,
        # which is why the app processes listen on 127.0.0.1 only and the proxy overwrites the header
        direct = CookieSession(probe.app_url(1), None, headers={"X-Forwarded-For": "203.0.113.66"})
        await direct.connect("", "")
        assert "ip=203.0.113.66" in direct.text()
        for s in (teacher, student, direct):
            await s.close()

    asyncio.run(asyncio.wait_for(run(), 30))


def test_a_process_busy_for_four_seconds_is_not_marked_down(cluster):
    """A process that answers its health checks late (busy: its warm-up on a loaded machine, a class's thirty
    redraws) stays up: HAProxy waits `timeout check` (5 s) for the answer. With the default, `inter`'s 1 s, two
    late answers marked it down, and every session that began meanwhile went to the other process (a teacher
    sent to app1 found itself on app2: the failover test in test_classroom_servers.py lost its teacher with app2)."""
    app = cluster.apps[0]
    log = cluster.dir / "haproxy.log"
    down = log.read_text().count(f"{app.name} is DOWN")
    os.kill(app.proc.pid, signal.SIGSTOP)  # (busy, as far as anyone outside can tell: the port still accepts)
    try:
        time.sleep(4.0)
    finally:
        os.kill(app.proc.pid, signal.SIGCONT)
    time.sleep(1.5)  # (the check under way has its answer)
    assert log.read_text().count(f"{app.name} is DOWN") == down, log.read_text()[-3000:]
    assert get(cluster, "/", app.name)[1] == app.name


def test_a_killed_process_sends_its_clients_to_the_other(cluster):
    async def run():
        victim, survivor = "app1", "app2"
        s = await open_page(cluster, victim)
        assert s.replica == victim
        cluster.kill_app(0)
        t = time.perf_counter()
        # the open websocket dies with its process; the browser's next request (the page again, or a
        # reconnect) still names the dead process in its cookie: the proxy sends it to the live one
        status, replica, new_cookie, _ = get(cluster, "/", victim)
        first = time.perf_counter() - t
        assert (status, replica, new_cookie) == (200, survivor, survivor)
        s2 = await open_page(cluster, victim, sentence="i am a student")
        try:
            assert s2.replica == survivor and s2.new_cookie == survivor
        finally:
            await s2.close()
            await s.close()
        for _ in range(4):  # new clients only go to the live process
            assert get(cluster)[1] == survivor
        return first

    with sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            # a student's Chromium tab on the process that will die
            ctx = browser.new_context()
            ctx.add_cookies([{"name": COOKIE, "value": "app1", "url": cluster.url}])
            page = ctx.new_page()
            page.goto(cluster.url + "/overview?s=i+am+a+student")
            page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=60_000)
            assert "Source tokens: i am a student" in main_text(page)

            # (in a thread: Playwright's sync API keeps an event loop of its own in this one)
            with ThreadPoolExecutor(1) as pool:
                first = pool.submit(asyncio.run, asyncio.wait_for(run(), 60)).result()
            assert first < 5, f"the first request after the kill took {first:.1f} s"

            # the tab reconnects by itself (Streamlit's frontend retries its websocket): the proxy sends it
            # to the live process and its cookie now names that one; the page is still drawn
            reconnect = wait_for(
                lambda: replica_cookie(ctx) == "app2",
                30,
                lambda: f"the tab to reconnect: cookie {replica_cookie(ctx)}",
                every=0.1,
                sleep=lambda seconds: page.wait_for_timeout(seconds * 1000),  # (the driver's events keep flowing)
            )
            assert_no_exception(page)
            assert "Source tokens: i am a student" in main_text(page)
            page.goto(cluster.url + "/overview?s=she+is+a+student")  # the student goes on, on the live process
            page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=60_000)
            assert_no_exception(page)
            assert "Source tokens: she is a student" in main_text(page)
        finally:
            browser.close()
    print(
        f"first request after the kill: {first * 1000:.0f} ms; the tab's cookie named the live process "
        f"{reconnect:.1f} s after the websocket checks"
    )


def replica_cookie(ctx) -> str | None:
    return next((c["value"] for c in ctx.cookies() if c["name"] == COOKIE), None)


def main_text(page) -> str:
    return page.locator('[data-testid="stMain"]').inner_text()


def test_shipped_proxy_configs_are_valid(tmp_path):
    """HAProxy itself accepts the rendered config of serving/replicas.py and compose.yaml's."""
    haproxy = require_tool("haproxy")
    rendered = tmp_path / "haproxy.cfg"
    rendered.write_text(render_haproxy("127.0.0.1", 8500, [("app1", 8501), ("app2", 8502)]))
    compose = Path(__file__).resolve().parents[1] / "deploy" / "haproxy-compose.cfg"
    for cfg in (rendered, compose):
        r = subprocess.run(
            [haproxy, "-c", "-f", str(cfg)],
            capture_output=True,
            text=True,
            timeout=30,
            env={**os.environ, "GLASS_PROXY_COOKIE_KEY": "test"},
        )
        assert r.returncode == 0, f"{cfg}:\n{r.stdout}{r.stderr}"
    text = rendered.read_text()
    assert "cookie GLASS_REPLICA insert indirect nocache" in text and "option redispatch" in text
    assert "server app2 127.0.0.1:8502 cookie app2" in text and "bind 127.0.0.1:8500" in text
    # without it HAProxy lets the kernel hold each class event of a page's event stream for 200 ms
    for cfg in (rendered, compose):
        backend = cfg.read_text().split("backend streamlit", 1)[1]
        assert "\n    option http-no-delay" in backend, cfg
        assert re.search(r"\n    timeout check 5s", cfg.read_text()), cfg  # (a busy process is not a dead one)


def test_serve_command_starts_and_stops_everything(tmp_path):
    """`python -m serving.replicas` (what `./dev.sh serve` runs): up, answering through the proxy, and on
    SIGTERM every process it started is gone."""
    require_tool("haproxy")
    port = free_port()
    log = tmp_path / "serve.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "serving.replicas",
                "--replicas",
                "2",
                "--workers",
                "1",
                "--port",
                str(port),
                "--script",
                "tests/replica_probe_app.py",
                "--log-dir",
                str(tmp_path / "logs"),
            ],
            cwd=Path(__file__).resolve().parents[1],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def serving() -> bool:
            if b"Glass Transformer: http://127.0.0.1:" in log.read_bytes():
                return True
            assert proc.poll() is None, log.read_text()
            return False

        wait_for(serving, 60, lambda: f"the launcher's address:\n{log.read_text()}", every=0.2)
        children = [int(p) for p in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        assert len(children) == 5  # redis-server, two app processes, a training queue worker, haproxy
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=5) as r:
            assert r.read() == b"ok" and r.headers["X-Glass-Replica"] in ("app1", "app2")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0, log.read_text()
        for pid in children:
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
    finally:
        stop(Child("serve_many", proc, log))
