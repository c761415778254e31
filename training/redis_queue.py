"""The training service over Redis (`RedisQueue`): one queue for every app process, trained by queue workers.

This is the app's end; the workers' end is `training.queue_worker` (``python -m training.queue_worker``:
one worker trains one run at a time, so the workers alive are the server-wide cap). With
``GLASS_REDIS_URL`` set, `training.service()` returns a `RedisQueue` instead of this process's
`LocalPool`: the same `training.job.Job` objects for the page, but the runs go through one RQ queue
(``glass-training``), with RQ's JSON serializer, and every message of a run through a Redis stream in
the plain form of `training.messages` (nothing crosses Redis as a pickle; a message that does not
parse ends the page's view of the run with "could not be read", never a crash).

What is shared, and where
-------------------------
- **The cap**: the queue workers alive now (each refreshes its entry in ``workers`` every few seconds;
  one that died stops counting within `WORKER_TTL` seconds).
- **One FIFO queue**: RQ's list; a job's place in it is the student's position in the queue.
- **Fairness**, atomically in one Lua script (`training.redis_lua.SUBMIT`) whatever process a student's request reaches:
  one active job per owner (browser; a second Start returns the running job, also from another
  process), at most ``jobs_per_client`` jobs queued or running per client, at most ``starts_per_minute``
  starts per client, at most ``max_queue`` jobs waiting. The clock is Redis's. Clients are stored hashed
  (`serving.identity.client_key`), never as addresses.
- **The run**: a worker runs the very training process the local pool runs (`training.run_process`)
  and appends each of its messages to the job's stream; every app process that shows the job reads
  it from its start, so a student whose process died sees the whole run again on another process.

Keys (prefix ``glass:train:``): ``active`` (sorted set of the ids queued or running), ``owner:<browser>``
(its latest job), ``client:<hash>`` (its active ids), ``starts:<hash>`` (its recent starts), ``workers``
(sorted set: queue workers by last heartbeat), ``ended`` / ``ended:bytes`` (ended runs still kept, and
their size), ``job:<id>:meta`` (a `JobRecord`), ``job:<id>:events`` (the stream), ``job:<id>:stop`` (a
`StopRequest`), ``job:<id>:alive`` (exists while a session of the job's browser is connected to some
app process: each app process refreshes it for the jobs it shows; when it expires, ``grace`` seconds
after the last one went away, the worker ends the run).

Memory: Redis runs with a ceiling and ``maxmemory-policy noeviction`` (`serving.replicas`, compose):
it never evicts anything, so no class and no running job's stream can vanish under memory pressure; a
write that would pass the ceiling is refused, and the page says the server is full. What this service
keeps is bounded by its own rules: an ended run's stream and record expire `KEEP_SECONDS` after the last
page of its browser looked, and the ended runs kept hold at most `RESULTS_BUDGET` bytes (the oldest
ended runs go first; a running job's stream is never one of them).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from redis.exceptions import OutOfMemoryError, RedisError

from model.train import TrainConfig
from serving.identity import client_key
from serving.shared_redis import client as redis_client
from serving.shared_redis import redis_url
from training import messages as m
from training.contract import DEFAULT_GRACE, DEFAULT_MAX_SECONDS, JobRefused, Watchdog, any_alive, client_shares
from training.job import Job, Link
from training.redis_lua import KEEP, PICK, SUBMIT, WORKERS, YIELD

if TYPE_CHECKING:
    from redis import Redis
    from rq import Queue
    from rq.serializers import JSONSerializer

_P = ParamSpec("_P")
_R = TypeVar("_R")

QUEUE = "glass-training"
TRAIN_FUNCTION = "training.queue_worker.train"  # the one function a queued job may name
PREFIX = "glass:train:"
KEEP_SECONDS = 300  # an ended job (its model, its figures) stays fetchable this long after the last look
ACTIVE_TTL = 12 * 3600  # bookkeeping of a job that never ends cleanly (a worker killed twice) expires
RESULTS_BUDGET = 256 * 2**20  # bytes of ended runs' streams kept at most (the oldest go first)
WORKER_TTL = 20  # seconds after its last heartbeat a queue worker stops counting toward the cap
JOB_ID = re.compile(r"[0-9a-f]{12}")
_log = logging.getLogger("glass.training")


def key(*parts: str) -> str:
    return PREFIX + ":".join(parts)


def events(job_id: str) -> str:
    return key("job", job_id, "events")


def rq_serializer() -> type[JSONSerializer]:
    """RQ's JSON serializer (never RQ's default, pickle), for every Queue and Worker of ours."""
    from rq.serializers import JSONSerializer

    return JSONSerializer


UNREACHABLE = "The training queue cannot be reached right now. Try again in a minute."
FULL = "The server's memory for training runs is full right now. Try again in a few minutes."
UNREADABLE = (
    "This training run's records on the server could not be read, so it cannot be shown (see the server's log)."
)


def _tolerant(fallback: object) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Redis unreachable (or full) for a moment: log it and let the page carry on with `fallback` (an
    exception class: raise it with a message the page shows)."""

    def wrap(method: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(method)
        def inner(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return method(*args, **kwargs)
            except (RedisError, OSError) as e:
                _log.warning("training queue: %s failed (%s)", method.__name__, e)
                if isinstance(fallback, type) and issubclass(fallback, Exception):
                    raise fallback(FULL if isinstance(e, OutOfMemoryError) else UNREACHABLE) from e
                return cast(_R, fallback)  # a value of the method's type (an exception class is raised above)

        return inner

    return wrap


class RedisQueue:
    """The training service over Redis and RQ (see the module's docstring).

    This process keeps the `Job` objects its sessions show (`_jobs`); everything that decides (the queue,
    the shares, which job a browser has) lives in Redis, so any app process may answer.
    """

    def __init__(
        self,
        url: str | None = None,
        max_seconds: float | None = None,
        grace: float = DEFAULT_GRACE,
        max_queue: int = 200,
        jobs_per_client: int | None = None,
        starts_per_minute: int | None = None,
        session_alive: Callable[[str | None], bool] = lambda session_id: True,
        poll: float = 1.0,
    ) -> None:
        from rq import Queue

        self.url = url or redis_url()
        self.redis = redis_client(self.url)
        self.queue = Queue(QUEUE, connection=self.redis, serializer=rq_serializer())
        self.max_seconds = float(max_seconds if max_seconds is not None else DEFAULT_MAX_SECONDS)
        self.grace = float(grace)
        self.max_queue = int(max_queue)
        self.jobs_per_client, self.starts_per_minute = client_shares(jobs_per_client, starts_per_minute)
        self.session_alive = session_alive
        self._submit = self.redis.register_script(SUBMIT)
        self._workers = self.redis.register_script(WORKERS)
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}  # id -> the Job object this process's sessions show
        self._watchdog = Watchdog("training-queue-watchdog", poll, self.sweep, lambda: bool(self._jobs), self._lock)

    # --- the TrainingService interface ------------------------------------------------------------

    @property
    @_tolerant(0)
    def max_running(self) -> int:
        """Jobs that train at once, server-wide: the queue workers alive now."""
        return int(self._workers(keys=[key("workers")], args=[WORKER_TTL]))

    @_tolerant(JobRefused)
    def submit(self, job: Job) -> Job:
        """Queue `job` (or return its owner's active job, from whatever process started it); `JobRefused`
        when its client is over its share or the queue is full."""
        from rq import Retry

        if job.state != "new":
            raise JobRefused("This job was already submitted.")
        owner = job.owner or f"job-{job.id}"
        client = client_key(job.client or "local")  # stored hashed: no address is kept in Redis
        job.attach(self, self.max_seconds, runner=self._follow)
        verdict = self._submit(
            keys=[
                key("owner", owner),
                key("client", client),
                key("starts", client),
                key("active"),
                self.queue.key,
                key("clients"),
            ],
            args=[job.id, self.jobs_per_client, self.starts_per_minute, self.max_queue, ACTIVE_TTL, client],
        )
        what, arg = verdict[0].decode(), verdict[1].decode()
        if what != "ok":
            if what == "existing":
                found = self._local(arg) or self._rebuild(arg)
                if found is not None:
                    found.add_sessions(job.session_ids())
                    return found
                raise JobRefused("Your browser's training job could not be found; try again in a moment.")
            raise _refusal(verdict)
        try:  # accepted: what other processes need to show it, its browser alive, then the queue
            with self.redis.pipeline() as p:
                p.set(key("job", job.id, "meta"), m.to_value(job.record(client)), ex=ACTIVE_TTL)
                p.set(key("job", job.id, "alive"), b"1", ex=max(1, int(self.grace)))
                p.execute()
            header, _ = m.encode(job.spec())
            self.queue.enqueue(
                TRAIN_FUNCTION,
                header.decode(),
                job_id=job.id,
                retry=Retry(max=1),
                job_timeout=int(job.tcfg.max_seconds or self.max_seconds) + 300,
                result_ttl=KEEP_SECONDS,
                failure_ttl=KEEP_SECONDS,
                description="a training run",
            )
        except BaseException:  # counted but not queued: give its owner's and client's places back
            with contextlib.suppress(RedisError, OSError):
                finish(self.redis, job.id, m.End("failed", "error", UNREACHABLE))
            raise
        job.forget_data()
        job.mark_queued()
        with self._lock:
            self._jobs[job.id] = job
            self._watchdog.ensure_locked()
        job.follow()
        return job

    @_tolerant(None)
    def job_for(self, owner: str | None, session_id: str | None = None) -> Job | None:
        """The owner's latest job (started by any process, active or ended and kept), or None."""
        if owner is None:
            return None
        raw = cast(bytes | None, self.redis.get(key("owner", owner)))  # bytes: our clients never decode
        job_id = raw.decode("ascii", "replace") if raw is not None else None
        if job_id is None or not JOB_ID.fullmatch(job_id):
            return None
        job = self._local(job_id) or self._rebuild(job_id)
        if job is not None and session_id is not None:
            job.add_sessions((session_id,))
        return job

    @_tolerant(None)
    def position(self, job: Job) -> int | None:
        """1-based position in the queue, or None when not queued."""
        if job.state != "queued":
            return None
        pos = self.queue.get_job_position(job.id)
        return None if pos is None else pos + 1

    @_tolerant(None)
    def stop(self, job: Job, reason: str = "stopped by you", kill: bool = False) -> None:
        """Stop a job wherever it trains: a queued one leaves the queue at once, a running one stops after
        its current step and hands over the model so far (with `kill`: ends at once)."""
        job.request_stop(reason, kill)
        self.redis.set(
            key("job", job.id, "stop"), m.to_value(m.StopRequest("kill" if kill else "stop", reason)), ex=ACTIVE_TTL
        )
        if self.redis.lrem(self.queue.key, 0, job.id):  # still queued: nobody else will end it
            self.redis.expire(self.queue.job_class.key_for(job.id), KEEP_SECONDS)  # RQ's record of it
            finish(self.redis, job.id, m.End("stopped", reason))

    @_tolerant((0, 0))
    def counts(self) -> tuple[int, int]:
        """(running, queued), server-wide."""
        with self.redis.pipeline() as p:
            p.zcard(key("active"))
            p.llen(self.queue.key)
            active, queued = p.execute()
        return max(0, active - queued), queued

    def active_jobs(self) -> list[Job]:
        """The active jobs this process shows."""
        with self._lock:
            return [j for j in self._jobs.values() if j.active]

    def release(self, job: Job) -> None:
        """A job's thread ends: nothing to free here (the worker freed its slot)."""

    def sweep(self, now: float | None = None) -> None:
        """Keep the jobs whose browser has a live session here alive (in Redis, for every process and the
        worker); forget ended jobs nobody here looks at any more."""
        now = time.monotonic() if now is None else now
        with self._lock:
            jobs = list(self._jobs.values())
        for job in jobs:
            alive = any_alive(self.session_alive, job)
            gone_for = job.seen_alive(alive, now)
            if job.active and alive:
                self.redis.set(key("job", job.id, "alive"), b"1", ex=max(1, int(self.grace)))
            elif job.done and alive:  # its model stays fetchable while a page of its browser is open
                with self.redis.pipeline() as p:
                    p.expire(events(job.id), KEEP_SECONDS)
                    p.expire(key("job", job.id, "meta"), KEEP_SECONDS)
                    p.execute()
            elif job.done and gone_for >= self.grace:
                with self._lock:
                    self._jobs.pop(job.id, None)

    def shutdown(self, timeout: float = 30) -> None:
        """Stop every job this process shows and wait for them (tests)."""
        for job in self.active_jobs():
            self.stop(job, "server shutting down")
        for job in self.active_jobs():
            job.join(timeout)
        with self._lock:
            self._jobs.clear()  # the watchdog ends

    # --- internal ---------------------------------------------------------------------------------

    def _local(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def _rebuild(self, job_id: str) -> Job | None:
        """A job another process started (or one this process forgot): its Job object from its record, and
        a thread that reads its whole stream, so the page shows the run from its start. A record that does
        not parse gives a job that ended with `UNREADABLE`, so the page says so."""
        raw = cast(bytes | None, self.redis.get(key("job", job_id, "meta")))  # bytes: our clients never decode
        if raw is None:
            return None
        try:
            rec = cast(m.JobRecord, m.from_value(raw, ("job",)))  # kinds: a JobRecord (or BadMessage)
        except m.BadMessage as e:
            _log.warning("training job %s: its record could not be read (%s)", job_id, e)
            rec = None
        if rec is None:
            job = Job(TrainConfig(), None, "?", None, (), 0, None, None, "my model")
            job.id = job_id
            job.fail(UNREADABLE)
        else:
            job = Job(
                rec.tcfg,
                None,
                rec.data_label,
                rec.data_sha256,
                rec.probes,
                0,
                None,
                rec.owner,
                rec.name,
                rec.memory,
                rec.client,
            )
            job.id, job.probe_every = job_id, rec.probe_every
            job.attach(self, self.max_seconds, runner=self._follow)
            job.mark_queued()
        with self._lock:
            if job_id in self._jobs:  # another session of this process got there first
                return self._jobs[job_id]
            self._jobs[job_id] = job
            self._watchdog.ensure_locked()
        if rec is not None:
            job.follow()
        return job

    def _follow(self, spec: m.Spec, link: Link) -> tuple[str, str, str | None]:
        """A job's runner in this process: pass each message of its stream to `link.receive` until its end;
        forward a stop (or kill) of this process's page to the worker."""
        job_id, last = spec.job_id, "0"
        told: str | None = None
        attempt: bytes | None = None
        while True:
            try:
                wanted = "kill" if link.kill() else "stop" if link.stop.is_set() else None
                if wanted is not None and wanted != told:
                    self.redis.set(
                        key("job", job_id, "stop"),
                        m.to_value(m.StopRequest(wanted, "stopped")),
                        nx=told is None,
                        ex=ACTIVE_TTL,
                    )
                    told = wanted
                batches = cast(
                    list[list[Any]],  # RESP2 (our clients): [[stream, [(id, fields), ...]], ...]
                    self.redis.xread({events(job_id): last}, count=100, block=1000),
                )
                if not batches and not self.redis.exists(key("job", job_id, "meta")):
                    return "failed", "error", "This training job's records expired on the server."
            except (RedisError, OSError) as e:  # Redis away for a moment: try again, the stream keeps
                _log.warning("training job %s: reading its stream failed (%s)", job_id, e)
                time.sleep(1.0)
                continue
            for _, entries in batches or ():
                for entry_id, fields in entries:
                    last, sender = entry_id, fields.get(b"a")
                    try:
                        msg = m.from_fields(fields)
                    except m.BadMessage as e:
                        _log.warning("training job %s: a message of its stream could not be read (%s)", job_id, e)
                        return "failed", "error", UNREADABLE
                    if isinstance(msg, m.Started):
                        attempt = sender
                    elif attempt is not None and sender is not None and sender != attempt:
                        continue  # a late message of an attempt whose worker died (a retry runs now)
                    if isinstance(msg, m.End):
                        return msg.state, msg.reason, msg.error
                    link.receive(msg)


def _refusal(verdict: Sequence[bytes]) -> JobRefused:
    """The Lua script's refusal, in the words the local pool uses."""
    what, *figures = (v.decode() for v in verdict)
    if what == "share":
        return JobRefused.share(int(figures[0]), int(figures[1]))
    if what == "rate":
        return JobRefused.rate(int(figures[0]), int(figures[1]), float(figures[2]))
    return JobRefused.full(int(figures[0]))


def publish(conn: Redis, job_id: str, msg: m.Message, attempt: str) -> int:
    """Append one message to the job's stream; returns its size in bytes."""
    fields = m.to_fields(msg, a=attempt)
    # redis-py's stub asks for an invariant dict[FieldT, EncodableT] where any mapping of those would do
    conn.xadd(events(job_id), fields)  # type: ignore[arg-type]
    return sum(len(v) for v in fields.values())


def finish(conn: Redis, job_id: str, end: m.End, attempt: str = "", size: int = 0) -> None:
    """The job's last message, and its bookkeeping cleared (its stream and record kept `KEEP_SECONDS`, within
    `RESULTS_BUDGET`). `attempt` names the worker's try ("": the job never started); `size`: the bytes its
    stream holds."""
    raw = cast(bytes | None, conn.get(key("job", job_id, "meta")))  # bytes: our clients never decode
    client = None
    if raw is not None:
        try:
            client = cast(m.JobRecord, m.from_value(raw, ("job",))).client  # kinds: a JobRecord (or BadMessage)
        except m.BadMessage as e:
            _log.warning("training job %s: its record could not be read (%s)", job_id, e)
    with conn.pipeline() as p:
        p.xadd(events(job_id), m.to_fields(end, a=attempt))  # type: ignore[arg-type]  # (as in `publish`)
        p.zrem(key("active"), job_id)
        if client is not None:
            p.srem(key("client", client), job_id)
        p.expire(events(job_id), KEEP_SECONDS)
        p.expire(key("job", job_id, "meta"), KEEP_SECONDS)
        p.delete(key("job", job_id, "stop"), key("job", job_id, "alive"))
        p.zrem(key("running"), job_id)
        p.hdel(key("clients"), job_id)
        p.execute()
    conn.eval(KEEP, 2, key("ended"), key("ended", "bytes"), job_id, size, RESULTS_BUDGET, PREFIX)


def fair_keys(queue_key: str) -> list[str]:
    """The keys of `redis_lua.FAIR_COUNTS`, for the queue `queue_key`."""
    return [key("running"), key("clients"), queue_key, key("active"), key("workers")]


def started(conn: Redis, job_id: str) -> None:
    """A worker starts the run `job_id`: it counts for its client's share of the slots from now (Redis's clock)."""
    seconds, micros = conn.time()
    conn.zadd(key("running"), {job_id: seconds + micros / 1e6})


def gives_its_slot_back(conn: Redis, job_id: str, seconds: float) -> bool:
    """The run `job_id` stops now for the fair share of the slots (`YIELD`; `training.contract.over_share`)."""
    return bool(conn.eval(YIELD, 5, *fair_keys(key_of_queue()), WORKER_TTL, job_id, seconds))


def key_of_queue() -> str:
    from rq import Queue

    return Queue.redis_queue_namespace_prefix + QUEUE


def fair_queue_class() -> type[Queue]:
    """RQ's Queue, whose worker takes the first queued job of the clients running fewest (`PICK`) instead of the
    queue's head; an empty queue (or Redis refusing the script) is waited on as RQ does."""
    from rq import Queue
    from rq.intermediate_queue import IntermediateQueue

    class FairQueue(Queue):
        @classmethod
        def lmove(cls, connection: Redis, queue_key: str, timeout: int | None) -> Any:  # (as RQ's: untyped)
            try:
                picked = connection.eval(
                    PICK, 6, *fair_keys(queue_key), IntermediateQueue(queue_key, connection).key, WORKER_TTL
                )
            except RedisError as e:
                _log.warning("training queue: the fair pick failed (%s); the queue's head is taken", e)
                picked = None
            if picked:
                return queue_key, picked
            return super().lmove(connection, queue_key, timeout)

    return FairQueue
