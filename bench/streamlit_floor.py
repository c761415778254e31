"""What a rerun costs Streamlit itself, with nothing of the app's: the floor under a follower's redraw.

A bare Streamlit app (a title, one text box in the sidebar, N paragraphs of markdown; the app's own
`runner.postScriptGC = false`) in a temporary folder, served by `streamlit run` on 127.0.0.1; S sessions
(bench/ws_client.py, no browser) rerun it at once, as a class's followers do when the teacher changes something;
the server process's CPU per session rerun, median of the rounds, for each N; then a straight line through them
(a fixed cost per rerun, and a cost per element). Compare with `bench.classroom_load follow`'s "ms per student"
and with the number of elements a page sends (a follower on the overview: 51 messages, since a section's heading
and its first paragraph are one element).

    .venv/bin/python -m bench.streamlit_floor [--sessions 30] [--elements 1 40 80 160] [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from bench.ws_client import StreamlitSession
from serving.processes import app_command, app_env, free_port, healthy, spawn, stop, wait_until

APP = '''import streamlit as st
st.title("Bare")
with st.sidebar:
    st.text_input("Your sentence", key="sentence")
for i in range({n}):
    st.markdown(f"Paragraph {{i}}: about as long as one of the app's, with **bold** and *italic* words.")
'''
CONFIG = "[runner]\npostScriptGC = false\n"


def cpu_seconds(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def rounds(url: str, pid: int, sessions: int, count: int) -> list[float]:
    """ms of server CPU per session rerun, one figure per round (all sessions rerun at once, then a pause)."""
    clients = [StreamlitSession(url, timeout=60) for _ in range(sessions)]
    try:
        for c in clients:
            await c.connect("")
        await asyncio.wait_for(asyncio.gather(*(c.rerun() for c in clients)), 120)  # warm
        out = []
        for _ in range(count):
            await asyncio.sleep(0.5)
            c0 = cpu_seconds(pid)
            await asyncio.wait_for(asyncio.gather(*(c.rerun() for c in clients)), 120)
            await asyncio.sleep(0.3)  # (the last messages leave the server)
            out.append((cpu_seconds(pid) - c0) / sessions * 1000)
        return out
    finally:
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)


def measure(n: int, sessions: int, count: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "app.py").write_text(APP.format(n=n))
        (root / ".streamlit").mkdir()
        (root / ".streamlit" / "config.toml").write_text(CONFIG)
        port = free_port()
        child = spawn("bare", app_command(port), root / "log.txt", env=app_env(), port=port, cwd=root)
        try:
            wait_until(lambda: healthy(child.url), child, 60, "bare streamlit")
            return statistics.median(asyncio.run(rounds(child.url, child.proc.pid, sessions, count)))
        finally:
            stop(child)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--elements", type=int, nargs="+", default=[1, 40, 80, 160])
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    t = time.perf_counter()
    rows = [(n, measure(n, args.sessions, args.rounds)) for n in args.elements]
    for n, ms in rows:
        print(f"{n:4d} paragraphs: {ms:5.2f} ms of server CPU per session rerun (median of {args.rounds} rounds "
              f"of {args.sessions} sessions)")
    if len(rows) >= 2:
        slope, fixed = statistics.linear_regression([n for n, _ in rows], [ms for _, ms in rows])
        print(f"bare Streamlit: {fixed:.2f} ms per rerun + {slope * 1000:.0f} us per element "
              f"({time.perf_counter() - t:.0f} s)")


if __name__ == "__main__":
    main()
