"""A study under load: N participants taking a test at once on several app processes, and nothing lost.

    .venv/bin/python -m bench.study_load [--participants 100] [--items 16] [--processes 2] [--database URL]

`--processes` app processes behind HAProxy (serving/replicas.py, with its Redis) share one study database: the
SQLite file of a temporary data folder (GLASS_DATA_DIR), or PostgreSQL with --database postgresql://... (or
--postgres: a private server from Debian's package, serving/postgres.py). A study is created through the store;
then every participant, a browserless Streamlit session (tools/ws_client.py, Streamlit's own websocket protocol),
opens the study's link, agrees, and answers the first `--items` items of their pre-test (participant i chooses
option (i + item) mod its options; a transfer item's column the same way), all of them at the same time.

Printed: the wall time, each submission's time from click to the end of its run (p50 / p95 / max), the answers
the store holds against the answers sent (lost must be 0, duplicates 0), and the report computed from the store
(explain/report.py) against the one computed from what was sent: every item's share right must be equal. Bounded:
every wait has a timeout; servers on 127.0.0.1 and free ports, stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch
from streamlit.proto.WidgetStates_pb2 import WidgetState

from explain import report
from explain.instrument import build
from explain.items import Models
from explain.questionnaires import CONFIDENCE
from model import checkpoint
from serving.processes import healthy, wait_until
from serving.replicas import Cluster
from study.database import PostgresDatabase, SqliteDatabase
from study.store import StudyStore
from tools.ws_client import StreamlitSession, _Widget


def _widget(session: StreamlitSession, key: str) -> str:
    """The id of the widget drawn with `key` in the session's last run."""
    for _, el in session.elements.values():
        w = _Widget(el)
        if w.widget_id and w.widget_id.endswith(f"-{key}"):
            return w.widget_id
    raise KeyError(key)


def _set(session: StreamlitSession, key: str, text: str) -> None:
    """Give the widget `key` the (formatted) option `text`, as a click on it does."""
    wid = _widget(session, key)
    session.widgets[wid] = WidgetState(id=wid, string_value=text)


def _submit_key(session: StreamlitSession) -> str:
    for _, el in session.elements.values():
        w = _Widget(el)
        if w.widget_id and "-study_submit_" in w.widget_id:
            return w.widget_id.rsplit("-study_submit_", 1)[1]
    raise KeyError("no item to answer on the page")


def choice_of(i: int, item: dict) -> int:
    n = len(item["grid"]["cols"]) if item.get("grid") else len(item["options"])
    return (i + int(item["id"][1:])) % n


async def participant(
    i: int, url: str, code: str, token: str, study, items: int, times: list[float], sent: list[tuple], timeout: float
) -> None:
    s = StreamlitSession(url, timeout=timeout)
    try:
        await s.connect("studies", f"study={code}&sk={token}")
        try:
            await s.click("study_agree")
        except KeyError as e:
            raise RuntimeError(f"participant {i} saw no consent: {s.text()[:300]!r}") from e
        for _ in range(items):
            item_id = _submit_key(s)
            item = next(it for it in study.instrument["forms"][item_id[0]] if it["id"] == item_id)
            c = choice_of(i, item)
            _set(s, f"study_choice_{item_id}", (item["grid"]["cols"] if item.get("grid") else item["options"])[c])
            _set(s, f"study_conf_{item_id}", CONFIDENCE[1 + (i + c) % 4])
            times.append(await s.click(f"study_submit_{item_id}"))
            sent.append((i, item_id, c))
        assert not s.exceptions(), s.exceptions()
    finally:
        await s.close()


def sent_report(study, sent: list[tuple]) -> report.Report:
    """The report computed from what the participants sent (not from the store): the same per-item table must come
    out of the store."""
    people, events = {}, []
    for i, item_id, c in sent:
        people[i] = {
            "actor": f"sim-{i}",
            "condition": "all",
            "first_form": item_id[0],
            "phase": "pre",
            "joined": 0,
            "phase_at": 0,
        }
        item = next(it for it in study.instrument["forms"][item_id[0]] if it["id"] == item_id)
        events.append(
            {
                "actor": f"sim-{i}",
                "verb": "answered",
                "object": f"item/{item_id}",
                "result": {"choice": c, "correct": c == item["answer"]},
                "context": {"phase": "pre", "form": item_id[0]},
                "timestamp": 0,
            }
        )
    return report.build(study.instrument, list(people.values()), _completed(events, list(people.values())))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--participants", type=int, default=100)
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--database", default="", help="a postgresql:// URL (default: SQLite in a temporary folder)")
    ap.add_argument("--postgres", action="store_true", help="start a private PostgreSQL (Debian's) and use it")
    ap.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args(argv)
    result = run(args.participants, args.items, args.processes, args.database, args.postgres, args.timeout)
    print(result["text"])
    ok = result["lost"] == 0 and result["duplicates"] == 0 and result["report_equal"] and not result["failed"]
    return 0 if ok else 1


