import os

import pytest

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
