"""What a rerun costs Streamlit itself, with nothing of the app's: the floor under a follower's redraw.

A bare Streamlit app (a title, one text box in the sidebar, N paragraphs of markdown; the app's own
`runner.postScriptGC = false`) in a temporary folder, served by `streamlit run` on 127.0.0.1; S sessions
(tools/ws_client.py, no browser) rerun it at once, as a class's followers do when the teacher changes something;
the server process's CPU per session rerun, median of the rounds, for each N; then a straight line through them
(a fixed cost per rerun, and a cost per element). Compare with `bench.classroom_load follow`'s "ms per student"
and with the number of elements a page sends (a follower on the overview: 51 messages, since a section's heading
and its first paragraph are one element).

--follow PAGE... compares a class with that floor in one run: for each page and round, `classroom_load follow`
(--sessions students, --changes changes; the app's script runs recorded by bench/follower_profile.py's hook: the
messages each follower's redraw enqueued), then the bare app with as many messages per rerun (its paragraphs, its
title and its text box), the same number of sessions rerunning at once; the app's CPU per student per change
against the bare app's per rerun (goal: at most 1.2x). A second line compares it with a bare app that sends the
same messages with the page's widgets in them (the same number of each kind, as the hook counted them: a Streamlit
widget costs more than a paragraph: a selectbox about 0.6 ms more a rerun, a button 0.4 ms, a fold 0.2 ms, 30
sessions at once): what remains above that one is the app's own. `--root` runs another checkout's app (before /
after).

    .venv/bin/python -m bench.streamlit_floor [--sessions 30] [--elements 1 40 80 160] [--rounds 6]
    .venv/bin/python -m bench.streamlit_floor --follow overview self_attention lesson [--root .] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from serving.processes import ROOT, app_command, app_env, free_port, healthy, spawn, stop, wait_until
from tools.ws_client import StreamlitSession

APP = """import streamlit as st
st.title("Bare")
with st.sidebar:
    st.text_input("Your sentence", key="sentence")
for i in range({n}):
    st.markdown(f"Paragraph {{i}}: about as long as one of the app's, with **bold** and *italic* words.")
