import os
import uuid

import pytest

import study  # noqa: F401 - the service packages, imported first: AppTest runs a page with pages/ first on
import training  # noqa: F401 - sys.path, where pages/training.py would shadow the package (as classroom's do)
from classroom import MemoryClassStore, RedisClassStore
from tests.services import redis_server

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the app's server runs (ui/startup.py)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op torch thread for a module (`pytestmark = pytest.mark.usefixtures("one_torch_thread")`):
    tiny models and page runs are fastest on one, and on 2 busy cores a second thread spins against the
    test process and the other processes (a page's run was 10x slower with two). Restored afterwards."""
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
    stores of one test are two app processes on one Redis)."""
    made = []
    prefix = f"test:{uuid.uuid4().hex[:8]}"

    def make(**kw):
        kw.setdefault("classes_per_client", 1000)  # many classes from one test client; the limits' own tests set them
        kw.setdefault("class_starts_per_minute", 1000)
        if request.param == "memory":
            store = MemoryClassStore(**kw)
        else:
            store = RedisClassStore(request.getfixturevalue("redis_url"), prefix=prefix, **kw)
        made.append(store)
        return store

    make.kind = request.param
    make.prefix = prefix
    yield make
    for s in made:
        s.close()
