"""This process's training pool (`LocalPool`): the training service of one `streamlit run app.py`.

It holds the bookkeeping that a classroom needs:

- at most `max_running` jobs train at once (default: the number of CPU cores), each in its own
  training process (`training.run_process`) with one torch thread at a lower CPU priority (nice +10)
  than the server; the others wait in a first-in-first-out queue and can see their position;
- a job belongs to a **browser**, not to a websocket: one active job per browser, and `submit` is a
  compare-and-set under the pool's lock, so any burst of Start messages (from one tab, several
  tabs, or reloads) gives exactly one job, which every session of that browser sees and can stop
  (`job_for`); a reload re-attaches to the running job and its figures;
- fair sharing between **clients** (hashed network addresses): at most `jobs_per_client` jobs queued
  or running per client and at most `starts_per_minute` new jobs per client per minute, so one client
  cannot fill the queue, whatever number of sessions or browsers it opens; a freed slot goes to the first
  queued job of the clients running fewest, and while a client under its share of the slots waits, a run
  beyond its own client's share stops (with its model so far) once it has trained `fair_seconds`
  (`training.contract.over_share`), so one address cannot hold every slot for the whole time limit;
- a maximum wall-clock time per job (`TrainConfig.max_seconds`, plus a watchdog for a hard stop);
- a job is cancelled only when no session of its browser has been alive for `grace` seconds
  (queued jobs leave the queue, running ones are killed); the browser's last ended job (its model)
  is kept for a reload until then too. The liveness check is handed in (`session_alive`: the app
  passes Streamlit's), so nothing here knows it is served by Streamlit.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable

from training.contract import (
    DEFAULT_GRACE,
    DEFAULT_MAX_SECONDS,
    FAIR_REASON,
    FAIR_SECONDS,
    JobRefused,
    Watchdog,
    any_alive,
    client_shares,
    fair_next,
    over_share,
)
from training.job import Job


def _always_alive(session_id: str | None) -> bool:
    return True


class LocalPool:
    """Server-wide limits: running jobs, a FIFO queue, per-client shares, a time limit, browser liveness.

    max_running: jobs training at once (default: CPU cores, or $GLASS_MAX_TRAINING_JOBS).
    max_seconds: wall-clock limit per job (default 600 s, or $GLASS_TRAINING_MAX_SECONDS).
    session_alive: session id -> bool (default: always alive; the app hands in Streamlit's check).
    grace: seconds no session of a browser may be alive before its job is cancelled (and its last
      ended job forgotten).
    poll: seconds between the watchdog's sweeps (it runs only while it has jobs to watch).
    max_queue: jobs waiting at most.
    jobs_per_client: jobs queued or running per client at most ($GLASS_JOBS_PER_CLIENT, default 2).
    starts_per_minute: new jobs per client in any 60 s ($GLASS_STARTS_PER_MINUTE, default 6).
    fair_seconds: while a client under its share of the slots waits, a run beyond its client's share stops once it
      has trained this long ($GLASS_TRAINING_FAIR_SECONDS, default 120: `contract.over_share`).
    """

    def __init__(
        self,
        max_running: int | None = None,
        max_seconds: float = DEFAULT_MAX_SECONDS,
        session_alive: Callable[[str | None], bool] = _always_alive,
        grace: float = DEFAULT_GRACE,
        poll: float = 1.0,
        max_queue: int = 200,
        jobs_per_client: int | None = None,
        starts_per_minute: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        fair_seconds: float = FAIR_SECONDS,
    ):
        env = os.environ.get("GLASS_MAX_TRAINING_JOBS")
        self.max_running = max(1, int(max_running or (int(env) if env else 0) or os.cpu_count() or 1))
        self.max_seconds = float(max_seconds)
        self.session_alive = session_alive
        self.grace = float(grace)
        self.poll = float(poll)
        self.max_queue = int(max_queue)
        self.jobs_per_client, self.starts_per_minute = client_shares(jobs_per_client, starts_per_minute)
        self.clock = clock
        self.fair_seconds = float(fair_seconds)
        self._lock = threading.Lock()
        self._running: list[Job] = []
        self._queue: collections.deque[Job] = collections.deque()
        self._owned: dict[str, Job] = {}  # owner (browser) -> its latest job, active or ended
        self._starts: dict[str, collections.deque[float]] = {}  # client -> times of its recent starts
        self._watchdog = Watchdog("training-watchdog", self.poll, self.sweep, self._busy_locked, self._lock)

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
            self._watchdog.ensure_locked()
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
        with self._lock:  # a fair share of the slots while others wait (`contract.over_share`)
            runs = [
                (j, j.client, j.started) for j in self._running if j.started is not None and not j.stop_event.is_set()
            ]
            lent = over_share(runs, [j.client for j in self._queue], self.max_running, now, self.fair_seconds)
        if lent is not None:
            self.stop(lent, FAIR_REASON)
            stopped.append(lent)
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
        """Called by a job's thread as it ends: free its slot and start the next queued jobs (the first of the
        clients running fewest: `contract.fair_next`)."""
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            while self._queue and len(self._running) < self.max_running:
                i = fair_next([j.client for j in self._queue], collections.Counter(j.client for j in self._running))
                nxt = self._queue[i]
                del self._queue[i]
                self._start_locked(nxt)

    # --- internal ---------------------------------------------------------------------------

    def _alive(self, job: Job) -> bool:
        return any_alive(self.session_alive, job)

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

    def _busy_locked(self) -> bool:
        return bool(self._running or self._queue or self._owned)
