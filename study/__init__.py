"""Studies of learning: `get_store()` and what a page needs from the study store (study/store.py, read it first).

study/schema.py holds what a study stores (settings, phases, the consent text, the event log's fixed schema),
database.py the two back-ends (SQLite by default, PostgreSQL with GLASS_DATABASE_URL), export.py the CSV and JSON
lines a report downloads as. Nothing here imports Streamlit; the study's Streamlit face is ui/study/.
"""

from __future__ import annotations

import threading

from study.codes import normalize_code  # noqa: F401
from study.database import URL_ENV, data_dir, open_database
from study.errors import *  # noqa: F403
from study.store import Participant, Study, StudyStore  # noqa: F401

_stores: dict[str, StudyStore] = {}
_lock = threading.Lock()


def get_store() -> StudyStore:
    """This process's study store: PostgreSQL when $GLASS_DATABASE_URL is set, else the SQLite file under the data
    folder ($GLASS_DATA_DIR, default data/). One per process (and place)."""
    import os

    where = os.environ.get(URL_ENV, "").strip() or str(data_dir())
    with _lock:
        store = _stores.get(where)
        if store is None:
            store = _stores[where] = StudyStore(open_database())
        return store