"""
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


WIDGETS = {  # a widget of each kind a page may send (bench/follower_profile.py counts them), as the bare app draws it
    "button": 'st.button("Button {i}", key="w{i}")',
    "selectbox": 'st.selectbox("Pick {i}", range(6), key="w{i}")',
    "radio": 'st.radio("Radio {i}", ["one", "two"], key="w{i}", horizontal=True)',
    "text_input": 'st.text_input("Text {i}", key="w{i}")',
    "checkbox": 'st.checkbox("Box {i}", key="w{i}")',
    "slider": 'st.slider("Slider {i}", 0, 10, key="w{i}")',
    "number_input": 'st.number_input("Number {i}", key="w{i}")',
    "multiselect": 'st.multiselect("Several {i}", ["one", "two"], key="w{i}")',
    "expander": 'st.expander("Fold {i}", key="w{i}", on_change="rerun")',  # (a keyed one: a fold)
}


def bare_app(n: int, widgets: dict[str, int] | None = None) -> str:
    """The bare app: its title, its text box, the `widgets` (kind -> how many), then `n` paragraphs."""
    lines = [WIDGETS[kind].format(i=f"{kind}{j}") for kind, k in (widgets or {}).items() for j in range(k)]
    return APP.format(n=n) + "".join(line + "\n" for line in lines)


def measure(n: int, sessions: int, count: int, widgets: dict[str, int] | None = None) -> float:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "app.py").write_text(bare_app(n, widgets))
        (root / ".streamlit").mkdir()
        (root / ".streamlit" / "config.toml").write_text(CONFIG)
        port = free_port()
        child = spawn("bare", app_command(port), root / "log.txt", env=app_env(), port=port, cwd=root)
        try:
            wait_until(lambda: healthy(child.url), child, 60, "bare streamlit")
            return statistics.median(asyncio.run(rounds(child.url, child.proc.pid, sessions, count)))
        finally:
            stop(child)


BARE_MESSAGES = 2  # what the bare app's script enqueues besides its paragraphs: its title and its text box


def against_follow(pages: list[str], roots: list[Path], students: int, changes: int, rounds_: int, count: int) -> None:
    """Each page's followers against the bare app with as many messages per run (see the module's docstring)."""
    from bench.follower_profile import follow

    rows: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    for r in range(rounds_):
        for page in pages:
            for root in roots:
                f, runs = follow(root, page, students, changes)
                redraws = [x for x in runs if x["fragment"]]
                msgs = round(statistics.median(x["msgs"] for x in redraws)) if redraws else 0
                app = statistics.median(f.change_cpu) / students * 1000
                bare = measure(max(1, msgs - BARE_MESSAGES), students, count)
                kinds = {k for x in redraws for k in x.get("widgets", {})}
                widgets = {k: round(statistics.median(x.get("widgets", {}).get(k, 0) for x in redraws)) for k in kinds}
                widgets = {k: v for k, v in sorted(widgets.items()) if v}
                alike = measure(max(1, msgs - BARE_MESSAGES - sum(widgets.values())), students, count, widgets)
                rows.setdefault((page, root.name), []).append((app, bare, alike))
                print(
                    f"round {r + 1}: {page} ({root.name}): {students} followers, {msgs} messages a redraw, "
                    f"{app:.2f} ms per student per change; bare Streamlit, the same messages: {bare:.2f} ms per "
                    f"rerun: {app / bare:.2f}x; p50 {statistics.median(f.latencies):.2f} s, p95 "
                    f"{sorted(f.latencies)[int(0.95 * (len(f.latencies) - 1))]:.2f} s, {f.missed} missed",
                    flush=True,
                )
                print(
                    f"  the same messages with the page's widgets ({', '.join(f'{v} {k}' for k, v in widgets.items())}"
                    f"): {alike:.2f} ms per rerun: {app / alike:.2f}x",
                    flush=True,
                )
    for (page, name), xs in rows.items():
        ratios = [a / b for a, b, _ in xs]
        print(
            f"{page} ({name}): a follower's redraw {statistics.median(ratios):.2f}x the bare-Streamlit floor for the "
            f"same messages (median of {len(xs)}; worst {max(ratios):.2f}x; goal <= 1.2x)"
        )
        alike_ratios = [a / c for a, _, c in xs]
        print(
            f"{page} ({name}): {statistics.median(alike_ratios):.2f}x the floor for the same messages and widgets "
            f"(median of {len(xs)}; worst {max(alike_ratios):.2f}x; the widgets' own cost taken out)"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--elements", type=int, nargs="+", default=[1, 40, 80, 160])
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--follow", nargs="+", help="pages whose followers to compare with the floor (see above)")
    ap.add_argument("--root", action="append", default=[], help="--follow: the checkout(s) to run (repeatable)")
    ap.add_argument("--changes", type=int, default=8, help="--follow: the teacher's changes per run")
    args = ap.parse_args()
    if args.follow:
        against_follow(
            args.follow, [Path(r).resolve() for r in args.root] or [ROOT], args.sessions, args.changes, args.rounds, 4
        )
        return
    t = time.perf_counter()
    rows = [(n, measure(n, args.sessions, args.rounds)) for n in args.elements]
    for n, ms in rows:
        print(
            f"{n:4d} paragraphs: {ms:5.2f} ms of server CPU per session rerun (median of {args.rounds} rounds "
            f"of {args.sessions} sessions)"
        )
    if len(rows) >= 2:
        slope, fixed = statistics.linear_regression([n for n, _ in rows], [ms for _, ms in rows])
        print(
            f"bare Streamlit: {fixed:.2f} ms per rerun + {slope * 1000:.0f} us per element "
            f"({time.perf_counter() - t:.0f} s)"
        )


if __name__ == "__main__":
    main()
