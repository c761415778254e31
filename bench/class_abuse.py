"""A hostile visitor against classroom mode, measured: what one address can do to a class and to its other
students, and what a class goes through while its Redis is away.

    .venv/bin/python -m bench.class_abuse flood [--kind answers|reruns|http|both] [--sessions 8] [--rate 60]
                                                [--samples 32]
    .venv/bin/python -m bench.class_abuse classes [--sessions 12]
    .venv/bin/python -m bench.class_abuse students [--fakes 100] [--grace 20]
    .venv/bin/python -m bench.class_abuse outage [--seconds 20]

Each starts `streamlit run app.py` (the memory store; `outage`: one app process with Redis, serving/replicas.py)
with GLASS_TRUST_PROXY=1, so that every simulated client carries its own address in X-Forwarded-For as a
proxy would write it. `--root DIR` serves another checkout instead (a `git archive` of an older commit: the
"before" of a before/after); `--no-limit` switches the per-client share off (GLASS_CLIENT_SHARE=1000).

flood: a teacher starts a class, asks a question and goes to the overview; another student (their own
address) joins and follows. Measured, in `--rounds` alternating turns without and with the flood (the
machine's other load hits both alike): the student's rerun latency (a full run of the page, as a click does)
and their follow latency (the teacher types a sentence: the time until the student's page shows it). The
flood: `--sessions` sessions of one address, each sending `--rate` messages a second without waiting for
answers: answer-button clicks (`answers`: in the question panel's fragment, alternating options) or full
page reruns (`reruns`); or (`http`) two loops per session of plain HTTP requests, each sent as soon as the last was
answered: the page, the health check, and the session's event stream opened and closed (bench/http_flood.py, in a
process of its own at nice 10: a remote flooder's work is not on the server's cores). The flood's sessions join
anew each turn, are measured against once their burst is spent, and leave at its end (what they left queued goes
with their connections: "without the flood" is without it). Printed: p50 and p95 of
both latencies, without and during, and the p95 ratio; a rerun or change that takes longer than `--timeout` counts
as stalled (at the timeout).

classes: `--sessions` browsers of one address each press "Start a class"; then one of another address.

students: a class with a question; `--fakes` cookieless sessions of one address join by the link, follow
(their pages' event streams open) and vote; a real student of another address joins; the fake sessions
close, and the teacher's count is read every second until it shows the real student alone.

outage: Redis killed for `--seconds` under a teacher on the class console (its answers redraw every second,
as a browser's timer does) and a following student; the app process's CPU and log lines meanwhile, what
each page says, and whether the class is back (question, students) and follows the teacher's next change
once Redis is started again from its append-only file.

What survives each killed part (HAProxy, Redis, an app process) is `python -m bench.classroom_load chaos`.
Every client is a browserless websocket session (tools/ws_client.py). Bounded: at most 16 flood sessions of
at most 120 messages a second, 16 class starts, 200 fake students; every wait has a timeout; servers on
127.0.0.1 and free ports, stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import statistics
import sys
import time
from pathlib import Path

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ClientState_pb2 import ClientState
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.proto.WidgetStates_pb2 import WidgetState, WidgetStates

from bench.abuse import SENTENCES, Visitor
from bench.class_clients import CODE, cpu_seconds, pct, shows
from serving.fair_share import CLIENT_BURST
from serving.processes import start_app

TEACHER, STUDENT, FLOODER = "192.0.2.10", "198.51.100.20", "203.0.113.66"


class Member(Visitor):
    """A Visitor that remembers which fragment drew each element (a click in a fragment reruns that fragment
    only, as the frontend sends it), and can stop reading what the server sends (a flood's sessions read their
    websocket without parsing it: the server's work is what is measured, not this script's)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.fragment_of: dict[str, str] = {}  # widget id -> fragment id
        self.drain = False

    def _handle(self, msg) -> None:
        d = msg.delta
        if msg.WhichOneof("type") == "delta" and d.fragment_id and d.WhichOneof("type") == "new_element":
            el = d.new_element
            if el.WhichOneof("type") == "button":
                self.fragment_of[el.button.id] = d.fragment_id
        super()._handle(msg)

    async def _read(self) -> None:
        try:
            async for raw in self._ws:
                if self.drain:
                    continue
                msg = ForwardMsg()
                msg.ParseFromString(raw)
                self._handle(msg)
        except Exception as e:  # noqa: BLE001
            self._fail(e)
        self._fail(ConnectionError("the server closed the websocket"))

    def answer_buttons(self) -> list[str]:
        return sorted(i for i in self.fragment_of if "class_answer_" in i)

    def message(self, button: str | None) -> bytes:
        """One rerun request: a click on `button` (in its fragment), or a full rerun of the page (None)."""
        state = ClientState(page_script_hash=self.page_hash, query_string=self.query_string)
        widgets = list(self.widgets.values())
        if button is not None:
            state.fragment_id = self.fragment_of[button]
            widgets = [w for w in widgets if w.id != button] + [WidgetState(id=button, trigger_value=True)]
        state.widget_states.CopyFrom(WidgetStates(widgets=widgets))
        state.context_info.timezone, state.context_info.locale = "UTC", "en-US"
        state.context_info.url = self.page_url
        return BackMsg(rerun_script=state).SerializeToString()


