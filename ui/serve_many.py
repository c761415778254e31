"""Several app processes behind HAProxy on one machine: `./dev.sh serve --replicas N`.

    python -m ui.serve_many --replicas 2 --port 8500 [--host 127.0.0.1] [--redis-url redis://...]

Starts, each in its own process group and all stopped together (Ctrl-C, SIGTERM, or this process
dying: the children get SIGTERM from the kernel):

- a `redis-server` on 127.0.0.1 and a free port, with a random password and no persistence (nothing of
  a class outlives it), unless a Redis is given (--redis-url or GLASS_REDIS_URL);
- N × `streamlit run app.py` on 127.0.0.1 and free ports, sharing one `server.cookieSecret` (so the XSRF
  cookie one process set is accepted by all) and the Redis URL (GLASS_REDIS_URL: the classes in
  ui/classroom/, the training queue in ui/job_queue.py);
- W training queue workers (`python -m ui.queue_worker`, --workers, default GLASS_MAX_TRAINING_JOBS
  or the machine's cores): the server-wide cap on jobs training at once. Workers on other machines
  join with the same command and GLASS_REDIS_URL; --workers 0 leaves the training to them;
- HAProxy (deploy/haproxy.cfg.in, rendered into a temporary folder) on --host:--port: sticky sessions
  by cookie, websocket upgrades, health checks, redispatch to a live process.

The app processes only ever listen on 127.0.0.1; --host 0.0.0.0 exposes the proxy alone (put TLS in
front, or in HAProxy: README "Serving a class"). `Cluster` is the same as a context manager, for
tests (tests/test_replicas.py).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "deploy" / "haproxy.cfg.in"
INSTALL_HINT = {"redis-server": "redis-server", "haproxy": "haproxy"}


class MissingTool(RuntimeError):
    pass


def require(binary: str) -> str:
    """The path of a Debian tool this needs, or MissingTool saying how to install it."""
    path = shutil.which(binary) or next((p for p in (f"/usr/bin/{binary}", f"/usr/sbin/{binary}")
                                         if os.access(p, os.X_OK)), None)
    if path is None:
        raise MissingTool(f"{binary} is missing: `./dev.sh test` and `./dev.sh serve` install it "
                          f"(or: apt-get update && apt-get install -y {INSTALL_HINT.get(binary, binary)}).")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send this process `sig` when the process that started it dies (PR_SET_PDEATHSIG);
    also a `preexec_fn`."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log: Path
    port: int = 0

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def spawn(name: str, cmd: list[str], log: Path, env: dict | None = None, stdin_text: str | None = None,
          port: int = 0) -> Child:
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    try:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                                start_new_session=True, preexec_fn=die_with_parent)
    finally:
        out.close()
    if stdin_text is not None:
        proc.stdin.write(stdin_text.encode())
        proc.stdin.close()
    return Child(name, proc, log, port)


def stop(child: Child, timeout: float = 10, sig: int = signal.SIGTERM) -> None:
    """Signal the child's process group, then SIGKILL whatever is left of it."""
    proc = child.proc
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=timeout)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(timeout=timeout)


def http_get(url: str, timeout: float = 3) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode(errors="replace")


