"""Who is in a class and where: each student's status (following, exploring, where), their number, the teacher's
devices. Mixed into `ClassStore` (classroom/store.py); classroom/redis_roster.py holds the Redis back-end's part.

- **Numbers.** A student gets a number when they first join (1, 2, 3, ... in the order they came), the same in the
  teacher's roster, the gallery of snapshots and the class board, and shown to the student ("you are student 7"),
  so a teacher can say "student 7, follow again" without anybody's name existing anywhere.
- **Status** (`report`): a student's session tells the store how it stands after each of its runs, when that
  changed: its mode (`MODES`), its page and lesson step, the plan stop its view is on, and, when it left follow
  mode by changing something rather than with its button, what it changed. A change of mode moves the class's
  `tally`, so the teacher's counts redraw at once: a student who stops following without having chosen to is
  visible at once. A change of page or stop alone moves nothing (a hundred followers report after each of the
  teacher's moves; the roster reads them when it is drawn).
- **The roster** (`roster`, the teacher's only): every student who joined, by number, with their status, whether
  they are present (a page of the class open lately) and whether they voted in each round of the open question.
- **Teacher devices** (`remember_device`, `device`): a teacher's browser (the projector, or a second device for
  the console) is remembered for the class, with the class's secret wrapped by a key only that browser's own id
  gives (`wrap`): a reload, a lost connection or a new tab of that browser is the teacher again, without the key.
  The store never sees the browser's id, only a hash of it, so nobody reading the store can unwrap the secret.

Nothing here imports Streamlit.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from classroom.errors import InvalidInput, NotFound
from classroom.parts import StoreParts
from classroom.rules import check_id, check_text, normalize_code

if TYPE_CHECKING:
    from classroom.memory import _Class
    from classroom.snapshot import Counters

MODES = ("following", "free", "chose", "left")  # follows; explores as the teacher lets everyone; explores by its own
# button; left follow mode by changing something (a sentence, a step, a page) without the button
MODE_LABELS = {
    "following": "following",
    "free": "exploring (your choice)",
    "chose": "exploring (their choice)",
    "left": "left without the button",
}
DEVICE_ROLES = ("lead", "console")  # the screen that leads the class (the projector), or the console beside it
DEVICE_SECONDS = 12 * 3600  # how long a teacher's browser is remembered (a class ends after 2 idle hours anyway)
_PAGE = re.compile(r"[a-z0-9_]{1,40}", re.ASCII)


def check_status(status: object) -> dict[str, Any]:
    """What a student's session may report: {"mode", "page", "step", "stop", "changed"} (every key optional but
    the mode); anything else, or any value out of shape, is refused."""
    if (
        not isinstance(status, dict)
        or "mode" not in status
        or set(status) - {"mode", "page", "step", "stop", "changed"}
    ):
        raise InvalidInput("a status has a mode, and perhaps a page, a step, a stop and what changed")
    if status["mode"] not in MODES:
        raise InvalidInput(f"the mode is one of {', '.join(MODES)}")
    out = {"mode": status["mode"]}
    page = status.get("page")
    if page is not None:
        if not isinstance(page, str) or not _PAGE.fullmatch(page):
            raise InvalidInput("the page is a page's name")
        out["page"] = page
    for key, high in (("step", 999), ("stop", 99)):
        value = status.get(key)
        if value is not None:
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= high:
                raise InvalidInput(f"the {key} is a whole number from 0 to {high}")
            out[key] = value
    changed = status.get("changed")
    if changed is not None:
        if not isinstance(changed, list | tuple) or len(changed) > 8:
            raise InvalidInput("what changed is a short list")
        out["changed"] = [check_text(str(k), 32, "what changed") for k in changed if isinstance(k, str)]
    return out


def device_key(browser: str) -> str:
    """What the store knows of a browser: a hash of its id (the id itself never leaves the app process)."""
    return hashlib.sha256(f"glass-teacher-device|{browser}".encode()).hexdigest()


def _pad(browser: str, code: str, n: int) -> bytes:
    out, i = b"", 0
    while len(out) < n:
        out += hmac.new(browser.encode(), f"glass-teacher-wrap|{code}|{i}".encode(), "sha256").digest()
        i += 1
    return out[:n]


def wrap(secret: str, browser: str, code: str) -> str:
    """The class's secret, unreadable without the browser's id (an HMAC of it is the pad)."""
    raw = secret.encode()
    return base64.urlsafe_b64encode(
        bytes(a ^ b for a, b in zip(raw, _pad(browser, code, len(raw)), strict=True))
    ).decode()


def unwrap(wrapped: str, browser: str, code: str) -> str | None:
    try:
        raw = base64.urlsafe_b64decode(wrapped.encode())
        return bytes(a ^ b for a, b in zip(raw, _pad(browser, code, len(raw)), strict=True)).decode()
    except (ValueError, UnicodeDecodeError):
        return None


def check_device(record: object) -> dict[str, Any] | None:
    """A device record as read back from the store (None: not one of ours)."""
    if not isinstance(record, dict) or normalize_code(record.get("code")) is None:
        return None
    if record.get("role") not in DEVICE_ROLES or not isinstance(record.get("wrapped"), str):
        return None
    if len(record["wrapped"]) > 200:
        return None
    return {"code": normalize_code(record["code"]), "role": record["role"], "wrapped": record["wrapped"]}


class RosterOps(StoreParts):
    """The public operations (mixed into `ClassStore`; a back-end implements the underscored ones)."""

    def report(self, code: str, student_id: str, status: dict[str, Any]) -> None:
        """A student's status (`check_status`), kept until the next; a change of its mode moves the class's tally."""
        code = self._code(code)
        self._report(code, check_id(student_id), check_status(status))

    def number(self, code: str, student_id: str) -> int | None:
        """The student's number in the class (None: not a member)."""
        return self._number(self._code(code), check_id(student_id))

    def roster(self, code: str, secret: str) -> list[dict[str, Any]]:
        """For the teacher: [{"number", "present", "status" (or None), "voted": (round 1, round 2)}] by number."""
        code = self._code(code)
        self._teacher(code, secret)
        out = []
        for row in self._roster(code):
            try:
                status = check_status(row["status"]) if row.get("status") is not None else None
            except InvalidInput:
                status = None
            out.append(
                {
                    "number": int(row["number"]),
                    "present": bool(row["present"]),
                    "status": status,
                    "voted": (bool(row["voted"][0]), bool(row["voted"][1])),
                }
            )
        return sorted(out, key=lambda r: r["number"])

    def remember_device(self, code: str, secret: str, browser: str, role: str) -> None:
        """This browser is a teacher's device of the class (`role`: "lead" or "console")."""
        if role not in DEVICE_ROLES:
            raise InvalidInput(f"the role is one of {', '.join(DEVICE_ROLES)}")
        code = self._code(code)
        self._teacher(code, secret)
        record = {"code": code, "role": role, "wrapped": wrap(secret, browser, code)}
        self._set_device(device_key(browser), json.dumps(record), DEVICE_SECONDS)

    def device(self, browser: str) -> tuple[str, str, str] | None:
        """(code, role, secret) of the class this browser was a teacher's device of, or None. The caller still
        checks the secret (`is_teacher`): the class may have ended."""
        raw = self._device(device_key(browser))
        try:
            record = check_device(json.loads(raw)) if raw else None
        except ValueError:
            record = None
        if record is None:
            return None
        secret = unwrap(record["wrapped"], browser, record["code"])
        return (record["code"], record["role"], secret) if secret else None

    def forget_device(self, browser: str) -> None:
        self._set_device(device_key(browser), None, 0)

    # the back-end's part
    @abstractmethod
    def _report(self, code: str, student_id: str, status: dict[str, Any]) -> None:
        raise NotImplementedError

    @abstractmethod
    def _number(self, code: str, student_id: str) -> int | None:
        raise NotImplementedError

    @abstractmethod
    def _roster(self, code: str) -> list[dict[str, Any]]:
        raise NotImplementedError

    @abstractmethod
    def _set_device(self, key: str, record: str | None, seconds: float) -> None:
        raise NotImplementedError

    @abstractmethod
    def _device(self, key: str) -> str | None:
        raise NotImplementedError