async def start_class(url: str) -> tuple[Member, str]:
    """A teacher: starts a class, asks the default question, goes to the overview."""
    teacher = Member(url, TEACHER)
    await teacher.connect("classroom")
    await teacher.click("Start a class")
    m = CODE.search(teacher.text())
    if not m:
        raise RuntimeError(f"no class code on the teacher's page:\n{teacher.text()[:400]}")
    await teacher.click("Ask the class")
    await teacher.switch_page("overview")
    return teacher, m[1]


async def join(url: str, code: str, address: str) -> Member:
    s = Member(url, address)
    await s.connect("classroom", f"class={code}")
    if f"Following class {code}" not in s.text(1):
        raise RuntimeError(f"no join: {s.text(1)[:300]!r} {s.text()[:300]!r}")
    return s


async def measure(teacher: Member, student: Member, samples: int, k0: int, timeout: float) -> dict:
    """`samples` of the student's rerun latency and of their follow latency, alternately."""
    reruns, follows, missed = [], [], 0
    for k in range(samples):
        try:
            reruns.append(await asyncio.wait_for(student.rerun(), timeout))
        except TimeoutError:  # stalled: counted at the timeout (the true figure is larger)
            reruns.append(timeout)
            missed += 1
            await asyncio.sleep(0.2)
            continue
        sentence = SENTENCES[(k0 + k) % len(SENTENCES)] + f" {k0 + k}"
        seen = asyncio.get_running_loop().create_future()
        student.on_full_run = lambda s, sentence=sentence, seen=seen: (
            shows(s, sentence) and not seen.done() and seen.set_result(time.perf_counter())
        )
        t0 = time.perf_counter()
        try:
            await asyncio.wait_for(teacher.type_sentence(sentence), timeout)
            follows.append(await asyncio.wait_for(seen, max(0.1, timeout - (time.perf_counter() - t0))) - t0)
        except TimeoutError:  # the change never reached the student within the timeout: counted at it
            follows.append(timeout)
            missed += 1
        student.on_full_run = None
        await asyncio.sleep(0.2)
    return {"rerun": reruns, "follow": follows, "missed": missed}


async def flooding(sessions: list[Member], kind: str, rate: float, stop: asyncio.Event) -> int:
    """Every session sends `rate` rerun requests a second until `stop` (`http`: each runs loops of plain HTTP
    requests instead, 2 per session, as fast as they are answered: the page, the health check, its event stream
    opened and closed); how many were sent."""
    if kind == "http":  # in a process of its own (bench/http_flood.py), niced: a remote flooder's work is not on the
        # server's cores, and this machine's two cores also run the server and the measuring client
        proc = await asyncio.create_subprocess_exec(
            "nice",
            "-n",
            "10",
            sys.executable,
            "-m",
            "bench.http_flood",
            sessions[0].page_url,
            FLOODER,
            str(2 * len(sessions)),
            "600",
            "/",
            "/_stcore/health",
            sessions[0].sync["url"],
            stdout=asyncio.subprocess.PIPE,
        )
        await stop.wait()
        proc.terminate()
        out, _ = await proc.communicate()
        return int(out.split()[0]) if out.strip() else 0
    sent = 0

    async def one(s: Member) -> None:
        nonlocal sent
        buttons = s.answer_buttons()
        s.drain = True
        k, start = 0, time.perf_counter()
        while not stop.is_set():
            button = buttons[k % len(buttons)] if kind == "answers" else None
            try:
                await s._ws.send(s.message(button))
            except Exception:  # noqa: BLE001 - the server closed it: this session's flood ends
                return
            k += 1
            sent += 1
            delay = start + k / rate - time.perf_counter()
            if delay > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), delay)

    await asyncio.gather(*(one(s) for s in sessions))
    return sent


