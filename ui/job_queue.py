"""Training jobs through a Redis queue (RQ), for several app processes and any number of worker machines.

This is the app's end; the workers' end is `ui.queue_worker`.

With ``GLASS_REDIS_URL`` set, `ui.job_manager.get_manager()` returns a `QueueJobManager` instead of the
in-process `JobManager`: same methods, same `ui.jobs.Job` objects for the page, but the jobs go through
one RQ queue (``glass-training``) in Redis, and **queue workers** train them:

    python -m ui.queue_worker          # one worker = one job at a time; start as many as the cap

Why RQ: it is the smallest well-kept Redis job queue (one list per queue, plain Redis keys, a worker
process that forks one "work horse" per job, retries of jobs whose worker died); Celery would add a
broker abstraction and a second configuration language for what one queue and one function need.

What is shared, and where
-------------------------
- **The cap** on jobs training at once, server-wide: the number of queue workers (each takes one job
  at a time). `./dev.sh serve --replicas N` starts ``GLASS_MAX_TRAINING_JOBS`` of them (default: the
  machine's cores); more machines add their own with the command above and the same URL.
- **One FIFO queue**: RQ's list; a job's place in it is the student's position in the queue.
- **Fairness**, atomically in one Lua script (`_SUBMIT`) whatever process a student's request reaches:
  one active job per owner (browser) — a second Start returns the running job, also from another
  process —, at most ``jobs_per_client`` jobs queued or running per client (network address), at most
  ``starts_per_minute`` starts per client, at most ``max_queue`` jobs waiting. The clock is Redis's.
- **The run itself**: the worker runs the very worker process the local pool runs (`ui.train_worker`:
  one torch thread, nice +10, an address-space cap), and appends each of its messages (pickled, as RQ
  pickles its jobs: Redis is trusted infrastructure, never a user's input) to a Redis stream,
  ``glass:train:job:<id>:events``. Every app process that shows the job reads that stream from its
  start, so a student whose process died sees the whole run again on another process.

Keys (prefix ``glass:train:``): ``active`` (sorted set of the ids queued or running), ``owner:<browser>``
(its latest job), ``client:<addr>`` (its active ids), ``starts:<addr>`` (its recent starts),
``job:<id>:meta`` (what the page needs to draw it), ``job:<id>:events`` (the stream),
``job:<id>:stop`` ("stop" or "kill" and a reason), ``job:<id>:alive`` (exists while a session of the
job's browser is connected to some app process: every app process refreshes it for the jobs it shows;
when it expires — ``grace`` seconds after the last one went away — the worker ends the run). An ended
job's stream (its figures and model) and meta expire `KEEP_SECONDS` after the last app process that
showed it to a live session of its browser stopped refreshing them (as the local pool forgets a browser's
ended job once its pages are closed); nothing else outlives it.

No job is lost when an app process dies: the run is in a worker, its figures and model in Redis, and
the owner key in Redis points the browser's next session, on any process, to it. When a *worker*
dies mid-run, RQ's registry clean-up (each worker runs it every 30 s, `ui.queue_worker`) finds the
abandoned job and retries it once (``Retry(max=1)``) from the start; the page then shows the run
starting over (the "started" message clears its figures).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import pickle
import threading
import time

from redis.exceptions import RedisError

from ui.identity import streamlit_session_alive
from ui.job_manager import JobRefused
from ui.jobs import Job
from ui.shared_redis import client as redis_client
from ui.shared_redis import redis_url

QUEUE = "glass-training"
PREFIX = "glass:train:"
KEEP_SECONDS = 300  # an ended job (its model, its figures) stays fetchable this long after the last look
ACTIVE_TTL = 12 * 3600  # bookkeeping of a job that never ends cleanly (a worker killed twice) expires
DEFAULT_GRACE = 60.0
_log = logging.getLogger("glass.training")


def key(*parts: str) -> str:
    return PREFIX + ":".join(parts)


def events(job_id: str) -> str:
    return key("job", job_id, "events")


# KEYS: owner, client set, client starts, active, rq queue list. ARGV: id, jobs/client, starts/minute, max queue,
# ttl. Returns {"ok", id} | {"existing", id} | {"share", n, limit} | {"rate", n, limit, seconds to wait} |
# {"full", n}.
_SUBMIT = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local cur = redis.call('GET', KEYS[1])
if cur and redis.call('ZSCORE', KEYS[4], cur) then return {'existing', cur} end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if not redis.call('ZSCORE', KEYS[4], id) then redis.call('SREM', KEYS[2], id) end
end
local n = redis.call('SCARD', KEYS[2])
if n >= tonumber(ARGV[2]) then return {'share', tostring(n), ARGV[2]} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', t - 60)
local s = redis.call('ZCARD', KEYS[3])
if s >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  return {'rate', tostring(s), ARGV[3], tostring(tonumber(first[2]) + 60 - t)}
end
local waiting = redis.call('LLEN', KEYS[5])
if waiting >= tonumber(ARGV[4]) then return {'full', tostring(waiting)} end
redis.call('ZADD', KEYS[4], t, ARGV[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], t, ARGV[1])
redis.call('EXPIRE', KEYS[3], 120)
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[5])
return {'ok', ARGV[1]}
"""