def run(
    participants: int, items: int, processes: int = 2, database: str = "", postgres: bool = False, timeout: float = 300
) -> dict:
    torch.set_num_threads(1)
    data = Path(tempfile.mkdtemp(prefix="glass-study-load-"))
    pg = None
    try:
        if postgres:
            from serving.postgres import start_postgres

            pg = start_postgres(Path(tempfile.mkdtemp(prefix="glass-pg-")))  # its own folder: postgres must enter it
            database = pg.url
        env = {
            "GLASS_DATA_DIR": str(data),
            "OMP_NUM_THREADS": "1",
            **({"GLASS_DATABASE_URL": database} if database else {}),
        }
        db = PostgresDatabase(database) if database else SqliteDatabase(data / "studies.sqlite3")
        store = StudyStore(db)
        inst = build(Models(checkpoint.load(checkpoint.SHIPPED), checkpoint.load(checkpoint.SHIPPED_NO_MASK)))
        code, secret = store.create({"title": "load", "instrument": inst.version}, inst.as_dict())
        token = store.link(code, secret)
        study = store.study(code)
        times: list[float] = []
        sent: list[tuple] = []
        with Cluster(replicas=processes, timeout=120, workers=0, env=env) as cluster:
            for _ in range(2 * processes):  # the proxy sees every app up (each answers through it)
                wait_until(lambda: healthy(cluster.url), None, 60, "the apps through HAProxy")

            async def everyone() -> list:
                return await asyncio.gather(
                    *[
                        participant(i, cluster.url, code, token, study, items, times, sent, timeout)
                        for i in range(participants)
                    ],
                    return_exceptions=True,
                )

            t0 = time.perf_counter()
            outcomes = asyncio.run(everyone())
            wall = time.perf_counter() - t0
        failed = [o for o in outcomes if isinstance(o, BaseException)]
        _, people, events = store.records(code, secret)
        answered = [e for e in events if e["verb"] == "answered"]
        held = {(e["actor"], e["object"]) for e in answered}
        lost = len(sent) - len(held)
        duplicates = len(answered) - len(held)
        got = report.build(study.instrument, people, _completed(events, people))
        want = sent_report(study, sent)
        equal = [(r["slot"], r["difficulty"]) for r in got.items] == [(r["slot"], r["difficulty"]) for r in want.items]
        load = os.getloadavg()
        text = (
            f"{participants} participants x {items} items, {processes} app processes behind HAProxy, "
            f"{'PostgreSQL' if database else 'SQLite (one file)'}: wall {wall:.1f} s\n"
            f"  submissions: {len(times)} timed, p50 {statistics.median(times) if times else float('nan'):.2f} s, "
            f"p95 {_pct(times, 0.95):.2f} s, max {max(times, default=float('nan')):.2f} s\n"
            f"  sent {len(sent)} answers, stored {len(held)} (lost {lost}, duplicates {duplicates}), "
            f"participants stored {len(people)} of {participants}, sessions failed {len(failed)}"
            + (f" (first: {failed[0]!r})" if failed else "")
            + "\n"
            f"  report from the store = report from what was sent: {equal} "
            f"({len(got.items)} item rows)\n"
            f"  machine load (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        )
        store.close_db()
        return {
            "text": text,
            "lost": lost,
            "duplicates": duplicates,
            "report_equal": equal,
            "failed": len(failed),
            "sent": len(sent),
            "stored": len(held),
            "p50": statistics.median(times) if times else None,
        }
    finally:
        if pg is not None:
            pg.stop()
            shutil.rmtree(pg.data_dir, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)


def _completed(events: list[dict], people: list[dict]) -> list[dict]:
    """The events, plus every participant's pre-test marked complete (the load stops before "Go on")."""
    return [
        *events,
        *(
            {
                "actor": p["actor"],
                "verb": "completed",
                "object": "phase/pre",
                "result": {},
                "context": {"phase": "pre"},
                "timestamp": 0,
            }
            for p in people
        ),
    ]


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))] if xs else float("nan")


if __name__ == "__main__":
    raise SystemExit(main())
