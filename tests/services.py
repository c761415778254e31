"""Real servers for tests: a redis-server (and the Debian tools the replica tests need), started on
127.0.0.1 and a free port by the test itself and stopped with their process group, also on failure.

A missing tool is a test failure with the command that installs it, never a skip: `./dev.sh test`
installs redis-server and haproxy (as it installs chromium).
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import pytest

from serving.processes import MissingTool, require, stop
from serving.replicas import start_redis


def require_tool(binary: str) -> str:
    try:
        return require(binary)
    except MissingTool as e:
        pytest.fail(str(e), pytrace=False)


@contextmanager
def redis_server(server: bool = False):
    """A private redis-server (`serving.replicas.start_redis`: passwords, a worker user, a memory ceiling, an
    append-only file): yields its redis:// URL for the app, or with `server` the `RedisServer` itself."""
    require_tool("redis-server")
    workdir = Path(tempfile.mkdtemp(prefix="glass-redis-"))
    redis = start_redis(workdir)
    try:
        yield redis if server else redis.url
    finally:
        stop(redis.child)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def postgres_server():
    """A private PostgreSQL server (`serving.postgres.start_postgres`: Debian's postgresql on 127.0.0.1 and a free
    port, a temporary data folder, run as the postgres user when the tests run as root): yields the server."""
    from serving.postgres import pg_bin, start_postgres

    try:
        pg_bin("postgres")
    except MissingTool as e:
        pytest.fail(str(e), pytrace=False)
    workdir = Path(tempfile.mkdtemp(prefix="glass-pg-"))
    server = start_postgres(workdir)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def wait_for(
    cond: Callable[[], object],
    timeout: float = 60.0,
    what: str | Callable[[], str] = "condition",
    every: float = 0.05,
    tolerate: bool = False,
    sleep: Callable[[float], object] = time.sleep,
) -> float:
    """Wait until `cond()` is true (a part of the system on its way), polling every `every` seconds; the seconds it
    took. Past `timeout`, fail the test naming `what` (a callable: called then, to say what the test saw).
    `tolerate`: an exception from `cond` counts as "not yet" (a process on its way back up). `sleep`: how to pass
    the time between two polls (a browser page's `wait_for_timeout`, which keeps its driver's events flowing)."""
    start = time.monotonic()
    while True:
        if _holds(cond, tolerate):
            return time.monotonic() - start
        assert time.monotonic() - start < timeout, _timed_out(what)
        sleep(every)


async def until(
    cond: Callable[[], object],
    timeout: float = 60.0,
    what: str | Callable[[], str] = "condition",
    every: float = 0.05,
    tolerate: bool = False,
) -> float:
    """`wait_for` on an event loop: the same polls, bound and failure, sleeping with `asyncio.sleep` so the loop's
    other tasks (the part the test waits for) run in between."""
    start = time.monotonic()
    while True:
        if _holds(cond, tolerate):
            return time.monotonic() - start
        assert time.monotonic() - start < timeout, _timed_out(what)
        await asyncio.sleep(every)


def _holds(cond: Callable[[], object], tolerate: bool) -> bool:
    try:
        return bool(cond())
    except Exception:  # noqa: BLE001 - only with tolerate: a part on its way back up
        if not tolerate:
            raise
        return False


def _timed_out(what: str | Callable[[], str]) -> str:
    return f"timed out waiting for {what() if callable(what) else what}"


class Clock:
    """A clock the test moves by hand (`clock.t += 2.0`), for a `clock=` argument (the memory class store, the
    ledger, the study store): expiry and windows run on it, exact to their boundaries, with no sleep and nothing
    a busy machine can shift."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
