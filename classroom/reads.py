"""Reads of a class kept by an app process until the class's next event (used by classroom/redis_store.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

KEEP_SECONDS = 1.0  # a class-wide read is kept at most this long (`ClassReads`)


class ClassReads:
    """What every student of a class reads alike (its record with no question open, its pace, the teacher's
    training run), kept in this process until the class's next event, and at most `KEEP_SECONDS`.

    A teacher's change wakes a hundred followers at once, and each read the same few fields: one read a class
    and process instead. Sound because every change publishes its event in the same atomic step as the change
    (classroom/redis_lua.py `ANNOUNCE`), and this process's subscriber drops a class's reads (`changed`) before
    anyone hears that event: a read kept is never older than the last event heard, and a read that an event
    overtook is not kept. Only while the subscription is up (`status`); `KEEP_SECONDS` bounds what moves with no
    event (a class expiring, the students present). A change made through the process's store drops its class's
    reads too, as soon as it is made: a teacher's run reads back its own change. Raw replies are kept (strings and
    numbers), so every reader parses its own copy."""

    NAMES = ("snapshot", "x:pace", "x:run")

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], tuple[float, object]] = {}
        self._moves: dict[str, int] = {}  # class -> events heard (a read overtaken by one is not kept)
        self._epoch = 0  # moves with the subscription's status
        self.up = False

    def get(self, code: str, name: str, read: Callable[[], Any]) -> Any:  # (a raw reply)
        now = self._clock()
        with self._lock:
            if not self.up:
                mark = None
            else:
                hit = self._kept.get((code, name))
                if hit is not None and now - hit[0] < KEEP_SECONDS:
                    return hit[1]
                mark = (self._epoch, self._moves.get(code, 0))
        value = read()
        with self._lock:
            if mark is not None and self.up and mark == (self._epoch, self._moves.get(code, 0)):
                if len(self._kept) >= 3000:  # (a few per class: bounded by the classes of a server)
                    self._kept.clear()
                self._kept[(code, name)] = (now, value)
        return value

    def changed(self, code: str) -> None:
        with self._lock:
            if len(self._moves) >= 10_000:
                self._moves.clear()
                self._epoch += 1
            self._moves[code] = self._moves.get(code, 0) + 1
            for name in self.NAMES:
                self._kept.pop((code, name), None)

    def status(self, up: bool) -> None:
        with self._lock:
            self.up = up
            self._epoch += 1
            self._kept.clear()
