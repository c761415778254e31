"""Slow clients against the one-process recipe (`streamlit run app.py`, no proxy in front): connections that send
half a request head and wait (a "slowloris"), under the usual login's open-file limit.

    .venv/bin/python -m bench.slow_clients [--heads 1100] [--nofile 1024] [--seconds 30] [--root DIR]

One `streamlit run app.py` on 127.0.0.1 and a free port, started under `prlimit --nofile=NOFILE:HARD` (the soft
limit a login or a systemd unit often has); then `--heads` connections each send `GET / HTTP/1.1` and one
header, and nothing more. Printed, every second for `--seconds`: how many of them the server has closed, and
whether a health check and a page load answered. `--root` serves another checkout (a `git worktree` of an older
commit: the "before" of a before/after).

Bounded: at most 4,000 connections to 127.0.0.1, held at most `--seconds` (120 at most); the server is stopped at
the end (its process group).
"""

from __future__ import annotations

import argparse
import http.client
import selectors
import socket
import sys
import time
from pathlib import Path

from serving.processes import app_command, app_env, free_port, healthy, spawn, stop, wait_until

HALF_HEAD = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # no blank line: the head never ends


def hold_heads(port: int, n: int) -> list[socket.socket]:
    """`n` connections to 127.0.0.1:`port`, each with half a request head sent."""
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(HALF_HEAD)
        out.append(s)
    return out


def served(url: str, timeout: float = 5) -> bool:
    """A page load answers: GET / gives the app's HTML."""
    host, port = url.split("//")[1].split(":")
    try:
        conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
        conn.request("GET", "/")
        r = conn.getresponse()
        ok = r.status == 200 and b"<html" in r.read().lower()
        conn.close()
        return ok
    except (OSError, http.client.HTTPException):
        return False


def closed_by_server(heads: list[socket.socket], gone: set[int]) -> set[int]:
    """The connections (by index) the server has answered or closed so far (a read does not block)."""
    sel = selectors.DefaultSelector()
    for i, s in enumerate(heads):
        if i not in gone:
            sel.register(s, selectors.EVENT_READ, i)
    for key, _ in sel.select(timeout=0):
        gone.add(key.data)
    sel.close()
    return gone


def run(heads: int, nofile: int, seconds: float, root: Path | None) -> dict:
    port = free_port()
    log = Path("/tmp") / f"glass-slow-clients-{port}.log"
    child = spawn(
        "app", ["prlimit", f"--nofile={nofile}:20000", *app_command(port)], log, env=app_env(), port=port, cwd=root
    )
    held: list[socket.socket] = []
    out: dict = {"heads": heads, "nofile": nofile, "timeline": []}
    try:
        wait_until(lambda: healthy(child.url), child, 120, "streamlit (/_stcore/health)")
        t0 = time.monotonic()
        held = hold_heads(port, heads)
        out["opened_seconds"] = time.monotonic() - t0
        gone: set[int] = set()
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds:
            closed_by_server(held, gone)
            try:
                health = healthy(child.url)
            except OSError:
                health = False
            page = served(child.url)
            row = (round(time.monotonic() - t0, 1), len(gone), health, page)
            out["timeline"].append(row)
            print(
                f"  {row[0]:5.1f} s: {row[1]} of {heads} closed by the server; health {'ok' if health else 'FAILED'},"
                f" page load {'ok' if page else 'FAILED'}",
                flush=True,
            )
            if len(gone) == heads and health and page:
                break
            time.sleep(1.0)
        out["all_closed_after"] = next((t for t, n, _, _ in out["timeline"] if n == heads), None)
        out["failed_checks"] = sum(not (h and p) for _, _, h, p in out["timeline"])
    finally:
        for s in held:
            s.close()
        stop(child)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--heads", type=int, default=1100)
    ap.add_argument("--nofile", type=int, default=1024, help="the server's soft open-file limit at its start")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--root", type=Path, default=None, help="serve this checkout instead (a before)")
    args = ap.parse_args(argv)
    heads, seconds = min(args.heads, 4000), min(args.seconds, 120.0)
    print(
        f"{heads} unfinished request heads against one `streamlit run app.py` (soft open-file limit {args.nofile}"
        f"{', ' + str(args.root) if args.root else ''})",
        flush=True,
    )
    r = run(heads, args.nofile, seconds, args.root)
    closed = r["all_closed_after"]
    print(
        f"slow clients: {heads} heads held; all closed by the server after "
        f"{f'{closed:.0f} s' if closed is not None else f'more than {seconds:.0f} s (never)'}; "
        f"{r['failed_checks']} of {len(r['timeline'])} health checks or page loads failed meanwhile",
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
