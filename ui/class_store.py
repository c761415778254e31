"""Class state shared between people (classroom mode, issue 14): one interface, two back-ends.

A teacher creates a class and gets a short code (shown to the class) and a secret (kept in the
teacher's session only). Students join with the code and follow the teacher's state (page, sentence,
model, interventions, lesson step) by polling `snapshot` about once a second; the teacher asks a
question with options and the model's own answer, which stays hidden until `reveal`; students answer
(one answer per student per question, changeable until the reveal) and the teacher sees the counts.
A class ends when the teacher ends it, or after `idle_seconds` without a teacher action; then all its
data is deleted and only a small "ended" marker stays for `tombstone_seconds`, so that students
polling it learn that it ended.

Back-ends, chosen by one setting (`get_store()`):

- `MemoryClassStore` (default, GLASS_REDIS_URL unset): a dict in this process, for one
  `streamlit run app.py`. Expired classes are swept on the next call.
- `RedisClassStore` (GLASS_REDIS_URL=redis://...): Redis keys with a TTL (idle expiry is Redis's
  own), every update one Lua script (atomic across processes and machines), every snapshot one
  MULTI/EXEC round trip. Several app processes behind a proxy (ui/serve_many.py) see one class.

Pages never know which one runs. This module does not import Streamlit.

How the classroom UI is meant to use it (a sketch; `ss` is st.session_state):

    store = get_store()
    # teacher
    ss.class_code, ss.class_secret = store.create(shared_state())   # show the code, never the secret
    store.set_state(ss.class_code, ss.class_secret, shared_state())  # on every change of the shared keys
    qid = store.ask(code, ss.class_secret, "Which word does 'it' attend to most?", ["animal", "street"], 0)
    snap = store.snapshot(code, secret=ss.class_secret)              # counts live; .answer before reveal
    store.reveal(code, ss.class_secret); store.end(code, ss.class_secret)
    # student (put ?class=CODE in the URL: a student moved to another process rejoins by itself)
    ss.student_id = ss.get("student_id") or new_student_id()
    snap = store.join(code, st.context.ip_address or "local", ss.student_id)
    snap = store.snapshot(code, student_id=ss.student_id)            # each second, in an st.fragment
    if following and snap.version != ss.applied_version: apply(snap.state)
    store.answer(code, ss.student_id, snap.question.id, option)

Errors are `ClassStoreError` subclasses whose message can be shown as it is (NotFound, ClassEnded,
Forbidden, RateLimited with .retry_after, QuestionClosed, ClassFull, InvalidInput, StoreUnavailable).

Safety:
- The teacher's secret is `secrets.token_urlsafe(24)`; only its SHA-256 (with the code) is stored,
  and it is compared with `hmac.compare_digest`. Nothing a student sees or sends (code, snapshot,
  student id) is or reveals it; every teacher operation needs it.
- Everything stored is plain data, validated on the way in: state keys are whitelisted
  (`STATE_FIELDS`), strings are bounded and may not contain `<`, `>` or control/format characters,
  a question has 2 to 6 distinct options. Invalid input raises `InvalidInput`, it is never cut or
  cleaned silently. Pages still render everything from here as text.
- Codes: 6 characters of a 31-letter alphabet without look-alikes (0/O, 1/I/L): 887 million codes.
  `join` allows at most `max_failed_joins` failed joins per client per `join_window_seconds` (10 a
  minute): after that the client is refused (`RateLimited`) before its code is even looked at, so it
  learns nothing. The client id should be the client's address, not a session id the client can renew:
  `st.context.ip_address or "local"`. Behind the HAProxy configs in deploy/ that is the address the
  proxy saw (it overwrites X-Forwarded-For, and uvicorn trusts that header from 127.0.0.1, or from
  FORWARDED_ALLOW_IPS in compose.yaml, where only the proxy reaches the apps).
- Bounded: at most `max_students` per class, `MAX_CLASSES` classes in the memory store.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import threading
import time
import unicodedata
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass, field

REDIS_URL_ENV = "GLASS_REDIS_URL"
CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # no 0/O, 1/I/L
CODE_LENGTH = 6
IDLE_SECONDS = 2 * 3600  # a class without a teacher action for this long ends
TOMBSTONE_SECONDS = 15 * 60  # an ended class answers "ended" for this long, then "no such class"
MAX_FAILED_JOINS = 10  # per client and window
JOIN_WINDOW_SECONDS = 60
MAX_STUDENTS = 500
MAX_CLASSES = 1_000  # memory back-end
MAX_TEXT = 500  # sentence, question text
MAX_OPTION = 80
MAX_OPTIONS = 6
MAX_STATE_BYTES = 8_192  # the state as JSON
_ID = re.compile(r"[A-Za-z0-9_-]{8,64}", re.ASCII)
_SLUG = re.compile(r"[a-z0-9_-]{1,64}", re.ASCII)
_HEAD = re.compile(r"(enc\.\d{1,2}\.self_attn|dec\.\d{1,2}\.(self_attn|cross_attn)):\d{1,2}", re.ASCII)  # ui.state
MAX_HEADS = 64


# -- errors -------------------------------------------------------------------------------------------
class ClassStoreError(Exception):
    """Anything the class store refuses; the message is safe to show."""


class InvalidInput(ClassStoreError, ValueError):
    pass


class NotFound(ClassStoreError):
    """No such class (never existed, expired, or ended long ago)."""


class ClassEnded(ClassStoreError):
    pass


class Forbidden(ClassStoreError):
    """A teacher operation without the class's secret."""


