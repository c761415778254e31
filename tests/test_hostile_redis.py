"""Whoever can write to Redis cannot run code in an app process or a queue worker (a real redis-server and a
real queue worker, the worker on its own restricted Redis user).

Every key and stream the app and the workers read gets a hostile value: a pickle whose unpickling would
create a file (the classic `__reduce__` payload), RQ jobs naming another function, callbacks and webhooks,
and records that are not ours at all. The file never appears, nothing crashes, and the page says the run
(or the class) could not be read.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile
import uuid
import zlib
from pathlib import Path

import pytest

from serving.processes import spawn, stop
from serving.shared_redis import new_client
from tests.apptest_util import no_exception, run_app
from tests.services import redis_server, wait_for
from training import messages as m
from training.job import make_job
from training.queue_worker import REFUSED
from training.redis_queue import PREFIX, QUEUE, UNREADABLE, RedisQueue, key

TINY = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16, steps=20, warmup=5, eval_every=0, dropout=0.0)


class Boom:
    """Unpickling this runs a shell command that creates `path`."""

    def __init__(self, path: Path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture(scope="module")
def redis():
    with redis_server(server=True) as server:
        yield server


@pytest.fixture(scope="module")
def marker():
    path = Path(tempfile.mkdtemp(prefix="glass-hostile-")) / "code-ran"
    yield path
    assert not path.exists(), "a hostile value ran code"


@pytest.fixture(scope="module")
def worker(redis):
    """One queue worker on the worker user (it cannot even read a class)."""
    log = Path(tempfile.mkdtemp(prefix="glass-hostile-worker-")) / "worker.log"
    child = spawn(
        "worker", [sys.executable, "-m", "training.queue_worker", "--name", "hostile-w", "--url", redis.worker_url], log
    )
    conn = new_client(redis.url)

    def registered() -> bool:
        if conn.zscore(PREFIX + "workers", "hostile-w"):
            return True
        assert child.alive(), child.log_tail()
        return False

    wait_for(registered, 60, lambda: f"the worker's registration:\n{child.log_tail()}", every=0.1)
    yield child
    stop(child)


def evil(marker: Path) -> bytes:
    return pickle.dumps(Boom(marker))


def rq_job(conn, job_id: str, data: bytes, **fields) -> None:
    """An RQ job record written by hand (as an attacker with the queue's keys would), then queued."""
    conn.hset(
        f"rq:job:{job_id}",
        mapping={
            "data": data,
            "origin": QUEUE,
            "status": "queued",
            "created_at": "2026-01-01T00:00:00.000000Z",
            "timeout": "60",
            "description": "x",
            **fields,
        },
    )
    conn.rpush(f"rq:queue:{QUEUE}", job_id)


def ended_with(conn, job_id: str) -> m.End | None:
    entries = conn.xrevrange(f"{PREFIX}job:{job_id}:events", count=1)
    return m.from_fields(entries[0][1]) if entries else None


@pytest.mark.parametrize("case", ["pickle", "func", "callbacks"])
def test_a_hostile_queued_job_is_refused_with_a_message_and_runs_nothing(redis, worker, marker, case):
    conn = new_client(redis.url)
    job_id = uuid.uuid4().hex[:12]
    if case == "pickle":  # a job in the pickled form RQ uses by default (and older versions of this app did)
        rq_job(conn, job_id, zlib.compress(pickle.dumps(("os.system", None, [f"touch {marker}"], {}))))
    elif case == "func":  # JSON, but naming another function
        rq_job(conn, job_id, json.dumps(["os.system", None, [f"touch {marker}"], {}]).encode())
    else:  # the right function, with a spec that is not ours, and callbacks and a webhook that would run code
        rq_job(
            conn,
            job_id,
            json.dumps(["training.queue_worker.train", None, ["{}"], {}]).encode(),
            success_callback_name="os.system",
            failure_callback_name="os.system",
            webhooks=json.dumps([{"url": "http://127.0.0.1:9/", "job_status": "failed"}]),
        )
    wait_for(lambda: ended_with(conn, job_id) is not None, 60, "the worker's refusal")
    assert ended_with(conn, job_id) == m.End("failed", "error", REFUSED)
    assert not marker.exists() and worker.alive()


def test_the_worker_trains_an_honest_run_after_the_hostile_ones(redis, worker, marker):
    q = RedisQueue(redis.url, poll=0.2)
    try:
        job = q.submit(make_job(TINY, owner="honest", client="10.9.8.7", probes=[]))
        assert job.join(120) and job.view().state == "finished", job.view().error
    finally:
        q.shutdown()
    assert not marker.exists()


def test_hostile_records_and_stream_entries_are_refused_by_the_app(redis, marker):
    conn = new_client(redis.url)
    q = RedisQueue(redis.url, poll=0.2)
    try:
        # a job record (meta) that is a pickle: the page gets a job that says it could not be read
        conn.set(key("owner", "browser-a"), "0123456789ab")
        conn.set(key("job", "0123456789ab", "meta"), evil(marker))
        job = q.job_for("browser-a")
        assert job is not None and job.done and job.view().error == UNREADABLE
        # an owner key that names no job id of ours
        conn.set(key("owner", "browser-b"), evil(marker))
        assert q.job_for("browser-b") is None
        # a good record, then a hostile message in its stream: the run's view ends with the same message
        honest = make_job(TINY, owner="browser-c", client="10.1.1.1", probes=[])
        conn.set(key("owner", "browser-c"), honest.id)
        conn.set(key("job", honest.id, "meta"), m.to_value(honest.record("c-client")))
        conn.xadd(f"{PREFIX}job:{honest.id}:events", {"m": evil(marker), "a": "x"})
        job = q.job_for("browser-c")
        assert job.join(30) and job.view().error == UNREADABLE
    finally:
        q.shutdown()
    assert not marker.exists()


def test_the_training_page_says_a_hostile_run_could_not_be_read(redis, marker, monkeypatch):
    import training

    monkeypatch.setenv("GLASS_REDIS_URL", redis.url)
    monkeypatch.setattr(training, "_SERVICE", None)
    conn = new_client(redis.url)
    owner = uuid.uuid4().hex
    conn.set(key("owner", owner), "feedfacecafe")
    conn.set(key("job", "feedfacecafe", "meta"), evil(marker))
    try:
        at = run_app("training", training_owner=owner)
        no_exception(at)
        assert UNREADABLE in [e.value for e in at.error]
    finally:
        if training._SERVICE is not None:
            training._SERVICE.shutdown()
    assert not marker.exists()


def test_a_hostile_class_record_is_a_message_not_code_or_a_traceback(redis, marker):
    from classroom import RedisClassStore, StoreUnavailable
    from classroom.redis_store import UNREADABLE as CLASS_UNREADABLE

    store = RedisClassStore(redis.url, prefix=f"test:{uuid.uuid4().hex[:8]}")
    code, secret = store.create({"sentence": "i am a student"})
    for field, value in [
        ("state", evil(marker)),
        ("state", json.dumps({"sentence": "<script>x</script>"})),
        ("question", evil(marker)),
        ("version", "not a number"),
    ]:
        good = store._r.hget(store._keys(code)[0], field)
        store._r.hset(store._keys(code)[0], field, value)
        with pytest.raises(StoreUnavailable, match="could not be read"):
            store.snapshot(code)
        assert str(CLASS_UNREADABLE).startswith("The class's record")
        if good is not None:
            store._r.hset(store._keys(code)[0], field, good)
        else:
            store._r.hdel(store._keys(code)[0], field)
    assert store.snapshot(code).state == {"sentence": "i am a student"}
    assert not marker.exists()
