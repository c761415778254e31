"""How many long-lived streams (the class's event streams) one member, one client and one process may hold open.

A page of a class holds one event stream (ui/classroom/push.py): a long HTTP response that costs the process a
file descriptor and about 33 KB while it lasts. The process refuses streams past `MAX_STREAMS`; without a count per
member and per client, one student's token replayed from a script held all of them, and every class on the process
silently stopped following (its new pages' streams were refused). So every stream asks `StreamCaps.admit` before
it opens (a refusal, in words, or None) and calls `release` as it closes:

- per member of a class (a student id, or the teacher): `GLASS_STREAMS_PER_MEMBER`, default 8 (a student's tabs);
- per client (the address, as `serving.identity` decides it): `GLASS_STREAMS_PER_ADDRESS`, default 500, a quarter
  of the process: a school behind one NAT address fills no one process with its students' pages, and whatever one
  address holds, three quarters of the process stay for everyone else;
- per process: `MAX_STREAMS` (2,000), whoever asks.

A refused page asks again a few seconds later (its EventSource is opened again): it follows as soon as a stream of
its member or address closes. Counted on the web server's event loop only (no lock). Only the standard library.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from typing import Any

from serving.settings import env_number

MAX_STREAMS = 2000  # per process
STREAMS_PER_MEMBER = 8  # $GLASS_STREAMS_PER_MEMBER
STREAMS_PER_ADDRESS = 500  # $GLASS_STREAMS_PER_ADDRESS


class StreamCaps:
    """The streams open now, per member, per client and in all."""

    def __init__(self, per_member: int | None = None, per_client: int | None = None, total: int = MAX_STREAMS):
        self.per_member = per_member or env_number("GLASS_STREAMS_PER_MEMBER", int, STREAMS_PER_MEMBER, 1)
        self.per_client = per_client or env_number("GLASS_STREAMS_PER_ADDRESS", int, STREAMS_PER_ADDRESS, 1)
        self.total = total
        self._members: Counter[Hashable] = Counter()
        self._clients: Counter[str] = Counter()
        self.open = 0  # streams open now
        self.refused = 0  # streams refused so far

    def admit(self, member: Hashable, client: str) -> str | None:
        """Count one more stream of `member` (any hashable: the class and the member) from `client`, or say why
        not (and count nothing)."""
        why = None
        if self._members[member] >= self.per_member:
            why = f"this member of the class already holds {self.per_member} streams"
        elif self._clients[client] >= self.per_client:
            why = f"this address already holds {self.per_client} streams"
        elif self.open >= self.total:
            why = "too many connections"
        if why is not None:
            self.refused += 1
            return why
        self._members[member] += 1
        self._clients[client] += 1
        self.open += 1
        return None

    def release(self, member: Hashable, client: str) -> None:
        self.open -= 1
        pairs: tuple[tuple[Counter[Any], Hashable], ...] = ((self._members, member), (self._clients, client))
        for counts, key in pairs:
            counts[key] -= 1
            if counts[key] <= 0:
                del counts[key]
