"""A private PostgreSQL server from Debian's `postgresql` package, for the tests and the benchmarks: a temporary data
folder, 127.0.0.1 and a free port, trust authentication on loopback only, stopped with its process group.

PostgreSQL refuses to run as root: as root, the data folder goes to the `postgres` user the package creates and
`initdb` and `postgres` run as that user (util-linux's `runuser`). Only the standard library.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from serving.processes import Child, MissingTool, free_port, spawn, stop, wait_until

USER = "postgres"


def pg_bin(name: str) -> str:
    """The path of a PostgreSQL program (initdb, postgres), or MissingTool saying how to install it."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    if not found:
        raise MissingTool(
            f"PostgreSQL's {name} is missing: `./dev.sh test` installs it "
            "(or: apt-get update && apt-get install -y postgresql)."
        )
    return found[-1]


def _as_owner(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser") or "/usr/sbin/runuser"
    return [runuser, "-u", USER, "--", *cmd]


@dataclass
class PostgresServer:
    data_dir: Path
    port: int
    child: Child | None = None
    _log_from: int = 0

    @property
    def url(self) -> str:
        return f"postgresql://glass@127.0.0.1:{self.port}/postgres"

    def start(self, timeout: float = 30) -> PostgresServer:
        self._wait_gone(timeout)
        log = self.data_dir / "postgres.log"
        self._log_from = log.stat().st_size if log.exists() else 0
        self.child = spawn(
            "postgres",
            _as_owner(
                [
                    pg_bin("postgres"),
                    "-D",
                    str(self.data_dir / "db"),
                    "-h",
                    "127.0.0.1",
                    "-p",
                    str(self.port),
                    "-k",
                    str(self.data_dir),
                ]
            ),
            self.data_dir / "postgres.log",
            port=self.port,
        )
        wait_until(self.ready, self.child, timeout, "postgres")
        return self

    def ready(self) -> bool:
        with socket.create_connection(("127.0.0.1", self.port), timeout=1):
            pass
        with open(self.data_dir / "postgres.log", errors="replace") as f:
            f.seek(self._log_from)
            return "ready to accept connections" in f.read()

    def _wait_gone(self, timeout: float) -> None:
        """A killed server's processes may take a moment to go: its lock file names its pid until then."""
        pid_file = self.data_dir / "db" / "postmaster.pid"
        deadline = time.monotonic() + timeout
        while pid_file.exists() and time.monotonic() < deadline:
            try:
                os.kill(int(pid_file.read_text().split()[0]), 0)
            except (ProcessLookupError, ValueError, IndexError, FileNotFoundError):
                return
            except PermissionError:
                pass
            time.sleep(0.1)

    def stop(self, crash: bool = False) -> None:
        """Stop the server: a fast shutdown, or with `crash` a SIGKILL (what a power cut or an OOM kill does)."""
        if self.child is not None:
            import signal

            stop(self.child, sig=signal.SIGKILL if crash else signal.SIGINT)


def start_postgres(workdir: Path, timeout: float = 60) -> PostgresServer:
    """initdb a cluster in `workdir` (superuser "glass", trust on loopback) and start it on a free port. As root,
    `workdir` is handed to the postgres user, who must be able to reach it: a fresh tempfile.mkdtemp() is right."""
    workdir.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(workdir, USER, USER)
        os.chmod(workdir, 0o700)
    result = subprocess.run(
        _as_owner(
            [
                pg_bin("initdb"),
                "-D",
                str(workdir / "db"),
                "-U",
                "glass",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-instructions",
            ]
        ),
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=workdir,
    )
    if result.returncode:
        raise RuntimeError(f"initdb failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return PostgresServer(workdir, free_port()).start(timeout)