class RateLimited(ClassStoreError):
    def __init__(self, retry_after: float):
        super().__init__(f"Too many attempts: try again in {max(1, round(retry_after))} s.")
        self.retry_after = retry_after


class QuestionClosed(ClassStoreError):
    """The question was revealed, or replaced by a newer one, or there is none."""


class ClassFull(ClassStoreError):
    pass


class StoreUnavailable(ClassStoreError):
    """The shared store (Redis) cannot be reached."""


# -- data ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Question:
    id: int
    text: str
    options: tuple[str, ...]


@dataclass(frozen=True)
class ClassSnapshot:
    """What a poll sees. `answer` (the model's) is None until revealed, except for the teacher.
    `version` counts the teacher's `set_state` calls (start 1); `question.id` counts questions."""
    code: str
    state: dict = field(default_factory=dict)
    version: int = 0
    question: Question | None = None
    counts: tuple[int, ...] = ()
    revealed: bool = False
    answer: int | None = None
    my_answer: int | None = None  # the asking student's current answer
    students: int = 0
    ended: bool = False

    @property
    def answered(self) -> int:
        return sum(self.counts)


# -- validation ---------------------------------------------------------------------------------------
def check_text(value, max_len: int = MAX_TEXT, what: str = "text", allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{what} must be a string")
    if len(value) > max_len:
        raise InvalidInput(f"{what} is longer than {max_len} characters")
    if not value.strip() and not allow_empty:
        raise InvalidInput(f"{what} is empty")
    if "<" in value or ">" in value:
        raise InvalidInput(f"{what} may not contain < or >")
    if any(unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") for c in value):
        raise InvalidInput(f"{what} contains control or unassigned characters")
    return value


def _slug(value, what: str) -> str:
    if not isinstance(value, str) or not _SLUG.fullmatch(value):
        raise InvalidInput(f"{what} must be 1-64 characters of a-z, 0-9, _ and -")
    return value


def _bool(value, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{what} must be true or false")
    return value


def _heads(value, what: str) -> list[str]:
    if not isinstance(value, list | tuple) or len(value) > MAX_HEADS:
        raise InvalidInput(f"{what} must be a list of at most {MAX_HEADS} heads")
    if not all(isinstance(h, str) and _HEAD.fullmatch(h) for h in value):
        raise InvalidInput(f"{what}: every head looks like enc.0.self_attn:2")
    return sorted(set(value))


def _model(value, what: str) -> str:
    if value not in ("base", "no_mask"):  # "mine" lives in one session only: it cannot be shared
        raise InvalidInput(f"{what} must be base or no_mask")
    return value


def _step(value, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 999:
        raise InvalidInput(f"{what} must be a whole number from 0 to 999")
    return value


# The state a teacher shares (the session-state keys of ui/state.py, plus the page and lesson step).
# A new key is one line here; anything not listed is refused.
STATE_FIELDS = {
    "page": _slug,  # a page's url path (ui/page_list.py)
    "sentence": lambda v, w: check_text(v, MAX_TEXT, w, allow_empty=True),
    "model": _model,
    "heads_off": _heads,
    "iv_look_ahead": _bool,
    "iv_padding": _bool,
    "iv_scale": _bool,
    "iv_pos": _bool,
    "lesson": _slug,
    "step": _step,
}


def check_state(state) -> dict:
    if not isinstance(state, dict):
        raise InvalidInput("the state must be a dict")
    unknown = [k for k in state if k not in STATE_FIELDS]
    if unknown:
        raise InvalidInput(f"unknown state keys: {', '.join(sorted(map(str, unknown)))[:200]}")
    clean = {k: STATE_FIELDS[k](v, k) for k, v in state.items()}
    if len(json.dumps(clean)) > MAX_STATE_BYTES:
        raise InvalidInput("the state is too large")
    return clean


def check_question(text, options, answer) -> dict:
    text = check_text(text, MAX_TEXT, "the question")
    if not isinstance(options, list | tuple) or not 2 <= len(options) <= MAX_OPTIONS:
        raise InvalidInput(f"a question has 2 to {MAX_OPTIONS} options")
    options = [check_text(o, MAX_OPTION, "an option") for o in options]
    if len(set(options)) != len(options):
        raise InvalidInput("the options must differ")
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(options):
        raise InvalidInput("the answer must be the index of one of the options")
    return {"text": text, "options": options, "answer": answer}


def normalize_code(code) -> str | None:
    """"abc 2de-f" -> "ABC2DEF"; None when it cannot be a code."""
    if not isinstance(code, str) or len(code) > 32:
        return None
    code = re.sub(r"[\s-]", "", code).upper()
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        return None
    return code


def check_id(value, what: str = "the student id") -> str:
    if not isinstance(value, str) or not _ID.fullmatch(value):
        raise InvalidInput(f"{what} must be 8-64 characters of A-Z, a-z, 0-9, _ and -")
    return value


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def new_student_id() -> str:
    """A random id for one student's session (keep it in the session to rejoin as the same student)."""
    return secrets.token_urlsafe(16)


def secret_hash(code: str, secret: str) -> str:
    return hashlib.sha256(f"{code}:{secret}".encode()).hexdigest()


def client_key(client_id) -> str:
    """Rate limits are kept per client under a hash: addresses are not stored, keys stay bounded."""
    if not isinstance(client_id, str) or not 1 <= len(client_id) <= 256:
        raise InvalidInput("the client id must be a string of 1-256 characters")
    return hashlib.sha256(client_id.encode()).hexdigest()[:32]


# -- the interface ------------------------------------------------------------------------------------
class ClassStore(ABC):
    """Validation and the public operations; a back-end implements the underscored ones."""

    def __init__(self, idle_seconds: float = IDLE_SECONDS, tombstone_seconds: float = TOMBSTONE_SECONDS,
                 max_failed_joins: int = MAX_FAILED_JOINS, join_window_seconds: float = JOIN_WINDOW_SECONDS,
                 max_students: int = MAX_STUDENTS):
        self.idle_seconds = idle_seconds
        self.tombstone_seconds = tombstone_seconds
        self.max_failed_joins = max_failed_joins
        self.join_window_seconds = join_window_seconds
        self.max_students = max_students

    # teacher
    def create(self, state: dict | None = None) -> tuple[str, str]:
        """A new class with this initial state: (code, teacher secret). Keep the secret in the
        teacher's session only."""
        state = check_state(state or {})
        secret = secrets.token_urlsafe(24)
        for _ in range(20):
            code = new_code()
            if self._create(code, secret_hash(code, secret), state):
                return code, secret
        raise ClassStoreError("could not find a free class code")  # pragma: no cover - 887M codes

    def set_state(self, code: str, secret: str, state: dict) -> int:
        """Replace the shared state; returns the new version."""
        state = check_state(state)
        code = self._code(code)
        return self._set_state(code, self._teacher(code, secret), state)

    def ask(self, code: str, secret: str, text: str, options, answer: int) -> int:
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

    def touch(self, code: str, secret: str) -> None:
        """A teacher action without a change: postpones the idle expiry."""
        code = self._code(code)
        self._touch(code, self._teacher(code, secret))

    def is_teacher(self, code: str, secret) -> bool:
        try:
            self._teacher(self._code(code), secret)
            return True
        except (NotFound, ClassEnded, Forbidden):
            return False

    # students (and the teacher's view)
    def join(self, code: str, client_id: str, student_id: str) -> ClassSnapshot:
        """Join (or rejoin) a class: rate-limited per client (`RateLimited`), then `NotFound`,
        `ClassEnded` or `ClassFull`, else the class's snapshot."""
        ckey = client_key(client_id)
        student_id = check_id(student_id)
        norm = normalize_code(code)
        self._join(norm, ckey, student_id)  # a malformed code (None) counts as a failed join
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

    def snapshot(self, code: str, *, secret: str | None = None, student_id: str | None = None
                 ) -> ClassSnapshot | None:
        """The class as it is now, or None if there is no such class. With the teacher's secret
        (`Forbidden` if wrong) it includes the model's answer before the reveal."""
        code = normalize_code(code)
        if code is None:
            return None
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

    def close(self) -> None:  # noqa: B027 - optional
        pass

    # helpers
    @staticmethod
    def _code(code) -> str:
        norm = normalize_code(code)
        if norm is None:
            raise NotFound("No class with this code.")
        return norm

    def _teacher(self, code: str, secret) -> str:
        """The stored secret hash after checking `secret` against it (NotFound, ClassEnded, Forbidden)."""
        stored = self._secret_hash(code)
        if not isinstance(secret, str) or not secret or len(secret) > 256:
            raise Forbidden("Only the teacher can do this.")
        if not hmac.compare_digest(stored.encode(), secret_hash(code, secret).encode()):
            raise Forbidden("Only the teacher can do this.")
        return stored

    # back-end
    @abstractmethod
    def _create(self, code: str, shash: str, state: dict) -> bool: ...

    @abstractmethod
    def _secret_hash(self, code: str) -> str: ...

    @abstractmethod
    def _set_state(self, code: str, shash: str, state: dict) -> int: ...

    @abstractmethod
    def _ask(self, code: str, shash: str, q: dict) -> int: ...

    @abstractmethod
    def _reveal(self, code: str, shash: str) -> None: ...

    @abstractmethod
    def _end(self, code: str, shash: str) -> None: ...

    @abstractmethod
    def _touch(self, code: str, shash: str) -> None: ...

    @abstractmethod
    def _join(self, code: str | None, ckey: str, student_id: str) -> None: ...

    @abstractmethod
    def _answer(self, code: str, student_id: str, question_id: int, option: int) -> None: ...

    @abstractmethod
    def _snapshot(self, code: str, teacher: bool, student_id: str | None) -> ClassSnapshot | None: ...


def _snapshot_of(code: str, state: dict, version: int, qid: int, q: dict | None, counts: list[int],
                  revealed: bool, students: int, teacher: bool, my_answer: int | None) -> ClassSnapshot:
    question = Question(qid, q["text"], tuple(q["options"])) if q else None
    n = len(question.options) if question else 0
    return ClassSnapshot(code=code, state=state, version=version, question=question,
                         counts=tuple((counts + [0] * n)[:n]), revealed=revealed and question is not None,
                         answer=q["answer"] if q and (revealed or teacher) else None,
                         my_answer=my_answer if question else None, students=students)


# -- in-process memory --------------------------------------------------------------------------------
@dataclass
class _Class:
    secret_hash: str
    state: dict
    expires: float
    version: int = 1
    qid: int = 0
    question: dict | None = None
    answers: dict[str, int] = field(default_factory=dict)
    revealed: bool = False
    students: set[str] = field(default_factory=set)
    ended: bool = False


class MemoryClassStore(ClassStore):
    """One process's classes, in a dict under one lock (every operation is a few dict updates)."""

    def __init__(self, clock=time.monotonic, max_classes: int = MAX_CLASSES, **kw):
        super().__init__(**kw)
        self._clock = clock
        self._max_classes = max_classes
        self._lock = threading.Lock()
        self._classes: dict[str, _Class] = {}
        self._fails: dict[str, deque[float]] = {}
        self._next_sweep = 0.0

    def _sweep(self, now: float) -> None:  # under the lock
        if now < self._next_sweep:
            return
        self._next_sweep = now + min(30.0, self.idle_seconds / 4, self.join_window_seconds / 4)
        for code in [c for c, k in self._classes.items() if k.expires <= now]:
            del self._classes[code]
        for ckey in [c for c, d in self._fails.items() if not d or d[-1] <= now - self.join_window_seconds]:
            del self._fails[ckey]

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

    def _create(self, code, shash, state):
        with self._lock:
            now = self._clock()
            if self._live(code, now) is not None:
                return False
            if len(self._classes) >= self._max_classes:
                self._next_sweep = 0.0
                self._sweep(now)
                if len(self._classes) >= self._max_classes:
                    raise ClassStoreError("Too many classes on this server: try again later.")
            self._classes[code] = _Class(shash, dict(state), now + self.idle_seconds)
            return True

    def _secret_hash(self, code):
        with self._lock:
            return self._get(code).secret_hash

    def _set_state(self, code, shash, state):
        with self._lock:
            c = self._get(code, shash)
            c.state = dict(state)
            c.version += 1
            return c.version

    def _ask(self, code, shash, q):
        with self._lock:
            c = self._get(code, shash)
            c.qid += 1
            c.question, c.answers, c.revealed = q, {}, False
            return c.qid

    def _reveal(self, code, shash):
        with self._lock:
            c = self._get(code, shash)
            if c.question is None:
                raise QuestionClosed("There is no question to reveal.")
            c.revealed = True

    def _end(self, code, shash):
        with self._lock:
            self._get(code, shash)
            self._classes[code] = _Class("", {}, self._clock() + self.tombstone_seconds, version=0, ended=True)

    def _touch(self, code, shash):
        with self._lock:
            self._get(code, shash)

    def _join(self, code, ckey, student_id):
        with self._lock:
            now = self._clock()
            fails = self._fails.setdefault(ckey, deque())
            while fails and fails[0] <= now - self.join_window_seconds:
                fails.popleft()
            if len(fails) >= self.max_failed_joins:
                raise RateLimited(fails[0] + self.join_window_seconds - now)
            c = self._live(code, now) if code else None
            if c is None:
                fails.append(now)
                raise NotFound("No class with this code.")
            if c.ended:
                raise ClassEnded("This class has ended.")
            if student_id not in c.students and len(c.students) >= self.max_students:
                raise ClassFull("This class is full.")
            c.students.add(student_id)

    def _answer(self, code, student_id, question_id, option):
        with self._lock:
            c = self._get(code)
            if student_id not in c.students:
                raise NotFound("Join the class first.")
            if c.question is None or question_id != c.qid or c.revealed:
                raise QuestionClosed("This question is closed.")
            if option >= len(c.question["options"]):
                raise InvalidInput("no such option")
            c.answers[student_id] = option

    def _snapshot(self, code, teacher, student_id):
        with self._lock:
            c = self._live(code, self._clock())
            if c is None:
                return None
            if c.ended:
                return ClassSnapshot(code=code, ended=True)
            counts = [0] * MAX_OPTIONS
            for a in c.answers.values():
                counts[a] += 1
            return _snapshot_of(code, json.loads(json.dumps(c.state)), c.version, c.qid, c.question, counts,
                                c.revealed, len(c.students), teacher,
                                c.answers.get(student_id) if student_id else None)


# -- Redis --------------------------------------------------------------------------------------------
# Keys of class CODE (prefix p): p:CODE (hash: secret, version, state, qid, question, revealed, ended),
# p:CODE:answers (hash student -> option), p:CODE:counts (hash option -> count), p:CODE:students (set);
# p:joinfail:CLIENT (failed-join counter). All expire: a class's keys with the class's idle TTL.
# Every script returns a number >= 0 on success, or one of these:
_ERRORS = {-1: (NotFound, "No class with this code."), -2: (Forbidden, "Only the teacher can do this."),
           -3: (ClassEnded, "This class has ended."), -4: (QuestionClosed, "This question is closed."),
           -5: (InvalidInput, "no such option"), -6: (NotFound, "Join the class first."),
           -8: (ClassFull, "This class is full."), -9: (QuestionClosed, "There is no question to reveal.")}

# KEYS: class, answers, counts, students. ARGV[1] secret hash, ARGV[2] idle TTL in ms.
_TEACHER = """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return -3 end
if not h[1] then return -1 end
if h[1] ~= ARGV[1] then return -2 end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
"""
_LUA = {
    "create": """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'secret', ARGV[1], 'version', 1, 'state', ARGV[3], 'qid', 0, 'revealed', 0, 'ended', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1""",
    "touch": _TEACHER + "return 0",
    "set_state": _TEACHER + """
redis.call('HSET', KEYS[1], 'state', ARGV[3])
return redis.call('HINCRBY', KEYS[1], 'version', 1)""",
    "ask": _TEACHER + """
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'question', ARGV[3], 'revealed', 0)
return redis.call('HINCRBY', KEYS[1], 'qid', 1)""",
    "reveal": _TEACHER + """
if not redis.call('HGET', KEYS[1], 'question') then return -9 end
redis.call('HSET', KEYS[1], 'revealed', 1)
return 0""",
    "end": _TEACHER + """
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
redis.call('HSET', KEYS[1], 'ended', 1, 'version', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 0""",
    # ARGV: student, question id, option
    "answer": """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended', 'qid', 'revealed', 'question')
if h[2] == '1' then return -3 end
if not h[1] then return -1 end
if redis.call('SISMEMBER', KEYS[4], ARGV[1]) == 0 then return -6 end
if not h[5] or h[3] ~= ARGV[2] or h[4] == '1' then return -4 end
local option = tonumber(ARGV[3])
if option >= #cjson.decode(h[5])['options'] then return -5 end
local old = redis.call('HGET', KEYS[2], ARGV[1])
if old == ARGV[3] then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('HINCRBY', KEYS[3], ARGV[3], 1)
if old then redis.call('HINCRBY', KEYS[3], old, -1) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) redis.call('PEXPIRE', KEYS[3], ttl) end
return 1""",
    # KEYS: class, students, failures. ARGV: student, max failures, window ms, max students.
    # Returns -7 with the ms to wait when the client is over its limit.
    "join": """
local fails = tonumber(redis.call('GET', KEYS[3]) or '0')
if fails >= tonumber(ARGV[2]) then return {-7, redis.call('PTTL', KEYS[3])} end
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return {-3, 0} end
if not h[1] then
  if redis.call('INCR', KEYS[3]) == 1 then redis.call('PEXPIRE', KEYS[3], ARGV[3]) end
  return {-1, 0}
end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
  if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[4]) then return {-8, 0} end
  redis.call('SADD', KEYS[2], ARGV[1])
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
end
return {1, 0}""",
}


class RedisClassStore(ClassStore):
    """Classes in Redis: any number of app processes (or machines) share them."""

    def __init__(self, url: str | None = None, prefix: str = "glass:class", client=None, **kw):
        super().__init__(**kw)
        if client is None:
            import redis  # only needed with this back-end

            client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5,
                                          health_check_interval=30)
        self._r = client
        self._p = prefix
        self._scripts = {name: client.register_script(src) for name, src in _LUA.items()}

    def _keys(self, code: str) -> list[str]:
        k = f"{self._p}:{code}"
        return [k, f"{k}:answers", f"{k}:counts", f"{k}:students"]

    @contextlib.contextmanager
    def _errors(self):
        import redis

        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise StoreUnavailable("The class service cannot be reached right now.") from e

    def _run(self, name: str, keys: list[str], *args):
        with self._errors():
            result = self._scripts[name](keys=keys, args=list(args))
        code = result[0] if isinstance(result, list) else result
        if code in _ERRORS:
            kind, message = _ERRORS[code]
            raise kind(message)
        return result

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.idle_seconds * 1000))

    def close(self) -> None:
        self._r.close()

    def _create(self, code, shash, state):
        return self._run("create", self._keys(code)[:1], shash, self._ttl_ms, json.dumps(state)) == 1

    def _secret_hash(self, code):
        with self._errors():
            secret, ended = self._r.hmget(self._keys(code)[0], "secret", "ended")
        if ended == "1":
            raise ClassEnded("This class has ended.")
        if secret is None:
            raise NotFound("No class with this code.")
        return secret

    def _set_state(self, code, shash, state):
        return int(self._run("set_state", self._keys(code), shash, self._ttl_ms, json.dumps(state)))

    def _ask(self, code, shash, q):
        return int(self._run("ask", self._keys(code), shash, self._ttl_ms, json.dumps(q)))

    def _reveal(self, code, shash):
        self._run("reveal", self._keys(code), shash, self._ttl_ms)

    def _end(self, code, shash):
        self._run("end", self._keys(code), shash, self._ttl_ms, max(1, int(self.tombstone_seconds * 1000)))

    def _touch(self, code, shash):
        self._run("touch", self._keys(code), shash, self._ttl_ms)

    def _join(self, code, ckey, student_id):
        keys = self._keys(code or "-")
        status, wait_ms = self._run("join", [keys[0], keys[3], f"{self._p}:joinfail:{ckey}"], student_id,
                                    self.max_failed_joins, max(1, int(self.join_window_seconds * 1000)),
                                    self.max_students)
        if status == -7:
            raise RateLimited(max(wait_ms, 0) / 1000)

    def _answer(self, code, student_id, question_id, option):
        self._run("answer", self._keys(code), student_id, str(question_id), str(option))

    def _snapshot(self, code, teacher, student_id):
        k, answers, counts, students = self._keys(code)
        with self._errors():
            pipe = self._r.pipeline(transaction=True)  # MULTI/EXEC: one consistent read, one round trip
            pipe.hmget(k, "secret", "ended", "version", "state", "qid", "question", "revealed")
            pipe.hgetall(counts)
            pipe.scard(students)
            if student_id:
                pipe.hget(answers, student_id)
            fields, count_map, n_students, *mine = pipe.execute()
        secret, ended, version, state, qid, question, revealed = fields
        if ended == "1":
            return ClassSnapshot(code=code, ended=True)
        if secret is None:
            return None
        per_option = [0] * MAX_OPTIONS
        for option, n in count_map.items():
            per_option[int(option)] = int(n)
        my = mine[0] if mine else None
        return _snapshot_of(code, json.loads(state), int(version), int(qid), json.loads(question) if question else None,
                            per_option, revealed == "1", int(n_students), teacher,
                            int(my) if my is not None else None)


# -- the factory --------------------------------------------------------------------------------------
_stores: dict[str, ClassStore] = {}
_stores_lock = threading.Lock()


def get_store() -> ClassStore:
    """This process's class store: Redis when GLASS_REDIS_URL is set (redis://[:password@]host:port/db),
    else the in-process memory store. One per process (and URL)."""
    url = os.environ.get(REDIS_URL_ENV, "").strip()
    with _stores_lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = RedisClassStore(url) if url else MemoryClassStore()
        return store
