"""Classroom mode's shared state: `get_store()` and everything a page needs from the class store.

classroom/store.py holds the interface and its data (read its docstring first), rules.py what a class
may store, errors.py the refusals, memory.py and redis_store.py the two back-ends. Nothing here imports
Streamlit; the classroom's Streamlit face is ui/classroom/.
"""

from __future__ import annotations

import threading

from classroom.errors import *  # noqa: F403
from classroom.memory import MemoryClassStore
from classroom.redis_store import RedisClassStore
from classroom.rules import *  # noqa: F403
from classroom.snapshot import ClassQuestion, ClassSnapshot, Counters  # noqa: F401
from classroom.store import ClassStore  # noqa: F401
from serving.shared_redis import redis_url

_stores: dict[str, ClassStore] = {}
_stores_lock = threading.Lock()


def get_store() -> ClassStore:
    """This process's class store: Redis when GLASS_REDIS_URL is set (redis://[:password@]host:port/db),
    else the in-process memory store. One per process (and URL)."""
    url = redis_url()
    with _stores_lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = RedisClassStore(url) if url else MemoryClassStore()
        return store
