"""A class of 30 presses Train at once: how long until the last student has a model?

Thirty jobs with the training page's default settings (`model.train_settings.DEFAULTS`, its probes and their
snapshot interval) are submitted at the same moment to one `training.local_pool.LocalPool` with two
training slots, as one server on a 2-core machine runs them (`GLASS_MAX_TRAINING_JOBS`, default: the
cores). The class counts as one client, as a school behind one address does, with the README's settings
for it (30 jobs, 60 starts a minute). Each student's queue wait (submit to start), run time (start to its
model handed over) and the time from its start until its held-out exact match was first seen at 95% or
more (polled every 0.2 s) are printed, then the class's figures. Target: every run finished within 4
minutes of the click.

Only the training service runs here: the pages' own work (30 browsers' redraws) is not on the clock; the
classroom load tests measure that (`bench.load_test`).

    python -m bench.bench_class_training [--students 30] [--slots 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time

from model import train_settings
from training.job import make_job
from training.local_pool import LocalPool

TARGET_S = 240.0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_class_training", description=__doc__.split("\n\n")[0])
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--slots", type=int, default=2, help="training slots (jobs training at once)")
    ap.add_argument("--timeout", type=float, default=900, help="give up after this many seconds")
    args = ap.parse_args(argv)
    d = train_settings.DEFAULTS
    settings = {
        f.name: getattr(d, f.name)
        for f in dataclasses.fields(d)
        if f.name not in ("clip_grad_norm", "max_seconds", "max_len")
    }
    pool = LocalPool(
        max_running=args.slots, max_seconds=600, jobs_per_client=args.students, starts_per_minute=2 * args.students
    )
    print(
        f"{args.students} students, {args.slots} training slots, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f}; each: d_model {d.d_model}, {d.n_layers}+{d.n_layers} layers, {d.steps} steps, "
        f"evaluation every {d.eval_every}, probes every {train_settings.DEFAULT_PROBE_EVERY}",
        flush=True,
    )
    jobs = [
        make_job(
            settings,
            probe_every=train_settings.DEFAULT_PROBE_EVERY,
            owner=f"student-{i}",
            client="the school",
            session_id=f"session-{i}",
        )
        for i in range(args.students)
    ]
    click = time.monotonic()
    for job in jobs:
        pool.submit(job)
    hit: dict[int, float] = {}  # student -> seconds from its start until a poll saw 95%
    try:
        while not all(job.done for job in jobs) and time.monotonic() - click < args.timeout:
            time.sleep(0.2)
            for i, job in enumerate(jobs):
                if i not in hit and job.started is not None and any(e.exact_match >= 0.95 for e in job.view().evals):
                    hit[i] = time.monotonic() - job.started
    finally:
        pool.shutdown()
    rows = []
    print(
        f"\n{'student':>7s} {'queue wait s':>12s} {'run s':>6s} {'95% after s':>11s} {'final EM':>8s} {'done at s':>9s}"
    )
    for i, job in enumerate(jobs):
        v = job.view()
        wait = (job.started - click) if job.started is not None else None
        run = (job.ended - job.started) if job.ended is not None and job.started is not None else None
        done = (job.ended - click) if job.ended is not None else None
        final = v.evals[-1].exact_match if v.evals else None
        rows.append((wait, run, hit.get(i), final, done, v.state))
        print(
            f"{i + 1:7d} {wait or 0:12.1f} {run or 0:6.1f} "
            f"{'-' if i not in hit else format(hit[i], '.1f'):>11s} "
            f"{'-' if final is None else format(final, '.1%'):>8s} {done or 0:9.1f} {v.state if v.done else ''}"
        )
    finished = [r for r in rows if r[5] == "finished"]
    runs = [r[1] for r in finished]
    waits = [r[0] for r in finished]
    last = max((r[4] for r in rows if r[4] is not None), default=None)
    reached = sum(r[2] is not None for r in rows)
    print(f"\n{len(finished)} of {len(rows)} runs finished; {reached} reached 95% held-out exact match")
    if runs:
        print(
            f"queue wait: median {statistics.median(waits):.1f} s, longest {max(waits):.1f} s; run time: median "
            f"{statistics.median(runs):.1f} s, longest {max(runs):.1f} s"
        )
    if last is not None:
        ok = len(finished) == len(rows) and last <= TARGET_S
        print(
            f"the last student's model was ready {last:.1f} s after the click "
            f"(target <= {TARGET_S:.0f} s: {'met' if ok else 'NOT met'})"
        )
    return 0 if len(finished) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