def wait_until(check, child: Child | None, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child is not None and not child.alive():
            raise RuntimeError(f"{child.name} exited with code {child.proc.returncode}:\n{child.log_tail()}")
        with contextlib.suppress(OSError, urllib.error.URLError, ConnectionError, TimeoutError):
            if check():
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready within {timeout:.0f} s" + (f":\n{child.log_tail()}" if child else ""))


def healthy(url: str) -> bool:
    status, body = http_get(url + "/_stcore/health", timeout=2)
    return status == 200 and body.strip() == "ok"


def redis_config(port: int, password: str) -> str:
    """A loopback-only, password-protected Redis that keeps nothing on disk."""
    return (f'bind 127.0.0.1\nport {port}\nprotected-mode yes\nrequirepass "{password}"\nsave ""\n'
            "appendonly no\ndaemonize no\n")


def start_redis(workdir: Path, timeout: float = 15) -> tuple[Child, str]:
    """redis-server on 127.0.0.1 and a free port: (child, URL). The password goes in on standard input
    (`redis-server -`), never on a command line."""
    binary = require("redis-server")
    port, password = free_port(), secrets.token_hex(16)
    child = spawn("redis-server", [binary, "-"], workdir / "redis.log", stdin_text=redis_config(port, password),
                  port=port)

    def ping() -> bool:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            s.sendall(f"AUTH {password}\r\nPING\r\n".encode())
            data = b""
            while data.count(b"\r\n") < 2:
                chunk = s.recv(256)
                if not chunk:
                    return False
                data += chunk
            return data.endswith(b"+PONG\r\n")

    try:
        wait_until(ping, child, timeout, "redis-server")
    except BaseException:
        stop(child)
        raise
    return child, f"redis://:{password}@127.0.0.1:{port}/0"


def render_haproxy(bind: str, port: int, servers: list[tuple[str, int]]) -> str:
    lines = "\n".join(f"    server {name} 127.0.0.1:{p} cookie {name}" for name, p in servers)
    return string.Template(TEMPLATE.read_text()).substitute(bind=bind, port=port, servers=lines)


def app_command(port: int, extra: list[str] | tuple[str, ...] = (), script: str = "app.py") -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", script, "--server.address", "127.0.0.1",
            "--server.port", str(port), "--server.headless", "true", "--server.fileWatcherType", "none",
            "--browser.gatherUsageStats", "false", *extra]


