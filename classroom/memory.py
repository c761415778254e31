"""The in-process back-end of the class store (the default: one `streamlit run app.py`)."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from classroom import plans as _plans
from classroom.errors import ClassEnded, ClassFull, ClassStoreError, InvalidInput, NotFound, QuestionClosed, RateLimited
from classroom.memory_votes import MemoryVotes
from classroom.roster import MemoryRoster
from classroom.rules import MAX_OPTIONS, Limit
from classroom.snapshot import ClassSnapshot, Counters, _snapshot_of
from classroom.store import ClassStore, too_many_classes, too_many_students


# -- in-process memory --------------------------------------------------------------------------------
@dataclass
class _Class:
    secret_hash: str
    state: dict[str, Any]
    expires: float
    version: int = 1
    qid: int = 0
    question: dict[str, Any] | None = None
    answers: dict[str, int] = field(default_factory=dict)
    revealed: bool = False
    students: set[str] = field(default_factory=set)
    ended: bool = False
    client: str = ""  # the hashed client that started it
    joined_by: dict[str, int] = field(default_factory=dict)  # hashed client -> students it added
    here: dict[str, float] = field(default_factory=dict)  # student -> present until (store.presence_seconds)
    seq: int = 1  # the counters (classroom.snapshot.Counters)
    q: int = 0
    tally: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # "plan", "pace" (classroom/plans.py)
    # the gallery: {"n", "student", "state", "note"}, oldest first
    shots: list[dict[str, Any]] = field(default_factory=list)
    numbers: dict[str, int] = field(default_factory=dict)  # student id -> their number (in the order they joined)
    # student id -> their last status (classroom/roster.py)
    status: dict[str, dict[str, Any]] = field(default_factory=dict)
    runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # the class board: student number -> their run

    def bump(self, seq: bool = True, q: bool = False, tally: bool = False) -> Counters:
        self.seq, self.q, self.tally = self.seq + seq, self.q + q, self.tally + tally
        return self.counters()

    def counters(self) -> Counters:
        return Counters(self.seq, self.q, self.tally, self.ended)

    def present(self, now: float) -> int:
        """Forget the students whose presence ran out (how many); the others are the class's count."""
        gone = [x for x, until in self.here.items() if until <= now]
        for x in gone:
            del self.here[x]
        return len(gone)


class Windows:
    """The memory store's rate limits (`rules.Limit`: sliding windows): per limit and key, the times of the sends
    it allowed in its window (kept for exactly its `seconds`: N a minute allows N in any minute, its ends included)."""

    def __init__(self) -> None:
        self._times: dict[tuple[str, str], deque[float]] = {}
        self._longest = 0.0

    def wait(self, now: float, limit: Limit, key: str) -> float | None:
        """Seconds until `limit` allows one more send under `key`; None: it allows one now."""
        times = self._times.get((limit.name, key), deque())
        while times and times[0] < now - limit.seconds:
            times.popleft()
        return times[0] + limit.seconds - now if len(times) >= limit.most else None

    def spend(self, now: float, limit: Limit, key: str) -> None:
        self._times.setdefault((limit.name, key), deque()).append(now)
        self._longest = max(self._longest, limit.seconds)

    def take(self, now: float, *sends: tuple[Limit, str]) -> None:
        """One send under each (limit, key), or none and `RateLimited` (until every one has room)."""
        waits = [w for limit, key in sends if (w := self.wait(now, limit, key)) is not None]
        if waits:
            raise RateLimited(max(waits))
        for limit, key in sends:
            self.spend(now, limit, key)

    def sweep(self, now: float) -> None:
        """Forget the keys whose sends all left their window."""
        for gone in [k for k, times in self._times.items() if not times or times[-1] < now - self._longest]:
            del self._times[gone]