async def quiet(pid: int, limit: float = 60.0) -> None:
    """Wait until the server uses under a tenth of a core (at most `limit` seconds)."""
    end = time.monotonic() + limit
    while time.monotonic() < end:
        c0 = cpu_seconds([pid])
        await asyncio.sleep(1.0)
        if cpu_seconds([pid]) - c0 < 0.1:
            return


def summary(xs: list[float]) -> str:
    if not xs:
        return "no samples"
    return f"p50 {statistics.median(xs):.3f} s, p95 {pct(xs, 0.95):.3f} s (n={len(xs)})"


async def flood(
    url: str, pid: int, kind: str, n: int, rate: float, samples: int, rounds: int = 4, timeout: float = 30
) -> dict:
    teacher, code = await start_class(url)
    student = await join(url, code, STUDENT)
    student.start_following()
    flooders: list[Member] = []

    async def arrive() -> None:  # the flood's sessions, anew each turn (what one left queued goes with it)
        for i in range(0, n, 4):
            flooders.extend(await asyncio.gather(*(join(url, code, FLOODER) for _ in range(min(4, n - i)))))
        if kind == "answers" and not all(f.answer_buttons() for f in flooders):
            raise RuntimeError("a flood session sees no answer button")

    try:
        await student.rerun()  # warm
        before = {"rerun": [], "follow": [], "missed": 0}
        during = {"rerun": [], "follow": [], "missed": 0}
        sent, wall, cpu, k = 0, 0.0, 0.0, 0
        per = max(1, samples // rounds)
        for turn in range(rounds):  # without and with the flood in turns: the machine's other load hits both alike
            r = await measure(teacher, student, per, k, timeout)
            k += per
            for key in ("rerun", "follow"):
                before[key] += r[key]
            before["missed"] += r["missed"]
            await arrive()
            stop = asyncio.Event()
            cpu0, t0 = cpu_seconds([pid]), time.perf_counter()
            task = asyncio.create_task(flooding(flooders, kind, rate, stop))
            # the flood is on, past its burst: a client quiet for a while may use CLIENT_BURST (3) CPU-seconds at once
            # (serving/fair_share.py), which takes one interpreter at least that long; what is measured is the flood
            await asyncio.sleep(CLIENT_BURST + 2.0)
            r = await measure(teacher, student, per, k, timeout)
            k += per
            for key in ("rerun", "follow"):
                during[key] += r[key]
            during["missed"] += r["missed"]
            stop.set()
            sent += await task
            wall += time.perf_counter() - t0
            cpu += cpu_seconds([pid]) - cpu0
            await asyncio.gather(*(asyncio.wait_for(f.close(), 10) for f in flooders), return_exceptions=True)
            flooders.clear()  # the flood leaves, and what it left queued on its connections goes with them
            if turn < rounds - 1:
                await quiet(pid)  # the server is quiet again before the next turn without the flood
    finally:
        for s in [teacher, student, *flooders]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(s.close(), 10)
    return {
        "kind": kind,
        "sessions": n,
        "rate": rate,
        "before": before,
        "during": during,
        "sent": sent,
        "seconds": wall,
        "server_cpu": cpu,
    }


def print_flood(r: dict) -> None:
    print(
        f"flood of {r['kind']}: {r['sessions']} sessions from one address, {r['rate']:g} messages/s each; "
        f"{r['sent']} sent in {r['seconds']:.0f} s; server CPU {r['server_cpu']:.1f} s"
    )
    for what in ("rerun", "follow"):
        b, d = r["before"][what], r["during"][what]
        ratio = pct(d, 0.95) / pct(b, 0.95) if b and d else float("nan")
        print(
            f"  another student's {what} latency: without the flood {summary(b)}; during {summary(d)}; "
            f"p95 ratio {ratio:.2f}x"
        )
    if r["during"]["missed"] or r["before"]["missed"]:
        print(
            f"  stalled (a rerun or a change not shown within the timeout, counted at it): without the flood "
            f"{r['before']['missed']}, during {r['during']['missed']}"
        )


async def outage(seconds: float, timeout: float = 60) -> dict:
    """A class on one app process with Redis (serving/replicas.py); Redis killed (SIGKILL) for `seconds`, then
    started again with its data. The teacher's page is the class's console (its answers redraw every second, as
    a browser's timer does), the student's page follows by its event stream. Measured: the app process's CPU
    and log lines during the outage, how many runs the two pages made meanwhile, what each page said, and
    whether the class came back (its question, the student's place, the teacher's next change on the student's
    page)."""
    from bench.class_clients import Cookie
    from bench.class_clients import join as join_class
    from classroom import RedisClassStore
    from serving.processes import wait_until
    from serving.replicas import Cluster

    with Cluster(replicas=1, timeout=120, workers=0) as c:
        app, log = c.apps[0], Path(c.apps[0].log)
        teacher = Cookie(c.url, timeout=timeout)
        await teacher.connect("classroom")
        await teacher.click("class_start")
        code = CODE.search(teacher.text())[1]
        await teacher.click("class_ask")
        student = await join_class(c.url, code, timeout=timeout)
        student.start_following()
        store = RedisClassStore(c.redis_url, prefix="glass:class")
        before = store.snapshot(code)
        polling = [asyncio.create_task(x.poll_fragments(seconds + timeout)) for x in (teacher, student)]
        try:
            await asyncio.sleep(2.0)  # the append-only file is written every second
            lines0, cpu0 = len(log.read_text(errors="replace").splitlines()), cpu_seconds([app.proc.pid])
            runs0 = (teacher.full_runs, student.full_runs, len(teacher.runs), len(student.runs))
            c.kill("redis")
            await asyncio.sleep(seconds)
            text = log.read_text(errors="replace").splitlines()
            out = {
                "seconds": seconds,
                "cpu": cpu_seconds([app.proc.pid]) - cpu0,
                "log_lines": len(text) - lines0,
                "log": text[lines0:][:12],
                "teacher_full_runs": teacher.full_runs - runs0[0],
                "student_full_runs": student.full_runs - runs0[1],
                "teacher_says": [
                    x
                    for x in teacher.text().splitlines() + teacher.text(1).splitlines()
                    if "unreachable" in x or "cannot be reached" in x
                ][:2],
            }
            await student.rerun()  # the student's page, drawn during the outage
            out["student_says"] = [x for x in student.text(1).splitlines() if "unreachable" in x][:2]
            t0 = time.perf_counter()
            c.redis.start()
            wait_until(c.redis.ping, None, 30, "redis-server")
            after = store.snapshot(code)
            out["class_kept"] = (
                after is not None
                and after.question is not None
                and before.question is not None
                and after.question.id == before.question.id
                and after.students == before.students
            )
            await teacher.switch_page("overview")
            seen = asyncio.get_running_loop().create_future()
            student.on_full_run = lambda s: shows(s, "the class is back") and not seen.done() and seen.set_result(1)
            for _ in range(20):  # a change made while the app's connection to Redis comes back may be refused
                await teacher.type_sentence("the class is back")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(seen), 3)
                    break
            out["resumed_after"] = time.perf_counter() - t0 if seen.done() else None
        finally:
            for t in polling:
                t.cancel()
            store.close()
            await asyncio.gather(*polling, teacher.close(), student.close(), return_exceptions=True)
    return out