class Cluster:
    """N app processes + HAProxy (+ redis-server): `with Cluster(2) as c: c.url`."""

    def __init__(self, replicas: int = 2, port: int = 0, host: str = "127.0.0.1", redis_url: str | None = None,
                 log_dir: Path | None = None, app_args: tuple[str, ...] = (), env: dict | None = None,
                 timeout: float = 90, script: str = "app.py", workers: int | None = None):
        if not 1 <= replicas <= 16:
            raise ValueError("replicas: 1 to 16")
        self.replicas, self.host, self.timeout = replicas, host, timeout
        self.port = port or free_port(host if host != "0.0.0.0" else "127.0.0.1")
        self.redis_url = redis_url
        self.app_args, self.extra_env, self.script = tuple(app_args), dict(env or {}), script
        self._own_dir = log_dir is None
        self.dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="glass-serve-"))
        self.dir.mkdir(parents=True, exist_ok=True)
        self.redis: Child | None = None
        self.apps: list[Child] = []
        self.workers: list[Child] = []
        env_jobs = os.environ.get("GLASS_MAX_TRAINING_JOBS", "")
        self.n_workers = workers if workers is not None else (
            int(env_jobs) if env_jobs.isdigit() else max(1, os.cpu_count() or 1))
        self.proxy: Child | None = None

    @property
    def url(self) -> str:
        return f"http://{'127.0.0.1' if self.host == '0.0.0.0' else self.host}:{self.port}"

    def app_url(self, i: int) -> str:
        return f"http://127.0.0.1:{self.apps[i].port}"

    def start(self) -> Cluster:
        try:
            haproxy = require("haproxy")
            if not self.redis_url:
                self.redis, self.redis_url = start_redis(self.dir)
            cookie_secret = os.environ.get("STREAMLIT_SERVER_COOKIE_SECRET") or secrets.token_hex(32)
            for i in range(1, self.replicas + 1):
                port = free_port()
                env = {**os.environ, "STREAMLIT_SERVER_COOKIE_SECRET": cookie_secret, "GLASS_REDIS_URL": self.redis_url,
                       "GLASS_REPLICA": f"app{i}", "OMP_NUM_THREADS": "1",
                       "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false", "STREAMLIT_SERVER_HEADLESS": "true",
                       **self.extra_env}
                self.apps.append(spawn(f"app{i}", app_command(port, self.app_args, self.script),
                                       self.dir / f"app{i}.log", env=env, port=port))
            for i in range(1, self.n_workers + 1):
                self.workers.append(spawn(f"worker{i}", [sys.executable, "-m", "ui.queue_worker"],
                                          self.dir / f"worker{i}.log",
                                          env={**os.environ, "GLASS_REDIS_URL": self.redis_url, **self.extra_env}))
            for i, app in enumerate(self.apps):
                wait_until(lambda i=i: healthy(self.app_url(i)), app, self.timeout, app.name)
            cfg = self.dir / "haproxy.cfg"
            cfg.write_text(render_haproxy(self.host, self.port, [(a.name, a.port) for a in self.apps]))
            check = subprocess.run([haproxy, "-c", "-q", "-f", str(cfg)], capture_output=True, text=True)
            if check.returncode:
                raise RuntimeError(f"haproxy rejected {cfg}:\n{check.stdout}{check.stderr}")
            self.proxy = spawn("haproxy", [haproxy, "-db", "-f", str(cfg)], self.dir / "haproxy.log", port=self.port)
            wait_until(lambda: healthy(self.url), self.proxy, 20, "haproxy")
        except BaseException:
            self.stop()
            raise
        return self

    def kill_app(self, i: int) -> None:
        """SIGKILL one app process (tests: a process that dies)."""
        stop(self.apps[i], sig=signal.SIGKILL)

    def stop(self) -> None:
        for child in [self.proxy, *self.apps, *self.workers, self.redis]:
            if child is not None:
                with contextlib.suppress(Exception):
                    stop(child)
        if self._own_dir and os.environ.get("GLASS_KEEP_LOGS", "") in ("", "0"):
            shutil.rmtree(self.dir, ignore_errors=True)

    def logs(self, n: int = 30) -> str:
        children = [self.proxy, *self.apps, *self.workers, self.redis]
        return "\n".join(f"== {c.name} ({c.log})\n{c.log_tail(n)}" for c in children if c)

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ui.serve_many", description=__doc__.split("\n\n")[0])
    ap.add_argument("--replicas", type=int, default=2, help="app processes (default 2)")
    ap.add_argument("--port", type=int, default=8500, help="the proxy's port (default 8500)")
    ap.add_argument("--host", default="127.0.0.1", help="the proxy's address (default 127.0.0.1: this machine only)")
    ap.add_argument("--redis-url", default=os.environ.get("GLASS_REDIS_URL", ""),
                    help="a running Redis (default GLASS_REDIS_URL; none: start a private redis-server)")
    ap.add_argument("--workers", type=int, default=None,
                    help="training queue workers (default GLASS_MAX_TRAINING_JOBS, or the cores; 0: none here)")
    ap.add_argument("--log-dir", type=Path, default=None, help="keep the logs and the HAProxy config here")
    ap.add_argument("--script", default="app.py", help="the Streamlit script each process runs (default app.py)")
    args = ap.parse_args(argv)

    stopping = False

    def on_signal(signum, frame):
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    cluster = Cluster(args.replicas, args.port, args.host, args.redis_url or None, args.log_dir, script=args.script,
                      workers=args.workers)
    print(f"starting {args.replicas} app processes, HAProxy{'' if args.redis_url else ' and redis-server'} "
          f"(logs: {cluster.dir})", flush=True)
    try:
        cluster.start()
    except (MissingTool, RuntimeError, OSError) as e:
        print(f"serve_many: {e}", file=sys.stderr)
        return 1
    try:
        print(f"Glass Transformer: {cluster.url}  ({', '.join(f'{a.name} :{a.port}' for a in cluster.apps)}; "
              "Ctrl-C stops everything)", flush=True)
        reported: set[str] = set()
        while not stopping:
            time.sleep(0.5)
            for child in [*cluster.apps, *cluster.workers, cluster.redis]:
                if child is not None and not child.alive() and child.name not in reported:
                    reported.add(child.name)
                    print(f"{child.name} exited ({child.proc.returncode}); the proxy sends its visitors to the "
                          f"others. Its log:\n{child.log_tail(15)}", file=sys.stderr, flush=True)
            if cluster.proxy is not None and not cluster.proxy.alive():
                print(f"haproxy exited:\n{cluster.proxy.log_tail(15)}", file=sys.stderr)
                return 1
        return 0
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
