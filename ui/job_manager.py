"""The server's training jobs: one `JobManager` per process, the only object sessions share.

It holds the bookkeeping that a classroom needs:

- at most `max_running` jobs train at once (default: the number of CPU cores), each in its own
  process (`ui.train_worker`) with one torch thread at a lower CPU priority (nice +10) than the
  server; the others wait in a first-in-first-out queue and can see their position;
- a job belongs to a **browser**, not to a websocket: one active job per browser, and `submit` is a
  compare-and-set under the manager's lock, so any burst of Start messages (from one tab, several
  tabs, or reloads) gives exactly one job, which every session of that browser sees and can stop
  (`job_for`); a reload re-attaches to the running job and its figures;
- fair sharing between **clients** (network addresses): at most `jobs_per_client` jobs queued or
  running per client and at most `starts_per_minute` new jobs per client per minute, so one client
  cannot fill the running slots or the queue, whatever number of sessions or browsers it opens;
- a maximum wall-clock time per job (`TrainConfig.max_seconds`, plus a watchdog for a hard stop);
- a job is cancelled only when no session of its browser has been alive for `grace` seconds
  (queued jobs leave the queue, running ones are killed); the browser's last ended job (its model)
  is kept for a reload until then too. The liveness check is injectable (`session_alive`), so tests
  simulate dead sessions without Streamlit.

Who asks (the browser, the client, the session) is `ui.identity`'s business. Nothing here needs a
running Streamlit: the Streamlit calls are imported lazily inside small functions.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ui.identity import streamlit_session_alive
from ui.jobs import Job

DEFAULT_MAX_SECONDS = float(os.environ.get("GLASS_TRAINING_MAX_SECONDS", 600))
DEFAULT_GRACE = 60.0  # seconds no session of a browser may be alive (a reload, a flaky network) before its job ends
def _env_int(name: str, default: int) -> int:
    try:
        return int(os.environ.get(name, "") or default)
    except ValueError:
        return default


def client_shares(jobs_per_client: int | None = None, starts_per_minute: int | None = None) -> tuple[int, int]:
    """(jobs queued or running, starts per minute) allowed per client: the arguments, else
    $GLASS_JOBS_PER_CLIENT (default 2) and $GLASS_STARTS_PER_MINUTE (default 6); at least 1 each."""
    jobs = jobs_per_client if jobs_per_client is not None else _env_int("GLASS_JOBS_PER_CLIENT", 2)
    starts = starts_per_minute if starts_per_minute is not None else _env_int("GLASS_STARTS_PER_MINUTE", 6)
    return max(1, jobs), max(1, starts)


class JobRefused(RuntimeError):
    """The manager cannot take this job (its client is over its share, the queue is full)."""

    @classmethod
    def share(cls, active: int, limit: int) -> JobRefused:
        return cls(f"Your network address already has {active} training job(s) queued or running; the limit is "
                   f"{limit} per address, so that everyone gets a turn. Wait until one ends, or stop one.")

    @classmethod
    def rate(cls, started: int, limit: int, wait: float) -> JobRefused:
        return cls(f"{started} training runs were started from your network address in the last minute; the "
                   f"limit is {limit} per minute. Try again in {max(1, int(wait + 0.999))} s.")

    @classmethod
    def full(cls, waiting: int) -> JobRefused:
        return cls(f"The server's training queue is full ({waiting} jobs waiting). Try again in a few minutes.")


class JobManager:
    """Server-wide limits: running jobs, a FIFO queue, per-client shares, a time limit, browser liveness.

    max_running: jobs training at once (default: CPU cores, or $GLASS_MAX_TRAINING_JOBS).
    max_seconds: wall-clock limit per job (default 600 s, or $GLASS_TRAINING_MAX_SECONDS).
    session_alive: session id -> bool (default: ask the Streamlit runtime).
    grace: seconds no session of a browser may be alive before its job is cancelled (and its last
      ended job forgotten).
    poll: seconds between the watchdog's sweeps (it runs only while it has jobs to watch).
    max_queue: jobs waiting at most.
    jobs_per_client: jobs queued or running per client at most ($GLASS_JOBS_PER_CLIENT, default 2).
    starts_per_minute: new jobs per client in any 60 s ($GLASS_STARTS_PER_MINUTE, default 6).
    """

    def __init__(self, max_running: int | None = None, max_seconds: float = DEFAULT_MAX_SECONDS,
                 session_alive: Callable[[str | None], bool] = streamlit_session_alive, grace: float = DEFAULT_GRACE,
                 poll: float = 1.0, max_queue: int = 200, jobs_per_client: int | None = None,
                 starts_per_minute: int | None = None, clock: Callable[[], float] = time.monotonic):
        env = os.environ.get("GLASS_MAX_TRAINING_JOBS")
        self.max_running = max(1, int(max_running or (int(env) if env else 0) or os.cpu_count() or 1))
        self.max_seconds = float(max_seconds)
        self.session_alive = session_alive
        self.grace = float(grace)
        self.poll = float(poll)
        self.max_queue = int(max_queue)
        self.jobs_per_client, self.starts_per_minute = client_shares(jobs_per_client, starts_per_minute)
        self.clock = clock
        self._lock = threading.Lock()
        self._running: list[Job] = []
        self._queue: collections.deque[Job] = collections.deque()
        self._owned: dict[str, Job] = {}  # owner (browser) -> its latest job, active or ended
        self._starts: dict[str, collections.deque[float]] = {}  # client -> times of its recent starts
        self._watchdog: threading.Thread | None = None

    # --- public -----------------------------------------------------------------------------

    def submit(self, job: Job) -> Job:
        """Start the job now if a slot is free, else queue it; returns the job that now runs for its owner.

        Idempotent per owner: when the owner already has a job queued or running, that job is returned
        and `job` is dropped (a double click, a burst of messages, a second tab). Raises `JobRefused`
        when the job's client is over its share or the queue is full.
        """
        with self._lock:
            if job.state != "new":
                raise JobRefused("This job was already submitted.")
            if job.owner is not None:
                current = self._owned.get(job.owner)
                if current is not None and current.active:
                    current.add_sessions(job.session_ids())
                    return current
            if job.client is not None:
                self._check_share_locked(job.client)
            if len(self._running) >= self.max_running and len(self._queue) >= self.max_queue:
                raise JobRefused.full(len(self._queue))
            job.attach(self, self.max_seconds)
            if job.client is not None:
                self._starts.setdefault(job.client, collections.deque()).append(self.clock())
            if job.owner is not None:
                self._owned[job.owner] = job
            if len(self._running) < self.max_running:
                self._start_locked(job)
            else:
                job.mark_queued()
                self._queue.append(job)
            self._ensure_watchdog_locked()
        return job

    def job_for(self, owner: str | None, session_id: str | None = None) -> Job | None:
        """The owner's (browser's) latest job, active or ended and not yet forgotten; `session_id`, when
        given, is attached to it, so this session keeps the job alive and sees its figures."""
        if owner is None:
            return None
        with self._lock:
            job = self._owned.get(owner)
            if job is not None and session_id is not None:
                job.add_sessions((session_id,))
            return job

    def position(self, job: Job) -> int | None:
        """1-based position in the queue, or None when not queued."""
        with self._lock:
            for i, j in enumerate(self._queue):
                if j is job:
                    return i + 1
        return None

    def stop(self, job: Job, reason: str = "stopped by you", kill: bool = False) -> None:
        """Stop a job: it leaves the queue, or its worker ends after the current step and hands over the
        model so far; with `kill` (nobody will look at the model) the worker process is killed at once."""
        with self._lock:
            if job in self._queue:
                self._queue.remove(job)
                job.cancel(reason)
            elif job in self._running:
                job.request_stop(reason, kill)

    def counts(self) -> tuple[int, int]:
        """(running, queued)."""
        with self._lock:
            return len(self._running), len(self._queue)

    def active_jobs(self) -> list[Job]:
        with self._lock:
            return [*self._running, *self._queue]

    def client_jobs(self, client: str) -> int:
        """Jobs of `client` queued or running."""
        with self._lock:
            return sum(j.client == client for j in (*self._running, *self._queue))

    def sweep(self, now: float | None = None) -> list[Job]:
        """Cancel jobs whose browser has had no live session for `grace` seconds and jobs over the time
        limit; forget ended jobs nobody can come back for. Returns the jobs told to stop."""
        now = time.monotonic() if now is None else now
        stopped = []
        for job in self.active_jobs():
            alive = self._alive(job)
            disconnected_for = job.seen_alive(alive, now)
            if not alive and disconnected_for >= self.grace:
                self.stop(job, "session ended", kill=True)
                stopped.append(job)
                continue
            # hard limit: the trainer stops itself at max_seconds; this catches a run stuck in one long step
            if job.started is not None and job.state == "running" and now - job.started > self.max_seconds + 60:
                self.stop(job, f"time limit ({self.max_seconds:.0f} s per job)")
                stopped.append(job)
        with self._lock:
            ended = [(owner, job) for owner, job in self._owned.items() if job.done]
        for owner, job in ended:
            alive = self._alive(job)
            disconnected_for = job.seen_alive(alive, now)
            if not alive and disconnected_for >= self.grace:
                with self._lock:
                    if self._owned.get(owner) is job:
                        del self._owned[owner]
        with self._lock:
            cutoff = self.clock() - 60.0
            for client in list(self._starts):
                times = self._starts[client]
                while times and times[0] <= cutoff:
                    times.popleft()
                if not times:
                    del self._starts[client]
        return stopped

    def shutdown(self, timeout: float = 30) -> None:
        """Stop every job and wait for them (tests)."""
        for job in self.active_jobs():
            self.stop(job, "server shutting down")
        for job in list(self._running):
            job.join(timeout)
        with self._lock:
            self._owned.clear()

    def release(self, job: Job) -> None:
        """Called by a job's thread as it ends: free its slot and start the next queued jobs."""
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            while self._queue and len(self._running) < self.max_running:
                self._start_locked(self._queue.popleft())

    # --- internal ---------------------------------------------------------------------------

    def _alive(self, job: Job) -> bool:
        """Whether any session attached to the job is connected (a failing check counts as alive; a job
        without sessions, started outside Streamlit, always is)."""
        if not job.session_ids():
            return True
        alive = False
        dead = []
        for sid in job.session_ids():
            try:
                ok = bool(self.session_alive(sid))
            except Exception:  # noqa: BLE001 - a failing check must not kill the watchdog
                ok = True
            alive = alive or ok
            if not ok:
                dead.append(sid)
        if alive and dead:
            job.drop_sessions(dead)  # a reload's old session: the new one keeps the job
        return alive

    def _check_share_locked(self, client: str) -> None:
        active = sum(j.client == client for j in (*self._running, *self._queue))
        if active >= self.jobs_per_client:
            raise JobRefused.share(active, self.jobs_per_client)
        times = self._starts.get(client)
        now = self.clock()
        if times:
            while times and times[0] <= now - 60.0:
                times.popleft()
            if len(times) >= self.starts_per_minute:
                raise JobRefused.rate(len(times), self.starts_per_minute, times[0] + 60.0 - now)

    def _start_locked(self, job: Job) -> None:
        self._running.append(job)
        job.mark_started()

    def _ensure_watchdog_locked(self) -> None:
        if self._watchdog is None or not self._watchdog.is_alive():
            self._watchdog = threading.Thread(target=self._watch, name="training-watchdog", daemon=True)
            self._watchdog.start()

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll)
            self.sweep()
            with self._lock:
                if not self._running and not self._queue and not self._owned:
                    self._watchdog = None
                    return


