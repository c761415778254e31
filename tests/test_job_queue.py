"""Training jobs through Redis and RQ (training/redis_queue.py, training/queue_worker.py): a real redis-server
and real queue workers (`python -m training.queue_worker` processes), several `RedisQueue`s standing in for app
processes, and app processes that are killed for real."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from rq import Queue, Worker
from rq.registry import StartedJobRegistry

from serving.identity import client_key
from serving.processes import ROOT, spawn, stop
from serving.shared_redis import client as redis_client
from tests.services import redis_server, wait_for
from training import messages as m
from training.contract import FAIR_REASON, JobRefused
from training.job import Job, make_job
from training.redis_queue import KEEP_SECONDS, PREFIX, QUEUE, RedisQueue, key, rq_serializer

TINY = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16, steps=40, warmup=10, eval_every=0, dropout=0.0)
LONG = {**TINY, "steps": 5000}


class Workers:
    """Queue workers in their own process groups (killed with everything they started)."""

    def __init__(self, url: str):
        self.url, self.dir, self.children = url, Path(tempfile.mkdtemp(prefix="glass-workers-")), {}

    def start(self, name: str):
        self.children[name] = spawn(
            name,
            [sys.executable, "-m", "training.queue_worker", "--name", name],
            self.dir / f"{name}.log",
            env={**os.environ, "GLASS_REDIS_URL": self.url},
        )
        conn = redis_client(self.url)
        # registered with RQ and counted by the cap (its heartbeat thread may write a moment after RQ's entry)
        wait_for(
            lambda: conn.exists(f"rq:worker:{name}") and conn.zscore(PREFIX + "workers", name) is not None,
            60,
            f"worker {name} registered",
        )

    def kill(self, name: str, forget: bool = True):
        """SIGKILL; with `forget`, take it off RQ's list of workers (a dead worker would stay on it for minutes)
        and off the cap's count (it would count for WORKER_TTL seconds more)."""
        stop(self.children.pop(name), sig=signal.SIGKILL)
        if not forget:
            return
        conn = redis_client(self.url)
        conn.zrem(PREFIX + "workers", name)
        for worker in Worker.all(connection=conn):
            if worker.name == name:
                worker.register_death()

    def stop_all(self):
        for child in self.children.values():
            stop(child)


@pytest.fixture(scope="module")
def url():
    with redis_server() as url:
        yield url


@pytest.fixture(scope="module")
def workers(url):
    w = Workers(url)
    w.start("w1")  # one worker: the cap is 1, so the queue's order shows
    yield w
    w.stop_all()


@pytest.fixture
def queues(url, workers):
    """Two app processes' training services (tests give every job its own owner and client)."""
    made = [RedisQueue(url, poll=0.2, grace=30), RedisQueue(url, poll=0.2, grace=30)]
    yield made
    for q in made:
        q.shutdown()
    conn = redis_client(url)
    wait_for(lambda: conn.zcard(PREFIX + "active") == 0, 60, "every job ended")


def make(owner: str, client: str | None = None, **settings) -> Job:
    return make_job({**TINY, **settings}, owner=owner, client=client or owner, probes=[])


def last_message(conn, job_id: str) -> m.Message:
    ((_, fields),) = conn.xrevrange(f"{PREFIX}job:{job_id}:events", count=1)
    return m.from_fields(fields)


def test_a_job_from_one_process_is_shown_and_stopped_by_another(url, queues):
    a, b = queues
    job = a.submit(make("browser-1", **LONG))
    seen = b.job_for("browser-1", session_id=None)
    assert seen is not None and seen.id == job.id and seen is not job
    wait_for(lambda: seen.view().step >= 20, 60, "steps on the other process")
    b.stop(seen, "stopped by you")
    assert job.join(60) and seen.join(60)
    va, vb = job.view(), seen.view()
    assert va.state == vb.state == "stopped" and vb.reason == "stopped by you"
    assert va.steps == vb.steps and va.losses == vb.losses and va.steps == list(range(1, len(va.steps) + 1))
    assert job.result is not None and seen.result is not None  # the model so far, on both processes
    assert seen.result.config.d_model == 16
    # its records expire a few minutes after the last look by a page of its browser, not at once
    events = f"{PREFIX}job:{job.id}:events"
    conn = redis_client(url)
    assert 0 < conn.ttl(events) <= KEEP_SECONDS and conn.ttl(f"{PREFIX}job:{job.id}:alive") == -2
    conn.expire(events, 5)
    b.sweep()  # a session of its browser still shows it (no sessions here: counts as alive)
    assert conn.ttl(events) > 5


