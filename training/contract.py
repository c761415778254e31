"""What the training page may ask of the training service, whichever runs it (`training.service()`):
the protocol, its refusals, its per-client shares and the watchdog both implementations use.

`LocalPool` (`training.local_pool`: this process's pool of training processes) and `RedisQueue`
(`training.redis_queue`: one Redis queue for every app process, trained by queue workers) both
provide `TrainingService`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

from training.job import Job

DEFAULT_MAX_SECONDS = float(os.environ.get("GLASS_TRAINING_MAX_SECONDS", 600))
DEFAULT_GRACE = 60.0  # seconds no session of a browser may be alive (a reload, a flaky network) before its job ends
_log = logging.getLogger("glass.training")


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


# A fair share of the training slots while others wait: the slots (the cores, or the queue workers alive) over the
# addresses with a run queued or running, at least one each. A run beyond its address's share goes on while nobody
# else waits; once an address under its share waits, that run stops after it has trained FAIR_SECONDS (its model
# so far stays its student's), and the slot goes to the waiting address. Before, one address holding every slot
# made a class wait the whole time limit (600 s) for its first run.
FAIR_SECONDS = float(os.environ.get("GLASS_TRAINING_FAIR_SECONDS", 120))
FAIR_REASON = (
    "another address was waiting for a training slot: while others wait, an address keeps at most its "
    "share of the slots"
)


def fair_share(slots: int, clients: int) -> int:
    """The slots each address may hold while others wait (at least 1)."""
    return max(1, slots // max(1, clients))


def fair_next(queued: list[str | None], running: Counter[str | None]) -> int:
    """Which queued job (by its client, in queue order) starts next: the first of the clients running fewest."""
    return min(range(len(queued)), key=lambda i: (running[queued[i]], i))


Run = TypeVar("Run")  # what `over_share` picks from (a Job)


def over_share(
    runs: Sequence[tuple[Run, str | None, float]],
    queued: list[str | None],
    slots: int,
    now: float,
    seconds: float = FAIR_SECONDS,
) -> Run | None:
    """The run (`runs`: (run, client, started)) that gives its slot back now, or None: while a client under its share
    waits, the newest run of a client over its share, once it has trained `seconds`."""
    running = Counter(client for _, client, _ in runs)
    share = fair_share(slots, len(set(running) | set(queued)))
    if not any(running[client] < share for client in queued):
        return None
    over = [(started, run) for run, client, started in runs if running[client] > share and now - started >= seconds]
    return max(over, key=lambda x: x[0])[1] if over else None


class JobRefused(RuntimeError):
    """The service cannot take this job (its client is over its share, the queue is full); the message
    is for the page."""

    @classmethod
    def share(cls, active: int, limit: int) -> JobRefused:
        return cls(
            f"Your network address already has {active} training job(s) queued or running; the limit is "
            f"{limit} per address, so that everyone gets a turn. Wait until one ends, or stop one."
        )

    @classmethod
    def rate(cls, started: int, limit: int, wait: float) -> JobRefused:
        return cls(
            f"{started} training runs were started from your network address in the last minute; the "
            f"limit is {limit} per minute. Try again in {max(1, int(wait + 0.999))} s."
        )

    @classmethod
    def full(cls, waiting: int) -> JobRefused:
        return cls(f"The server's training queue is full ({waiting} jobs waiting). Try again in a few minutes.")


class TrainingService(Protocol):
    """What the training page needs: start a job, find its browser's job, stop it, the queue's figures."""

    @property
    def max_running(self) -> int: ...  # (a property of RedisQueue: the queue workers alive now)

    max_seconds: float

    def submit(self, job: Job) -> Job: ...
    def job_for(self, owner: str | None, session_id: str | None = None) -> Job | None: ...
    def position(self, job: Job) -> int | None: ...
    def stop(self, job: Job, reason: str = "stopped by you", kill: bool = False) -> None: ...
    def counts(self) -> tuple[int, int]: ...
    def release(self, job: Job) -> None: ...
    def shutdown(self, timeout: float = 30) -> None: ...


def any_alive(session_alive: Callable[[str | None], bool], job: Job) -> bool:
    """Whether a session attached to the job is connected (a failing check counts as alive; a job without
    sessions, started outside a web session, always is). Sessions found dead are dropped from the job
    while another one is alive (a reload's old session: the new one keeps the job)."""
    sessions = job.session_ids()
    if not sessions:
        return True
    dead = []
    for sid in sessions:
        try:
            ok = bool(session_alive(sid))
        except Exception:  # noqa: BLE001 - a failing check must not kill the watchdog
            ok = True
        if not ok:
            dead.append(sid)
    alive = len(dead) < len(sessions)
    if alive and dead:
        job.drop_sessions(dead)
    return alive


class Watchdog:
    """A thread that calls `sweep()` every `poll` seconds while its owner has something to watch, and ends
    when it has not. `lock` is the owner's lock; `busy_locked()` is called holding it, and `ensure_locked()`
    must be (so that a job added as the thread decides to end is never left unwatched). A failing sweep is
    logged and tried again next time."""

    def __init__(
        self, name: str, poll: float, sweep: Callable[[], object], busy_locked: Callable[[], bool], lock: threading.Lock
    ):
        self.name, self.poll, self._sweep, self._busy_locked, self._lock = name, float(poll), sweep, busy_locked, lock
        self._thread: threading.Thread | None = None

    def ensure_locked(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._watch, name=self.name, daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while True:
            time.sleep(self.poll)
            try:
                self._sweep()
            except Exception as e:  # noqa: BLE001 - Redis away for a moment: the next sweep tries again
                _log.warning("%s: sweep failed (%s)", self.name, e)
            with self._lock:
                if not self._busy_locked():
                    self._thread = None
                    return
