"""Redis as `./dev.sh serve` and compose run it (serving/redis_conf.py), on a real redis-server: the worker's
own user, the memory ceiling that never evicts, the bound on ended runs kept, and an append-only file that
brings the classes back after a restart."""

from __future__ import annotations

import secrets
import shutil
import tempfile
from pathlib import Path

import pytest
import redis as redis_py

from classroom import RedisClassStore, StoreUnavailable
from serving.processes import stop
from serving.redis_conf import WORKER_USER, redis_conf
from serving.replicas import start_redis
from serving.shared_redis import new_client
from tests.services import redis_server, require_tool
from training import messages as m
from training import redis_queue
from training.contract import JobRefused
from training.job import make_job
from training.redis_queue import PREFIX, RedisQueue, finish, key

TINY = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16, steps=20, warmup=5, eval_every=0, dropout=0.0)


@pytest.fixture(scope="module")
def server():
    with redis_server(server=True) as s:
        yield s


def test_no_password_is_on_a_command_line(server):
    cmdline = Path(f"/proc/{server.child.proc.pid}/cmdline").read_bytes().decode()
    assert server.password not in cmdline and server.worker_password not in cmdline
    assert server.password not in " ".join(server.child.cmd)


def test_the_worker_user_reaches_the_training_queue_only(server):
    app, worker = new_client(server.url), new_client(server.worker_url)
    app.set("glass:class:ABCDEF", "a class")
    app.set("glass:browser-key", "00")
    with pytest.raises(redis_py.exceptions.NoPermissionError):
        worker.get("glass:class:ABCDEF")
    with pytest.raises(redis_py.exceptions.NoPermissionError):
        worker.get("glass:browser-key")
    with pytest.raises(redis_py.exceptions.NoPermissionError):
        worker.flushall()
    worker.set(PREFIX + "probe", "ok")
    worker.set("rq:probe", "ok")
    assert app.get(PREFIX + "probe") == b"ok" and worker.get("rq:probe") == b"ok"
    assert worker.acl_whoami() == WORKER_USER


def test_redis_never_evicts_and_a_full_redis_is_a_message():
    """maxmemory with noeviction: a write past the ceiling is refused (a message on the page), and nothing
    that was stored before is ever dropped."""
    require_tool("redis-server")
    workdir = Path(tempfile.mkdtemp(prefix="glass-redis-full-"))
    small = start_redis(workdir, maxmemory="64mb")
    try:
        conn = new_client(small.url)
        assert conn.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        store = RedisClassStore(small.url, prefix="full")
        code, _ = store.create({"sentence": "i am a student"})
        for i in range(40):
            conn.set(f"filler:{i}", b"x" * 50_000)
        conn.config_set("maxmemory", "1mb")  # now well over the ceiling: every write is refused, nothing evicted
        with pytest.raises(redis_py.exceptions.OutOfMemoryError):
            conn.set("one more", b"x")
        with pytest.raises(StoreUnavailable, match="full"):
            store.create({"sentence": "another class"})
        q = RedisQueue(small.url)
        with pytest.raises(JobRefused, match="full"):
            q.submit(make_job(TINY, owner="o-full", client="10.0.0.1", probes=[]))
        assert store.snapshot(code).state == {"sentence": "i am a student"}  # the first class is still there
        assert conn.exists("filler:0")  # and so is the first filler: nothing was evicted
    finally:
        stop(small.child)
        shutil.rmtree(workdir, ignore_errors=True)


def test_ended_runs_kept_stay_within_their_budget_oldest_first(server, monkeypatch):
    conn = new_client(server.url)
    monkeypatch.setattr(redis_queue, "RESULTS_BUDGET", 25_000)
    ids = [secrets.token_hex(6) for _ in range(4)]
    running = secrets.token_hex(6)
    conn.xadd(f"{PREFIX}job:{running}:events", {"m": b"x" * 20_000})  # a running job: never dropped
    for job_id in ids:
        conn.xadd(f"{PREFIX}job:{job_id}:events", {"m": b"x" * 10_000})
        conn.set(key("job", job_id, "meta"), b"{}")
        finish(conn, job_id, m.End("finished", "completed"), size=10_000)
    kept = [conn.exists(f"{PREFIX}job:{j}:events") for j in ids]
    assert kept == [0, 0, 1, 1]  # 2 x 10 kB fit in 25 kB: the two oldest ended runs went
    assert not conn.exists(key("job", ids[0], "meta"))
    assert conn.exists(f"{PREFIX}job:{running}:events")


def test_classes_survive_a_restart_of_redis():
    require_tool("redis-server")
    workdir = Path(tempfile.mkdtemp(prefix="glass-redis-restart-"))
    server = start_redis(workdir)
    try:
        store = RedisClassStore(server.url, prefix="restart")
        code, secret = store.create({"sentence": "i am a student"})
        qid = store.ask(code, secret, "Which word?", ["i", "am"], 1)
        new_client(server.url).execute_command("WAIT", 0, 100)
        stop(server.child)  # SIGTERM: Redis writes what it has, as a supervisor's restart would see it
        server.start()
        snap = RedisClassStore(server.url, prefix="restart").snapshot(code, secret=secret)
        assert snap.state == {"sentence": "i am a student"} and snap.question.id == qid and snap.answer == 1
    finally:
        stop(server.child)
        shutil.rmtree(workdir, ignore_errors=True)


def test_the_config_refuses_a_password_that_could_break_it():
    with pytest.raises(ValueError):
        redis_conf('secret" \nrequirepass x', None)
    with pytest.raises(ValueError):
        redis_conf("a" * 20, "short")
    conf = redis_conf("a" * 20, "b" * 20, port=7000, data_dir="/tmp/x", maxmemory="2gb")
    assert "maxmemory 2gb" in conf and "maxmemory-policy noeviction" in conf and "appendonly yes" in conf
    assert f"user {WORKER_USER} on >" + "b" * 20 in conf
