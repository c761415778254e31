"""Real servers for tests: a redis-server (and the Debian tools the replica tests need), started on
127.0.0.1 and a free port by the test itself and stopped with their process group, also on failure.

A missing tool is a test failure with the command that installs it, never a skip: `./dev.sh test`
installs redis-server and haproxy (as it installs chromium).
"""

from __future__ import annotations

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
    what: str = "condition",
    every: float = 0.05,
    tolerate: bool = False,
) -> float:
    """Wait until `cond()` is true (a part of the system on its way), polling every `every` seconds; the seconds it
    took. Past `timeout`, fail the test naming `what`. `tolerate`: an exception from `cond` counts as "not yet" (a
    process on its way back up)."""
    start = time.monotonic()
    while True:
        try:
            if cond():
                return time.monotonic() - start
        except Exception:  # noqa: BLE001 - only with tolerate: a part on its way back up
            if not tolerate:
                raise
        assert time.monotonic() - start < timeout, f"timed out waiting for {what}"
        time.sleep(every)


class Clock:
    """A clock the test moves by hand (`clock.t += 2.0`), for a `clock=` argument (the memory class store, the
    ledger, the study store): expiry and windows run on it, exact to their boundaries, with no sleep and nothing
    a busy machine can shift."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t
