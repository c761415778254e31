"""Start the app: ``python -m ui.serve [streamlit options]`` is ``streamlit run app.py`` plus one fix.

Streamlit treats a folder named ``pages/`` next to the main script as an old-style (v1) multipage
app until the main script has called ``st.navigation`` once in the process. So on a freshly started
server, a first visitor arriving through a deep link (a teacher's shared ``/positional?s=...``)
would get the bare page file without the sidebar or navigation. app.py always uses
``st.navigation``, so we tell Streamlit that before the server starts. (tests/conftest.py does the
same for AppTest.)

It also imports the heavy libraries before the server starts and freezes what they allocated
(``gc.freeze``): those ~250,000 long-lived objects then never go through the garbage collector
again, so its occasional full collections stay short while students are using the app (see also
``runner.postScriptGC`` in .streamlit/config.toml).
"""

from __future__ import annotations

import gc
import os
import sys
from pathlib import Path

# One torch (OpenMP) thread per server thread: on a small shared machine, torch's intra-op threads
# fight the server and each other (a page with a new sentence: 0.37 s with 1 thread, 4-7 s with 2).
os.environ.setdefault("OMP_NUM_THREADS", "1")

from streamlit.runtime.pages_manager import PagesManager
from streamlit.web import cli

APP = Path(__file__).resolve().parents[1] / "app.py"


def main() -> None:
    PagesManager.uses_pages_directory = False  # pages/ is listed by st.navigation in app.py, not auto-discovered
    import pandas  # noqa: F401 - imported now so that gc.freeze() below covers them
    import plotly.graph_objects  # noqa: F401
    import torch  # noqa: F401

    import model.pipeline  # noqa: F401
    import ui.jobs  # noqa: F401

    gc.freeze()
    sys.argv = ["streamlit", "run", str(APP), *sys.argv[1:]]
    cli.main()


if __name__ == "__main__":
    main()
