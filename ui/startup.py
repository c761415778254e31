"""Once per server process, imported first by app.py (its web server starts importing it in the background; every
script run imports it first): settings that must precede the heavy imports.

- One torch (OpenMP) thread per server thread: on a small shared machine, torch's intra-op threads
  fight the server and each other (a page with a new sentence: 0.37 s with 1 thread, 4-7 s with 2).
  OpenMP reads OMP_NUM_THREADS when torch loads it, so this must run before the first `import torch`.
- The heavy libraries are imported here, and what they allocated is frozen (`gc.freeze`): those
  ~250,000 long-lived objects then never go through the garbage collector again, so its occasional
  full collections stay short while students use the app (see also `runner.postScriptGC` in
  .streamlit/config.toml).
- The collector's youngest generation is collected after 10,000 new container objects instead of Python's 700
  (`GC_THRESHOLDS`). A class's redraw makes hundreds of thousands of short-lived objects (elements, protobuf
  wrappers, dicts), nearly all freed at once by reference counting; at 700 the collector ran some 50 times a
  second and promoted the survivors, so that a full collection (40-50 ms with the interpreter lock held, every
  redraw of every student waiting) came every few changes. With 10,000, one class of 30 following 15 changes of
  the teacher spent 113 ms in the collector instead of 366 ms, and no full collection came during the changes
  (measured with `gc.callbacks`, `bench.classroom_load follow --students 30 --changes 15`). Cycles are still
  collected, in batches; memory grows by a few MB at most.

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
GC_THRESHOLDS = (10_000, 10, 10)  # Python's: (700, 10, 10)
gc.set_threshold(*GC_THRESHOLDS)
