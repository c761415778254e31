"""Where a follower's redraw goes: a profile of the app process while a class follows its teacher.

Starts `streamlit run app.py` with a small hook (a `sitecustomize` in a temporary folder, nothing in the app) that
records each script run's thread CPU, whether it was a fragment's run (a follower's page redrawn alone) and the
messages it sent; runs bench/classroom_load.py's `follow` on `--page` (students join, the teacher types
sentences) and samples the process meanwhile with py-spy (`--gil`: the thread holding the interpreter, which is
what a GIL-bound server spends; requirements-dev.txt). Prints the process's CPU per student per change and how it
divides: the script threads by part of a follower's run (the class's reads, the page, its end, Streamlit's
enqueueing of each element), the web server's event loop (sending the messages), the rest.

    .venv/bin/python -m bench.follower_profile [--page overview] [--students 30] [--changes 8] [--top 25]
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench import class_clients as cc
from bench import classroom_load as cl
from serving.processes import ROOT, start_app

# -- inside the app process -------------------------------------------------------------------------------
# The widgets the hook counts in each run, by kind (a keyed expander, a fold, is "expander"): bench.streamlit_floor
# draws each kind in its bare app.
COUNTED = (
    "button",
    "selectbox",
    "radio",
    "text_input",
    "checkbox",
    "slider",
    "number_input",
    "multiselect",
    "expander",
)


def install(out: str, counted: tuple[str, ...]) -> None:
    """Record every script run (the server process only; written on SIGUSR1)."""
    import threading

    from streamlit.runtime.scriptrunner import script_runner as sr
    from streamlit.runtime.scriptrunner_utils import script_run_context as src

    runs: list[dict] = []
    local = threading.local()
    run_script, enqueue = sr.ScriptRunner._run_script, src.ScriptRunContext.enqueue

    def _run(self, rerun_data):
        local.msgs, local.widgets = 0, {}
        t = time.thread_time()
        try:
            run_script(self, rerun_data)
        finally:
            runs.append(
                {
                    "fragment": bool(rerun_data.fragment_id_queue),
                    "cpu": time.thread_time() - t,
                    "msgs": local.msgs,
                    "widgets": local.widgets,
                }
            )

    def _enqueue(self, msg):
        local.msgs = getattr(local, "msgs", 0) + 1
        if msg.WhichOneof("type") == "delta":  # (a widget's kind, as the bare app of bench.streamlit_floor draws it)
            d = msg.delta
            kind = d.WhichOneof("type")
            what = d.new_element.WhichOneof("type") if kind == "new_element" else None
            if kind == "add_block" and d.add_block.WhichOneof("type") == "expandable" and d.add_block.expandable.id:
                what = "expander"
            if what in counted:
                w = getattr(local, "widgets", {})
                w[what] = w.get(what, 0) + 1
                local.widgets = w
        enqueue(self, msg)

    sr.ScriptRunner._run_script, src.ScriptRunContext.enqueue = _run, _enqueue

    def dump(*_):
        Path(out, "runs.json").write_text(json.dumps(runs))

    signal.signal(signal.SIGUSR1, dump)


# -- the driver -----------------------------------------------------------------------------------------------
# What a follower's fragment run spends its time on: a sample counts for the first part whose frame it holds
# (function name, file name ending), in this order.
PARTS = [
    ("Streamlit: each element's message (ctx.enqueue: hash, queue)", [("enqueue", "script_run_context.py")]),
    ("  the page: its analysis (ui.models.analysis)", [("analysis", "ui/models.py")]),
    (
        "  the page: replays of what was drawn once (st.cache_data)",
        [("_drawn_once", "widgets.py"), ("_heatmap_chart", "widgets.py")],
    ),
    ("the page (shell.run_page), the rest", [("run_page", "ui/shell.py")]),
    (
        "the class's reads (plans.on_run, board.read_run, follow_on_run, roster.report)",
        [("on_run", "plans.py"), ("read_run", "board.py"), ("follow_on_run", "session.py"), ("report", "roster.py")],
    ),
    ("the page's end (end_of_run)", [("end_of_run", "panels.py")]),
    (
        "the teacher's line, the stop's banner, the class's run",
        [("teacher_line", "panels.py"), ("stop_banner", "plans.py"), ("class_run_panel", "board.py")],
    ),
    ("the address (sync_query_params), the rest of followed_page", [("followed_page", "panels.py")]),
    ("a full run of app.py (the teacher's, a student's)", [("<module>", "app.py")]),
    ("Streamlit's script runner around the run", [("_run_script_thread", "script_runner.py")]),
]
LOOP = [
    ("sending messages (websocket)", [("_sender", "starlette_websocket.py"), ("send", "websockets.py")]),
    (
        "the run's messages handed to the session (on the loop)",
        [("_handle_scriptrunner_event_on_event_loop", "app_session.py"), ("_loop_coroutine", "runtime.py")],
    ),
    (
        "receiving a rerun (BackMsg)",
        [("_websocket_endpoint", "starlette_websocket.py"), ("handle_backmsg", "app_session.py")],
    ),
    ("the class's event streams", [("stream", "push.py"), ("events", "push.py"), ("_fan_out", "hub.py")]),
]


THREADS = {"script": "script threads", "loop": "the event loop (web server)", "other": "other threads"}


def frames(stack: str) -> list[tuple[str, str]]:
    """(function, file) of each frame of a py-spy raw stack, outermost first."""
    out = []
    for f in stack.split(";"):
        name, _, where = f.partition(" (")
        out.append((name.strip().rsplit(".", 1)[-1], where.rsplit(":", 1)[0]))
    return out


def classify(fr: list[tuple[str, str]], parts) -> str | None:
    for label, keys in parts:
        for name, file in keys:
            if any(n == name and f.endswith(file) for n, f in fr):
                return label
    return None


def read_samples(path: Path) -> Counter:
    """py-spy's raw output: 'frame;frame;... count' per line."""
    out: Counter = Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if stack and n.isdigit():
            out[stack] += int(n)
    return out