def print_outage(r: dict) -> None:
    print(
        f"Redis away for {r['seconds']:.0f} s: app process CPU {r['cpu']:.2f} s, {r['log_lines']} log lines, "
        f"full runs: teacher {r['teacher_full_runs']}, student {r['student_full_runs']}"
    )
    print(f"  the teacher's page says: {r['teacher_says']}; the student's: {r['student_says']}")
    print(
        f"  Redis back: class kept (question, students) {r['class_kept']}; the teacher's next change on the "
        f"student's page {r['resumed_after']:.1f} s after Redis started"
        if r["resumed_after"] is not None
        else "  Redis back: the teacher's change never reached the student"
    )
    for line in r["log"]:
        print(f"  log: {line[:160]}")


async def classes(url: str, n: int) -> dict:
    """`n` browsers behind one address each press "Start a class" (once, all within a few seconds); then one
    more from another address."""
    out = {"attempts": n, "started": 0, "refused": {}}
    sessions = []
    t0 = time.perf_counter()
    try:
        for _ in range(n):
            v = Member(url, FLOODER)
            sessions.append(v)
            await v.connect("classroom")
            await v.click("Start a class")
            if CODE.search(v.text()):
                out["started"] += 1
            else:
                said = next(
                    (x for x in v.text().splitlines() if "class" in x.lower() and ("limit" in x or "Too many" in x)),
                    "no code, no message",
                )
                out["refused"][said[:120]] = out["refused"].get(said[:120], 0) + 1
        out["seconds"] = time.perf_counter() - t0
        other = Member(url, "192.0.2.77")
        sessions.append(other)
        await other.connect("classroom")
        await other.click("Start a class")
        out["another_address_starts"] = bool(CODE.search(other.text()))
    finally:
        await asyncio.gather(*(x.close() for x in sessions), return_exceptions=True)
    return out