def test_one_active_job_per_browser_and_the_client_share_hold_across_processes(url, workers):
    a = RedisQueue(url, jobs_per_client=1, starts_per_minute=2)
    b = RedisQueue(url, jobs_per_client=1, starts_per_minute=2)
    try:
        first = a.submit(make("browser-2", client="10.0.0.2", **LONG))
        again = b.submit(make("browser-2", client="10.0.0.2", **LONG))  # a second Start, another process
        assert again.id == first.id
        with pytest.raises(JobRefused, match="limit is 1 per address"):
            b.submit(make("browser-3", client="10.0.0.2", **LONG))  # another browser, same address
        a.stop(first)
        assert first.join(60)
        second = b.submit(make("browser-3", client="10.0.0.2", **LONG))  # the slot is free again
        b.stop(second)
        assert second.join(60)
        with pytest.raises(JobRefused, match=r"2 training runs .* limit is 2 per minute\. Try again in \d+ s"):
            a.submit(make("browser-4", client="10.0.0.2", **LONG))
    finally:
        a.shutdown()
        b.shutdown()


def test_one_fifo_queue_for_every_process(queues):
    a, b = queues
    first = a.submit(make("browser-5", **LONG))
    wait_for(lambda: first.view().state == "running", 60, "the first job running")
    second = b.submit(make("browser-6", **LONG))
    third = a.submit(make("browser-7", **LONG))
    assert (second.view().position, third.view().position) == (1, 2)
    assert a.counts() == b.counts() == (1, 2)
    a.stop(first)
    wait_for(lambda: second.view().state == "running", 60, "the second job running")
    assert third.view().position == 1 and third.view().state == "queued"
    a.stop(third)  # a queued job leaves the queue at once: its end is written for every process
    assert third.join(10) and third.view().state == "stopped" and third.view().step == 0
    assert b.counts() == (1, 0)


def test_one_address_keeps_its_share_of_the_workers_while_another_waits(monkeypatch):
    """The local pool's fair share of the slots (tests/test_jobs.py), across queue workers: 2 workers, one address's
    two runs on both. Another address's run, queued behind a third run of the first address, is the next a worker
    takes, and it does not wait for a time limit: the newest of the first address's runs stops once it has trained
    GLASS_TRAINING_FAIR_SECONDS (here 2), with its model so far, and gives its worker to the waiting address."""
    with redis_server() as url:
        monkeypatch.setenv("GLASS_TRAINING_FAIR_SECONDS", "2")
        workers = Workers(url)
        q = RedisQueue(url, poll=0.2, grace=60, jobs_per_client=5, starts_per_minute=100)
        try:
            workers.start("fair-1")
            workers.start("fair-2")
            greedy = [q.submit(make(f"greedy-{i}", client="10.0.0.20", **LONG)) for i in range(2)]
            wait_for(lambda: all(g.view().state == "running" for g in greedy), 90, "both of A's runs training")
            conn = redis_client(url)  # when each began, on Redis's clock (two workers: either may begin first)
            wait_for(lambda: all(conn.zscore(key("running"), g.id) for g in greedy), 30, "A's runs counted")
            newest = max(greedy, key=lambda g: conn.zscore(key("running"), g.id))
            late = q.submit(make("greedy-2", client="10.0.0.20", **LONG))
            waiting = q.submit(make("class-0", client="10.0.0.30", **LONG))
            assert (late.view().position, waiting.view().position) == (1, 2)
            wait_for(lambda: waiting.view().state == "running", 90, "B's run training")
            assert late.view().state == "queued"  # (queued first, but its address runs one already)
            stopped = [g for g in greedy if g.view().state == "stopped"]
            assert len(stopped) == 1 and stopped[0].join(30) and stopped[0].view().reason == FAIR_REASON, [
                g.view() for g in greedy
            ]
            assert stopped[0] is newest  # the newest of A's runs, with its model so far
            assert all(g.view().state == "running" for g in greedy if g is not newest)
        finally:
            q.shutdown()
            workers.stop_all()


