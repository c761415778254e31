"""The per-client share of the server (serving/fair_share.py) as a school lives it: a class of students and their
teacher behind one NAT address, alone on the server and beside an outsider's idle page.

    .venv/bin/python -m bench.class_share nat [--students 30] [--changes 8] [--pause 1.0] [--rounds 4]
                                              [--page multi_head] [--root DIR]

One `streamlit run app.py` (memory store) with GLASS_TRUST_PROXY=1: every simulated client carries its address in
X-Forwarded-For, as a proxy would write it. The teacher and `--students` students (browserless websocket sessions,
tools/ws_client.py, each with its own XSRF cookie: a browser) all come from 203.0.113.7; the class follows the
teacher on `--page`. In `--rounds` alternating rounds the teacher types `--changes` sentences `--pause` seconds
apart, alone on the server, then with an outsider's page open at 198.51.100.99 (loaded once, then idle). Printed
per condition: the students' follow latency (the teacher sends the sentence -> a student's page shows it) p50, p95
and max, the teacher's own change (sent -> the teacher's page drawn), and the ratio of the p95s. `--root DIR`
serves another checkout (a `git worktree` of an older commit: the "before").

A flooder beside honest students is `python -m bench.class_abuse flood` (its `--kind http` floods plain HTTP).
Bounded: at most 100 students, every wait has a timeout, the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

from bench.class_abuse import SENTENCES, Member
from bench.class_clients import CODE, pct, shows
from serving.processes import start_app

SCHOOL, OUTSIDER = "203.0.113.7", "198.51.100.99"


async def change(teacher: Member, students: list[Member], sentence: str, timeout: float) -> tuple[list[float], float]:
    """The teacher types `sentence`: each student's follow latency (missed: the timeout), and the teacher's own."""
    seen: dict[int, float] = {}
    done = asyncio.Event()

    def hook(s, i):
        if i not in seen and shows(s, sentence):
            seen[i] = time.perf_counter()
            if len(seen) == len(students):
                done.set()

    for i, s in enumerate(students):
        s.on_full_run = lambda s, i=i: hook(s, i)
    t0 = time.perf_counter()
    own = await asyncio.wait_for(teacher.type_sentence(sentence), timeout)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout)
    for s in students:
        s.on_full_run = None
    return [seen.get(i, t0 + timeout) - t0 for i in range(len(students))], own


async def nat(url: str, n: int, changes: int, pause: float, rounds: int, page: str, timeout: float) -> dict:
    teacher = Member(url, SCHOOL)
    await teacher.connect("classroom")
    await teacher.click("Start a class")
    code = CODE.search(teacher.text())[1]
    await teacher.switch_page(page)
    students: list[Member] = []
    for i in range(0, n, 10):
        students += await asyncio.gather(*(_join(url, code) for _ in range(min(10, n - i))))
    for s in students:
        s.start_following()
    out = {"alone": {"follow": [], "teacher": [], "missed": 0}, "outsider": {"follow": [], "teacher": [], "missed": 0}}
    k = 0
    try:
        await asyncio.sleep(2)
        for r in range(rounds):
            condition = "alone" if r % 2 == 0 else "outsider"
            outsider = None
            if condition == "outsider":  # an outsider's page: loaded once, then idle for the whole round
                outsider = Member(url, OUTSIDER)
                await outsider.connect("overview")
            for _ in range(changes):
                k += 1
                follows, own = await change(teacher, students, f"{SENTENCES[k % len(SENTENCES)]} {k}", timeout)
                out[condition]["follow"] += follows
                out[condition]["teacher"].append(own)
                out[condition]["missed"] += sum(f >= timeout for f in follows)
                await asyncio.sleep(pause)
            if outsider is not None:
                await outsider.close()
            print(
                f"  round {r + 1} ({condition}): follow p50 {statistics.median(out[condition]['follow']):.2f} s, "
                f"p95 {pct(out[condition]['follow'], 0.95):.2f} s so far",
                flush=True,
            )
    finally:
        await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)
    return out


async def _join(url: str, code: str) -> Member:
    s = Member(url, SCHOOL)
    await s.connect("classroom", f"class={code}")
    if f"Following class {code}" not in s.text(1):
        raise RuntimeError(f"no join: {s.text(1)[:300]!r}")
    return s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=("nat",))
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--changes", type=int, default=8)
    ap.add_argument("--pause", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--page", default="multi_head")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--root", type=Path, default=None, help="serve this checkout instead (a before)")
    args = ap.parse_args(argv)
    n = max(1, min(args.students, 100))
    env = {"GLASS_TRUST_PROXY": "1", "GLASS_STUDENTS_PER_ADDRESS": "1000"}
    server = start_app(log=Path("/tmp") / "glass-class-share.log", timeout=120, extra_env=env, root=args.root)
    try:
        print(
            f"nat: a teacher and {n} students behind {SCHOOL}, {args.rounds} rounds of {args.changes} changes on "
            f"{args.page}, alone and beside an idle page at {OUTSIDER}{', ' + str(args.root) if args.root else ''}",
            flush=True,
        )
        r = asyncio.run(
            asyncio.wait_for(
                nat(server.url, n, args.changes, args.pause, args.rounds, args.page, args.timeout),
                120 + n * 10 + args.rounds * args.changes * 60,
            )
        )
    finally:
        server.stop()
    for condition in ("alone", "outsider"):
        f, t = r[condition]["follow"], r[condition]["teacher"]
        print(
            f"{condition}: follow p50 {statistics.median(f):.2f} s, p95 {pct(f, 0.95):.2f} s, max {max(f):.2f} s "
            f"({len(f)} samples, {r[condition]['missed']} missed); the teacher's own change p50 "
            f"{statistics.median(t):.2f} s, max {max(t):.2f} s",
            flush=True,
        )
    ratio = pct(r["outsider"]["follow"], 0.95) / pct(r["alone"]["follow"], 0.95)
    print(f"nat: follow p95 beside an idle outsider / alone = {ratio:.2f}x (target <= 1.2x)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