def print_classes(r: dict) -> None:
    print(
        f"classes one address can start: {r['started']} of {r['attempts']} browsers pressing Start in "
        f"{r['seconds']:.0f} s; another address still starts one: {r['another_address_starts']}"
    )
    for said, k in r["refused"].items():
        print(f"  refused {k}x: {said}")


async def fake_students(url: str, n: int, grace: float, timeout: float = 90) -> dict:
    """A class (teacher, a question); `n` cookieless sessions from one address join by the link, follow (their
    pages' event streams open) and vote; a real student from another address joins; the fake sessions close,
    and the teacher's count is watched until it shows the real student alone."""
    teacher, code = await start_class(url)
    await teacher.switch_page("classroom")
    fakes: list[Member] = []
    out: dict = {"fakes": n}

    def console() -> tuple[int, int]:
        text = teacher.text()
        m = re.search(r"(\d+) of (\d+) students answered", text)
        return (int(m[2]), int(m[1])) if m else (-1, -1)

    try:
        for i in range(0, n, 10):
            batch = [Member(url, FLOODER) for _ in range(min(10, n - i))]
            fakes += batch
            await asyncio.gather(*(f.connect("classroom", f"class={code}") for f in batch), return_exceptions=True)
        joined = [f for f in fakes if f"Following class {code}" in f.text(1)]
        out["joined"] = len(joined)
        out["refused_says"] = next(
            (x for f in fakes if f not in joined for x in f.text().splitlines() if "address" in x or "full" in x), ""
        )[:160]
        for f in joined:
            f.start_following()
        for f in joined:  # each presses an answer button (a click, as the frontend sends it: in its fragment)
            buttons = f.answer_buttons()
            if buttons:
                with contextlib.suppress(Exception):
                    await f._ws.send(f.message(buttons[0]))
        last, still = None, 0
        for _ in range(40):  # until the teacher's count stays the same for 3 s (the votes are paced, not lost)
            await asyncio.sleep(1.0)
            await teacher.rerun()
            still = still + 1 if console() == last else 0
            last = console()
            if still >= 3:
                break
        out["teacher_sees_students"], out["teacher_sees_votes"] = console()
        real = await join(url, code, STUDENT)
        real.start_following()
        fakes.append(real)
        await asyncio.gather(*(f.close() for f in joined), return_exceptions=True)
        t0 = time.perf_counter()
        out["count_back_to_real_after"] = None
        while time.perf_counter() - t0 < timeout:
            await asyncio.sleep(1.0)
            await teacher.rerun()
            if console()[0] == 1:
                out["count_back_to_real_after"] = time.perf_counter() - t0
                break
        out["grace"] = grace
    finally:
        await asyncio.gather(*(x.close() for x in [teacher, *fakes]), return_exceptions=True)
    return out


