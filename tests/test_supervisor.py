"""No single part takes the others down (`serving.replicas.Cluster(supervise=True)`, what `./dev.sh serve`
runs): HAProxy, Redis, a queue worker and an app process are each killed in turn, for real; the supervisor
starts each again, the other parts keep serving meanwhile, and a class created before Redis died is there
after it came back."""

from __future__ import annotations

import functools
import time

import pytest

from classroom import RedisClassStore
from serving.processes import healthy
from serving.replicas import Cluster
from serving.shared_redis import new_client
from tests.services import require_tool, wait_for
from training.redis_queue import PREFIX

wait_for_up = functools.partial(wait_for, every=0.2, tolerate=True)  # a part on its way back up raises


@pytest.fixture(scope="module")
def cluster():
    require_tool("haproxy")
    require_tool("redis-server")
    with Cluster(replicas=2, workers=1, supervise=True, timeout=180) as c:
        yield c


def pids(cluster, *names: str) -> dict[str, int]:
    return {n: cluster.parts[n].child.proc.pid for n in names}


def test_haproxy_dies_and_comes_back_while_the_apps_keep_serving(cluster):
    before = pids(cluster, "app1", "app2", "redis", "worker1")
    cluster.kill("haproxy")
    assert healthy(cluster.app_url(0)) and healthy(cluster.app_url(1))  # the apps serve on, right now
    wait_for_up(lambda: healthy(cluster.url), 30, "the proxy answering again")
    assert pids(cluster, "app1", "app2", "redis", "worker1") == before  # nothing else was touched
    assert any(e.startswith("haproxy exited") for e in cluster.events)


def test_redis_dies_and_comes_back_with_its_classes(cluster):
    store = RedisClassStore(cluster.redis_url, prefix="supervised")
    code, secret = store.create({"sentence": "i am a student"})
    time.sleep(1.5)  # the append-only file is written every second
    before = pids(cluster, "app1", "app2", "haproxy")
    cluster.kill("redis")
    assert healthy(cluster.url)  # pages are served while Redis is away
    wait_for_up(lambda: new_client(cluster.redis_url).ping(), 30, "Redis answering again")
    snap = RedisClassStore(cluster.redis_url, prefix="supervised").snapshot(code, secret=secret)
    assert snap is not None and snap.state == {"sentence": "i am a student"}
    assert pids(cluster, "app1", "app2", "haproxy") == before


def test_a_queue_worker_dies_and_another_takes_its_place(cluster):
    conn = new_client(cluster.redis_url)
    wait_for_up(lambda: conn.zcard(PREFIX + "workers") >= 1, 60, "a worker counted")
    old = cluster.parts["worker1"].child.proc.pid
    cluster.kill("worker1")
    wait_for_up(
        lambda: cluster.parts["worker1"].child.proc.pid != old and cluster.parts["worker1"].child.alive(),
        30,
        "the worker started again",
    )
    names = {n.decode() for n in conn.zrange(PREFIX + "workers", 0, -1)}
    wait_for_up(
        lambda: any(
            str(cluster.parts["worker1"].child.proc.pid) in n.decode() for n in conn.zrange(PREFIX + "workers", 0, -1)
        ),
        60,
        "the new worker counted",
    )
    assert names  # the queue had a worker before, and has one again


def test_an_app_process_dies_and_comes_back_while_the_other_serves(cluster):
    other = pids(cluster, "app2")
    cluster.kill("app1")
    assert healthy(cluster.url) and healthy(cluster.app_url(1))  # the proxy sends everyone to app2
    took = wait_for_up(lambda: healthy(cluster.app_url(0)), 120, "app1 answering again")
    assert pids(cluster, "app2") == other
    assert cluster.parts["app1"].restarts >= 1 and took < 120
