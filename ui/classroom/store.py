"""Class state shared between people (classroom mode, issue 14): the interface, its data and its validation.

A teacher creates a class and gets a short code (shown to the class) and a secret (kept in the
teacher's session only). Students join with the code and follow the teacher's state (page, sentence,
model, interventions, lesson step) by polling `snapshot` about once a second; the teacher asks a
question with options and the model's own answer, which stays hidden until `reveal`; students answer
(one answer per student per question, changeable until the reveal) and the teacher sees the counts.
A class ends when the teacher ends it, or after `idle_seconds` without a teacher action; then all its
data is deleted and only a small "ended" marker stays for `tombstone_seconds`, so that students
polling it learn that it ended.

Back-ends (ui/classroom/memory.py, ui/classroom/redis_store.py), chosen by one setting (`ui.classroom.get_store()`):

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

import hashlib
import hmac
import json
import re
import secrets
import unicodedata
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from ui.shared_redis import REDIS_URL_ENV  # noqa: F401 - one name for the setting

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

    @property
    def stamp(self) -> tuple:
        """What moves when a student's view of the class changes (`ClassStore.stamp`)."""
        return ("ended",) if self.ended else (self.version, self.question.id if self.question else 0, self.revealed)


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
    "lesson_sentence": lambda v, w: check_text(v, MAX_TEXT, w, allow_empty=True),  # the guided lesson's own
    "own_model": _bool,  # the teacher shows a model of their own (private): the class sees `model` instead
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

    def stamp(self, code: str) -> tuple | None:
        """(version, question id, revealed), ("ended",), or None when there is no such class: what moves when
        anything a student sees changes (not the counts, which only the teacher sees). One small read: a
        student's poll compares it with its last snapshot's (`ClassSnapshot.stamp`) and asks for a whole
        snapshot only when it moved."""
        code = normalize_code(code)
        return None if code is None else self._stamp(code)

    def _stamp(self, code: str) -> tuple | None:  # a back-end may do it cheaper
        snap = self._snapshot(code, False, None)
        return None if snap is None else snap.stamp

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