class RunLog:
    """The hook above as a `sitecustomize` in `folder`: `env` starts a process with it (nothing of this checkout is
    imported for it, so another checkout's app runs as it is), `runs(pid)` reads what it recorded so far."""

    def __init__(self, folder: Path):
        self.folder = folder
        (folder / "hook").mkdir(exist_ok=True)
        head = "import json, signal, time\nfrom pathlib import Path\n\n"
        (folder / "hook" / "sitecustomize.py").write_text(
            head + inspect.getsource(install) + f"\n\ninstall({str(folder)!r}, {COUNTED!r})\n"
        )
        self.env = {"PYTHONPATH": str(folder / "hook")}

    def runs(self, pid: int) -> list[dict]:
        (self.folder / "runs.json").unlink(missing_ok=True)
        os.kill(pid, signal.SIGUSR1)
        for _ in range(200):
            if (self.folder / "runs.json").exists():
                return json.loads((self.folder / "runs.json").read_text())
            time.sleep(0.05)
        raise RuntimeError("the app process wrote no runs")


def follow(
    root: Path,
    page: str,
    students: int,
    changes: int,
    pause: float = 2.0,
    sampler: list[str] | None = None,
    raw: Path | None = None,
) -> tuple[cc.Follow, list[dict]]:
    """`classroom_load follow` on `root`'s app, its script runs recorded from the moment every student has joined
    (and `sampler` + [--pid, PID, --output, raw] running meanwhile): the figures, and the runs."""
    with tempfile.TemporaryDirectory() as d:
        log = RunLog(Path(d))
        server = start_app(log=Path(d) / "log.txt", timeout=120, extra_env={**cc.ONE_ADDRESS, **log.env}, root=root)
        pid, before, spies = server.proc.pid, [], []
        try:

            def start() -> None:  # every student has joined: the class's changes (and the idle second) from now
                before.append(len(log.runs(pid)))
                if sampler:
                    spies.append(
                        subprocess.Popen(
                            [*sampler, "--pid", str(pid), "--output", str(raw)],
                            stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL,
                        )
                    )

            f = asyncio.run(cl.follow(server.url, students, changes, pause, 30.0, [pid], 1.0, page, on_start=start))
            for p in spies:
                p.send_signal(signal.SIGINT)
                p.wait(60)
            return f, log.runs(pid)[before[0] :]
        finally:
            server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--page", default="overview")
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--changes", type=int, default=8)
    ap.add_argument("--pause", type=float, default=2.0)
    ap.add_argument("--rate", type=int, default=250, help="py-spy's samples per second")
    ap.add_argument("--top", type=int, default=25, help="functions listed by their own samples")
    ap.add_argument("--root", default=str(ROOT), help="the checkout to run (a worktree of another commit)")
    ap.add_argument("--raw", help="also keep py-spy's raw samples in this file")
    args = ap.parse_args()
    spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if spy is None:
        sys.exit("py-spy is not installed (requirements-dev.txt)")
    with tempfile.TemporaryDirectory() as d:
        raw = Path(d) / "samples.txt"
        sampler = [spy, "record", "--gil", "--nonblocking", "--threads", "--rate", str(args.rate), "--format", "raw"]
        f, runs = follow(Path(args.root), args.page, args.students, args.changes, args.pause, sampler, raw)
        samples = read_samples(raw)
        if args.raw:
            shutil.copy(raw, args.raw)
    report(args, f, runs, samples)