def print_students(r: dict) -> None:
    print(
        f"fake students one address can add: {r['joined']} of {r['fakes']} cookieless sessions joined "
        f"(refused: {r['refused_says']!r}); the teacher saw {r['teacher_sees_students']} students, "
        f"{r['teacher_sees_votes']} votes"
    )
    back = r["count_back_to_real_after"]
    print(
        "  once their sessions closed, the teacher's count showed the one real student "
        + (f"after {back:.0f} s" if back is not None else "never (within 90 s)")
        + f" (GLASS_PRESENCE_SECONDS={r['grace']:g})"
    )


def run_server(extra: dict | None = None, root: str | None = None):
    env = {"GLASS_TRUST_PROXY": "1", **(extra or {})}
    return start_app(
        log=Path("/tmp") / "glass-class-abuse.log", timeout=120, extra_env=env, root=Path(root) if root else None
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario", choices=["flood", "outage", "classes", "students"])
    ap.add_argument("--fakes", type=int, default=100, help="students: cookieless sessions from one address")
    ap.add_argument("--grace", type=float, default=20, help="students: GLASS_PRESENCE_SECONDS for this run (>= 20)")
    ap.add_argument("--kind", choices=["answers", "reruns", "http", "both"], default="both")
    ap.add_argument(
        "--sessions", type=int, default=8, help="flood: sessions of one address; classes: browsers pressing Start"
    )
    ap.add_argument("--rate", type=float, default=60)
    ap.add_argument("--samples", type=int, default=32, help="flood: samples of each latency, without and with it")
    ap.add_argument("--seconds", type=float, default=20, help="outage: how long Redis stays away")
    ap.add_argument("--rounds", type=int, default=4, help="turns without and with the flood")
    ap.add_argument("--timeout", type=float, default=20, help="seconds a rerun or a change may take (then: stalled)")
    ap.add_argument("--no-limit", action="store_true", help="switch the per-client share off (GLASS_CLIENT_SHARE=1000)")
    ap.add_argument(
        "--root",
        help="flood, classes, students: serve another checkout (e.g. `git archive` of an older "
        "commit), for a before/after comparison",
    )
    ap.add_argument("--json", action="store_true", help="also print the raw figures as JSON")
    args = ap.parse_args(argv)
    args.sessions, args.rate = max(1, min(args.sessions, 16)), max(1.0, min(args.rate, 120.0))
    if args.scenario == "flood":
        server = run_server({"GLASS_CLIENT_SHARE": "1000"} if args.no_limit else None, args.root)
        try:
            for kind in ["answers", "reruns"] if args.kind == "both" else [args.kind]:
                r = asyncio.run(
                    asyncio.wait_for(
                        flood(
                            server.url,
                            server.proc.pid,
                            kind,
                            args.sessions,
                            args.rate,
                            args.samples,
                            max(1, min(args.rounds, 10)),
                            min(args.timeout, 60),
                        ),
                        1800,
                    )
                )
                print_flood(r)
                if args.json:
                    print(json.dumps(r))
        finally:
            server.stop()
    if args.scenario in ("classes", "students"):
        server = run_server({"GLASS_PRESENCE_SECONDS": str(args.grace)}, args.root)
        try:
            if args.scenario == "classes":
                print_classes(asyncio.run(asyncio.wait_for(classes(server.url, min(args.sessions, 40)), 600)))
            else:
                print_students(
                    asyncio.run(asyncio.wait_for(fake_students(server.url, min(args.fakes, 200), args.grace), 900))
                )
        finally:
            server.stop()
    if args.scenario == "outage":
        r = asyncio.run(asyncio.wait_for(outage(min(args.seconds, 120)), 600))
        print_outage(r)
        if args.json:
            print(json.dumps(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
