"""A training queue worker: `python -m training.queue_worker` (the other end of `training.redis_queue`).

One worker takes one run at a time from the Redis queue that every app process feeds, so the workers
alive are the server-wide cap on runs training at once; start them on any machine that reaches the
Redis (`GLASS_REDIS_URL`, best with the worker's own Redis user: docs/operators.md, "Several processes"). For each
run RQ forks a "work horse", which runs `train`: the very training process the local pool runs
(`training.run_process`: one torch thread, nice +10, a memory cap), every message of it appended to the
run's Redis stream, its stop key and its browser's liveness (the alive key) looked at every `POLL`
seconds, and the fair share of the slots every few looks. The horse dies with its worker (PR_SET_PDEATHSIG), and
its training process with it; RQ's clean-up (every `MAINTENANCE_SECONDS` in each worker) then retries the run once
elsewhere.

The slots are shared fairly (training/contract.py): a worker takes the first queued run of the addresses running
fewest (`FairQueue`), and a run beyond its address's share stops, with its model so far, once it has trained
`GLASS_TRAINING_FAIR_SECONDS` while another address waits.

Nothing read from Redis is trusted: RQ's jobs are JSON (never pickle), and `TrainingJob` runs only
`TRAIN_FUNCTION` with one JSON argument (a `training.messages.Spec`, checked again with the app's
bounds), drops any callback, webhook or dependency a job record may name, and refuses anything else,
including a job queued by an older version of the app, with a message on the run's stream that the
student's page shows.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
import time
import uuid
import warnings
import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict, cast

from redis.exceptions import RedisError

from serving.processes import die_with_parent
from serving.shared_redis import new_client, redis_url
from training import messages as m
from training import run_process
from training.contract import FAIR_REASON, FAIR_SECONDS
from training.job import Link
from training.redis_queue import (
    QUEUE,
    TRAIN_FUNCTION,
    fair_queue_class,
    finish,
    gives_its_slot_back,
    key,
    publish,
    rq_serializer,
    started,
)

POLL = 0.5  # seconds between a worker's looks at the stop and alive keys
FAIR_LOOKS = 4  # every this many looks, also at the fair share of the slots (training.contract.over_share)
MAINTENANCE_SECONDS = 30  # how often a worker looks for jobs whose worker died (RQ's default is 10 min)
HEARTBEAT_SECONDS = 5  # how often a worker says it is alive (it stops counting WORKER_TTL s after the last time)
MAX_JOB_DATA = 8 * 2**20  # bytes of a queued job's data, once decompressed (a spec with a 2 MB corpus fits)
REFUSED = "This training run could not be read by the training worker, so it was not trained. Press Start again."
_log = logging.getLogger("glass.training")

if TYPE_CHECKING:
    from redis import Redis
    from rq.job import Job as RQJob


class _Why(TypedDict):
    """Why a run stops (its page's stop, kill or its session's end, or the fair share), as seen by `control`."""

    kill: bool
    reason: str


def _refused_job(job_id: str, conn: Redis, why: str) -> None:
    """A queued job that will not run: say so on its stream (the student's page shows it) and free its places."""
    _log.warning("training job %s refused: %s", job_id, why)
    try:
        finish(conn, job_id, m.End("failed", "error", REFUSED))
    except RedisError as e:
        _log.warning("training job %s: could not record the refusal (%s)", job_id, e)


def _job_class() -> type[RQJob]:
    """`TrainingJob`, built on first use (RQ is imported lazily, as everywhere in the app)."""
    from rq.job import Job
    from rq.utils import decode_redis_hash

    class TrainingJob(Job):
        """RQ's job, held to what this app enqueues (see the module's docstring)."""

        unreadable: str | None = None

        def restore(self, raw_data: Any) -> None:
            try:
                data = decode_redis_hash(raw_data).get("data", b"")
                inflate = zlib.decompressobj()
                try:
                    if len(inflate.decompress(data, MAX_JOB_DATA)) >= MAX_JOB_DATA or inflate.unconsumed_tail:
                        raise ValueError("its data is too large")
                except zlib.error:
                    if len(data) > MAX_JOB_DATA:
                        raise ValueError("its data is too large") from None
                super().restore(raw_data)
                self.unreadable = _not_ours(self)
            except Exception as e:  # noqa: BLE001 - whatever Redis holds, the worker goes on
                if type(e).__name__ == "NoSuchJobError":
                    raise
                self.unreadable = f"its record could not be read ({type(e).__name__})"
            if self.unreadable is not None:  # nothing of it is kept: RQ's own steps see a job that does nothing
                self.data = rq_serializer().dumps([None, None, [], {}])  # type: ignore[no-untyped-call]  # (RQ: unannotated)
            # Whatever the record says, a job of ours has no callbacks, webhooks or dependencies.
            self.webhooks = []
            self._success_callback_name = self._failure_callback_name = self._stopped_callback_name = None
            # RQ declares these two "a callback or UNEVALUATED", yet its getters treat None as "none" (and return it)
            self._success_callback = None  # type: ignore[assignment]
            self._failure_callback = None  # type: ignore[assignment]
            self._stopped_callback = None
            self._dependency_ids = []

        @property
        def func(self) -> Callable[[str], str]:
            if self.unreadable is not None:
                _refused_job(self.id, self.connection, self.unreadable)
                raise RuntimeError(f"refused: {self.unreadable}")
            return train

    return TrainingJob


def _not_ours(job: RQJob) -> str | None:
    """Why an RQ job is not one this app queued (None: it is): exactly `TRAIN_FUNCTION` with one string."""
    try:
        ok = (
            job.func_name == TRAIN_FUNCTION
            and job.instance is None
            and not job.kwargs
            and isinstance(job.args, list | tuple)
            and len(job.args) == 1
            and isinstance(job.args[0], str)
        )
    except Exception as e:  # noqa: BLE001 - data that is not JSON (a pickle of an older version)
        return f"its data could not be read ({type(e).__name__})"
    return None if ok else f"it names {str(job.func_name)[:80]!r}, not {TRAIN_FUNCTION!r}"


def train(spec_json: str) -> str:
    """RQ's job function: train the spec in a `training.run_process` process, publish every message to the
    run's stream, obey its stop key, end it when no session looks at it any more (its alive key expired)."""
    from rq import get_current_job

    die_with_parent(signal.SIGKILL)  # this work horse ends with its worker (its training process then too)
    rq_job = get_current_job()
    assert rq_job is not None  # RQ calls this function inside its job
    conn, job_id = rq_job.connection, rq_job.id
    try:
        spec = cast(m.Spec, m.decode(spec_json.encode(), (), kinds=("spec",)))  # kinds: a Spec (or BadMessage)
    except m.BadMessage as e:
        _refused_job(job_id, conn, f"its settings could not be read ({e})")
        return "refused"
    if spec.job_id != job_id:
        _refused_job(job_id, conn, "its settings name another run")
        return "refused"
    attempt = uuid.uuid4().hex[:12]
    stop = threading.Event()
    why: _Why = {"kill": False, "reason": ""}
    done = threading.Event()
    size = 0

    def stop_request() -> m.StopRequest | None:
        raw = cast(bytes | None, conn.get(key("job", job_id, "stop")))  # bytes: our clients never decode
        if raw is None:
            return None
        try:
            return cast(m.StopRequest, m.from_value(raw, ("stop_request",)))  # kinds: a StopRequest (or BadMessage)
        except m.BadMessage as e:  # unreadable: a stop all the same (someone wrote the key)
            _log.warning("training job %s: its stop key could not be read (%s)", job_id, e)
            return m.StopRequest("stop", "stopped")

    def control() -> None:  # the page's stop button, the browser's liveness and the fair share, seen from here
        looks = 0
        while not done.is_set():
            try:
                told = stop_request()
                if told is not None:
                    why["reason"] = why["reason"] or told.reason
                    why["kill"] = why["kill"] or told.how == "kill"
                    stop.set()
                elif not conn.exists(key("job", job_id, "alive")):
                    why["reason"], why["kill"] = why["reason"] or "session ended", True
                    stop.set()
                elif looks % FAIR_LOOKS == 0 and gives_its_slot_back(conn, job_id, FAIR_SECONDS):
                    why["reason"] = why["reason"] or FAIR_REASON  # (another address waits: the model so far is kept)
                    stop.set()
            except (RedisError, OSError):  # Redis away for a moment: the run goes on, look again next time
                pass
            looks += 1
            done.wait(POLL)

    def publish_one(msg: m.Message) -> None:
        nonlocal size
        size += publish(conn, job_id, msg, attempt)

    end = m.End("failed", "error", "Training failed before it started.")
    try:
        told = stop_request()
        if told is not None or not conn.exists(key("job", job_id, "alive")):  # stopped or left while queued
            end = m.End("stopped", told.reason if told is not None else "session ended")
            return end.reason
        publish_one(m.Started(time.time(), socket.gethostname()))
        started(conn, job_id)  # (it counts for its client's share of the slots from now)
        threading.Thread(target=control, name="training-control", daemon=True).start()
        state, reason, error = run_process.run(spec, Link(stop, lambda: why["kill"], lambda proc: None, publish_one))
        if state == "stopped" and why["reason"]:
            reason = why["reason"]
        end = m.End(state, reason, error)
        return state
    finally:
        done.set()
        finish(conn, job_id, end, attempt, size)


def heartbeat(url: str, name: str, stopping: threading.Event) -> None:
    """Say every `HEARTBEAT_SECONDS` that this worker is alive (its entry in ``workers``, on Redis's clock),
    so that the cap counts it; a worker that died stops counting `WORKER_TTL` seconds later."""
    conn = new_client(url)  # not the worker's: RQ changes its connection's timeout
    while not stopping.is_set():
        try:
            seconds, micros = conn.time()
            conn.zadd(key("workers"), {name: seconds + micros / 1e6})
        except (RedisError, OSError) as e:
            _log.warning("queue worker %s: heartbeat failed (%s)", name, e)
        stopping.wait(HEARTBEAT_SECONDS)
    try:
        conn.zrem(key("workers"), name)
    except (RedisError, OSError):
        pass


def main(argv: list[str] | None = None) -> None:
    """`python -m training.queue_worker [--burst]`: one queue worker on $GLASS_REDIS_URL (one run at a time)."""
    from rq import Worker

    ap = argparse.ArgumentParser(prog="python -m training.queue_worker", description=main.__doc__)
    ap.add_argument("--url", default=None, help="Redis URL (default: $GLASS_REDIS_URL)")
    ap.add_argument("--burst", action="store_true", help="end when the queue is empty")
    ap.add_argument("--name", default=None, help="worker name (default: host, pid and a random part)")
    args = ap.parse_args(argv)
    url = args.url or redis_url()
    if not url:
        raise SystemExit("Set GLASS_REDIS_URL (or --url): a queue worker needs the app's Redis.")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # the worker's Redis user may not list other clients (serving.redis_conf); RQ then records no address
    warnings.filterwarnings("ignore", message="CLIENT LIST command not supported")
    # host, pid and a random part: a container restarted after a crash has the same host name and pid, and
    # RQ refuses a name whose previous owner is still registered (for minutes after it died)
    name = args.name or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    stopping = threading.Event()
    beat = threading.Thread(target=heartbeat, args=(url, name, stopping), name="heartbeat", daemon=True)
    beat.start()
    worker = Worker(
        [QUEUE],
        connection=new_client(url),
        name=name,
        maintenance_interval=MAINTENANCE_SECONDS,
        serializer=rq_serializer(),
        job_class=_job_class(),
        queue_class=fair_queue_class(),
    )
    try:
        worker.work(burst=args.burst, logging_level="WARNING", with_scheduler=False)
    finally:
        stopping.set()
        beat.join(5)


if __name__ == "__main__":
    main()