def report(args, f, runs: list[dict], samples: Counter) -> None:
    frag = [r for r in runs if r["fragment"]]
    n = args.students
    per_student = statistics.median(f.change_cpu) / n * 1000
    print(
        f"\n{args.page}: {n} followers, {args.changes} changes; load {os.getloadavg()[0]:.1f}; "
        f"p50 {statistics.median(f.latencies):.2f} s, {f.missed} missed"
    )
    print(f"  the app process's CPU per student per change (median): {per_student:.2f} ms")
    if frag:
        print(
            f"  the followers' fragment runs: {len(frag)}, thread CPU median "
            f"{statistics.median(r['cpu'] for r in frag) * 1000:.2f} ms, messages median "
            f"{statistics.median(r['msgs'] for r in frag):.0f}; other runs {len(runs) - len(frag)}"
        )
    by_thread: dict[str, Counter] = {}
    for stack, count in samples.items():
        thread = stack.partition(";")[0]
        kind = "script" if "scriptThread" in thread else "loop" if "MainThread" in thread else "other"
        by_thread.setdefault(kind, Counter())[stack] += count
    total = sum(samples.values()) or 1
    print(
        f"  py-spy samples holding the interpreter: {total}, shares below as ms per student per change "
        f"(the share of samples x {per_student:.2f} ms)"
    )
    for kind, parts in (("script", PARTS), ("loop", LOOP), ("other", [])):
        c = by_thread.get(kind, Counter())
        share = sum(c.values()) / total
        print(f"\n  {share * per_student:6.2f} ms  {THREADS[kind]}")
        groups: Counter = Counter()
        for stack, count in c.items():
            groups[classify(frames(stack.partition(";")[2]), parts) or "  (other)"] += count
        for label, _ in [*parts, ("  (other)", None)]:
            if groups.get(label):
                print(f"    {groups[label] / total * per_student:6.2f} ms  {label}")
    own: Counter = Counter()
    for stack, count in samples.items():
        leaf = stack.rsplit(";", 1)[-1]
        own[leaf] += count
    print(f"\n  top {args.top} frames by own samples (ms per student per change)")
    for leaf, count in own.most_common(args.top):
        print(f"    {count / total * per_student:6.3f}  {leaf}")


if __name__ == "__main__":
    main()
