import functools
import inspect
import os
import re
import time
import uuid
from pathlib import Path

import pytest
from streamlit.components.v2 import manifest_scanner
from streamlit.testing.v1 import local_script_runner

import classroom
import study  # noqa: F401 - the service packages, imported first: AppTest runs a page with pages/ first on
import training  # noqa: F401 - sys.path, where pages/training.py would shadow the package (as classroom's do)
from classroom import MemoryClassStore, RedisClassStore
from serving.shared_redis import REDIS_URL_ENV
from tests.services import Clock, redis_server

TESTS = Path(__file__).resolve().parent

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the app's server runs (ui/startup.py)

# Every new AppTest scans the metadata of every installed distribution for Streamlit components (streamlit 1.67's
# AppTest._run -> BidiComponentManager.discover_and_register_components): about 0.1 s each, on thousands of AppTests
# in a run. Nothing is installed while the tests run, so each test process scans once.
manifest_scanner.scan_component_manifests = functools.cache(manifest_scanner.scan_component_manifests)


def _wait_for_the_run(runner: local_script_runner.LocalScriptRunner, timeout: float = 3) -> None:
    """AppTest's wait for a script run (`require_widgets_deltas`), without its poll: that one wakes every millisecond
    and reads all of the run's events, against the script's thread for the GIL. The script's thread ends once the run
    has shut down, so this joins it; past `timeout` it stops the run and raises, as Streamlit's does."""
    thread = runner._script_thread
    if thread is not None:
        thread.join(timeout)
    if runner.script_stopped():
        return
    runner.request_stop()
    runner.join()
    raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")


local_script_runner.require_widgets_deltas = _wait_for_the_run


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """One intra-op torch thread in every test process: tiny models and page runs are fastest on one, and on 2 busy
    cores a second thread spins against the other test processes, the servers and Chromium a test starts (a page's
    run was 10x slower with two; a browser test's search of expected values took 80 s instead of 1 s). Restored
    at the end. (A training process sets its own: training/run_process.py.)"""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


@pytest.fixture(params=["memory", "redis"])
def make_store(request):
    """make_store(**settings) -> a store; Redis stores of one test share a key prefix of their own (two
    stores of one test are two app processes on one Redis). `make_store.wait(seconds)`: time passes for the
    test's stores. The memory stores run on one `Clock` of the test, which it moves (no sleep, exact to the
    boundary, nothing a busy machine can shift); Redis keeps its own TIME, so there it sleeps: keep one such
    test per rule (idle expiry, the ended marker, the failed-join window, presence)."""
    made = []
    prefix = f"test:{uuid.uuid4().hex[:8]}"
    clock = Clock()

    def make(**kw):
        kw.setdefault("classes_per_client", 1000)  # many classes from one test client; the limits' own tests set them
        kw.setdefault("class_starts_per_minute", 1000)
        if request.param == "memory":
            store = MemoryClassStore(clock=clock, **kw)
        else:
            store = RedisClassStore(request.getfixturevalue("redis_url"), prefix=prefix, **kw)
        made.append(store)
        return store

    def wait(seconds: float) -> None:
        if request.param == "memory":
            clock.t += seconds
        else:
            time.sleep(seconds)

    make.kind = request.param
    make.prefix = prefix
    make.wait = wait
    yield make
    for s in made:
        s.close()


@pytest.fixture
def app_store(make_store, monkeypatch, request):
    """app_store(**settings) -> a class store (of make_store's kind) that the app's get_store() returns."""

    def install(**kw):
        s = make_store(**kw)
        key = request.getfixturevalue("redis_url") if make_store.kind == "redis" else ""
        if key:
            monkeypatch.setenv(REDIS_URL_ENV, key)
        else:
            monkeypatch.delenv(REDIS_URL_ENV, raising=False)
        monkeypatch.setitem(classroom._stores, key, s)
        return s

    return install


# --- Test tiers ---------------------------------------------------------------------------------------------------
# Every test gets one tier marker, from what it runs (docs/contributors.md, "Test tiers"):
#   unit      functions of model/, explain/, viz/, classroom/, ... in this process
#   app       a page run through Streamlit's AppTest (no server)
#   processes a training run's process or a command line in a subprocess (no server, nothing timed)
#   services  a real redis-server, PostgreSQL, HAProxy or app processes, started by the test
#   browser   the running app driven in Debian's Chromium (tests/browser/)
# `./dev.sh test fast` runs unit and app; `./dev.sh test` runs all five.
_STARTS = re.compile(
    r"\b(start_app|start_replicas|redis_server|redis_url|postgres_server|haproxy|Popen|subprocess"
    r"|RedisClassStore|serve_app|app_process)\b"
)
# A training run in its own process (the local pool), or a command line in a subprocess (tests/test_cli.py's and
# tests/test_rnn.py's run): no server, no port, nothing timed.
_PROCESSES = re.compile(r"\bLocalPool\b|\brun\(\s*\"model\.")
_TIERS = ("unit", "app", "processes", "services", "browser")
_APP = re.compile(r"\b(AppTest|run_app|run_page|app_test)\b")


@functools.cache
def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _tier(item: pytest.Item) -> str:
    if "browser" in Path(str(item.fspath)).parts:
        return "browser"
    for mark in item.iter_markers():  # a tier said by the test, else by its module (the closest mark wins)
        if mark.name in _TIERS:
            return mark.name
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "redis" in params.values() or "redis_url" in item.fixturenames:
        return "services"
    fixtures = [
        d
        for defs in item._fixtureinfo.name2fixturedefs.values()
        for d in defs
        if Path(inspect.getfile(d.func)).resolve().is_relative_to(TESTS)
    ]
    sources = [_source(f) for f in [item.function] + [d.func for d in fixtures]]
    if any(_STARTS.search(s) for s in sources):
        return "services"
    # A pool made by an autouse fixture starts no process by itself (tests/training_util.py's): a process is
    # what the test, or a fixture it asks for, starts.
    asked = [_source(f) for f in [item.function] + [d.func for d in fixtures if not d._autouse]]
    if any(_PROCESSES.search(s) for s in asked):
        return "processes"
    return "app" if any(_APP.search(s) for s in sources) else "unit"


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(_tier(item))
