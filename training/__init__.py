"""The training service: runs the paper's recipe (`model.train`) for web sessions, one process per run.

    service(session_alive) -> TrainingService     this process's `LocalPool`, or with $GLASS_REDIS_URL the
                                                   `RedisQueue` every app process and queue worker shares

job.py          a run as the page sees it (`Job`, `JobView`, `make_job`)
contract.py     what the page may ask (`TrainingService`), refusals, per-client shares
local_pool.py   this process's pool of training processes
redis_queue.py  the same over Redis and RQ, for several app processes
run_process.py  a training process: `python -m training.run_process FD` trains one run
queue_worker.py a queue worker: `python -m training.queue_worker` takes runs from the Redis queue
messages.py     what a run says, as JSON plus raw bytes (never a pickle)

Nothing here imports Streamlit: the app hands in what it needs (`session_alive`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from serving.shared_redis import redis_url
from training.contract import JobRefused, TrainingService
from training.job import Job, JobView, make_job

__all__ = ["Job", "JobRefused", "JobView", "TrainingService", "make_job", "service"]

_SERVICE: TrainingService | None = None
_LOCK = threading.Lock()


def service(session_alive: Callable[[str | None], bool] | None = None) -> TrainingService:
    """The process-wide training service (created on first use, with `session_alive` as its liveness check):
    this process's pool, or, with $GLASS_REDIS_URL set, the Redis queue every app process shares."""
    global _SERVICE
    with _LOCK:
        if _SERVICE is None:
            kwargs: dict[str, Any] = {"session_alive": session_alive} if session_alive is not None else {}
            if redis_url():
                from training.redis_queue import RedisQueue

                _SERVICE = RedisQueue(**kwargs)
            else:
                from training.local_pool import LocalPool

                _SERVICE = LocalPool(**kwargs)
        return _SERVICE
