"""The one-process recipe against slow clients (serving/connections.py): a request's head that does not arrive in
time is answered 408 and closed, and the open-file limit is raised, so unfinished heads held open cannot take the
server's health check and page loads with them. The long version with figures is `python -m bench.slow_clients`.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from bench.slow_clients import hold_heads, served
from serving.processes import app_command, app_env, free_port, healthy, spawn, stop, wait_until


def test_unfinished_request_heads_are_cut_and_cannot_exhaust_the_servers_files(tmp_path: Path):
    """`streamlit run app.py` started with an open-file limit of 256 (a login's is often 1,024): 300 connections
    that each send half a request head and wait. Before: the server never closed them, and past its limit every
    health check and page load failed. Now the server raised its limit, answers while they are held, and answers
    each of them 408 and closes it once its head is late (GLASS_HEAD_TIMEOUT, here 3 s)."""
    port = free_port()
    child = spawn(
        "app",
        ["prlimit", "--nofile=256:20000", *app_command(port)],
        tmp_path / "server.log",
        env=app_env({"GLASS_HEAD_TIMEOUT": "3"}),
        port=port,
    )
    try:
        wait_until(lambda: healthy(child.url), child, 120, "streamlit (/_stcore/health)")
        heads: list[socket.socket] = hold_heads(port, 300)
        try:
            t0 = time.monotonic()
            assert served(child.url), "a page load failed while 300 heads were held"
            assert healthy(child.url)
            closed = []
            deadline = t0 + 20
            for s in heads:
                s.settimeout(max(0.1, deadline - time.monotonic()))
                try:
                    closed.append(s.recv(200))
                except TimeoutError:
                    closed.append(None)
            assert all(reply is not None and reply.startswith(b"HTTP/1.1 408") for reply in closed), closed[:3]
            assert time.monotonic() - t0 < 15
            assert healthy(child.url) and served(child.url)
        finally:
            for s in heads:
                s.close()
    finally:
        stop(child)