class MemoryClassStore(MemoryVotes, MemoryRoster, ClassStore):
    """One process's classes, in a dict under one lock (every operation is a few dict updates)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, **kw: Any) -> None:
        super().__init__(**kw)
        self._clock = clock
        self._present: dict[str, dict[str, tuple[float, set[str]]]] = {}  # code -> process -> (until, ids)
        self._lock = threading.Lock()
        self._classes: dict[str, _Class] = {}
        self._rates = Windows()
        self._owned: dict[str, str] = {}  # hashed owner (a teacher's browser or session) -> its class
        self._next_sweep = 0.0

    def _sweep(self, now: float) -> None:  # under the lock
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(30.0, self.idle_seconds / 4)
        for code in [c for c, k in self._classes.items() if k.expires <= now]:
            del self._classes[code]
        self._rates.sweep(now)
        for okey in [o for o, code in self._owned.items() if code not in self._classes]:
            del self._owned[okey]

    def _live(self, code: str, now: float) -> _Class | None:
        self._sweep(now)
        c = self._classes.get(code)
        if c is not None and c.expires <= now:
            del self._classes[code]
            return None
        return c

    def _get(self, code: str, shash: str | None = None) -> _Class:
        now = self._clock()
        c = self._live(code, now)
        if c is None or (shash is not None and c.secret_hash != shash):
            raise NotFound("No class with this code.")
        if c.ended:
            raise ClassEnded("This class has ended.")
        if shash is not None:
            c.expires = now + self.idle_seconds
        return c

    def _create(
        self, code: str, shash: str, state: dict[str, Any], ckey: str, okey: str | None
    ) -> tuple[bool, str | None]:
        with self._lock:
            now = self._clock()
            if self._live(code, now) is not None:
                return False, None
            previous = self._owned.get(okey) if okey is not None else None
            ended = None
            if previous is not None and (old := self._live(previous, now)) is not None and not old.ended:
                ended = self._tombstone(previous, now)  # one class per teacher's browser: starting one ends the last
            self._next_sweep = 0.0
            self._sweep(now)
            running = [c for c in self._classes.values() if not c.ended]
            if sum(c.client == ckey for c in running) >= self.classes_per_client:
                raise ClassStoreError(too_many_classes(self.classes_per_client))
            starts = self.limit("starts")
            wait = self._rates.wait(now, starts, starts.key(client=ckey))
            if wait is not None:
                raise RateLimited(wait)
            if len(running) >= self.max_classes:
                raise ClassStoreError("Too many classes on this server: try again later.")
            self._classes[code] = _Class(shash, dict(state), now + self.idle_seconds, client=ckey)
            self._rates.spend(now, starts, starts.key(client=ckey))
            if okey is not None:
                self._owned[okey] = code
        if ended is not None:
            assert previous is not None  # (what ended is the owner's previous class)
            self._announce(previous, ended)
        return True, previous if ended is not None else None

    def _tombstone(self, code: str, now: float) -> Counters:  # under the lock; the ended class's counters
        old = self._classes.get(code)
        counters: dict[str, Any] = {"seq": old.seq, "q": old.q, "tally": old.tally} if old else {}
        c = self._classes[code] = _Class("", {}, now + self.tombstone_seconds, version=0, ended=True, **counters)
        return c.bump(q=True)

    def _secret_hash(self, code: str) -> str:
        with self._lock:
            return self._get(code).secret_hash

    def _set_state(self, code: str, shash: str, state: dict[str, Any]) -> int:
        with self._lock:
            c = self._get(code, shash)
            c.state = dict(state)
            c.version += 1
            version, event = c.version, c.bump()
        self._announce(code, event)
        return version

    def _ask(self, code: str, shash: str, q: dict[str, Any]) -> int:
        with self._lock:
            c = self._get(code, shash)
            c.qid += 1
            c.question, c.answers, c.revealed = q, {}, False
            qid, event = c.qid, c.bump(q=True)
        self._announce(code, event)
        return qid

    def _reveal(self, code: str, shash: str) -> None:
        with self._lock:
            c = self._get(code, shash)
            if c.question is None:
                raise QuestionClosed("There is no question to reveal.")
            c.revealed = True
            event = c.bump(q=True)
        self._announce(code, event)

    def _end(self, code: str, shash: str) -> None:
        with self._lock:
            self._get(code, shash)
            event = self._tombstone(code, self._clock())
        self._announce(code, event)

    def _touch(self, code: str, shash: str) -> None:
        with self._lock:
            self._get(code, shash)

    def _join(self, code: str | None, ckey: str, student_id: str, trusted: bool) -> None:
        with self._lock:
            now = self._clock()
            fails = self.limit("joinfail")
            if not trusted and (wait := self._rates.wait(now, fails, fails.key(client=ckey))) is not None:
                raise RateLimited(wait)
            c = self._live(code, now) if code else None
            if c is None:
                self._rates.spend(now, fails, fails.key(client=ckey))
                raise NotFound("No class with this code.")
            if c.ended:
                raise ClassEnded("This class has ended.")
            gone = c.present(now)
            if student_id in c.here:  # present already (another tab, a reload): here for longer
                c.here[student_id] = now + self.presence_seconds
                if not gone:
                    return
            else:
                if len(c.here) >= self.max_students:
                    raise ClassFull("This class is full.")
                if student_id not in c.students:
                    if c.joined_by.get(ckey, 0) >= self.students_per_client:
                        raise ClassFull(too_many_students(self.students_per_client))
                    c.joined_by[ckey] = c.joined_by.get(ckey, 0) + 1
                    c.students.add(student_id)
                    c.numbers.setdefault(student_id, len(c.numbers) + 1)
                c.here[student_id] = now + self.presence_seconds
            event = c.bump(seq=False, tally=True)
        assert code is not None  # (its class was found)
        self._announce(code, event)

    def _answer(self, code: str, student_id: str, question_id: int, option: int) -> None:
        with self._lock:
            c = self._get(code)
            if student_id not in c.students:
                raise NotFound("Join the class first.")
            if c.question is None or question_id != c.qid or c.revealed:
                raise QuestionClosed("This question is closed.")
            if option >= len(c.question["options"]):
                raise InvalidInput("no such option")
            if c.answers.get(student_id) == option:
                return
            c.answers[student_id] = option
            event = c.bump(seq=False, tally=True)
        self._announce(code, event)

    def _mark_connected(self, code: str, where: str, students: list[str], seconds: float) -> None:
        with self._lock:
            now = self._clock()
            marks = self._present.setdefault(code, {})
            marks[where] = (now + seconds, set(students))
            for w in [w for w, (until, _) in marks.items() if until <= now]:
                del marks[w]
            c = self._live(code, now)
            if c is None or c.ended:
                return
            for x in students:
                if x in c.students:
                    c.here[x] = max(c.here.get(x, 0.0), now + self.presence_seconds)
            if not c.present(now):
                return
            event = c.bump(seq=False, tally=True)  # students left: the teacher's count moves
        self._announce(code, event)

    def _connected(self, code: str) -> set[str]:
        with self._lock:
            now = self._clock()
            return set().union(*(ids for until, ids in self._present.get(code, {}).values() if until > now))

    def _counters(self, code: str) -> Counters | None:
        with self._lock:
            c = self._live(code, self._clock())
            return None if c is None else c.counters()

    def _snapshot(self, code: str, teacher: bool, student_id: str | None) -> ClassSnapshot | None:
        with self._lock:
            now = self._clock()
            c = self._live(code, now)
            if c is None:
                return None
            if c.ended:
                return ClassSnapshot(code=code, ended=True, seq=c.seq, q=c.q, tally=c.tally)
            counts = [0] * MAX_OPTIONS
            for a in c.answers.values():
                counts[a] += 1
            return _snapshot_of(
                code,
                json.loads(json.dumps(c.state)),
                c.version,
                c.qid,
                c.question,
                counts,
                c.revealed,
                sum(until > now for until in c.here.values()),
                teacher,
                c.answers.get(student_id) if student_id else None,
                c.counters(),
            )

    # -- lesson plans, pacing and snapshots ------------------------------------------------------------------
    def _set_plan(self, code: str, shash: str, plan: dict[str, Any]) -> int:
        with self._lock:
            c = self._get(code, shash)
            pace = dict(c.extra.get("pace") or _plans.DEFAULT_PACE)
            version: int = pace["plan"] + 1
            c.extra["plan"], c.extra["pace"] = plan, {**pace, "stop": 0, "reveal": False, "plan": version}
            event = c.bump(q=True)
        self._announce(code, event)
        return version

    def _extra(self, code: str, name: str) -> Any:
        with self._lock:
            value = self._get(code).extra.get(name)
            return None if value is None else json.loads(json.dumps(value))

    def _set_extra(self, code: str, shash: str, name: str, value: dict[str, Any]) -> None:
        with self._lock:
            c = self._get(code, shash)
            c.extra[name] = dict(value)
            event = c.bump(q=True)
        self._announce(code, event)

    def _set_model(self, code: str, shash: str, weights: str, meta: str, budget: int) -> int:
        with self._lock:
            c = self._get(code, shash)
            now = self._clock()
            held = sum(
                len(k.extra["model"]["weights"]) + len(k.extra["model"]["meta"])
                for name, k in self._classes.items()
                if name != code and "model" in k.extra and not k.ended and k.expires > now
            )
            if held + len(weights) + len(meta) > budget:
                raise ClassStoreError(_plans.too_many_models(budget // 2**20))
            version = int(c.extra.get("model_v", {}).get("v", 0)) + 1
            c.extra["model"] = {"v": version, "weights": weights, "meta": meta}
            c.extra["model_v"] = {"v": version}
            event = c.bump(q=True)
        self._announce(code, event)
        return version

    def _send_shot(self, code: str, student_id: str, ckey: str, shot: dict[str, Any]) -> int:
        with self._lock:
            now = self._clock()
            c = self._get(code)
            if student_id not in c.students:
                raise NotFound("Join the class first.")
            mine, theirs = self.limit("shots"), self.limit("shots_client")
            self._rates.take(
                now, (mine, mine.key(code=code, student=student_id)), (theirs, theirs.key(code=code, client=ckey))
            )
            number = c.numbers.setdefault(student_id, len(c.numbers) + 1)
            n = c.shots[-1]["n"] + 1 if c.shots else 1
            c.shots = [*c.shots, {"n": n, "student": number, **json.loads(json.dumps(shot))}][-_plans.SHOTS_KEPT :]
            event = c.bump(seq=False, tally=True)
        self._announce(code, event)
        return n

    def _shots(self, code: str) -> list[dict[str, Any]]:
        with self._lock:
            shots: list[dict[str, Any]] = json.loads(json.dumps(self._get(code).shots))  # (a copy)
            return shots

    def _post_run(self, code: str, student_id: str, run: dict[str, Any]) -> int:
        with self._lock:
            now = self._clock()
            c = self._get(code)
            if student_id not in c.students:
                raise NotFound("Join the class first.")
            runs = self.limit("runs")
            self._rates.take(now, (runs, runs.key(code=code, student=student_id)))
            number = c.numbers.setdefault(student_id, len(c.numbers) + 1)
            c.runs[number] = json.loads(json.dumps(run))
            event = c.bump(seq=False, tally=True)
        self._announce(code, event)
        return number

    def _board(self, code: str) -> list[dict[str, Any]]:
        with self._lock:
            return [{"student": n, "run": json.loads(json.dumps(r))} for n, r in self._get(code).runs.items()]
