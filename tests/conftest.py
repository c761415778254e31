import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")  # as the app's server runs (ui/serve.py)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import streamlit.testing.v1.app_test as _app_test  # noqa: E402
from streamlit.runtime.pages_manager import PagesManager  # noqa: E402


class _NavigationPagesManager(PagesManager):
    """AppTest resets Streamlit's "pages/ is an old-style multipage folder" flag before every run, so
    a switched-to page would run bare, without app.py and its sidebar. app.py always uses
    st.navigation: tell Streamlit so, exactly as ui/serve.py does for the real server."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        PagesManager.uses_pages_directory = False


_app_test.PagesManager = _NavigationPagesManager


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