def test_a_full_queue_refuses(url, workers):
    a = RedisQueue(url, max_queue=1)
    try:
        running = a.submit(make("browser-8", **LONG))
        wait_for(lambda: running.view().state == "running", 60, "running")
        a.submit(make("browser-9", **LONG))
        with pytest.raises(JobRefused, match=r"queue is full \(1 jobs waiting\)"):
            a.submit(make("browser-10", **LONG))
    finally:
        a.shutdown()


APP = """
import sys, time
from training.job import make_job
from training.redis_queue import RedisQueue
m = RedisQueue(sys.argv[1], grace=float(sys.argv[3]), poll=0.2)
settings = dict(d_model=16, n_heads=2, n_layers=1, d_ff=32, batch_size=16, warmup=10, eval_every=0, dropout=0.0)
job = m.submit(make_job({**settings, "steps": int(sys.argv[4])}, owner=sys.argv[2], client=sys.argv[2], probes=[]))
print(job.id, flush=True)
time.sleep(600)
"""


def start_app(url: str, owner: str, grace: float, steps: int) -> tuple[subprocess.Popen, str]:
    """An app process (a manager in its own interpreter) that starts a job for `owner`."""
    proc = subprocess.Popen(
        [sys.executable, "-c", APP, url, owner, str(grace), str(steps)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return proc, proc.stdout.readline().strip()


def test_no_training_job_is_lost_when_its_app_process_is_killed(url, workers):
    conn = redis_client(url)
    proc, job_id = start_app(url, "browser-11", grace=30, steps=400)
    try:
        assert job_id
        wait_for(lambda: conn.xlen(f"{PREFIX}job:{job_id}:events") >= 5, 60, "the run under way")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    other = RedisQueue(url)  # the browser comes back through the proxy, to another process
    try:
        job = other.job_for("browser-11", session_id=None)
        assert job is not None and job.id == job_id
        assert job.join(120)
        v = job.view()
        assert v.state == "finished" and v.steps == list(range(1, 401)), (v.state, v.reason, v.error)
        assert job.result is not None and len(v.losses) == 400
    finally:
        other.shutdown()


def test_a_job_nobody_comes_back_for_ends_after_the_grace_time(url, workers):
    conn = redis_client(url)
    proc, job_id = start_app(url, "browser-12", grace=2, steps=5000)
    try:
        wait_for(lambda: conn.xlen(f"{PREFIX}job:{job_id}:events") >= 3, 60, "the run under way")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    wait_for(lambda: conn.zscore(PREFIX + "active", job_id) is None, 30, "the worker ending the run")
    assert last_message(conn, job_id) == m.End("stopped", "session ended")
    assert conn.scard(PREFIX + "client:" + client_key("browser-12")) == 0  # its client's share is free again


def test_a_job_whose_worker_dies_is_retried_by_another_worker(url, workers):
    conn = redis_client(url)
    workers.start("w2")
    a = RedisQueue(url, poll=0.2)
    try:
        job = a.submit(make("browser-13", steps=300))
        wait_for(lambda: job.view().step >= 5, 60, "the run under way")
        rq_job = Queue(QUEUE, connection=conn, serializer=rq_serializer()).fetch_job(job.id)
        dead = rq_job.worker_name
        workers.kill(dead)  # the worker, its work horse and its training process
        if dead == "w1":
            workers.children["w1"] = workers.children.pop("w2")  # the survivor is the module's worker now
        # RQ finds abandoned jobs when a worker's maintenance runs; here at once, as if their time had come
        StartedJobRegistry(QUEUE, connection=conn, serializer=rq_serializer()).cleanup(timestamp=time.time() + 3600)
        assert job.join(120)
        v = job.view()
        assert v.state == "finished" and v.steps == list(range(1, 301)), (v.state, v.reason, v.error)
        assert job.result is not None
    finally:
        a.shutdown()
        for name in list(workers.children):
            if name != "w1":
                workers.kill(name)


def test_a_dead_queue_worker_stops_counting_toward_the_cap_within_a_minute(url, workers):
    """A worker killed outright (nothing unregisters it) no longer counts as a training slot WORKER_TTL
    seconds after its last heartbeat, not the minutes RQ's own registration would take."""
    from training.redis_queue import WORKER_TTL

    q = RedisQueue(url)
    try:
        assert q.max_running == 1
        workers.start("w3")
        assert q.max_running == 2
        killed = time.monotonic()
        workers.kill("w3", forget=False)
        wait_for(lambda: q.max_running == 1, 60, "the dead worker no longer counted")
        assert time.monotonic() - killed <= WORKER_TTL + 6 < 60
    finally:
        if "w3" in workers.children:  # a failure above leaves the module's later tests the one worker they count on
            workers.kill("w3")
        q.shutdown()


def test_the_training_page_trains_through_the_queue(url, workers, monkeypatch):
    """The page as a student uses it, with GLASS_REDIS_URL set: Start queues the run, a queue worker trains
    it, and the model it hands over becomes "my model" like a local run's."""
    import training
    from tests.apptest_util import all_text, chart_spec, decode, no_exception
    from tests.training_util import TINY as PAGE_TINY
    from tests.training_util import finish, run_navigated, start, trace

    monkeypatch.setenv("GLASS_REDIS_URL", url)
    monkeypatch.setattr(training, "_SERVICE", None)
    try:
        at = run_navigated("training")
        assert isinstance(training.service(), RedisQueue)
        assert "trains at most 1 model(s) at once" in all_text(at)  # the queue's one worker
        job = start(at)
        v = finish(at, job)
        no_exception(at)
        assert v.state == "finished" and v.step == PAGE_TINY["training_steps"]
        assert last_message(redis_client(url), job.id) == m.End("finished", "completed")  # through Redis
        shown = decode(trace(chart_spec(at, "training_loss"), "training loss")["y"])
        assert list(shown) == v.losses and len(shown) == PAGE_TINY["training_steps"]
        assert at.session_state["my_model"] is job.result and at.session_state["training_adopted"] == job.id
        assert "Training finished: 40 steps" in " ".join(str(e.value) for e in at.success)
    finally:
        manager = training._SERVICE
        if manager is not None:
            manager.shutdown()


def test_the_page_says_when_no_worker_serves_the_queue():
    from model.train_settings import DEFAULTS, estimate_memory, toy_profile, worst_case
    from pages.content.training import summary
    from ui.training.session import RunPreview

    mem = estimate_memory(DEFAULTS, toy_profile(DEFAULTS.direction), n_probes=1)
    preview = RunPreview(DEFAULTS, mem, worst_case(DEFAULTS.direction), 0, 600.0, 10**9, 10**6, 10**8)
    assert "No training worker is connected" in summary(preview) and "trains at most" not in summary(preview)
    assert "trains at most 3 model(s) at once" in summary(dataclasses.replace(preview, max_running=3))


def test_an_unreachable_redis_is_a_message_not_a_traceback(monkeypatch):
    import training
    from serving import identity
    from serving.processes import free_port
    from tests.apptest_util import no_exception
    from tests.training_util import TINY as PAGE_TINY
    from tests.training_util import run_navigated, set_widgets

    monkeypatch.setenv("GLASS_REDIS_URL", f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    monkeypatch.setattr(training, "_SERVICE", None)
    monkeypatch.setattr(identity, "_KEY", None)
    at = run_navigated("training")
    no_exception(at)
    set_widgets(at, PAGE_TINY)
    at.button(key="training_start").click().run()
    no_exception(at)
    assert [e.value for e in at.error] == ["The training queue cannot be reached right now. Try again in a minute."]
    assert "training_job" not in at.session_state or at.session_state["training_job"] is None  # nothing started
