"""Several app processes behind HAProxy on one machine: `./dev.sh serve --replicas N`.

    python -m serving.replicas --replicas 2 --port 8500 [--host 127.0.0.1] [--redis-url redis://...]

Starts, each in its own process group, supervised (a part that exits is started again: on the same
port and settings, Redis with its data; backing off when it keeps dying), and all stopped together
(Ctrl-C, SIGTERM, or this process dying: the children get SIGTERM from the kernel):

- a `redis-server` on 127.0.0.1 and a free port (`serving.redis_conf`: random passwords for the apps and
  for the queue workers' own user, a memory ceiling, an append-only file in the log folder, so that a
  restarted Redis brings the classes and the queue back), unless a Redis is given (--redis-url or
  GLASS_REDIS_URL; the workers then use GLASS_REDIS_WORKER_URL, else the same URL);
- N × `streamlit run app.py` on 127.0.0.1 and free ports, sharing one `server.cookieSecret` (so the XSRF
  cookie one process set is accepted by all) and the Redis URL (GLASS_REDIS_URL: the classes in
  classroom/, the training queue in training/redis_queue.py);
- W training queue workers (`python -m training.queue_worker`, --workers, default GLASS_MAX_TRAINING_JOBS
  or the machine's cores): the server-wide cap on jobs training at once. Workers on other machines
  join with the same command and GLASS_REDIS_URL; --workers 0 leaves the training to them;
- HAProxy (deploy/haproxy.cfg.in, rendered into a temporary folder) on --host:--port: sticky sessions
  by cookie, websocket upgrades, health checks, redispatch to a live process.

The app processes only ever listen on 127.0.0.1; --host 0.0.0.0 exposes the proxy alone (put TLS in
front, or in HAProxy: docs/operators.md, "Serving a class"). `Cluster` is the same as a context manager, for
tests (tests/test_replicas.py).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from serving.processes import (
    ROOT,
    Child,
    MissingTool,
    app_command,
    free_port,
    healthy,
    require,
    spawn,
    stop,
    wait_until,
)
from serving.redis_conf import DEFAULT_MAXMEMORY, WORKER_USER, redis_conf

TEMPLATE = ROOT / "deploy" / "haproxy.cfg.in"
SUPERVISE_SECONDS = 0.5  # how often the supervisor looks at its parts
RESTART_BACKOFF = (1.0, 30.0)  # a part that keeps dying waits 1, 2, 4 ... 30 s between restarts
BACKOFF_RESET_SECONDS = 60.0  # a part up this long starts again at the first back-off


@dataclass
class RedisServer:
    """A private redis-server (`serving.redis_conf`): its process, and what is needed to start it again on the
    same port with the same passwords and data (its append-only file in `data_dir`)."""

    child: Child | None  # (None until `start`)
    port: int
    password: str
    worker_password: str
    data_dir: Path
    maxmemory: str = DEFAULT_MAXMEMORY

    @property
    def url(self) -> str:
        """For the app processes (the default user)."""
        return f"redis://:{self.password}@127.0.0.1:{self.port}/0"

    @property
    def worker_url(self) -> str:
        """For queue workers: a user that can reach the training queue's keys only."""
        return f"redis://{WORKER_USER}:{self.worker_password}@127.0.0.1:{self.port}/0"

    def ping(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
            s.sendall(f"AUTH {self.password}\r\nPING\r\n".encode())
            data = b""
            while data.count(b"\r\n") < 2:
                chunk = s.recv(256)
                if not chunk:
                    return False
                data += chunk
            return data.endswith(b"+PONG\r\n")

    def start(self, timeout: float = 15) -> RedisServer:
        """(Re)start the process: the config goes in on standard input (`redis-server -`), so no password is
        ever on a command line; its append-only file brings the classes and the queue back."""
        conf = redis_conf(
            self.password, self.worker_password, self.port, maxmemory=self.maxmemory, data_dir=self.data_dir
        )
        self.child = spawn(
            "redis-server", [require("redis-server"), "-"], self.data_dir / "redis.log", stdin_text=conf, port=self.port
        )
        try:
            wait_until(self.ping, self.child, timeout, "redis-server")
        except BaseException:
            stop(self.child)
            raise
        return self


def start_redis(workdir: Path, timeout: float = 15, maxmemory: str | None = None) -> RedisServer:
    """A private redis-server on 127.0.0.1 and a free port, with random passwords for the app and for the
    queue workers, a memory ceiling and an append-only file in `workdir`."""
    workdir.mkdir(parents=True, exist_ok=True)
    server = RedisServer(
        None,
        free_port(),
        secrets.token_hex(16),
        secrets.token_hex(16),
        workdir,
        maxmemory or os.environ.get("GLASS_REDIS_MAXMEMORY", DEFAULT_MAXMEMORY),
    )
    return server.start(timeout)


def render_haproxy(bind: str, port: int, servers: list[tuple[str, int]]) -> str:
    lines = "\n".join(f"    server {name} 127.0.0.1:{p} cookie {name}" for name, p in servers)
    return string.Template(TEMPLATE.read_text()).substitute(bind=bind, port=port, servers=lines)


@dataclass
class Part:
    """One supervised part of the cluster, and how to start it (again)."""

    name: str
    launch: Callable[[], Child]
    child: Child | None = None
    restarts: int = 0
    next_try: float = 0.0  # monotonic time of the next restart attempt
    backoff: float = RESTART_BACKOFF[0]
    up_since: float = 0.0


class Cluster:
    """N app processes + training queue workers + HAProxy (+ redis-server): `with Cluster(2) as c: c.url`.

    With `supervise`, a thread watches every part and starts again any that exits (on the same port, with
    the same settings; Redis with its data), backing off 1, 2, 4 ... 30 s when a part keeps dying: no dead
    part takes the others down. `python -m serving.replicas` always supervises.
    """

    def __init__(
        self,
        replicas: int = 2,
        port: int = 0,
        host: str = "127.0.0.1",
        redis_url: str | None = None,
        log_dir: Path | None = None,
        app_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        timeout: float = 90,
        script: str = "app.py",
        workers: int | None = None,
        supervise: bool = False,
    ):
        if not 1 <= replicas <= 16:
            raise ValueError("replicas: 1 to 16")
        self.replicas, self.host, self.timeout = replicas, host, timeout
        self.port = port or free_port(host if host != "0.0.0.0" else "127.0.0.1")
        self.redis_url = redis_url
        self.app_args, self.extra_env, self.script = tuple(app_args), dict(env or {}), script
        self._own_dir = log_dir is None
        self.dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="glass-serve-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.redis: RedisServer | None = None  # the private one, when no Redis was given
        self.worker_url = os.environ.get("GLASS_REDIS_WORKER_URL") or redis_url
        env_jobs = os.environ.get("GLASS_MAX_TRAINING_JOBS", "")
        self.n_workers = (
            workers if workers is not None else (int(env_jobs) if env_jobs.isdigit() else max(1, os.cpu_count() or 1))
        )
        self.parts: dict[str, Part] = {}
        self.events: list[str] = []  # what the supervisor did, one line each
        self._supervise = supervise
        self._stopping = threading.Event()
        self._supervisor: threading.Thread | None = None

    # -- the parts -------------------------------------------------------------------------------------
    @property
    def apps(self) -> list[Child]:
        return [cast(Child, p.child) for n, p in self.parts.items() if n.startswith("app")]  # (launched by `_add`)

    @property
    def workers(self) -> list[Child]:
        return [cast(Child, p.child) for n, p in self.parts.items() if n.startswith("worker")]  # (as `apps`)

    @property
    def proxy(self) -> Child | None:
        part = self.parts.get("haproxy")
        return part.child if part else None

    @property
    def url(self) -> str:
        return f"http://{'127.0.0.1' if self.host == '0.0.0.0' else self.host}:{self.port}"

    def app_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.apps[i].port}"

    def _add(self, name: str, launch: Callable[[], Child]) -> Child:
        part = self.parts[name] = Part(name, launch)
        part.child, part.up_since = launch(), time.monotonic()
        return part.child

    def start(self) -> Cluster:
        try:
            haproxy = require("haproxy")
            if not self.redis_url:
                self.redis = start_redis(self.dir / "redis")
                self.redis_url, self.worker_url = self.redis.url, self.redis.worker_url
                self.parts["redis"] = Part("redis", self._restart_redis, self.redis.child, up_since=time.monotonic())
            cookie_secret = os.environ.get("STREAMLIT_SERVER_COOKIE_SECRET") or secrets.token_hex(32)
            for i in range(1, self.replicas + 1):
                port = free_port()
                env = {
                    **os.environ,
                    "STREAMLIT_SERVER_COOKIE_SECRET": cookie_secret,
                    "GLASS_REDIS_URL": self.redis_url,
                    "GLASS_REPLICA": f"app{i}",
                    "OMP_NUM_THREADS": "1",
                    "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
                    "STREAMLIT_SERVER_HEADLESS": "true",
                    **self.extra_env,
                }

                def launch_app(i: int = i, port: int = port, env: dict[str, str] = env) -> Child:
                    return spawn(
                        f"app{i}",
                        app_command(port, self.app_args, self.script),
                        self.dir / f"app{i}.log",
                        env=env,
                        port=port,
                    )

                self._add(f"app{i}", launch_app)
            for i in range(1, self.n_workers + 1):
                # (worker_url: the given URL's, or the private Redis's)
                worker_env = {**os.environ, "GLASS_REDIS_URL": cast(str, self.worker_url), **self.extra_env}

                def launch_worker(i: int = i, env: dict[str, str] = worker_env) -> Child:  # a new name each start
                    return spawn(
                        f"worker{i}",
                        [sys.executable, "-m", "training.queue_worker"],  # (host-pid)
                        self.dir / f"worker{i}.log",
                        env=env,
                    )

                self._add(f"worker{i}", launch_worker)
            for i, app in enumerate(self.apps):

                def app_healthy(i: int = i) -> bool:
                    return healthy(self.app_url(i))

                wait_until(app_healthy, app, self.timeout, app.name)
            cfg = self.dir / "haproxy.cfg"
            cfg.write_text(render_haproxy(self.host, self.port, [(a.name, a.port) for a in self.apps]))
            check = subprocess.run([haproxy, "-c", "-q", "-f", str(cfg)], capture_output=True, text=True)
            if check.returncode:
                raise RuntimeError(f"haproxy rejected {cfg}:\n{check.stdout}{check.stderr}")
            proxy = self._add(
                "haproxy",
                lambda: spawn("haproxy", [haproxy, "-db", "-f", str(cfg)], self.dir / "haproxy.log", port=self.port),
            )
            wait_until(lambda: healthy(self.url), proxy, 20, "haproxy")
        except BaseException:
            self.stop()
            raise
        if self._supervise:
            self._supervisor = threading.Thread(target=self._watch, name="supervisor", daemon=True)
            self._supervisor.start()
        return self

    # -- supervision -----------------------------------------------------------------------------------
    def supervise_once(self, now: float | None = None) -> list[str]:
        """Start again every part that has exited (when its back-off allows); returns what it did."""
        now = time.monotonic() if now is None else now
        done = []
        for part in list(self.parts.values()):
            if self._stopping.is_set():
                break
            child = part.child
            if child is not None and child.alive():
                if now - part.up_since > BACKOFF_RESET_SECONDS:
                    part.backoff = RESTART_BACKOFF[0]  # it stayed up: the next failure is news again
                continue
            if now < part.next_try:
                continue
            code = child.proc.returncode if child is not None else None
            line = (
                f"{part.name} exited (code {code}); starting it again (restart {part.restarts + 1}, "
                f"next back-off {part.backoff:.0f} s)"
            )
            try:
                part.child = part.launch()
                part.restarts += 1
                part.up_since = now
            except Exception as e:  # noqa: BLE001 - a part that cannot start yet: try again after its back-off
                line = f"{part.name} could not start again ({e}); next try in {part.backoff:.0f} s"
            part.next_try = now + part.backoff
            part.backoff = min(part.backoff * 2, RESTART_BACKOFF[1])
            self.events.append(line)
            print(line + (f"\n{child.log_tail(10)}" if child is not None else ""), file=sys.stderr, flush=True)
            done.append(line)
        return done

    def _restart_redis(self) -> Child:
        """The private redis-server started again (the "redis" part's launch)."""
        assert self.redis is not None  # (the part exists with a private Redis only)
        child = self.redis.start().child
        assert child is not None  # (`start` spawned it)
        return child

    def _watch(self) -> None:
        while not self._stopping.wait(SUPERVISE_SECONDS):
            self.supervise_once()

    def kill_app(self, i: int) -> None:
        """SIGKILL one app process (tests: a process that dies)."""
        stop(self.apps[i], sig=signal.SIGKILL)

    def kill(self, name: str) -> None:
        """SIGKILL one part by name: "redis", "haproxy", "app1", "worker1" (tests: a part that dies)."""
        stop(cast(Child, self.parts[name].child), sig=signal.SIGKILL)  # (launched by `_add`, or started)

    def stop(self) -> None:
        self._stopping.set()
        if self._supervisor is not None:
            self._supervisor.join(30)
        for part in [
            self.parts.get("haproxy"),
            *(p for n, p in self.parts.items() if n not in ("haproxy", "redis")),
            self.parts.get("redis"),
        ]:
            if part is not None and part.child is not None:
                with contextlib.suppress(Exception):
                    stop(part.child)
        if self.redis is not None and "redis" not in self.parts:
            with contextlib.suppress(Exception):
                stop(cast(Child, self.redis.child))  # (started by `start_redis`)
        if self._own_dir and os.environ.get("GLASS_KEEP_LOGS", "") in ("", "0"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self, n: int = 30) -> str:
        return "\n".join(f"== {p.name} ({p.child.log})\n{p.child.log_tail(n)}" for p in self.parts.values() if p.child)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m serving.replicas", description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=2, help="app processes (default 2)")
    ap.add_argument("--port", type=int, default=8500, help="the proxy's port (default 8500)")
    ap.add_argument("--host", default="127.0.0.1", help="the proxy's address (default 127.0.0.1: this machine only)")
    ap.add_argument(
        "--redis-url",
        default=os.environ.get("GLASS_REDIS_URL", ""),
        help="a running Redis (default GLASS_REDIS_URL; none: start a private redis-server)",
    )
    ap.add_argument(
        "--workers",
        type=int,
        default=None,
        help="training queue workers (default GLASS_MAX_TRAINING_JOBS, or the cores; 0: none here)",
    )
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the logs, the HAProxy config and Redis' data here")
    ap.add_argument("--script", default="app.py", help="the Streamlit script each process runs (default app.py)")
    args = ap.parse_args(argv)

    stopping = threading.Event()
    signal.signal(signal.SIGINT, lambda *a: stopping.set())
    signal.signal(signal.SIGTERM, lambda *a: stopping.set())
    cluster = Cluster(
        args.replicas,
        args.port,
        args.host,
        args.redis_url or None,
        args.log_dir,
        script=args.script,
        workers=args.workers,
        supervise=True,
    )
    print(
        f"starting {args.replicas} app processes, HAProxy{'' if args.redis_url else ' and redis-server'} "
        f"(logs: {cluster.dir})",
        flush=True,
    )
    try:
        cluster.start()
    except (MissingTool, RuntimeError, OSError) as e:
        print(f"replicas: {e}", file=sys.stderr)
        return 1
    try:
        print(
            f"Glass Transformer: {cluster.url}  ({', '.join(f'{a.name} :{a.port}' for a in cluster.apps)}; "
            "a part that exits is started again; Ctrl-C stops everything)",
            flush=True,
        )
        stopping.wait()
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
