"""The measured Table 3 rows (assets/ablations.json, written by `python -m bench.ablations --write`), read once
per server and file version, shared read-only. None when the file is missing or not what the bench writes."""

from __future__ import annotations

import streamlit as st

from explain import ablations


@st.cache_resource
def _read(path: str, mtime: float) -> dict | None:
    try:
        return ablations.read(path)
    except ablations.AblationsError:
        return None


def measured_key() -> float | None:
    """What names the rows `measured` returns (the file's modification time): a key for `ui.widgets.once`."""
    return ablations.PATH.stat().st_mtime if ablations.PATH.is_file() else None


def measured() -> dict | None:
    """The rows, or None (the page then says the measurements are not installed)."""
    mtime = measured_key()
    return None if mtime is None else _read(str(ablations.PATH), mtime)
