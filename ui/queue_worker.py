"""A training queue worker: `python -m ui.queue_worker` (the other end of `ui.job_queue`).

One worker takes one job at a time from the Redis queue that every app process feeds, so the number of
workers is the server-wide cap on runs training at once; start them on any machine that reaches the
Redis (`GLASS_REDIS_URL`). For each job RQ forks a "work horse", which runs `train`: the very training
process the local pool runs (`ui.train_worker`: one torch thread, nice +10, a memory cap), every message
of it appended to the job's Redis stream, its stop key and its browser's liveness (the alive key) looked
at every `POLL` seconds. The horse dies with its worker (PR_SET_PDEATHSIG), and its training process
with it; RQ's clean-up (every `MAINTENANCE_SECONDS` in each worker) then retries the job once elsewhere.
"""

from __future__ import annotations

import argparse
import os
import pickle
import signal
import socket
import threading
import time
import uuid

from redis.exceptions import RedisError

from ui import train_worker
from ui.job_queue import QUEUE, finish, key, publish
from ui.shared_redis import client as redis_client
from ui.shared_redis import redis_url

POLL = 0.5  # seconds between a worker's looks at the stop and alive keys
MAINTENANCE_SECONDS = 30  # how often a worker looks for jobs whose worker died (RQ's default is 10 min)


def train(spec: dict) -> str:
    """RQ's job function: train `spec` in a `ui.train_worker` process, publish every message to the job's
    stream, obey its stop key, end it when no session looks at it any more (its alive key expired)."""
    from rq import get_current_job

    from ui.serve_many import die_with_parent

    die_with_parent(signal.SIGKILL)  # this work horse ends with its worker (its training process then too)
    conn = get_current_job().connection
    job_id, attempt = spec["job_id"], uuid.uuid4().hex[:12]
    stop, why = threading.Event(), {"kill": False, "reason": ""}

    def control() -> None:  # the page's stop button and the browser's liveness, seen from here
        while not done.is_set():
            try:
                raw = conn.get(key("job", job_id, "stop"))
                if raw is not None:
                    kind, reason = pickle.loads(raw)
                    why["reason"] = why["reason"] or reason
                    why["kill"] = why["kill"] or kind == "kill"
                    stop.set()
                elif not conn.exists(key("job", job_id, "alive")):
                    why["reason"], why["kill"] = why["reason"] or "session ended", True
                    stop.set()
            except (RedisError, OSError):  # Redis away for a moment: the run goes on, look again next time
                pass
            done.wait(POLL)

    done = threading.Event()
    end = ("end", "failed", "error", "Training failed before it started.")
    try:
        told = conn.get(key("job", job_id, "stop"))
        if told is not None or not conn.exists(key("job", job_id, "alive")):  # stopped or left while queued
            reason = pickle.loads(told)[1] if told is not None else "session ended"
            end = ("end", "stopped", reason, None)
            return reason
        publish(conn, job_id, ("started", {"wall": time.time(), "worker": socket.gethostname()}), attempt)
        watcher = threading.Thread(target=control, name="training-control", daemon=True)
        watcher.start()
        state, reason, error = train_worker.run(spec, stop, lambda: why["kill"], lambda proc: None,
                                                lambda msg: publish(conn, job_id, msg, attempt))
        if state == "stopped" and why["reason"]:
            reason = why["reason"]
        end = ("end", state, reason, error)
        return state
    finally:
        done.set()
        finish(conn, job_id, end, attempt)


def main(argv: list[str] | None = None) -> None:
    """`python -m ui.queue_worker [--burst]`: one queue worker on $GLASS_REDIS_URL (one job at a time)."""
    from rq import Worker

    ap = argparse.ArgumentParser(prog="python -m ui.queue_worker", description=main.__doc__)
    ap.add_argument("--url", default=None, help="Redis URL (default: $GLASS_REDIS_URL)")
    ap.add_argument("--burst", action="store_true", help="end when the queue is empty")
    ap.add_argument("--name", default=None, help="worker name (default: host and pid)")
    args = ap.parse_args(argv)
    url = args.url or redis_url()
    if not url:
        raise SystemExit("Set GLASS_REDIS_URL (or --url): a queue worker needs the app's Redis.")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    conn = redis_client(url)
    worker = Worker([QUEUE], connection=conn, name=args.name or f"{socket.gethostname()}-{os.getpid()}",
                    maintenance_interval=MAINTENANCE_SECONDS)
    worker.work(burst=args.burst, logging_level="WARNING", with_scheduler=False)


if __name__ == "__main__":
    main()
