"""Classroom mode under load: follow latency, throughput of 1 vs 2 app processes, a process killed mid-class.

Every client is tools/ws_client.py's StreamlitSession (Streamlit's websocket protocol, no browser), which
also does what the page's class component does in a browser (ui/classroom/push.py): it listens to the
class's event stream and reruns its page when the class moved past what the page shows.

    .venv/bin/python -m bench.classroom_load follow --students 30 100 [--changes 6] [--processes 2] [--page lesson]
                                                   [--browsers 6]
    .venv/bin/python -m bench.classroom_load throughput [--students 24] [--seconds 40]
    .venv/bin/python -m bench.classroom_load failover [--students 20]
    .venv/bin/python -m bench.classroom_load chaos [--students 40]
    .venv/bin/python -m bench.classroom_load votes [--students 100] [--processes 2]

follow: one `streamlit run app.py` (the memory store), or --processes N behind HAProxy (Redis). A teacher
(ws) starts a class, N students join with the link and follow; the teacher types a new sentence `--changes`
times (a pause between); per change and student, the time from the teacher sending the sentence to the end
of the student's run that shows it (its sidebar's sentence box). p50 / p95 / max, and how many students
never showed it within --timeout. Also the time until the change's event reached each student's event stream:
the event's own way (store, hub, proxy), apart from the redraws (it showed HAProxy holding each event 0.2 s).
With --browsers N, N more students follow in real Chromium (each its own context, every third a phone): the time
until each page shows the change, and how many dropped out of follow mode (the websocket clients never did; real
browsers did, until issue 36's fix: a page's late request re-ran its callbacks).

throughput: the same N students, each typing its own sentences one after the other without a pause (a
saturated server), for --seconds, through HAProxy in front of 1 and then 2 app processes (serving/replicas.py,
Redis): completed interactions per second, and the ratio; and where the machine's CPU went meanwhile (the
app processes, the clients in this script, everything else: on a shared machine other people's work
takes cores the second process would use).

failover: 2 app processes behind HAProxy with Redis; a teacher on app1, students spread over both; a
question is open and half the class answered; app2 is killed (SIGKILL). Its students reconnect through the
proxy with the address and widget values they had (as a browser's reconnect does) and land on app1: they
must be in the class again (following, the teacher's sentence), the question and its counts unchanged, and
they follow the teacher's next change. One of them explores on its own and has just typed a sentence when
its process dies: it must come back exploring, with the sentence it typed. Each student sends a browser's
XSRF cookie, so the moved students must come back as the same students: the class's count of students is
unchanged and those who had answered see their answer as their own.

Bounded: every wait has a timeout, every loop a count or a deadline; servers on 127.0.0.1 and free ports,
stopped at the end (process groups).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

from bench.class_chaos import chaos, failover
from bench.class_clients import (
    CODE,
    ONE_ADDRESS,
    SENTENCES,
    ChromiumStudents,
    Cookie,
    Follow,
    button_states,
    class_server,
    cpu_seconds,
    half_drawn,
    join,
    machine_busy,
    shows,
    start_class,
    summary,
)
from serving.replicas import Cluster
from tools.ws_client import StreamlitSession


async def follow(
    url: str,
    n: int,
    changes: int,
    pause: float,
    timeout: float,
    pids: list[int] | None = None,
    idle: float = 10.0,
    page: str = "overview",
    browsers: int = 0,
    on_start=None,
) -> Follow:
    """Teacher changes -> every following student's page updated: latencies; and the app processes' CPU while
    the class waits (`idle` seconds) and per change. The teacher (and so the class) is on `page`. `browsers`: as
    many students in real Chromium besides (their latencies and drop-outs reported apart). `on_start()` is called
    once every student has joined (bench/follower_profile.py starts its sampler then)."""
    out = Follow(n, browsers=browsers)
    teacher, code = await start_class(url, page=page)
    t = time.perf_counter()
    students: list[StreamlitSession] = []
    for i in range(0, n, 10):  # arrive ten at a time
        students += await asyncio.gather(*(join(url, code) for _ in range(min(10, n - i))))
    out.join_seconds = time.perf_counter() - t
    chromium = ChromiumStudents(browsers)
    if browsers:
        await chromium.start(url, code)
    for s in students:
        s.start_following()
    pollers = [asyncio.create_task(s.poll_fragments(changes * (pause + timeout) + 30)) for s in students]
    try:
        await asyncio.sleep(2)
        if on_start is not None:
            on_start()
        cpu0 = cpu_seconds(pids or [])
        await asyncio.sleep(idle)
        out.idle_cpu = (cpu_seconds(pids or []) - cpu0) / idle
        for k in range(changes):
            sentence = SENTENCES[k % len(SENTENCES)]
            seen: dict[int, float] = {}
            done = asyncio.Event()

            def hook(s, i, sentence=sentence, seen=seen, done=done):
                if i not in seen and shows(s, sentence):
                    seen[i] = time.perf_counter()
                    if len(seen) == n:
                        done.set()

            for i, s in enumerate(students):
                s.on_full_run = lambda s, i=i, hook=hook: hook(s, i)
            runs0 = sum(s.full_runs for s in students), sum(s.page_runs for s in students)
            seqs0 = [max(s.event_at, default=0) for s in students]
            cpu0, client0, busy0 = cpu_seconds(pids or []), time.process_time(), machine_busy()
            t0 = time.perf_counter()
            await teacher.type_sentence(sentence)
            watching = asyncio.create_task(chromium.wait(sentence, t0, timeout)) if browsers else None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), timeout)
            if watching is not None:  # (the Chromium pages were watched meanwhile)
                shown, missed_b, dropped_b = await watching
                out.browser_latencies += shown
                out.browser_missed += missed_b
                out.browser_dropouts += dropped_b
            out.latencies += [seen[i] - t0 for i in seen]
            out.events += [
                min(t for q, t in s.event_at.items() if q > q0) - t0
                for s, q0 in zip(students, seqs0, strict=True)
                if max(s.event_at, default=0) > q0
            ]
            out.missed += n - len(seen)
            out.full_runs += sum(s.full_runs for s in students) - runs0[0]
            out.pages_alone += sum(s.page_runs for s in students) - runs0[1]
            await asyncio.sleep(pause)  # (the pause before the next change: runs that follow this one end)
            out.change_cpu.append(cpu_seconds(pids or []) - cpu0)
            out.client_cpu.append(time.process_time() - client0)
            out.machine_cpu.append(machine_busy() - busy0)
            half = sum(half_drawn(s, t0) for s in students)
            out.half_drawn += half
            missed = [s for i, s in enumerate(students) if i not in seen]
            if missed:  # what those students show: exploring? an old sentence? a dropped connection?
                why = {}
                for s in missed:
                    badge = next((line for line in s.text(1).splitlines() if "class" in line), "no badge")
                    try:
                        box = repr(s.widget_value("Your sentence"))
                    except KeyError:
                        box = "no sentence box (a run under way)"
                    key = f"{getattr(s, 'replica', None)}: {badge[:40]} / {box}"
                    why[key] = why.get(key, 0) + 1
                runs = [r for r in missed[0].runs if r[0] >= t0 - 2][:30]
                print(f"    not updated: {why}; the runs of one since the change (t0 {t0:.2f}): {runs}", flush=True)
            print(
                f"  change {k + 1}: {len(seen)}/{n} students updated, p50 "
                f"{statistics.median([seen[i] - t0 for i in seen]) if seen else float('nan'):.2f} s, "
                f"full runs {sum(s.full_runs for s in students) - runs0[0]}, pages redrawn alone "
                f"{sum(s.page_runs for s in students) - runs0[1]}, redraws whose end was lost {half}",
                flush=True,
            )
    finally:
        for p in pollers:
            p.cancel()
        await asyncio.gather(*pollers, return_exceptions=True)
        await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)
        await chromium.close()
    return out


async def saturate(url: str, n: int, seconds: float, pids: list[int] | None = None) -> dict:
    """n sessions, each typing its own sentences back to back for `seconds`: interactions per second, and
    where the machine's CPU went meanwhile (the app processes, this script's clients, everything)."""
    sessions = [StreamlitSession(url, timeout=120) for _ in range(n)]
    for i in range(0, n, 8):
        await asyncio.gather(*(s.connect("overview") for s in sessions[i : i + 8]))
    done, errors, times = 0, 0, []
    cpu0, mine0, busy0 = cpu_seconds(pids or []), time.process_time(), machine_busy()
    start = time.perf_counter()
    end = start + seconds

    async def one(i: int, s: StreamlitSession) -> None:
        nonlocal done, errors
        k = 0
        while time.perf_counter() < end:
            sentence = f"{SENTENCES[(i + k) % len(SENTENCES)]}"
            sentence = sentence if k % 2 else sentence + " ."  # every interaction a new value
            k += 1
            try:
                times.append(await s.type_sentence(sentence))
                done += 1
            except Exception:  # noqa: BLE001 - counted
                errors += 1
                return

    await asyncio.gather(*(one(i, s) for i, s in enumerate(sessions)))
    wall = time.perf_counter() - start
    cpu = {
        "apps": cpu_seconds(pids or []) - cpu0,
        "clients": time.process_time() - mine0,
        "machine": machine_busy() - busy0,
    }
    cpu["others"] = cpu["machine"] - cpu["apps"] - cpu["clients"]  # HAProxy, Redis, and whatever else runs here
    await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
    return {
        "interactions": done,
        "seconds": wall,
        "per_second": done / wall,
        "errors": errors,
        **summary(times),
        "cpu_seconds": cpu,
        "per_app_cpu_second": done / cpu["apps"] if cpu["apps"] else float("nan"),
    }


async def votes(url: str, n: int, timeout: float, rounds: int = 2) -> dict:
    """Peer instruction under load: a teacher asks a question; `n` students vote at once, half of them changing
    their vote at once too; the teacher locks the vote and opens the second; everyone votes again. Per round:
    how long the burst took, when the teacher's event stream said the last vote was stored (its `tally`), when
    the teacher's screen showed every vote (the sidebar's count, redrawn by that event), and whether the
    teacher's count and distribution (the console's chart, "not on the projector") are exact."""
    from plotly.io import from_json

    teacher = Cookie(url, timeout=120)
    await teacher.connect("classroom")
    await teacher.click("class_start")
    m = CODE.search(teacher.text())
    if not m:
        raise RuntimeError(f"no class code on the teacher's page:\n{teacher.text()[:500]}")
    code = m[1]
    await teacher.click("class_ask")  # the default kind: which word does a word attend to most
    students: list[StreamlitSession] = []
    for i in range(0, n, 10):
        students += await asyncio.gather(*(join(url, code, timeout=timeout) for _ in range(min(10, n - i))))
    # what the teacher's page watches: seq + tally (ui/classroom/panels.py TEACHER_WATCH); every vote moves the tally
    stream: list[tuple[float, int]] = []  # (when, seq + tally) as the teacher's event stream said
    shown: list[tuple[float, int]] = []  # (when, seq + tally, answers) as the teacher's screen showed

    check = teacher._check

    def watched(c: dict) -> int:
        return int(c.get("seq", 0)) + int(c.get("tally", 0))

    def watch_stream() -> None:
        if teacher.latest is not None and (not stream or watched(teacher.latest) != stream[-1][1]):
            stream.append((time.perf_counter(), watched(teacher.latest)))
        check()

    def watch_screen(t: StreamlitSession) -> None:  # what the teacher's page drew: its counters, and its count
        hit = re.search(r"Question: (\d+) answers?", t.text(1))
        if hit and t.sync and t.sync.get("watch") == "seq+tally":
            shown.append((time.perf_counter(), int(t.sync["drawn"]), int(hit[1])))

    teacher._check, teacher.on_full_run = watch_stream, watch_screen
    teacher.start_following()
    for s in students:
        s.start_following()
    out: dict = {"students": n, "rounds": []}
    await students[0].rerun()
    k = sum(1 for o in range(6) if button_states(students[0], f"class_answer_1_{o}"))  # the question's options
    for r in range(1, rounds + 1):
        suffix = "" if r == 1 else "_r2"
        for s in students:  # every page shows the open vote (the event reruns it; a late one is asked again)
            for _ in range(3):
                if button_states(s, f"class_answer_1_0{suffix}"):
                    break
                await s.rerun()
        final = {i: (i % 10 // 3 + r) % k for i in range(n)}  # an uneven spread (3:3:3:1), moved each round
        changers = {i for i in range(n) if i % 2 == 0}  # first another option, then their final one

        async def one(i: int, s: StreamlitSession, final=final, changers=changers, suffix=suffix) -> int:
            options = ([(final[i] + 1) % k] if i in changers else []) + [final[i]]
            for option in options:
                key = f"class_answer_1_{option}{suffix}"
                for _ in range(int(timeout / 0.05)):  # a redraw under way (an event's) has not drawn it yet
                    if not s.running and button_states(s, key):
                        break
                    await asyncio.sleep(0.05)
                await s.click(key)
            return len(options)

        shown.clear()
        t0 = time.perf_counter()
        sent = sum(await asyncio.gather(*(one(i, s) for i, s in enumerate(students))))
        t_done = time.perf_counter()
        deadline = t_done + timeout
        await asyncio.sleep(0.5)
        top = max(c for _, c in stream)  # seq + tally after the last vote (every vote and change moves the tally)
        t_stored = next(t for t, c in stream if c == top)  # the last vote stored and announced
        while time.perf_counter() < deadline and not any(d >= top for _, d, _ in shown):
            await asyncio.sleep(0.05)
        t_shown, _, count = next(((t, d, c) for t, d, c in shown if d >= top), (float("nan"), 0, 0))
        # the teacher's console, "not on the projector": the distribution, read from its chart
        wid = teacher.widget_id("Show the votes and the suggested next move (not on the projector)")
        from streamlit.proto.WidgetStates_pb2 import WidgetState

        teacher.widgets[wid] = WidgetState(id=wid, bool_value=True)
        await teacher.rerun()
        spec = next(
            el.plotly_chart.spec
            for _, (_, el) in teacher.elements.items()
            if el.WhichOneof("type") == "plotly_chart" and "First vote" in el.plotly_chart.spec
        )
        bars = [[int(x) for x in trace.x] for trace in from_json(spec).data]
        want = [sum(1 for v in final.values() if v == o) for o in range(k)]
        out["rounds"].append(
            {
                "round": r,
                "clicks": sent,
                "burst_seconds": t_done - t0,
                "teacher_shown_after_stored": t_shown - t_stored,
                "teacher_shown_after_last_click": t_shown - t_done,
                "count_exact": count == n,
                "distribution": bars[r - 1],
                "expected": want,
                "distribution_exact": bars[r - 1] == want,
            }
        )
        print(
            f"  round {r}: {n} students, {sent} clicks ({len(changers)} changed their vote) in "
            f"{t_done - t0:.2f} s; the teacher's screen showed all {count} votes {t_shown - t_stored:.2f} s "
            f"after the last was stored ({t_shown - t_done:+.2f} s after the last student's page finished); "
            f"distribution {bars[r - 1]} (expected {want}): {'exact' if bars[r - 1] == want else 'WRONG'}",
            flush=True,
        )
        teacher.widgets[wid] = WidgetState(id=wid, bool_value=False)
        if r < rounds:
            await teacher.rerun()
            await teacher.click("class_lock_vote")
            await teacher.click("class_revote")
    await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("follow", "throughput", "failover", "chaos", "votes"))
    ap.add_argument("--students", type=int, nargs="+", default=None)
    ap.add_argument("--changes", type=int, default=6, help="follow: the teacher's changes")
    ap.add_argument("--pause", type=float, default=3.0, help="follow: seconds between two changes")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds a student may take to show a change")
    ap.add_argument("--seconds", type=float, default=40.0, help="throughput: seconds of load per run")
    ap.add_argument("--replicas", type=int, nargs="+", default=[1, 2], help="throughput: app processes to compare")
    ap.add_argument(
        "--processes",
        type=int,
        default=0,
        help="follow: 0 = one `streamlit run app.py` (memory store); N = N processes behind HAProxy, Redis",
    )
    ap.add_argument("--idle", type=float, default=10.0, help="follow: seconds the class waits before the first change")
    ap.add_argument("--page", default="overview", help="follow: the page the teacher (and the class) is on")
    ap.add_argument(
        "--browsers",
        type=int,
        default=0,
        help="follow: as many students in real Chromium beside the websocket clients (every third a phone)",
    )
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args(argv)
    out: dict = {"what": args.what}
    if args.what == "follow":
        server = class_server(args.processes, "glass-classroom-load.log")
        pids = [server.proc.pid] if not args.processes else [a.proc.pid for a in server.apps]
        out["processes"] = args.processes or "one streamlit run app.py (memory store)"
        try:
            for n in args.students or [30, 100]:
                print(f"follow: {n} students, {args.changes} changes on the {args.page} page", flush=True)
                f = asyncio.run(
                    asyncio.wait_for(
                        follow(
                            server.url,
                            n,
                            args.changes,
                            args.pause,
                            args.timeout,
                            pids,
                            args.idle,
                            args.page,
                            args.browsers,
                        ),
                        n * 5 + args.browsers * 20 + args.changes * (args.pause + 2 * args.timeout) + 120,
                    )
                )
                out[f"follow_{n}"] = {
                    **summary(f.latencies),
                    "missed": f.missed,
                    "half_drawn": f.half_drawn,
                    "join_seconds": f.join_seconds,
                    "idle_cpu_per_second": f.idle_cpu,
                    "cpu_per_change": statistics.median(f.change_cpu),
                }
                s = out[f"follow_{n}"]
                print(
                    f"{n} students: teacher change -> student page updated p50 {s['p50']:.2f} s, "
                    f"p95 {s['p95']:.2f} s, max {s['max']:.2f} s; {f.missed} missed of {n * args.changes}; "
                    f"{f.half_drawn} redraws whose end was lost; all joined in {f.join_seconds:.1f} s",
                    flush=True,
                )
                if f.browsers:  # the real-browser witness beside the websocket clients
                    b = summary(f.browser_latencies)
                    s["chromium"] = {**b, "missed": f.browser_missed, "dropouts": f.browser_dropouts}
                    print(
                        f"{f.browsers} Chromium students: teacher change -> page shows it p50 {b['p50']:.2f} s, "
                        f"p95 {b['p95']:.2f} s, max {b['max']:.2f} s; {f.browser_dropouts} drop-outs, "
                        f"{f.browser_missed} missed of {f.browsers * args.changes}",
                        flush=True,
                    )
                if f.events:  # where the time goes: the event's way (store, hub, proxy) or the redraws
                    e = summary(f.events)
                    s["event"] = e
                    print(
                        f"{n} students: teacher change -> its event on the student's stream p50 {e['p50']:.3f} s, "
                        f"p95 {e['p95']:.3f} s",
                        flush=True,
                    )
                print(
                    f"{n} students: app processes' CPU while the class waits {f.idle_cpu:.3f} CPU-s per second "
                    f"({f.idle_cpu * 100:.1f}% of a core); per change (median) {s['cpu_per_change']:.2f} CPU-s = "
                    f"{s['cpu_per_change'] / n * 1000:.1f} ms per student",
                    flush=True,
                )
                print(
                    f"{n} students: per change (median) the simulated students (this process) used "
                    f"{statistics.median(f.client_cpu):.2f} CPU-s, the whole machine "
                    f"{statistics.median(f.machine_cpu):.2f} CPU-s ({os.cpu_count()} cores)",
                    flush=True,
                )
        finally:
            server.stop()
    elif args.what == "votes":
        server = class_server(args.processes, "glass-classroom-votes.log")
        out["processes"] = (
            f"{args.processes} app processes behind HAProxy, Redis"
            if args.processes
            else "one streamlit run app.py (memory store)"
        )
        try:
            for n in args.students or [100]:
                print(f"votes: {n} students vote and vote again at once ({out['processes']})", flush=True)
                res = asyncio.run(asyncio.wait_for(votes(server.url, n, args.timeout), n * 10 + 300))
                out[f"votes_{n}"] = res
                lags = [x["teacher_shown_after_stored"] for x in res["rounds"]]
                exact = all(x["count_exact"] and x["distribution_exact"] for x in res["rounds"])
                print(
                    f"{n} students: teacher's counts {'exact' if exact else 'NOT exact'} in every round; shown "
                    f"{', '.join(f'{x:.2f}' for x in lags)} s after the last vote was stored",
                    flush=True,
                )
        finally:
            server.stop()
    elif args.what == "throughput":
        n = (args.students or [24])[0]
        for r in args.replicas:
            with Cluster(replicas=r, timeout=120) as c:
                print(f"throughput: {n} students, {r} app process(es) behind HAProxy, {args.seconds:.0f} s", flush=True)
                asyncio.run(asyncio.wait_for(saturate(c.url, n, 5), 300))  # warm-up: imports, first analyses
                pids = [a.proc.pid for a in c.apps]
                res = asyncio.run(asyncio.wait_for(saturate(c.url, n, args.seconds, pids), args.seconds + 300))
                out[f"replicas_{r}"] = res
                cpu = res["cpu_seconds"]
                print(
                    f"  {res['interactions']} interactions in {res['seconds']:.1f} s = {res['per_second']:.2f}/s "
                    f"(p50 {res['p50']:.2f} s, p95 {res['p95']:.2f} s), errors {res['errors']}; CPU-s: app "
                    f"processes {cpu['apps']:.1f}, clients {cpu['clients']:.1f}, everything else on the machine "
                    f"{cpu['others']:.1f} (of {2 * res['seconds']:.0f} on 2 cores)",
                    flush=True,
                )
        if len(args.replicas) == 2:
            a, b = (out[f"replicas_{r}"]["per_second"] for r in args.replicas)
            out["ratio"] = b / a
            print(f"{args.replicas[1]} processes vs {args.replicas[0]}: {b / a:.2f}x (target >= 1.6x)")
    elif args.what == "chaos":
        n = (args.students or [40])[0]
        with Cluster(replicas=2, timeout=120, workers=0, supervise=True, env=ONE_ADDRESS) as c:
            print(f"chaos: {n} students on 2 processes behind HAProxy (Redis)", flush=True)
            res = asyncio.run(asyncio.wait_for(chaos(c, n, args.timeout), 900))
        out["chaos"] = res
        print(
            f"chaos: {res['stale']} students left on a stale state ({n} students, {len(res['phases'])} phases, "
            f"{res['clicks_at_run_ends']} clicks at run ends, {res['asks']} asks)",
            flush=True,
        )
    else:
        n = (args.students or [20])[0]
        with Cluster(replicas=2, timeout=120, env=ONE_ADDRESS) as c:
            res = asyncio.run(asyncio.wait_for(failover(c, n, args.timeout * 4), 600))
        out["failover"] = res
        print(json.dumps(res, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
