"""Class state shared between people: the interface (`ClassStore`); the data it hands out is classroom/snapshot.py's.

A teacher creates a class and gets a short code (shown to the class) and a secret (kept in the
teacher's session only). Students join with the code and follow the teacher's state (page, sentence,
model, interventions, lesson step); the teacher asks a question with options and the model's own
answer, which stays hidden until `reveal`; students answer (one answer per student per question,
changeable until the reveal) and the teacher sees the counts. A class ends when the teacher ends it,
or after `idle_seconds` without a teacher action; then all its data is deleted and only a small
"ended" marker stays for `tombstone_seconds`, so that students polling it learn that it ended.

Peer instruction (classroom/votes.py, mixed into `ClassStore`): `ask_peer` opens a poll beside the question;
students `vote`, the teacher locks, lets the class discuss, opens a second vote, reveals; click questions vote
for a cell of a real tensor's grid; votes are rate-limited; `results` feeds the teacher's CSV.

Back-ends, chosen by one setting (`classroom.get_store()`): `MemoryClassStore` (classroom/memory.py,
the default: a dict in this process, for one `streamlit run app.py`) and `RedisClassStore`
(classroom/redis_store.py, GLASS_REDIS_URL=redis://...: Redis keys with a TTL, every update one Lua
script, atomic across processes and machines). Pages never know which one runs; the classroom's
Streamlit face is ui/classroom/. Nothing here imports Streamlit.

Errors are `ClassStoreError` subclasses (classroom/errors.py) whose message can be shown as it is.
What may be stored, and every check, is in classroom/rules.py.

Safety:
- The teacher's secret is `secrets.token_urlsafe(24)`; only its SHA-256 (with the code) is stored,
  and it is compared with `hmac.compare_digest`. Nothing a student sees or sends (code, snapshot,
  student id) is or reveals it; every teacher operation needs it.
- Everything stored is plain data, validated on the way in (classroom/rules.py). Pages still render
  everything from here as text.
- Codes: 6 characters of a 31-letter alphabet without look-alikes (0/O, 1/I/L): 887 million codes.
  `join` allows at most `max_failed_joins` failed joins per client per `join_window_seconds` (the rate limit
  "joinfail"; every rate limit is a row of `rules.LIMITS`, applied by `ClassStore.limit`): after that the
  client is refused (`RateLimited`) before its code is even looked at, so it learns nothing.
  The client is the one `serving.identity` decides (the address the proxy saw), stored hashed.
- Bounded: at most `max_students` present per class (a student counts while a page of the class is open, and
  `presence_seconds` after their last page closed, join or answer), `students_per_client` added per client and
  class, `MAX_CLASSES` classes.

A class also keeps a lesson plan and its pace (mode, pause, stop, reveal), its students' snapshots, a board of
their training runs and the teacher's shared run and model: the last section of `ClassStore`, with the data
and its checks in classroom/plans.py. All of it lives in the class's own record and ends with it.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import logging
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from typing import Any

from classroom import plans as _plans
from classroom.errors import ClassEnded, ClassStoreError, Forbidden, InvalidInput, NotFound
from classroom.roster import RosterOps
from classroom.rules import (
    CLASSES_PER_CLIENT,
    IDLE_SECONDS,
    LIMITS,
    MAX_CLASSES,
    MAX_OPTIONS,
    MAX_STUDENTS,
    PRESENCE_SECONDS,
    STUDENTS_PER_CLIENT,
    TOMBSTONE_SECONDS,
    Limit,
    check_id,
    check_question,
    check_state,
    client_key,
    link_token,
    new_code,
    normalize_code,
    secret_hash,
    setting,
)
from classroom.snapshot import ClassSnapshot, Counters
from classroom.votes import PeerVotes

_log = logging.getLogger("glass.classroom")


# -- the interface ------------------------------------------------------------------------------------
class ClassStore(PeerVotes, RosterOps, ABC):
    """Validation and the public operations; a back-end implements the underscored ones."""

    def __init__(
        self,
        idle_seconds: float = IDLE_SECONDS,
        tombstone_seconds: float = TOMBSTONE_SECONDS,
        max_failed_joins: int | None = None,
        join_window_seconds: float | None = None,
        max_students: int = MAX_STUDENTS,
        max_classes: int | None = None,
        classes_per_client: int | None = None,
        class_starts_per_minute: int | None = None,
        students_per_client: int | None = None,
        presence_seconds: float | None = None,
    ):
        self.idle_seconds = idle_seconds
        self.tombstone_seconds = tombstone_seconds
        self.max_students = max_students
        self._watchers: list[tuple[Callable[[str, Counters], None], Callable[[bool], None] | None]] = []
        self._watch_lock = threading.Lock()
        self.max_classes = max_classes or setting("GLASS_MAX_CLASSES", MAX_CLASSES)
        self.classes_per_client = classes_per_client or setting("GLASS_CLASSES_PER_CLIENT", CLASSES_PER_CLIENT)
        # the rate limits (rules.LIMITS) this store was given values of: (seconds, most), None where not given
        self._given: dict[str, tuple[float | None, int | None]] = {
            "joinfail": (join_window_seconds, max_failed_joins),
            "starts": (None, class_starts_per_minute),
        }
        self.students_per_client = students_per_client or setting("GLASS_STUDENTS_PER_ADDRESS", STUDENTS_PER_CLIENT)
        # Presence: a class counts the students seen in the last `presence_seconds` (a join, an answer, or an
        # open page of the class, which every app process's hub reports every few seconds: `mark_connected`).
        # (at least twice the hubs' report interval, classroom/hub.py: else a student with a page open could flicker)
        self.presence_seconds = presence_seconds or max(20, setting("GLASS_PRESENCE_SECONDS", PRESENCE_SECONDS))

    def limit(self, name: str) -> Limit:
        """The rate limit `name` (rules.LIMITS) as this store applies it now: with the values its constructor was
        given, else with the limit's setting as it is now."""
        return LIMITS[name].current(*self._given.get(name, (None, None)))

    @property
    def max_failed_joins(self) -> int:
        return self.limit("joinfail").most

    # teacher
    def create(
        self, state: dict[str, Any] | None = None, client_id: str = "local", owner: str | None = None
    ) -> tuple[str, str]:
        """A new class with this initial state: (code, teacher secret). Keep the secret in the teacher's
        session only. `client_id` (the address) may run `classes_per_client` classes at once and start
        `class_starts_per_minute` a minute (`RateLimited`: the limit "starts"); `owner` (the teacher's browser, or
        session) runs one class at a time: its previous class, if still running, ends. Ended classes free their
        place."""
        state = check_state(state or {})
        ckey = client_key(client_id)
        okey = client_key(owner) if owner is not None else None
        secret = secrets.token_urlsafe(24)
        for _ in range(20):
            code = new_code()
            created, ended = self._create(code, secret_hash(code, secret), state, ckey, okey)
            if ended is not None:  # the owner's previous class: its polls and results go with it, as in `end`
                self._end_votes(ended)
            if created:
                return code, secret
        raise ClassStoreError("could not find a free class code")  # pragma: no cover - 887M codes

    def join_token(self, code: str, secret: str) -> str:
        """The token of this class's join link (`rules.link_token`): for the teacher only."""
        code = self._code(code)
        return link_token(self._teacher(code, secret))

    def set_state(self, code: str, secret: str, state: dict[str, Any]) -> int:
        """Replace the shared state; returns the new version."""
        state = check_state(state)
        code = self._code(code)
        return self._set_state(code, self._teacher(code, secret), state)

    def ask(self, code: str, secret: str, text: str, options: object, answer: int) -> int:
        """A new question (replaces the current one and its answers); returns its id. `answer` is the
        index of the model's answer, hidden from students until `reveal`."""
        q = check_question(text, options, answer)
        code = self._code(code)
        return self._ask(code, self._teacher(code, secret), q)

    def reveal(self, code: str, secret: str) -> None:
        code = self._code(code)
        self._reveal(code, self._teacher(code, secret))

    def end(self, code: str, secret: str) -> None:
        """End the class: everything it stored is deleted (an "ended" marker remains for a while)."""
        code = self._code(code)
        self._end(code, self._teacher(code, secret))
        self._end_votes(code)  # the class's polls and results (classroom/votes.py)

    def touch(self, code: str, secret: str) -> None:
        """A teacher action without a change: postpones the idle expiry."""
        code = self._code(code)
        self._touch(code, self._teacher(code, secret))

    def is_teacher(self, code: str, secret: object) -> bool:
        try:
            self._teacher(self._code(code), secret)
            return True
        except (NotFound, ClassEnded, Forbidden):
            return False

    # students (and the teacher's view)
    def join(self, code: str, client_id: str, student_id: str, token: str | None = None) -> ClassSnapshot:
        """Join (or rejoin) a class: failed joins are rate-limited per client (`RateLimited`), then `NotFound`,
        `ClassEnded` or `ClassFull` (the class, or its students from this client, are at their limit), else
        the class's snapshot. With its join link's `token` a join is never refused for the client's failures
        (classmates' typos behind one address): a link holds the class, a typed code is a guess."""
        ckey = client_key(client_id)
        student_id = check_id(student_id)
        norm = normalize_code(code)
        trusted = False
        if norm is not None and isinstance(token, str) and 0 < len(token) <= 64:
            try:
                trusted = hmac.compare_digest(token.encode(), link_token(self._secret_hash(norm)).encode())
            except (NotFound, ClassEnded):
                trusted = False
        self._join(norm, ckey, student_id, trusted)  # a malformed code (None) counts as a failed join
        snap = self.snapshot(norm, student_id=student_id)
        if snap is None:
            raise NotFound("No class with this code.")
        return snap

    def answer(self, code: str, student_id: str, question_id: int, option: int) -> None:
        """Answer the question `question_id` (as shown to the student); changeable until the reveal."""
        code = self._code(code)
        student_id = check_id(student_id)
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (question_id, option)):
            raise InvalidInput("the question id and the option are whole numbers")
        if not 0 <= option < MAX_OPTIONS:
            raise InvalidInput("no such option")
        self._answer(code, student_id, question_id, option)

    def snapshot(
        self, code: str | None, *, secret: str | None = None, student_id: str | None = None
    ) -> ClassSnapshot | None:
        """The class as it is now, or None if there is no such class. With the teacher's secret
        (`Forbidden` if wrong) it includes the model's answer before the reveal."""
        norm = normalize_code(code)
        if norm is None:
            return None
        code = norm
        teacher = secret is not None
        if teacher:
            try:
                self._teacher(code, secret)
            except ClassEnded:
                return ClassSnapshot(code=code, ended=True)
            except NotFound:
                return None
        if student_id is not None:
            student_id = check_id(student_id)
        return self._snapshot(code, teacher, student_id)

    def counters(self, code: str) -> Counters | None:
        """The class's counters (one small read), or None when there is no such class. Every change bumps
        them in the same atomic step that makes it and then announces them to `watch`ers."""
        norm = normalize_code(code)
        return None if norm is None else self._counters(norm)

    def watch(
        self, on_event: Callable[[str, Counters], None], on_status: Callable[[bool], None] | None = None
    ) -> Callable[[], None]:
        """Call `on_event(code, counters)` after every change of any class, from another thread (the memory
        back-end: the changing thread; Redis: a subscriber thread of this process), and `on_status(up)` when
        the events stop or resume arriving (Redis unreachable, then back: counters may have moved meanwhile,
        so a watcher reads them again). An event may be late or come twice, never before its change. Returns
        a function that stops watching."""
        with self._watch_lock:
            self._watchers.append((on_event, on_status))

        def stop() -> None:
            with self._watch_lock:
                with contextlib.suppress(ValueError):
                    self._watchers.remove((on_event, on_status))

        return stop

    def _announce(self, code: str, counters: Counters) -> None:
        """Hand an event to every watcher (never under a back-end's lock); a failing watcher is logged."""
        with self._watch_lock:
            watchers = list(self._watchers)
        for on_event, _ in watchers:
            try:
                on_event(code, counters)
            except Exception:  # noqa: BLE001 - one watcher's bug is not the class's
                _log.exception("class store: an event watcher failed")

    def _announce_status(self, up: bool) -> None:
        with self._watch_lock:
            watchers = list(self._watchers)
        for _, on_status in watchers:
            if on_status is not None:
                try:
                    on_status(up)
                except Exception:  # noqa: BLE001
                    _log.exception("class store: a status watcher failed")

    # who has a page of the class open (the event hubs of every app process tell, classroom/hub.py)
    def mark_connected(self, code: str, where: str, students: Iterable[str], seconds: float) -> None:
        """App process `where` has pages of class `code` open for `students` (ids) now: kept `seconds`, unless
        `where` says so again; a student it no longer names is dropped at once. The students named are present
        (counted) for `presence_seconds` more; when some student's presence ran out, the class's `tally` moves
        (the teacher's count is redrawn)."""
        norm = normalize_code(code)
        if norm is not None:
            self._mark_connected(norm, str(where)[:64], sorted({check_id(x) for x in students}), seconds)

    def connected(self, code: str) -> set[str]:
        """The students with a page of class `code` open on any app process (as their hubs last said)."""
        norm = normalize_code(code)
        return set() if norm is None else self._connected(norm)

    def close(self) -> None:  # noqa: B027 - optional
        pass

    # helpers
    @staticmethod
    def _code(code: object) -> str:
        norm = normalize_code(code)
        if norm is None:
            raise NotFound("No class with this code.")
        return norm

    def _teacher(self, code: str, secret: object) -> str:
        """The stored secret hash after checking `secret` against it (NotFound, ClassEnded, Forbidden)."""
        stored = self._secret_hash(code)
        if not isinstance(secret, str) or not secret or len(secret) > 256:
            raise Forbidden("Only the teacher can do this.")
        if not hmac.compare_digest(stored.encode(), secret_hash(code, secret).encode()):
            raise Forbidden("Only the teacher can do this.")
        return stored

    # back-end
    @abstractmethod
    def _create(
        self, code: str, shash: str, state: dict[str, Any], ckey: str, okey: str | None
    ) -> tuple[bool, str | None]: ...  # (created, the owner's previous class if this ended it)

    @abstractmethod
    def _secret_hash(self, code: str) -> str: ...

    @abstractmethod
    def _set_state(self, code: str, shash: str, state: dict[str, Any]) -> int: ...

    @abstractmethod
    def _ask(self, code: str, shash: str, q: dict[str, Any]) -> int: ...

    @abstractmethod
    def _reveal(self, code: str, shash: str) -> None: ...

    @abstractmethod
    def _end(self, code: str, shash: str) -> None: ...

    @abstractmethod
    def _touch(self, code: str, shash: str) -> None: ...

    @abstractmethod
    def _join(self, code: str | None, ckey: str, student_id: str, trusted: bool) -> None: ...

    @abstractmethod
    def _answer(self, code: str, student_id: str, question_id: int, option: int) -> None: ...

    @abstractmethod
    def _snapshot(self, code: str, teacher: bool, student_id: str | None) -> ClassSnapshot | None: ...

    @abstractmethod
    def _counters(self, code: str) -> Counters | None: ...

    @abstractmethod
    def _mark_connected(self, code: str, where: str, students: list[str], seconds: float) -> None: ...

    @abstractmethod
    def _connected(self, code: str) -> set[str]: ...

    # -- lesson plans, pacing and snapshots (classroom/plans.py holds their data and checks) -------------------
    # A class keeps one plan, its pace (mode, paused, stop, reveal, the plan's version) and a gallery of its
    # students' snapshots, all deleted with the class. A plan or pace change bumps `seq` and `q` (a pause reaches
    # students who explore on their own too); a snapshot bumps `tally` (the teacher's counts and gallery).
    def set_plan(self, code: str, secret: str, plan: dict[str, Any]) -> int:
        """Give the class this plan (`plans.check_plan`'s dict); returns its version (the pace's `plan`), and puts
        the class on the plan's first stop."""
        plan = _plans.check_plan(plan, None).as_dict()
        code = self._code(code)
        return self._set_plan(code, self._teacher(code, secret), plan)

    def plan(self, code: str) -> dict[str, Any] | None:
        """The class's plan (checked again as it is read), or None."""
        code = self._code(code)
        raw = self._extra(code, "plan")
        return None if raw is None else _plans.check_plan(raw, None).as_dict()

    def set_pace(self, code: str, secret: str, **changes: Any) -> dict[str, Any]:
        """Change the class's pace (mode, paused, stop, reveal: `plans.check_pace`); returns the new pace."""
        code = self._code(code)
        shash = self._teacher(code, secret)
        if "plan" in changes:
            raise InvalidInput("the plan's version changes with the plan only")
        pace = _plans.check_pace({**self.pace(code), **changes})
        self._set_extra(code, shash, "pace", pace)
        return pace

    def pace(self, code: str) -> dict[str, Any]:
        """The class's pace (`plans.DEFAULT_PACE` until the teacher sets one)."""
        raw = self._extra(self._code(code), "pace")
        return dict(_plans.DEFAULT_PACE) if raw is None else _plans.check_pace(raw)

    def send_shot(self, code: str, student_id: str, client_id: str, state: dict[str, Any], note: str = "") -> int:
        """A student's snapshot of their state with a one-line note, for the teacher's gallery; returns its number.
        At most a few a minute per student and per client (`RateLimited`: the limits "shots" and "shots_client");
        the gallery keeps the newest `plans.SHOTS_KEPT`."""
        code = self._code(code)
        shot = {"state": check_state(state), "note": _plans.check_note(note)}
        return self._send_shot(code, check_id(student_id), client_key(client_id), shot)

    def shots(self, code: str, secret: str) -> list[dict[str, Any]]:
        """The class's gallery, oldest first: [{"n", "state", "note", "student"}] ("student": the n-th student
        who sent one, never their id): for the teacher only."""
        code = self._code(code)
        self._teacher(code, secret)
        out = []
        for shot in self._shots(code):
            with contextlib.suppress(InvalidInput, KeyError, TypeError):
                out.append(
                    {
                        "n": int(shot["n"]),
                        "student": int(shot["student"]),
                        "state": check_state(shot["state"]),
                        "note": _plans.check_note(shot["note"]),
                    }
                )
        return out

    def post_run(self, code: str, student_id: str, client_id: str, run: dict[str, Any]) -> int:
        """A student's training run on the class board (`plans.check_run`; it replaces their last); returns the
        student's number on the board. A few posts a minute at most (`RateLimited`: the limit "runs")."""
        code = self._code(code)
        return self._post_run(code, check_id(student_id), _plans.check_run(run))

    def board(self, code: str) -> list[dict[str, Any]]:
        """The class board: one run per student who posted one, by their number: [{"student", **run}]."""
        code = self._code(code)
        self._extra(code, "pace")  # NotFound, ClassEnded: as every other read of a class
        out = []
        for item in self._board(code):
            with contextlib.suppress(InvalidInput, KeyError, TypeError):
                out.append({"student": int(item["student"]), **_plans.check_run(item["run"])})
        return sorted(out, key=lambda r: r["student"])

    def set_class_run(self, code: str, secret: str, run: dict[str, Any]) -> dict[str, Any]:
        """The teacher's training run, as the class follows it live (`plans.check_class_run`): every change moves
        `seq` and `q`, so every student's page hears it. Returns what was stored."""
        run = _plans.check_class_run(run)
        code = self._code(code)
        self._set_extra(code, self._teacher(code, secret), "run", run)
        return run

    def class_run(self, code: str) -> dict[str, Any] | None:
        """The teacher's shared run, or None."""
        raw = self._extra(self._code(code), "run")
        return None if raw is None else _plans.check_class_run(raw)

    def set_class_model(self, code: str, secret: str, weights: bytes, meta: bytes) -> int:
        """The teacher's trained model (a checkpoint's two files), for the class to explore; returns its version.
        At most `plans.MAX_CLASS_MODEL_BYTES`; stored as base64 text, read back only when a student asks for it. All
        the classes' models together stay within `GLASS_CLASS_MODELS_MB` (`ClassStoreError` past it)."""
        if not isinstance(weights, bytes) or not isinstance(meta, bytes):
            raise InvalidInput("a model is its weights and its JSON, as bytes")
        if len(weights) + len(meta) > _plans.MAX_CLASS_MODEL_BYTES:
            raise InvalidInput(
                f"This model is larger than {_plans.MAX_CLASS_MODEL_BYTES // 2**20} MB: too large to "
                "share with the class."
            )
        code = self._code(code)
        shash = self._teacher(code, secret)
        budget = setting("GLASS_CLASS_MODELS_MB", _plans.CLASS_MODELS_MB)
        return self._set_model(
            code, shash, base64.b64encode(weights).decode(), base64.b64encode(meta).decode(), budget * 2**20
        )

    def class_model(self, code: str) -> tuple[int, bytes, bytes] | None:
        """The teacher's shared model: (version, weights, JSON), or None. Load it with `model.checkpoint.from_bytes`,
        which checks everything."""
        raw = self._extra(self._code(code), "model")
        if not isinstance(raw, dict):
            return None
        try:
            return int(raw["v"]), base64.b64decode(raw["weights"]), base64.b64decode(raw["meta"])
        except (KeyError, TypeError, ValueError):
            return None

    def _post_run(self, code: str, student_id: str, run: dict[str, Any]) -> int:
        raise NotImplementedError

    def _set_model(self, code: str, shash: str, weights: str, meta: str, budget: int) -> int:
        """Store the class's model (base64 text) as its next version ("model" and "model_v" extras) if every class's
        model together stays within `budget` bytes (else `ClassStoreError`); the new version."""
        raise NotImplementedError

    def _board(self, code: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    def _set_plan(self, code: str, shash: str, plan: dict[str, Any]) -> int:
        raise NotImplementedError

    def _extra(self, code: str, name: str) -> Any:  # (the JSON stored, or None)
        raise NotImplementedError

    def _set_extra(self, code: str, shash: str, name: str, value: dict[str, Any]) -> None:
        raise NotImplementedError

    def _send_shot(self, code: str, student_id: str, ckey: str, shot: dict[str, Any]) -> int:
        raise NotImplementedError

    def _shots(self, code: str) -> list[dict[str, Any]]:
        raise NotImplementedError


def too_many_classes(limit: int) -> str:
    return (
        f"Your network address already runs {limit} classes, the limit per address. End one first (or ask "
        "whoever runs the server to raise GLASS_CLASSES_PER_CLIENT)."
    )


def too_many_students(limit: int) -> str:
    return (
        f"This class already has {limit} students from your network address, the limit per address. If your "
        "whole school shares one address, whoever runs the server can raise GLASS_STUDENTS_PER_ADDRESS."
    )
