"""The class's event streams under attack (ui/classroom/push.py, serving/streams.py): how many one member and one
address may hold, what a stream costs the server, and what an attacker holding them costs another class.

    .venv/bin/python -m bench.class_streams [--members 64] [--changes 8] [--root DIR]

One `streamlit run app.py` (memory store) with GLASS_TRUST_PROXY=1 (every simulated client carries its address in
X-Forwarded-For, as a proxy writes it). The attacker, at 203.0.113.66, runs classes of its own and joins them as
`--members` students (browserless websocket sessions, tools/ws_client.py), then replays their valid tokens: first
one token until the server refuses it (streams per member), then every token until the server refuses them all
(what one address holds); each stream is a plain HTTP connection held open after its first event. Meanwhile
another class (its teacher at 192.0.2.10, a newcomer at 198.51.100.20) is measured: the newcomer joins while the
streams are held and follows `--changes` of its teacher's sentences (teacher sends -> the newcomer's page shows
it), before the attack, during it and after its streams are let go. Printed: streams per member and per address,
the server's memory and file descriptors per stream, and the newcomer's follow latency (p50, p95, missed) in each
phase. `--root DIR` serves another checkout (a `git worktree` of an older commit: the "before").

Bounded: at most 2,100 held connections to 127.0.0.1 and 128 members; every wait has a timeout; the server is
stopped at the end (its process group).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import sys
import time
from pathlib import Path

from bench.abuse import Memory
from bench.class_abuse import SENTENCES, STUDENT, TEACHER, Member, join
from bench.class_clients import CODE, pct, shows
from serving.processes import start_app

ATTACKER = "203.0.113.66"
MAX_HELD = 2100


class Held:
    """Event streams held open: `open(path)` until the server refuses one."""

    def __init__(self, url: str):
        self.host, self.port = url.split("//")[1].split(":")
        self.writers: list[asyncio.StreamWriter] = []
        self.refused: list[str] = []

    async def open(self, path: str) -> bool:
        reader, writer = await asyncio.open_connection(self.host, int(self.port))
        writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Forwarded-For: {ATTACKER}\r\n\r\n".encode())
        status = (await asyncio.wait_for(reader.readline(), 30)).decode()
        if " 200 " not in status:
            self.refused.append(status.strip())
            writer.close()
            return False
        while (await asyncio.wait_for(reader.readline(), 30)).strip():  # the head, then the first event
            pass
        await asyncio.wait_for(reader.readuntil(b"\n\n"), 30)
        self.writers.append(writer)
        return True

    async def fill(self, path: str, limit: int) -> int:
        """Open streams of `path` until one is refused (or `limit`): how many opened."""
        n = 0
        while n < limit and len(self.writers) < MAX_HELD and await self.open(path):
            n += 1
        return n

    def release(self) -> None:
        for w in self.writers:
            w.close()
        self.writers.clear()


def fds(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


async def follow(teacher: Member, student: Member, changes: int, k0: int, timeout: float) -> list[float]:
    """The newcomer's follow latency for `changes` of the teacher's sentences (missed: the timeout)."""
    out = []
    for k in range(changes):
        sentence = f"{SENTENCES[(k0 + k) % len(SENTENCES)]} {k0 + k}"
        seen = asyncio.get_running_loop().create_future()
        student.on_full_run = lambda s, sentence=sentence, seen=seen: (
            shows(s, sentence) and not seen.done() and seen.set_result(time.perf_counter())
        )
        t0 = time.perf_counter()
        await asyncio.wait_for(teacher.type_sentence(sentence), timeout)
        try:
            out.append(await asyncio.wait_for(seen, timeout) - t0)
        except TimeoutError:
            out.append(timeout)
        student.on_full_run = None
        await asyncio.sleep(0.5)
    return out


async def newcomer(url: str, code: str) -> Member:
    s = await join(url, code, STUDENT)
    s.start_following()
    await asyncio.sleep(3.0)  # (its page's event stream opens, or is refused and asked again)
    return s


async def attack(url: str, pid: int, members: int, changes: int, timeout: float) -> dict:
    out: dict = {"members": members}
    teacher = Member(url, TEACHER)  # the class the newcomers join, at its own address
    await teacher.connect("classroom")
    await teacher.click("Start a class")
    code = CODE.search(teacher.text())[1]
    await teacher.switch_page("overview")
    owners, joined = [], []  # the attacker's classes (60 students of one address each) and their members
    for i in range(0, members, 60):
        owner = Member(url, ATTACKER)
        await owner.connect("classroom")
        await owner.click("Start a class")
        own = CODE.search(owner.text())[1]
        owners.append(owner)
        end = min(members, i + 60)
        for j in range(i, end, 10):
            joined += await asyncio.gather(*(join(url, own, ATTACKER) for _ in range(min(10, end - j))))
    held = Held(url)
    first = None
    try:
        first = await newcomer(url, code)
        out["before"] = await follow(teacher, first, changes, 0, timeout)
        await first.close()
        rss0, fd0 = Memory(pid).tree_rss(), fds(pid)
        t = time.perf_counter()
        out["per_member"] = await held.fill(joined[0].sync["url"], MAX_HELD)
        out["first_refusal"] = held.refused[-1] if held.refused else None
        for m in joined[1:]:
            await held.fill(m.sync["url"], MAX_HELD)
        out["held"], out["fill_seconds"] = len(held.writers), time.perf_counter() - t
        out["refusals"] = len(held.refused)
        rss1, fd1 = Memory(pid).tree_rss(), fds(pid)
        out["kb_per_stream"] = (rss1 - rss0) / max(1, out["held"]) / 1024
        out["fds_per_stream"] = (fd1 - fd0) / max(1, out["held"])
        second = await newcomer(url, code)  # a student who arrives while the streams are held
        out["newcomer_streams"] = second.stream_opens
        out["during"] = await follow(teacher, second, changes, changes, timeout)
        await second.close()
        t = time.perf_counter()
        held.release()
        third = await newcomer(url, code)
        out["after"] = await follow(teacher, third, changes, 2 * changes, timeout)
        out["after_seconds"] = time.perf_counter() - t
        await third.close()
    finally:
        held.release()
        for s in [teacher, *owners, *joined, *([first] if first else [])]:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(s.close(), 10)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--members", type=int, default=64, help="the attacker's students (tokens)")
    ap.add_argument("--changes", type=int, default=8, help="the teacher's changes the newcomer follows, per phase")
    ap.add_argument("--timeout", type=float, default=20.0)
    ap.add_argument("--root", type=Path, default=None, help="serve this checkout instead (a before)")
    args = ap.parse_args(argv)
    members = max(1, min(args.members, 128))
    server = start_app(
        log=Path("/tmp") / "glass-class-streams.log", timeout=120, extra_env={"GLASS_TRUST_PROXY": "1"}, root=args.root
    )
    try:
        where = f", {args.root}" if args.root else ""
        print(f"streams: an attacker at {ATTACKER} with {members} members' tokens{where}", flush=True)
        r = asyncio.run(asyncio.wait_for(attack(server.url, server.proc.pid, members, args.changes, args.timeout), 900))
    finally:
        server.stop()
    print(
        f"streams: one member's token holds {r['per_member']} streams (then: {r['first_refusal']}); the address "
        f"holds {r['held']} with {members} tokens ({r['refusals']} refused), opened in {r['fill_seconds']:.1f} s; "
        f"each costs the server {r['kb_per_stream']:.1f} KB and {r['fds_per_stream']:.2f} file descriptors",
        flush=True,
    )
    for phase in ("before", "during", "after"):
        xs = r[phase]
        missed = sum(x >= args.timeout for x in xs)
        print(
            f"  newcomer of another class, {phase} the attack: follow p50 {statistics.median(xs):.2f} s, "
            f"p95 {pct(xs, 0.95):.2f} s, {missed} of {len(xs)} changes missed"
            + (f" (its page's streams opened: {r['newcomer_streams']})" if phase == "during" else ""),
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
