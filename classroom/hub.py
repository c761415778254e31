"""The class events of one app process, handed to the connections that listen for them here.

A class's changes reach the hub through the store's `watch` (classroom/store.py: the memory store calls it
from the changing thread; the Redis store from its subscriber thread, fed by the PUBLISH each change makes in
its own Lua script). The hub runs on one asyncio loop (the web server's): every connection listening for
class CODE (`listen`) gets the latest counters as a value that can only grow, so a burst of changes costs a
connection one wake-up, and a late or repeated event costs nothing.

When the store's events stop (Redis restarted, a dropped connection), every connection hears `up=False`
(its page can say "reconnecting"); when they resume, the hub reads the counters of every class listened to
here again (pub/sub keeps nothing for a subscriber that was away) and hands on what moved.

`connected(code)` tells which students hold a connection to this process right now; the hub also tells the
store (`ClassStore.mark_connected`, at once when a student comes or goes, and every `MARK_SECONDS`), so
`store.connected(code)` names the students with a page open on any app process (a process that died is
forgotten after `MARK_TTL` seconds). Nothing here knows it is served by Streamlit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections import Counter as Tally
from collections.abc import Callable

from classroom.snapshot import Counters
from classroom.store import ClassStore

_log = logging.getLogger("glass.classroom")
MARK_SECONDS, MARK_TTL = 10.0, 30.0


def _newer(old: Counters | None, c: Counters) -> Counters:
    """`old` moved on by `c` (each counter only grows); `old` itself when `c` tells nothing new."""
    if old is None:
        return c
    if (c.seq, c.q, c.tally, c.ended) <= (old.seq, old.q, old.tally, old.ended):
        return old
    return Counters(max(c.seq, old.seq), max(c.q, old.q), max(c.tally, old.tally), c.ended or old.ended)


class Listener:
    """One connection's view: the latest counters of its class (`latest`), whether the store's events arrive
    (`up`), and `changed`, set when either moved since the connection last looked."""

    def __init__(self, code: str, student: str, latest: Counters | None, up: bool):
        self.code, self.student = code, student
        self.latest, self.up = latest, up
        self.changed = asyncio.Event()

    def offer(self, c: Counters) -> None:
        newer = _newer(self.latest, c)
        if newer is not self.latest:
            self.latest = newer
            self.changed.set()

    def status(self, up: bool) -> None:
        if up != self.up:
            self.up = up
            self.changed.set()


class EventHub:
    """One per app process (`start` on the web server's loop, `stop` at its end)."""

    def __init__(self, store: ClassStore):
        self.store = store
        self.up = True
        self._loop: asyncio.AbstractEventLoop | None = None
        self._unwatch: Callable[[], None] | None = None
        self._listeners: dict[str, set[Listener]] = {}
        self._latest: dict[str, Counters] = {}  # per class listened to here: the counters as the events told
        self.where = f"{socket.gethostname()}:{os.getpid()}"  # this process, in the store's record of pages
        self._marking: asyncio.Task[None] | None = None
        self._dirty: set[str] = set()  # classes whose students came or went since the store was last told
        self._wake: asyncio.Event | None = None

    # -- life -------------------------------------------------------------------------------------------
    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._loop = loop or asyncio.get_running_loop()
        self._unwatch = self.store.watch(self._event_from_thread, self._status_from_thread)
        self._wake = asyncio.Event()
        self._marking = self._loop.create_task(self._mark_loop())

    def stop(self) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._marking is not None:
            self._marking.cancel()
            self._marking = None
        self._loop = None

    @property
    def running(self) -> bool:
        return self._loop is not None

    # -- connections --------------------------------------------------------------------------------------
    async def listen(self, code: str, student: str) -> Listener | None:
        """A new connection for class `code` (None: no such class), with the class's counters as they are now."""
        listener = Listener(code, student, None, self.up)
        self._listeners.setdefault(code, set()).add(listener)  # first: no event between the read and this is lost
        self._changed(code)
        latest = await asyncio.to_thread(self._read, code)
        if latest is None and self.up:
            self.unlisten(listener)
            return None
        if latest is not None:
            self._deliver(code, latest)
        return listener

    def unlisten(self, listener: Listener) -> None:
        group = self._listeners.get(listener.code)
        if group is not None:
            group.discard(listener)
            if not group:
                del self._listeners[listener.code]
                self._latest.pop(listener.code, None)
            self._changed(listener.code)

    def _changed(self, code: str) -> None:
        self._dirty.add(code)
        if self._wake is not None:
            self._wake.set()

    async def _mark_loop(self) -> None:
        """Tell the store who is connected here: a class at once when its students change, all every
        MARK_SECONDS (so that the record of a process that died runs out)."""
        loop, every = asyncio.get_running_loop(), 0.0
        assert self._wake is not None  # (`start` sets it before this task)
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), MARK_SECONDS)
            self._wake.clear()
            if loop.time() >= every:
                every = loop.time() + MARK_SECONDS
                self._dirty.update(self._listeners)
            codes, self._dirty = self._dirty, set()
            for code in codes:
                students = [x for x in self.connected(code) if x != "teacher"]
                try:
                    await asyncio.to_thread(self.store.mark_connected, code, self.where, students, MARK_TTL)
                except Exception as e:  # noqa: BLE001 - the store is away: told again on the next round
                    _log.info("class events: the pages of %s could not be recorded (%s)", code, e)

    def connected(self, code: str) -> Tally[str]:
        """The students (by id) connected to this process for class `code` now, with their connections."""
        return Tally(x.student for x in self._listeners.get(code, ()))

    def listeners(self) -> int:
        return sum(len(g) for g in self._listeners.values())

    def latest(self, code: str) -> Counters | None:
        """Class `code`'s counters as its events told this process (any thread may ask): None when no page of the
        class listens here or the events are interrupted (then read the store). Never ahead of the store; it may
        be a moment behind it, as the pages' streams are."""
        return self._latest.get(code) if self.up else None

    # -- events (from the store's threads) --------------------------------------------------------------------
    def _read(self, code: str) -> Counters | None:
        try:
            return self.store.counters(code)
        except Exception as e:  # noqa: BLE001 - the store is away: the status says so
            _log.info("class events: the counters of %s could not be read (%s)", code, e)
            return None

    def _event_from_thread(self, code: str, counters: Counters) -> None:
        loop = self._loop
        if loop is not None and code in self._listeners:  # (a read of a dict: a stale answer costs one call)
            loop.call_soon_threadsafe(self._deliver, code, counters)

    def _deliver(self, code: str, counters: Counters) -> None:
        group = self._listeners.get(code)
        if group:
            self._latest[code] = _newer(self._latest.get(code), counters)
        for listener in group or ():
            listener.offer(counters)

    def _status_from_thread(self, up: bool) -> None:
        loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(self._status, up)

    def _status(self, up: bool) -> None:
        self.up = up
        for group in self._listeners.values():
            for listener in group:
                listener.status(up)
        if up and self._listeners:
            asyncio.get_running_loop().create_task(self._catch_up())

    async def _catch_up(self) -> None:
        """After an outage: the counters of every class listened to here, read again (events were lost)."""
        for code in list(self._listeners):
            counters = await asyncio.to_thread(self._read, code)
            if counters is not None:
                self._deliver(code, counters)