class Manager(Protocol):
    """What the training page and a `Job` need from a manager: `JobManager` (this process's pool) and
    `ui.job_queue.QueueJobManager` (one Redis queue for every process) both provide it."""

    max_running: int
    max_seconds: float

    def submit(self, job: Job) -> Job: ...
    def job_for(self, owner: str | None, session_id: str | None = None) -> Job | None: ...
    def position(self, job: Job) -> int | None: ...
    def stop(self, job: Job, reason: str = "stopped by you", kill: bool = False) -> None: ...
    def counts(self) -> tuple[int, int]: ...
    def release(self, job: Job) -> None: ...
    def shutdown(self, timeout: float = 30) -> None: ...


_MANAGER: Manager | None = None
_MANAGER_LOCK = threading.Lock()


def get_manager() -> Manager:
    """The process-wide manager (created on first use): this process's pool, or, with $GLASS_REDIS_URL set,
    the Redis queue that every app process and queue worker shares (`ui.job_queue.QueueJobManager`)."""
    global _MANAGER
    with _MANAGER_LOCK:
        if _MANAGER is None:
            from ui.shared_redis import redis_url

            if redis_url():
                from ui.job_queue import QueueJobManager

                _MANAGER = QueueJobManager()
            else:
                _MANAGER = JobManager()
        return _MANAGER