UNREACHABLE = "The training queue cannot be reached right now. Try again in a minute."


def _tolerant(fallback):
    """Redis unreachable for a moment: log it and let the page carry on with `fallback` (an exception class:
    raise it with `UNREACHABLE`, which the page shows)."""
    def wrap(method):
        @functools.wraps(method)
        def inner(*args, **kwargs):
            try:
                return method(*args, **kwargs)
            except (RedisError, OSError) as e:
                _log.warning("training queue: %s failed (%s)", method.__name__, e)
                if isinstance(fallback, type) and issubclass(fallback, Exception):
                    raise fallback(UNREACHABLE) from e
                return fallback
        return inner
    return wrap


class QueueJobManager:
    """The `ui.job_manager.JobManager` interface over Redis and RQ (see the module's docstring).

    This process keeps the `Job` objects its sessions show (`_jobs`); everything that decides (the
    queue, the shares, which job a browser has) lives in Redis, so any app process may answer.
    """

    def __init__(self, url: str | None = None, max_seconds: float | None = None, grace: float = DEFAULT_GRACE,
                 max_queue: int = 200, jobs_per_client: int | None = None, starts_per_minute: int | None = None,
                 session_alive=streamlit_session_alive, poll: float = 1.0):
        from rq import Queue

        from ui.job_manager import DEFAULT_MAX_SECONDS, client_shares

        self.url = url or redis_url()
        self.redis = redis_client(self.url)
        self.queue = Queue(QUEUE, connection=self.redis)
        self.max_seconds = float(max_seconds if max_seconds is not None else DEFAULT_MAX_SECONDS)
        self.grace = float(grace)
        self.max_queue = int(max_queue)
        self.jobs_per_client, self.starts_per_minute = client_shares(jobs_per_client, starts_per_minute)
        self.session_alive = session_alive
        self.poll = float(poll)
        self._submit = self.redis.register_script(_SUBMIT)
        self._lock = threading.Lock()
        self._jobs: dict[str, Job] = {}  # id -> the Job object this process's sessions show
        self._workers: tuple[float, int] = (0.0, 0)  # (when counted, queue workers)
        self._watchdog: threading.Thread | None = None

    # --- the JobManager interface ---------------------------------------------------------------

    @property
    @_tolerant(0)
    def max_running(self) -> int:
        """Jobs that train at once, server-wide: the queue workers connected now (counted every 10 s)."""
        from rq import Worker

        when, n = self._workers
        if time.monotonic() - when > 10:
            n = Worker.count(connection=self.redis, queue=self.queue)
            self._workers = (time.monotonic(), n)
        return n

    @_tolerant(JobRefused)
    def submit(self, job: Job) -> Job:
        """Queue `job` (or return its owner's active job, from whatever process started it); `JobRefused`
        when its client is over its share or the queue is full."""
        from rq import Retry

        if job.state != "new":
            raise JobRefused("This job was already submitted.")
        owner = job.owner or f"job-{job.id}"
        client = job.client or "local"
        job.attach(self, self.max_seconds, runner=self._follow)
        verdict = self._submit(keys=[key("owner", owner), key("client", client), key("starts", client),
                                     key("active"), self.queue.key],
                               args=[job.id, self.jobs_per_client, self.starts_per_minute, self.max_queue,
                                     ACTIVE_TTL])
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
                p.set(key("job", job.id, "meta"), pickle.dumps(_meta(job)), ex=ACTIVE_TTL)
                p.set(key("job", job.id, "alive"), b"1", ex=max(1, int(self.grace)))
                p.execute()
            self.queue.enqueue("ui.queue_worker.train", job.spec(), job_id=job.id, retry=Retry(max=1),
                               job_timeout=int(job.tcfg.max_seconds or self.max_seconds) + 300,
                               result_ttl=KEEP_SECONDS, failure_ttl=KEEP_SECONDS,
                               description=f"training for client {client}")
        except BaseException:  # counted but not queued: give its owner's and client's places back
            with contextlib.suppress(RedisError, OSError):
                finish(self.redis, job.id, ("end", "failed", "error", UNREACHABLE))
            raise
        job.forget_data()
        job.mark_queued()
        with self._lock:
            self._jobs[job.id] = job
        job.follow()
        self._ensure_watchdog()
        return job

    @_tolerant(None)
    def job_for(self, owner: str | None, session_id: str | None = None) -> Job | None:
        """The owner's latest job (started by any process, active or ended and kept), or None."""
        if owner is None:
            return None
        raw = self.redis.get(key("owner", owner))
        if raw is None:
            return None
        job = self._local(raw.decode()) or self._rebuild(raw.decode())
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
        self.redis.set(key("job", job.id, "stop"), pickle.dumps(("kill" if kill else "stop", reason)),
                       ex=ACTIVE_TTL)
        if self.redis.lrem(self.queue.key, 0, job.id):  # still queued: nobody else will end it
            self.redis.expire(self.queue.job_class.key_for(job.id), KEEP_SECONDS)  # RQ's record of it
            finish(self.redis, job.id, ("end", "stopped", reason, None))

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
            alive = any(_safe_alive(self.session_alive, s) for s in job.session_ids()) or not job.session_ids()
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
        """A job another process started (or one this process forgot): its Job object from its meta, and
        a thread that reads its whole stream, so the page shows the run from its start."""
        raw = self.redis.get(key("job", job_id, "meta"))
        if raw is None:
            return None
        meta = pickle.loads(raw)
        job = Job(meta["tcfg"], None, meta["data_label"], meta["data_sha256"], meta["probes"], 0, None,
                  meta["owner"], meta["name"], meta["memory"], meta["client"])
        job.id, job.probe_every = job_id, meta["probe_every"]
        job.attach(self, self.max_seconds, runner=self._follow)
        job.mark_queued()
        with self._lock:
            if job_id in self._jobs:  # another session of this process got there first
                return self._jobs[job_id]
            self._jobs[job_id] = job
        job.follow()
        self._ensure_watchdog()
        return job

    def _follow(self, spec: dict, stop: threading.Event, kill, started, receive) -> tuple[str, str, str | None]:
        """A job's runner in this process: pass each message of its stream to `receive` until its end;
        forward a stop (or kill) of this process's page to the worker."""
        job_id, last, told, attempt = spec["job_id"], "0", None, None
        while True:
            try:
                wanted = "kill" if kill() else "stop" if stop.is_set() else None
                if wanted is not None and wanted != told:
                    self.redis.set(key("job", job_id, "stop"), pickle.dumps((wanted, "stopped")),
                                   nx=told is None, ex=ACTIVE_TTL)
                    told = wanted
                batches = self.redis.xread({events(job_id): last}, count=100, block=1000)
                if not batches and not self.redis.exists(key("job", job_id, "meta")):
                    return "failed", "error", "This training job's records expired on the server."
            except (RedisError, OSError) as e:  # Redis away for a moment: try again, the stream keeps
                _log.warning("training job %s: reading its stream failed (%s)", job_id, e)
                time.sleep(1.0)
                continue
            for _, entries in batches or ():
                for entry_id, fields in entries:
                    last, sender = entry_id, fields.get(b"a")
                    msg = pickle.loads(fields[b"m"])
                    if msg[0] == "started":
                        attempt = sender
                    elif attempt is not None and sender is not None and sender != attempt:
                        continue  # a late message of an attempt whose worker died (a retry runs now)
                    if msg[0] == "end":
                        return msg[1], msg[2], msg[3]
                    receive(msg)

    def _ensure_watchdog(self) -> None:
        with self._lock:
            if self._watchdog is None or not self._watchdog.is_alive():
                self._watchdog = threading.Thread(target=self._watch, name="training-queue-watchdog", daemon=True)
                self._watchdog.start()

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll)
            try:
                self.sweep()
            except Exception as e:  # noqa: BLE001 - Redis away for a moment: the next sweep tries again
                _log.warning("training queue sweep failed: %s", e)
            with self._lock:
                if not self._jobs:
                    self._watchdog = None
                    return


