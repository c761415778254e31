"""Training runs when an app process dies: are they lost? (training/redis_queue.py)

Starts `./dev.sh serve`'s cluster on 127.0.0.1 and free ports (N app processes, W training queue
workers, redis-server, HAProxy) and one Debian Chromium. S students, each in a browser context of their
own (their own XSRF cookie, so their own browser id), open the training page through the proxy, set a
small model (d_model 32, 3000 steps) and press Start. When every run is under way, the app process
holding the most students is SIGKILLed. Their tabs reconnect through the proxy to a live process by
themselves (Streamlit's frontend); the training page there must show the student's own run again,
further on than before the kill. Then every student presses Stop and must get "Training stopped after
M of 3000 steps" with M past the step seen before the kill.

Prints, per student: the process they were on, the step before the kill, seconds until their tab's
cookie named a live process and until their run showed again, the step at Stop; then runs lost (a page
without the run, or showing a run that started afresh), and the medians. The students are looked at one
after the other, so a later student's seconds are an upper bound (they include the earlier waits).

Bounded: --students (4, at most 12), every wait has a timeout (--timeout, 120 s), and the whole run is
cut after --deadline seconds (900).

    .venv/bin/python -m bench.training_failover [--students 4] [--replicas 2] [--workers 4]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time

from playwright.sync_api import sync_playwright

from serving.replicas import Cluster
from tools.browser import IDLE_SELECTOR, STEP_JS, launch_chromium, replica_cookie, start_training

SETTINGS = [
    ("d_model", 32),
    ("Heads", 2),
    ("Layers (encoder and decoder each)", 1),
    ("d_ff", 64),
    ("Batch size (sentence pairs)", 32),
    ("Steps", 3000),
    ("Evaluate on held-out pairs every … steps (0: only at the end)", 0),
]


def start_run(page, url: str, timeout_ms: float) -> None:
    page.goto(url + "/")
    page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=timeout_ms)
    start_training(page, SETTINGS, timeout_ms)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.training_failover", description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=4)
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--workers", type=int, default=4, help="training queue workers (the cap on runs at once)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds per wait")
    ap.add_argument("--deadline", type=float, default=900, help="seconds for the whole run")
    args = ap.parse_args(argv)
    if not 1 <= args.students <= 12 or not 2 <= args.replicas <= 4:
        ap.error("--students 1..12, --replicas 2..4")
    deadline = time.monotonic() + args.deadline
    ms = args.timeout * 1000

    def left_ms() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"the run took over --deadline {args.deadline:.0f} s")
        return min(ms, remaining * 1000)

    rows = []
    # every student here comes from 127.0.0.1, one client: give it a whole class's share (docs/operators.md, NAT)
    share = {"GLASS_JOBS_PER_CLIENT": str(args.students), "GLASS_STARTS_PER_MINUTE": str(2 * args.students)}
    with Cluster(args.replicas, workers=args.workers, timeout=120, env=share) as cluster, sync_playwright() as pw:
        browser = launch_chromium(pw)
        try:
            students = []
            for _ in range(args.students):
                ctx = browser.new_context(viewport={"width": 1280, "height": 900})
                page = ctx.new_page()
                start_run(page, cluster.url, left_ms())
                students.append((ctx, page))
            for _, page in students:
                page.wait_for_function(f"() => ({STEP_JS})() >= 20", timeout=left_ms())
            on = [replica_cookie(ctx) for ctx, _ in students]
            victim = max(set(on), key=on.count)
            before = [page.evaluate(STEP_JS) for _, page in students]
            cluster.kill_app(int(victim[3:]) - 1)
            killed = time.monotonic()
            for i, (ctx, page) in enumerate(students):
                moved = again = None
                try:
                    while replica_cookie(ctx) in (victim, None):
                        if (time.monotonic() - killed) * 1000 > left_ms():
                            raise TimeoutError("no reconnect")
                        page.wait_for_timeout(100)
                    moved = time.monotonic() - killed
                    page.wait_for_function(f"() => ({STEP_JS})() > {before[i]}", timeout=left_ms())
                    again = time.monotonic() - killed
                except Exception as e:  # noqa: BLE001 - a lost run is a result, not a crash
                    print(f"student {i + 1}: {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
                rows.append(
                    {
                        "student": i + 1,
                        "process": on[i],
                        "moved": on[i] == victim,
                        "before": before[i],
                        "reconnect_s": moved if on[i] == victim else None,
                        "run_again_s": again,
                    }
                )
            for i, (_, page) in enumerate(students):
                stopped = None
                try:
                    page.wait_for_selector(IDLE_SELECTOR, state="attached", timeout=left_ms())
                    page.get_by_test_id("stMain").get_by_role("button", name=re.compile("Stop")).click()
                    done = page.get_by_test_id("stMain").get_by_text(
                        re.compile(r"Training (stopped|finished).* (\d+) of 3000 steps")
                    )
                    done.wait_for(timeout=left_ms())
                    stopped = int(re.search(r"(\d+) of 3000 steps", done.inner_text()).group(1))
                except Exception as e:  # noqa: BLE001
                    print(f"student {i + 1} (stop): {type(e).__name__}: {str(e).splitlines()[0]}", file=sys.stderr)
                rows[i]["stopped_at"] = stopped
        finally:
            browser.close()

    print(
        f"{args.students} students, {args.replicas} app processes, {args.workers} queue workers; "
        f"killed: {victim} ({on.count(victim)} students on it)"
    )
    print(
        f"{'student':>7} {'process':>7} {'step before':>11} {'reconnect s':>11} {'run again s':>11} {'stopped at':>10}"
    )
    for r in rows:
        rec = f"{r['reconnect_s']:.1f}" if r["reconnect_s"] is not None else "-"
        again = f"{r['run_again_s']:.1f}" if r["run_again_s"] is not None else "LOST"
        print(
            f"{r['student']:>7} {r['process']:>7} {r['before']:>11} {rec:>11} {again:>11} "
            f"{r.get('stopped_at') or 'LOST':>10}"
        )
    lost = [r for r in rows if r["run_again_s"] is None or not r.get("stopped_at") or r["stopped_at"] <= r["before"]]
    moved = [r for r in rows if r["moved"] and r["run_again_s"] is not None]
    print(f"runs lost: {len(lost)} of {len(rows)} ({sum(r['moved'] for r in rows)} on the killed process)")
    if moved:
        print(
            f"students of the killed process: reconnect median "
            f"{statistics.median(r['reconnect_s'] for r in moved):.1f} s, their run on screen again median "
            f"{statistics.median(r['run_again_s'] for r in moved):.1f} s (max "
            f"{max(r['run_again_s'] for r in moved):.1f} s) after the kill"
        )
    return 1 if lost else 0


if __name__ == "__main__":
    sys.exit(main())
