"""Drawn once per process, replayed as messages: what a class of thirty sees alike costs one drawing.

A Streamlit element is a message (a `ForwardMsg` holding a delta) that the script run hands to its session's
queue; the web server then sends it. `section(key, draw)` calls `draw()` the first time this process meets `key`
and records the messages it enqueued; for every later call, in any session, it hands copies of those messages to
the session's queue at the current place on the page: no page code, no plotly figure, no pandas frame, no
Streamlit element function, no hash of the message (the recording carries it). Measured on a bare Streamlit app
(30 sessions rerunning at once, 80 paragraphs): st.markdown costs the server about 185 µs per element, Streamlit's
own replay of a cached function (`st.cache_data`) about 275 µs, this one about 110 µs, the sending included.

What may be recorded: elements (text, headings, alerts, charts, tables, page links, metrics) and the
containers they sit in (columns, containers), all drawn below the section's place on the page. A section that
draws a widget (it belongs to its session: every element type not listed in ELEMENTS, an expander with a key), a
chart or table one can select in, a lazy table, media (a file per session), or anything outside its place (the
sidebar, a container made before it) is drawn and never recorded: it is simply drawn again next time. (An element
with a key, a chart, registers its id, which a replay registers too.)
`key` must name everything `draw` shows (a cheap name: a model's key, a sentence, a step), never the content
itself: see ui/widgets.py `once`.

Recordings are kept per process (LRU, at most MAX_SECTIONS of them and MAX_BYTES of messages), one per key and
page (the active script hash: an element's id names its page, and a follower's page runs under its own).
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from streamlit import config
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.runtime.scriptrunner_utils.script_run_context import ThreadState, get_script_run_ctx
from streamlit.util import calc_hash

MAX_SECTIONS = 3072
MAX_BYTES = 256 * 2**20
ELEMENTS = frozenset(
    {
        "markdown",
        "heading",
        "alert",
        "text",
        "code",
        "metric",
        "plotly_chart",
        "graphviz_chart",
        "page_link",
        "dataframe",
        "table",
        "progress",
        "empty",
        "space",
        "html",
        "json",
        "help_info",
        "echarts_chart",
        "vega_lite_chart",
        "deck_gl_json_chart",
    }
)
BLOCKS = frozenset(
    {"vertical", "horizontal", "column", "flex_container", "transparent", "grid_container", "grid_cell", "expandable"}
)


@dataclass
class Recording:
    """A section's messages: each with its place relative to the section's first place, and the number of places
    the section takes at its own level."""

    messages: list[tuple[tuple[int, ...], ForwardMsg]]
    places: int
    size: int
    ids: frozenset[str]  # the element ids the section registered (elements with a key: a duplicate is an error)
    cacheable: list[bool] = field(default_factory=list)  # (as Streamlit decides it: big new elements)
    hashes: dict[str, list[str]] = field(default_factory=dict)  # per fragment id (a fragment stamps its messages)

    def hashed(self, fragment_id: str) -> list[str]:
        """Each message's hash as Streamlit computes it (`populate_hash_if_needed`), once per fragment id."""
        out = self.hashes.get(fragment_id)
        if out is None:
            out = []
            for _, m in self.messages:
                m.delta.fragment_id = fragment_id
                out.append(calc_hash(m.SerializeToString(deterministic=True)))
                m.delta.ClearField("fragment_id")
            self.hashes[fragment_id] = out
        return out


_recordings: collections.OrderedDict[Hashable, Recording] = collections.OrderedDict()
_bytes = 0
_lock = threading.Lock()


def clear() -> None:
    """Forget every recording (tests)."""
    global _bytes
    with _lock:
        _recordings.clear()
        _bytes = 0


def _here():
    """The cursor of the container the next element goes to (the `with` block's), or None."""
    import streamlit as st

    dg = st._main._active_dg
    cursor = dg._cursor
    return cursor if cursor is not None and not cursor.is_locked else None


def section(key: Hashable, draw: Callable[[], None]) -> None:
    """`draw()` once per `key` in this process; replayed as messages after that (see the module's docstring)."""
    ctx = get_script_run_ctx(suppress_warning=True)
    cursor = _here() if ctx is not None else None
    if cursor is None:
        draw()
        return
    key = (key, ThreadState.get().active_script_hash)  # (an element's id is of its page: a chart's key on another)
    with _lock:
        rec = _recordings.get(key)
        if rec is not None:
            _recordings.move_to_end(key)
    if rec is not None:
        _replay(ctx, cursor, rec)
        return
    rec = _record(ctx, cursor, draw)
    if rec is not None:
        _keep(key, rec)


