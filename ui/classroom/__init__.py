"""Classroom mode's shared state: `get_store()` and everything a page needs from the class store.

ui/classroom/store.py holds the interface, the data and the validation (read its docstring first);
memory.py and redis_store.py the two back-ends. Nothing here imports Streamlit, except session.py and
panels.py (the classroom in a Streamlit session; import them by name).
"""

from __future__ import annotations

import os
import threading

from ui.classroom.memory import MemoryClassStore
from ui.classroom.redis_store import RedisClassStore
from ui.classroom.store import *  # noqa: F403
from ui.classroom.store import REDIS_URL_ENV, ClassStore

# -- the factory --------------------------------------------------------------------------------------
_stores: dict[str, ClassStore] = {}
_stores_lock = threading.Lock()


def get_store() -> ClassStore:
    """This process's class store: Redis when GLASS_REDIS_URL is set (redis://[:password@]host:port/db),
    else the in-process memory store. One per process (and URL)."""
    url = os.environ.get(REDIS_URL_ENV, "").strip()
    with _stores_lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = RedisClassStore(url) if url else MemoryClassStore()
        return store
