import os
import sys
from pathlib import Path

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