def _keep(key: Hashable, rec: Recording) -> None:
    global _bytes
    with _lock:
        if key in _recordings:
            return
        _recordings[key] = rec
        _bytes += rec.size
        while len(_recordings) > MAX_SECTIONS or _bytes > MAX_BYTES:
            _bytes -= _recordings.popitem(last=False)[1].size


def _record(ctx, cursor, draw: Callable[[], None]) -> Recording | None:
    """Draw, keeping a copy of every message the section enqueues; None when the section may not be replayed."""
    root, parent, start = cursor.root_container, tuple(cursor.parent_path), cursor.index
    depth = 1 + len(parent)  # (a message's path: its root container, the parents' places, its own place, ...)
    seen: list[ForwardMsg] = []
    ids = ctx.shared.widget_ids_this_run.snapshot()
    had = "enqueue" in vars(ctx)  # (a section inside a section: the outer one's recorder)
    enqueue = ctx.enqueue

    def recorder(msg: ForwardMsg) -> None:
        copy = ForwardMsg()
        copy.CopyFrom(msg)
        seen.append(copy)
        enqueue(msg)

    ctx.enqueue = recorder
    try:
        draw()
    finally:
        if had:
            ctx.enqueue = enqueue
        else:
            del ctx.enqueue  # (the class's method again)
    ids = ctx.shared.widget_ids_this_run.snapshot() - ids  # (a chart with a key has an id, and no state)
    messages, places, size = [], 0, 0
    for m in seen:
        path = tuple(m.metadata.delta_path)
        if (
            m.WhichOneof("type") != "delta"
            or not _replayable(m)
            or len(path) <= depth
            or path[0] != root
            or path[1:depth] != parent
            or path[depth] < start
        ):
            return None
        rel = (path[depth] - start, *path[depth + 1 :])
        places = max(places, rel[0] + 1)
        m.ClearField("metadata")
        m.ClearField("hash")
        m.delta.ClearField("fragment_id")
        size += m.ByteSize()
        messages.append((rel, m))
    if cursor.index != start + places:  # (something took a place without a message: not ours to guess)
        return None
    min_size = int(config.get_option("global.minCachedMessageSize"))
    return Recording(
        messages,
        places,
        size,
        ids,
        [m.delta.WhichOneof("type") == "new_element" and m.ByteSize() >= min_size for _, m in messages],
    )


def _replayable(m: ForwardMsg) -> bool:
    d = m.delta
    kind = d.WhichOneof("type")
    if kind == "new_element":
        el = d.new_element
        what = el.WhichOneof("type")
        if what not in ELEMENTS:
            return False
        if what == "dataframe":
            return not el.dataframe.HasField("lazy_data") and not el.dataframe.selection_mode
        if what == "plotly_chart":
            return not el.plotly_chart.selection_mode
        return True
    if kind == "add_block":
        b = d.add_block
        what = b.WhichOneof("type")
        return what in BLOCKS and not b.id and not (what == "expandable" and b.expandable.id)
    return False


def _replay(ctx, cursor, rec: Recording) -> None:
    """Hand copies of `rec`'s messages to this session's queue at the cursor's place, and move the cursor past them."""
    root, parent, start = cursor.root_container, tuple(cursor.parent_path), cursor.index
    fragment_id = ThreadState.get().fragment_id or ""
    hashes = rec.hashed(fragment_id)
    enqueue = ctx.enqueue
    for (rel, m), h, cacheable in zip(rec.messages, hashes, rec.cacheable, strict=True):
        out = ForwardMsg()
        out.CopyFrom(m)
        out.hash = h
        if fragment_id:
            out.delta.fragment_id = fragment_id
        out.metadata.delta_path[:] = (root, *parent, start + rel[0], *rel[1:])
        out.metadata.cacheable = cacheable
        enqueue(out)
    for _ in range(rec.places):
        cursor.lock_element()
    for i in rec.ids:
        ctx.shared.widget_ids_this_run.check_and_add(i)
