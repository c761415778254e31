"""Once per server process, imported first by app.py (its web server starts importing it in the background; every
script run imports it first): settings that must precede the heavy imports.

- One torch (OpenMP) thread per server thread: on a small shared machine, torch's intra-op threads
  fight the server and each other (a page with a new sentence: 0.37 s with 1 thread, 4-7 s with 2).
  OpenMP reads OMP_NUM_THREADS when torch loads it, so this must run before the first `import torch`.
- The heavy libraries are imported here, and what they allocated is frozen (`gc.freeze`): those
  ~250,000 long-lived objects then never go through the garbage collector again, so its occasional
  full collections stay short while students use the app (see also `runner.postScriptGC` in
  .streamlit/config.toml).

Python caches the module, so this runs once per process: on the web server's warm-up thread (app.py), or on the
first script run when that has not begun it (a page run on its own, AppTest); a run that comes while the thread
imports waits for it on Python's import lock.
"""

from __future__ import annotations

import gc
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import pandas  # noqa: E402, F401
import plotly.graph_objects  # noqa: E402, F401
import torch  # noqa: E402, F401

import model.pipeline  # noqa: E402, F401

gc.freeze()