def _safe_alive(check, session_id: str) -> bool:
    try:
        return bool(check(session_id))
    except Exception:  # noqa: BLE001 - a failing check counts as alive
        return True


def _meta(job: Job) -> dict:
    """What another process needs to show `job` (no data: that went to the worker)."""
    return {"tcfg": job.tcfg, "data_label": job.data_label, "data_sha256": job.data_sha256, "probes": job.probes,
            "probe_every": job.probe_every, "owner": job.owner, "name": job.name, "memory": job.memory,
            "client": job.client}


def _refusal(verdict) -> JobRefused:
    """The Lua script's refusal, in the words the local pool uses."""
    what, *figures = (v.decode() for v in verdict)
    if what == "share":
        return JobRefused.share(int(figures[0]), int(figures[1]))
    if what == "rate":
        return JobRefused.rate(int(figures[0]), int(figures[1]), float(figures[2]))
    return JobRefused.full(int(figures[0]))


def publish(conn, job_id: str, msg: tuple, attempt: str) -> None:
    conn.xadd(events(job_id), {"m": pickle.dumps(msg), "a": attempt})


def finish(conn, job_id: str, end: tuple, attempt: str = "") -> None:
    """The job's last message, and its bookkeeping cleared (its stream and meta kept `KEEP_SECONDS`).
    `attempt` names the worker's try ("": the job never started)."""
    meta = conn.get(key("job", job_id, "meta"))
    client = pickle.loads(meta)["client"] or "local" if meta else None
    with conn.pipeline() as p:
        p.xadd(events(job_id), {"m": pickle.dumps(end), "a": attempt})
        p.zrem(key("active"), job_id)
        if client is not None:
            p.srem(key("client", client), job_id)
        p.expire(events(job_id), KEEP_SECONDS)
        p.expire(key("job", job_id, "meta"), KEEP_SECONDS)
        p.delete(key("job", job_id, "stop"), key("job", job_id, "alive"))
        p.execute()
