"""Peer instruction on the memory back-end (classroom/votes.py explains the operations): the polls of the memory
store's classes, under its lock and on its clock. The rate limits of votes are the rows "votes" and "votes_client"
of `rules.LIMITS`, counted in the store's sliding windows.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from classroom.errors import InvalidInput, NotFound, QuestionClosed
from classroom.votes import MAX_RESULTS, _summary

if TYPE_CHECKING:
    from classroom.memory import Windows, _Class
    from classroom.rules import Limit
    from classroom.snapshot import Counters


@dataclass
class _Poll:
    qid: int
    record: dict[str, Any]  # text, options, answer, kind, grid
    round: int = 1
    open: bool = True
    discuss: bool = False
    shown: bool = False  # the first vote's distribution shown to the class (without the answer)
    # student -> choice, per round
    votes: tuple[dict[str, int], dict[str, int]] = field(default_factory=lambda: ({}, {}))


class MemoryVotes:
    """`PeerVotes` on the memory store (its lock, classes and clock)."""

    if TYPE_CHECKING:  # what this part uses of the memory store (classroom/memory.py), declared for the type checker
        _lock: threading.Lock
        _classes: dict[str, _Class]
        _clock: Callable[[], float]
        _poll_state: dict[str, dict[Any, Any]]
        _rates: Windows

        def limit(self, name: str) -> Limit: ...
        def _get(self, code: str, shash: str | None = None) -> _Class: ...
        def _live(self, code: str, now: float) -> _Class | None: ...
        def _announce(self, code: str, counters: Counters) -> None: ...

    def _polls(self) -> dict[str, dict[Any, Any]]:
        if not hasattr(self, "_poll_state"):
            self._poll_state = {"polls": {}, "results": {}}
        return self._poll_state

    def _poll_open(self, code: str, shash: str, qid: int, record: dict[str, Any]) -> None:
        with self._lock:
            c = self._get(code, shash)
            p = self._polls()
            live = {k for k, v in self._classes.items() if not v.ended}
            for table in (p["polls"], p["results"]):
                for gone in [k for k in table if k not in live]:
                    del table[gone]
            old = p["polls"].get(code)
            if old is not None and old.qid != qid:
                p["results"].setdefault(code, deque(maxlen=MAX_RESULTS)).append(_summary(self._raw(c, old, None)))
            p["polls"][code] = _Poll(qid, json.loads(json.dumps(record)))
            event = c.bump(q=True)
        self._announce(code, event)

    def _current(self, c: _Class, code: str) -> _Poll:
        poll: _Poll | None = self._polls()["polls"].get(code)
        if poll is None or poll.qid != c.qid or c.question is None:
            raise QuestionClosed("There is no vote open.")
        return poll

    def _vote(self, code: str, student_id: str, question_id: int, choice: int, ckey: str) -> None:
        with self._lock:
            c = self._get(code)
            if student_id not in c.students:
                raise NotFound("Join the class first.")
            poll = self._current(c, code)
            if poll.qid != question_id or not poll.open or c.revealed:
                raise QuestionClosed("The vote is closed.")
            grid = poll.record["grid"]
            if choice >= (len(grid["rows"]) * len(grid["cols"]) if grid else len(poll.record["options"])):
                raise InvalidInput("no such choice")
            per_student, per_client = self.limit("votes"), self.limit("votes_client")
            self._rates.take(
                self._clock(),
                (per_student, per_student.key(code=code, student=student_id)),
                (per_client, per_client.key(client=ckey)),
            )
            mine = poll.votes[poll.round - 1]
            if mine.get(student_id) == choice:
                return
            mine[student_id] = choice
            event = c.bump(seq=False, tally=True)
        self._announce(code, event)

    def _poll_move(self, code: str, shash: str, move: str) -> None:
        with self._lock:
            c = self._get(code, shash)
            poll = self._current(c, code)
            if c.revealed:
                raise QuestionClosed("The answer is revealed already.")
            if move == "show":
                poll.shown = True
            elif move == "lock":
                if not poll.open:
                    raise QuestionClosed("The vote is locked already.")
                poll.open = False
            elif poll.round != 1 or poll.open:
                raise QuestionClosed("Lock the first vote first." if poll.round == 1 else "The class voted twice.")
            elif move == "discuss":
                poll.discuss = True
            else:
                poll.round, poll.open, poll.discuss = 2, True, False
            event = c.bump(q=True)
        self._announce(code, event)

    def _raw(self, c: _Class, poll: _Poll, student_id: str | None) -> dict[str, Any]:
        counts = []
        for votes in poll.votes:
            tally: dict[int, int] = {}
            for v in votes.values():
                tally[v] = tally.get(v, 0) + 1
            counts.append(tally)
        return {
            **json.loads(json.dumps(poll.record)),
            "qid": poll.qid,
            "round": poll.round,
            "open": poll.open,
            "discuss": poll.discuss,
            "shown": poll.shown,
            "revealed": c.revealed and c.qid == poll.qid,
            "counts": counts,
            "voted": [len(v) for v in poll.votes],
            "mine": [v.get(student_id) if student_id else None for v in poll.votes],
        }

    def _poll_read(self, code: str, student_id: str | None) -> dict[str, Any] | None:
        with self._lock:
            c = self._live(code, self._clock())
            poll = self._polls()["polls"].get(code)
            if c is None or c.ended or poll is None or poll.qid != c.qid:
                return None
            return self._raw(c, poll, student_id)

    def _poll_results(self, code: str) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._polls()["results"].get(code, ()))

    def _close_question(self, code: str, shash: str) -> None:
        with self._lock:
            c = self._get(code, shash)
            if c.question is None:
                raise QuestionClosed("There is no question open.")
            p = self._polls()
            poll = p["polls"].pop(code, None)
            if poll is not None and poll.qid == c.qid:
                p["results"].setdefault(code, deque(maxlen=MAX_RESULTS)).append(_summary(self._raw(c, poll, None)))
            c.question, c.answers, c.revealed = None, {}, False
            event = c.bump(q=True)
        self._announce(code, event)

    def _end_votes(self, code: str) -> None:
        with self._lock:
            for table in ("polls", "results"):
                self._polls()[table].pop(code, None)
