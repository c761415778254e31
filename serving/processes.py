"""Child processes: start them in their own process group, watch them, stop them without leftovers.

One launcher for every process this project starts: the app itself (`start_app`: the README's
`streamlit run app.py` on 127.0.0.1 and a free port, used by the replica launcher, the tests, the
benchmarks and the screenshot script), redis-server, HAProxy and the training queue workers
(`serving.replicas`). Only the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PR_SET_PDEATHSIG = 1  # prctl(2): the signal this process gets when its parent dies
INSTALL_HINT = {"redis-server": "redis-server", "haproxy": "haproxy"}


class MissingTool(RuntimeError):
    pass


def require(binary: str) -> str:
    """The path of a Debian tool this needs, or MissingTool saying how to install it."""
    path = shutil.which(binary) or next(
        (p for p in (f"/usr/bin/{binary}", f"/usr/sbin/{binary}") if os.access(p, os.X_OK)), None
    )
    if path is None:
        raise MissingTool(
            f"{binary} is missing: `./dev.sh test` and `./dev.sh serve` install it "
            f"(or: apt-get update && apt-get install -y {INSTALL_HINT.get(binary, binary)})."
        )
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """Ask Linux to send this process `sig` when the thread that started it ends (PR_SET_PDEATHSIG).
    Called in the child itself (the queue worker's work horse), never as a `preexec_fn`, which Python
    documents as unsafe in a threaded parent."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def with_parent_death_signal(cmd: list[str]) -> list[str]:
    """`cmd` run through util-linux's `setpriv --pdeathsig TERM` when it is there: the child then gets
    SIGTERM when the thread that started it ends, so a launcher killed outright leaves no orphans (the
    same as `die_with_parent`, without a `preexec_fn`)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "TERM", *cmd] if setpriv else list(cmd)


@dataclass
class Child:
    """A started process: its name, the Popen, its log file, the port it listens on (0: none)."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    port: int = 0
    cmd: list[str] = field(default_factory=list)
    started: float = 0.0  # time.perf_counter() just before it was spawned

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10, sig: int = signal.SIGTERM) -> None:
        stop(self, timeout, sig)

    def log_tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def spawn(
    name: str,
    cmd: list[str],
    log: Path,
    env: dict[str, str] | None = None,
    stdin_text: str | None = None,
    port: int = 0,
    cwd: Path | None = None,
) -> Child:
    """Start `cmd` in a new process group (its output appended to `log`); `stdin_text`, when given, is
    written to its standard input (a secret never goes on a command line)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            with_parent_death_signal(cmd),
            cwd=cwd or ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
        )
    finally:
        out.close()
    if stdin_text is not None:
        assert proc.stdin is not None  # stdin=PIPE above
        proc.stdin.write(stdin_text.encode())
        proc.stdin.close()
    return Child(name, proc, log, port, list(cmd), started)


def stop(child: Child, timeout: float = 10, sig: int = signal.SIGTERM) -> None:
    """Signal the child's process group, then SIGKILL whatever is left of it (a group may outlive its
    leader: a child that ignored the signal)."""
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


def wait_until(check: Callable[[], bool], child: Child | None, timeout: float, what: str) -> None:
    """Poll `check` until it is true; RuntimeError (with the child's log) if the child exits or time runs out."""
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


def app_command(port: int, extra: list[str] | tuple[str, ...] = (), script: str = "app.py") -> list[str]:
    """How the README starts the app (`streamlit run app.py`), on 127.0.0.1:`port`."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        script,
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(port),
        "--server.headless",
        "true",
        "--server.fileWatcherType",
        "none",
        "--browser.gatherUsageStats",
        "false",
        *extra,
    ]


def app_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    return {
        **os.environ,
        "STREAMLIT_BROWSER_GATHER_USAGE_STATS": "false",
        "STREAMLIT_SERVER_HEADLESS": "true",
        **(extra or {}),
    }


def start_app(
    log: Path | None = None,
    timeout: float = 60,
    extra_env: dict[str, str] | None = None,
    root: Path | None = None,
    name: str = "app",
    args: tuple[str, ...] = (),
) -> Child:
    """`streamlit run app.py` from the repository (or another checkout's `root`, e.g. a git worktree of an
    older commit for a before/after benchmark) on 127.0.0.1 and a free port; returns once
    /_stcore/health answers "ok" (the process is stopped again if it does not)."""
    port = free_port()
    log = log or Path(os.environ.get("TMPDIR", "/tmp")) / f"glass-streamlit-{port}.log"
    child = spawn(name, app_command(port, args), log, env=app_env(extra_env), port=port, cwd=root or ROOT)
    try:
        wait_until(lambda: healthy(child.url), child, timeout, "streamlit (/_stcore/health)")
    except BaseException:
        stop(child)
        raise
    return child


@contextlib.contextmanager
def running_app(
    log: Path | None = None, timeout: float = 60, extra_env: dict[str, str] | None = None, root: Path | None = None
) -> Iterator[Child]:
    child = start_app(log, timeout, extra_env, root)
    try:
        yield child
    finally:
        stop(child)
