"""A class in real browsers (Chromium): drop-outs and seconds to the stop, one process or two behind HAProxy.

A teacher (a 1280 x 720 projector) and N students, each its own Chromium context (laptops, a tablet, phones), on
the shipped plan "Thinking Machines in a dozen stops": the teacher starts the class from the plan's link, the
students join by the join link, the teacher presses the plan's Next through every stop and Back to the first,
runs a peer-instruction cycle (ask, vote, lock, discuss, second vote, lock, reveal) and ends the class. Nothing is
clicked on the students' side (but "Follow the teacher" after a drop-out, so one is counted once). Driven by
tools/class_soak.py; what it counts is written there.

    .venv/bin/python -m bench.classroom_browser [--students 6] [--setup one|replicas|both] [--runs 3] [--shots DIR]
                                                [--plan il-or-elle]

Prints, per run: "N students, M moves: K drop-outs, p50 X s / p95 Y s to the stop (L late of N*M)", the peer
cycle's steps and the end. Servers on 127.0.0.1 and free ports, stopped at the end; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from classroom import plans
from serving.processes import start_app
from serving.replicas import Cluster
from tools.class_soak import Classroom, ExpectedStop, SoakResult, percentile

PLAN = Path(__file__).resolve().parents[1] / "assets" / "plans" / "thinking-machines.json"


def plan_and_stops(path: Path = PLAN) -> tuple[str, list[ExpectedStop]]:
    """The plan's link (/classroom?plan=...) and what each of its stops shows."""
    raw = json.loads(path.read_text())
    plan = plans.check_plan(raw, None)
    stops = [
        ExpectedStop(i + 1, len(plan.stops), s.state.get("step") if s.state.get("page") == "lesson" else None)
        for i, s in enumerate(plan.stops)
    ]
    return f"/classroom?plan={plans.plan_to_link(plan)}", stops


def soak(
    url: str,
    students: int,
    stops_to: int | None = None,
    back: bool = True,
    peer: bool = True,
    shots: Path | None = None,
    log=print,
    plan: Path = PLAN,
) -> SoakResult:
    """One class at `url`: join, the plan (its first `stops_to` stops; all by default) forward and back, a peer
    cycle, the end."""
    from playwright.sync_api import sync_playwright

    link, stops = plan_and_stops(plan)
    stops = stops[:stops_to] if stops_to else stops
    with sync_playwright() as p:
        room = Classroom(p, url, students, shots=shots, log=log)
        try:
            room.start(link)
            # the teacher's page is the Classroom page now: take the class to the first stop
            room.teacher_click(lambda: room.teacher.page.get_by_role("button", name="Take the class there").click())
            room.join()
            t0 = time.perf_counter()
            room.check_students("stop-1", stops[0], t0, 30)
            room.plan(stops, back=back)
            if peer:
                room.peer_cycle(stops[0])
            room.end()
            return room.result
        finally:
            room.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=6)
    ap.add_argument("--setup", choices=("one", "replicas", "both"), default="both")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--stops", type=int, default=None, help="only the plan's first N stops")
    ap.add_argument("--shots", type=Path, default=None, help="screenshots of drop-outs and late students here")
    ap.add_argument(
        "--plan",
        default="thinking-machines",
        help="a shipped plan's file name in assets/plans/ (il-or-elle moves the class between pages)",
    )
    args = ap.parse_args(argv)
    env = {"OMP_NUM_THREADS": "1"}
    failed = 0
    setups = ("one", "replicas") if args.setup == "both" else (args.setup,)
    plan = PLAN.with_name(f"{args.plan}.json")
    print(f"machine load (1, 5, 15 min): {os.getloadavg()}", flush=True)
    for setup in setups:
        results = []
        for run in range(args.runs):
            label = "one process" if setup == "one" else "2 processes behind HAProxy (Redis)"
            print(f"== {label}, run {run + 1} of {args.runs}", flush=True)
            if setup == "one":
                server = start_app(extra_env=env, timeout=90)
                try:
                    res = soak(server.url, args.students, args.stops, shots=args.shots, plan=plan)
                finally:
                    server.stop()
            else:
                with Cluster(2, env=env, workers=0) as cluster:
                    res = soak(cluster.url, args.students, args.stops, shots=args.shots, plan=plan)
            results.append(res)
            print(res.summary(), flush=True)
            for line in res.events:
                print("  peer instruction: " + line, flush=True)
            print(
                f"  the end reached every student: p50 {percentile(res.ended_seconds, 50):.2f} s, "
                f"max {max(res.ended_seconds):.2f} s",
                flush=True,
            )
            failed += bool(res.dropouts or res.late)
        every = [s for r in results for s in r.seconds]
        drops = sum(len(r.dropouts) for r in results)
        moves = sum(r.moves for r in results)
        print(
            f"{setup}: {args.students} students, {moves} moves in {len(results)} runs: {drops} drop-outs, "
            f"p50 {percentile(every, 50):.2f} s / p95 {percentile(every, 95):.2f} s to the stop",
            flush=True,
        )
    print(f"machine load (1, 5, 15 min): {os.getloadavg()}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
