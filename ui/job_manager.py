"""The server's training jobs: one `JobManager` per process, the only object sessions share.

It holds no results (each session keeps its own `ui.jobs.Job`), just the bookkeeping that a
classroom needs:

- at most `max_running` jobs train at once (default: the number of CPU cores), each in its own
  process (`ui.train_worker`) with one torch thread at a lower CPU priority (nice +10) than the
  server; the others wait in a first-in-first-out queue and can see their position;
- one active job per owner (the page's per-session token), so a double click cannot start two;
- a maximum wall-clock time per job (`TrainConfig.max_seconds`, plus a watchdog for a hard stop);
- a job whose browser session has ended (no websocket for `grace` seconds) is cancelled: queued
  jobs leave the queue, running ones are killed. The liveness check is injectable (`session_alive`), so
  tests simulate a dead session without Streamlit.

The manager moves a job through its states only through the job's public methods. Nothing here
needs a running Streamlit: the two Streamlit calls (the session id and the liveness check) are
imported lazily inside two small functions.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from collections.abc import Callable

from ui.jobs import Job

DEFAULT_MAX_SECONDS = float(os.environ.get("GLASS_TRAINING_MAX_SECONDS", 600))
DEFAULT_GRACE = 60.0  # seconds a session may be disconnected (a reload, a flaky network) before its job ends


class JobRefused(RuntimeError):
    """The manager cannot take this job (one is already active for this session, the queue is full)."""


def streamlit_session_alive(session_id: str | None) -> bool:
    """True while the browser session is connected (always True outside a Streamlit server)."""
    if session_id is None:
        return True
    try:
        from streamlit.runtime import Runtime
    except ImportError:  # pragma: no cover - streamlit is a dependency of the app
        return True
    if not Runtime.exists():
        return True  # AppTest, scripts, tests: nobody to ask
    return Runtime.instance().is_active_session(session_id)


def current_session_id() -> str | None:
    """The id of the Streamlit session running this script (None outside Streamlit)."""
    try:
        from streamlit.runtime.scriptrunner import get_script_run_ctx
    except ImportError:  # pragma: no cover
        return None
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else None


class JobManager:
    """Server-wide limits: a number of running jobs, a FIFO queue, a time limit, session liveness.

    max_running: jobs training at once (default: CPU cores, or $GLASS_MAX_TRAINING_JOBS).
    max_seconds: wall-clock limit per job (default 600 s, or $GLASS_TRAINING_MAX_SECONDS).
    session_alive: session id -> bool (default: ask the Streamlit runtime).
    grace: seconds a session may be disconnected before its job is cancelled.
    poll: seconds between the watchdog's sweeps (it runs only while jobs are active).
    """

    def __init__(self, max_running: int | None = None, max_seconds: float = DEFAULT_MAX_SECONDS,
                 session_alive: Callable[[str | None], bool] = streamlit_session_alive, grace: float = DEFAULT_GRACE,
                 poll: float = 1.0, max_queue: int = 200):
        env = os.environ.get("GLASS_MAX_TRAINING_JOBS")
        self.max_running = max(1, int(max_running or (int(env) if env else 0) or os.cpu_count() or 1))
        self.max_seconds = float(max_seconds)
        self.session_alive = session_alive
        self.grace = float(grace)
        self.poll = float(poll)
        self.max_queue = int(max_queue)
        self._lock = threading.Lock()
        self._running: list[Job] = []
        self._queue: collections.deque[Job] = collections.deque()
        self._watchdog: threading.Thread | None = None

    # --- public -----------------------------------------------------------------------------

    def submit(self, job: Job) -> Job:
        """Start the job now if a slot is free, else queue it. Raises `JobRefused`."""
        with self._lock:
            if job.state != "new":
                raise JobRefused("This job was already submitted.")
            if job.owner is not None and any(j.owner == job.owner for j in (*self._running, *self._queue)):
                raise JobRefused("You already have a training job queued or running: stop it first.")
            if len(self._running) >= self.max_running and len(self._queue) >= self.max_queue:
                raise JobRefused(f"The server's training queue is full ({self.max_queue} jobs waiting). "
                                 "Try again in a few minutes.")
            job.attach(self, self.max_seconds)
            if len(self._running) < self.max_running:
                self._start_locked(job)
            else:
                job.mark_queued()
                self._queue.append(job)
            self._ensure_watchdog_locked()
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

    def sweep(self, now: float | None = None) -> list[Job]:
        """Cancel jobs of ended sessions and jobs over the time limit; returns the jobs told to stop."""
        now = time.monotonic() if now is None else now
        stopped = []
        for job in self.active_jobs():
            alive = True
            try:
                alive = bool(self.session_alive(job.session_id))
            except Exception:  # noqa: BLE001 - a failing check must not kill the watchdog
                alive = True
            disconnected_for = job.seen_alive(alive, now)
            if not alive and disconnected_for >= self.grace:
                self.stop(job, "session ended", kill=True)
                stopped.append(job)
                continue
            # hard limit: the trainer stops itself at max_seconds; this catches a run stuck in one long step
            if job.started is not None and job.state == "running" and now - job.started > self.max_seconds + 60:
                self.stop(job, f"time limit ({self.max_seconds:.0f} s per job)")
                stopped.append(job)
        return stopped

    def shutdown(self, timeout: float = 30) -> None:
        """Stop every job and wait for them (tests)."""
        for job in self.active_jobs():
            self.stop(job, "server shutting down")
        for job in list(self._running):
            job.join(timeout)

    def release(self, job: Job) -> None:
        """Called by a job's thread as it ends: free its slot and start the next queued jobs."""
        with self._lock:
            if job in self._running:
                self._running.remove(job)
            while self._queue and len(self._running) < self.max_running:
                self._start_locked(self._queue.popleft())

    # --- internal ---------------------------------------------------------------------------

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
                if not self._running and not self._queue:
                    self._watchdog = None
                    return


_MANAGER: JobManager | None = None
_MANAGER_LOCK = threading.Lock()


def get_manager() -> JobManager:
    """The process-wide manager (created on first use)."""
    global _MANAGER
    with _MANAGER_LOCK:
        if _MANAGER is None:
            _MANAGER = JobManager()
        return _MANAGER