class MemoryRoster:
    """`RosterOps` on the memory store (its lock, classes, polls and clock)."""

    if TYPE_CHECKING:  # what this part uses of the memory store (classroom/memory.py, classroom/votes.py's MemoryVotes)
        _lock: threading.Lock
        _clock: Callable[[], float]

        def _get(self, code: str, shash: str | None = None) -> _Class: ...
        def _announce(self, code: str, counters: Counters) -> None: ...
        def _polls(self) -> dict[str, dict[Any, Any]]: ...

    def _report(self, code: str, student_id: str, status: dict[str, Any]) -> None:
        with self._lock:
            c = self._get(code)
            if student_id not in c.students:
                raise NotFound("Join the class first.")
            old = c.status.get(student_id)
            c.status[student_id] = dict(status)
            if old is not None and old["mode"] == status["mode"]:
                return
            event = c.bump(seq=False, tally=True)
        self._announce(code, event)

    def _number(self, code: str, student_id: str) -> int | None:
        with self._lock:
            return self._get(code).numbers.get(student_id)

    def _roster(self, code: str) -> list[dict[str, Any]]:
        with self._lock:
            now = self._clock()
            c = self._get(code)
            c.present(now)
            poll = self._polls()["polls"].get(code)
            votes = poll.votes if poll is not None and poll.qid == c.qid and c.question is not None else ({}, {})
            return [
                {
                    "number": c.numbers.get(x, 0),
                    "present": x in c.here,
                    "status": c.status.get(x),
                    "voted": (x in votes[0], x in votes[1]),
                }
                for x in c.students
            ]

    def _set_device(self, key: str, record: str | None, seconds: float) -> None:
        with self._lock:
            devices = self.__dict__.setdefault("_devices", {})
            now = self._clock()
            for k in [k for k, (_, until) in devices.items() if until <= now]:
                del devices[k]
            if record is None:
                devices.pop(key, None)
            else:
                devices[key] = (record, now + seconds)

    def _device(self, key: str) -> str | None:
        with self._lock:
            record, until = self.__dict__.get("_devices", {}).get(key, (None, 0.0))
            return record if until > self._clock() else None
