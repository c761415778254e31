"""What a class may store: its limits, the shared state's schema, and the checks every input passes.

Everything a class stores is plain data, validated on the way in: state keys are whitelisted
(`STATE_FIELDS`: the one schema of the state a teacher shares, which shared links are read with too),
strings are bounded and may not contain `<`, `>` or control/format characters, a question has 2 to 6
distinct options. Invalid input raises `InvalidInput`; it is never cut or cleaned silently.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import unicodedata
from dataclasses import dataclass, replace
from typing import Any

from classroom.errors import InvalidInput
from serving.identity import client_key as _client_key


def setting(name: str, default: int) -> int:
    """A limit from the environment ($NAME), else `default`; at least 1."""
    try:
        return max(1, int(os.environ.get(name, "") or default))
    except ValueError:
        return default


CODE_ALPHABET = "23456789ABCDEFGHJKMNPQRSTUVWXYZ"  # no 0/O, 1/I/L
CODE_LENGTH = 6
IDLE_SECONDS = 2 * 3600  # a class without a teacher action for this long ends
TOMBSTONE_SECONDS = 15 * 60  # an ended class answers "ended" for this long, then "no such class"
MAX_STUDENTS = 500
# Limits a school behind one network address (one NAT) may have to raise; each a setting (docs/operators.md).
MAX_CLASSES = 1_000  # live classes on the server (ended ones do not count): $GLASS_MAX_CLASSES
CLASSES_PER_CLIENT = 3  # live classes one client (address) may run at once: $GLASS_CLASSES_PER_CLIENT
STUDENTS_PER_CLIENT = 60  # students one client may add to one class: $GLASS_STUDENTS_PER_ADDRESS
PRESENCE_SECONDS = 45  # a student with no page of the class open this long leaves its count: $GLASS_PRESENCE_SECONDS
MAX_TEXT = 500  # sentence, question text
MAX_OPTION = 80
MAX_OPTIONS = 6
MAX_STATE_BYTES = 8_192  # the state as JSON
_ID = re.compile(r"[A-Za-z0-9_-]{8,64}", re.ASCII)
_SLUG = re.compile(r"[a-z0-9_-]{1,64}", re.ASCII)
_HEAD = re.compile(r"(enc|dec)\.(\d{1,2})\.(self_attn|cross_attn):(\d{1,2})", re.ASCII)
MAX_HEADS = 64
SHAREABLE_MODELS = ("base", "no_mask")  # "mine" lives in one session only: it cannot be shared
RETIRED_FIELDS = frozenset({"lesson_sentence"})  # keys older versions stored: dropped when read, never refused


@dataclass(frozen=True)
class Limit:
    """A rate limit: at most `most` sends in any `seconds`, counted per `per` (the parts of its key).

    Every limit is a sliding window, the same in both back-ends (classroom/memory.py `Windows`, the Lua `limit` of
    classroom/redis_lua.py): a send is allowed while fewer than `most` sends were allowed in the last `seconds`
    (its ends included), a refused one does not count, and the refusal says how long until the oldest allowed send
    leaves the window (`RateLimited`). Sliding rather than fixed windows (a counter per `seconds`-long slot) because
    the limit then means what it says: a fixed window allows `2 * most` across a slot's boundary, and tells a
    refused client to wait for the next slot however few it sent. The cost is one time per allowed send, at most
    `most` per key and gone after `seconds` (1,000 at most: votes per address). Votes had fixed 10 s slots of 20
    (up to 40 in 10 s across a boundary); 20 in any 10 s is never more, and a student who changes their vote a
    few times is far below it."""

    name: str  # the name of its keys in the store
    seconds: float
    most: int
    per: tuple[str, ...]  # what it is counted per: "code" (the class), "student", "client" (the hashed address)
    env: str = ""  # the setting (environment variable) that sets `most`, if any: docs/operators.md

    def current(self, seconds: float | None = None, most: int | None = None) -> Limit:
        """This limit as a store applies it: with the values the store was given (its constructor's), else with
        its setting's value now."""
        return replace(
            self,
            seconds=seconds or self.seconds,
            most=most or (setting(self.env, self.most) if self.env else self.most),
        )

    def key(self, **parts: str) -> str:
        """The key it counts under: `per`'s parts, in order ("ABC234:student-1")."""
        return ":".join(parts[p] for p in self.per)


# Every rate limit of a class store. A school behind one network address (one NAT) may have to raise the ones
# counted per client (docs/operators.md).
# fmt: off
LIMITS = {limit.name: limit for limit in (
    #     name            seconds  most   counted per             setting
    Limit("starts",       60,      6,     ("client",),            "GLASS_CLASS_STARTS_PER_MINUTE"),  # classes started
    Limit("joinfail",     60,      10,    ("client",)),  # joins with a wrong code (the store's constructor sets both)
    Limit("shots",        60,      3,     ("code", "student")),  # snapshots for the teacher's gallery
    Limit("shots_client", 60,      30,    ("code", "client"),     "GLASS_SHOTS_PER_ADDRESS"),
    Limit("runs",         60,      3,     ("code", "student")),  # posts to the class board
    Limit("votes",        10,      20,    ("code", "student"),    "GLASS_VOTES_PER_STUDENT"),  # changes included
    Limit("votes_client", 10,      1_000, ("client",),            "GLASS_VOTES_PER_ADDRESS"),
)}
# fmt: on


def parse_head(text: object) -> tuple[str, int] | None:
    """ "enc.0.self_attn:2" -> ("enc.0.self_attn", 2); anything malformed -> None (ASCII digits only:
    "²" is a digit to str.isdigit but not to int; the encoder has no cross-attention)."""
    m = _HEAD.fullmatch(text) if isinstance(text, str) else None
    if m is None or (m[1] == "enc" and m[3] == "cross_attn"):
        return None
    return f"{m[1]}.{int(m[2])}.{m[3]}", int(m[4])


def check_text(value: object, max_len: int = MAX_TEXT, what: str = "text", allow_empty: bool = False) -> str:
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


def printable(text: str) -> str:
    """`text` as it can be shown: a lone surrogate (valid in JSON, `"\\ud800"`, but not in UTF-8, so no page can send
    it to a browser) written as its escape. Every message that quotes what a user sent goes through this (or
    `repr`)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _slug(value: object, what: str) -> str:
    if not isinstance(value, str) or not _SLUG.fullmatch(value):
        raise InvalidInput(f"{what} must be 1-64 characters of a-z, 0-9, _ and -")
    return value


def _bool(value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{what} must be true or false")
    return value


def _heads(value: object, what: str) -> list[str]:
    if not isinstance(value, list | tuple) or len(value) > MAX_HEADS:
        raise InvalidInput(f"{what} must be a list of at most {MAX_HEADS} heads")
    if not all(parse_head(h) for h in value):
        raise InvalidInput(f"{what}: every head looks like enc.0.self_attn:2")
    return sorted(set(value))


def _model(value: object, what: str) -> str:
    if value not in SHAREABLE_MODELS:
        raise InvalidInput(f"{what} must be one of {', '.join(SHAREABLE_MODELS)}")
    return value


def _step(value: object, what: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 999:
        raise InvalidInput(f"{what} must be a whole number from 0 to 999")
    return value


MAX_VIEW = 8  # pickers of one page a class shares (ui/page_list.py `PageSpec.view`)


def _view(value: object, what: str) -> dict[str, int | str]:
    """The teacher's choices in the page's own pickers (a layer, a head, a word, a kind of attention): widget key ->
    an index (-1 to 999) or a short label. Which keys a student's session takes is the app's list, not this one."""
    if not isinstance(value, dict) or len(value) > MAX_VIEW:
        raise InvalidInput(f"{what} must be a dict of at most {MAX_VIEW} choices")
    clean: dict[str, int | str] = {}
    for key, choice in value.items():
        key = _slug(key, f"a key of {what}")
        if isinstance(choice, int) and not isinstance(choice, bool) and -1 <= choice <= 999:
            clean[key] = choice
        elif isinstance(choice, str):
            clean[key] = check_text(choice, 64, f"{what}: {key}")
        else:
            raise InvalidInput(f"{what}: {key} must be a whole number from -1 to 999 or a label")
    return clean


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
    "own_model": _bool,  # the teacher shows a model of their own (private): the class sees `model` instead
    "view": _view,  # the page's pickers (which layer, head, word): every follower sees the projector's figure
}


def check_state(state: object) -> dict[str, Any]:
    if not isinstance(state, dict):
        raise InvalidInput("the state must be a dict")
    state = {k: v for k, v in state.items() if k not in RETIRED_FIELDS}
    unknown = [k for k in state if k not in STATE_FIELDS]
    if unknown:
        raise InvalidInput(f"unknown state keys: {', '.join(sorted(printable(str(k)) for k in unknown))[:200]}")
    clean = {k: STATE_FIELDS[k](v, k) for k, v in state.items()}
    if len(json.dumps(clean)) > MAX_STATE_BYTES:
        raise InvalidInput("the state is too large")
    return clean


def check_question(text: object, options: object, answer: object) -> dict[str, Any]:
    text = check_text(text, MAX_TEXT, "the question")
    if not isinstance(options, list | tuple) or not 2 <= len(options) <= MAX_OPTIONS:
        raise InvalidInput(f"a question has 2 to {MAX_OPTIONS} options")
    options = [check_text(o, MAX_OPTION, "an option") for o in options]
    if len(set(options)) != len(options):
        raise InvalidInput("the options must differ")
    if not isinstance(answer, int) or isinstance(answer, bool) or not 0 <= answer < len(options):
        raise InvalidInput("the answer must be the index of one of the options")
    return {"text": text, "options": options, "answer": answer}


def normalize_code(code: object) -> str | None:
    """ "abc 2de-f" -> "ABC2DEF"; None when it cannot be a code."""
    if not isinstance(code, str) or len(code) > 32:
        return None
    code = re.sub(r"[\s-]", "", code).upper()
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        return None
    return code


def check_id(value: object, what: str = "the student id") -> str:
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


def link_token(shash: str) -> str:
    """The token of a class's join link, derived from its stored secret hash: a student who opens the link
    (or scans its QR code) joins even when their address is over its limit of failed joins (typos of the
    code by classmates behind the same NAT), while a typed code stays rate-limited, so guessing stays slow.
    Nobody without the teacher's link can compute it."""
    return hashlib.sha256(f"join-link|{shash}".encode()).hexdigest()[:20]


def client_key(client_id: object) -> str:
    """Rate limits are kept per client under a hash (`serving.identity.client_key`): addresses are not
    stored, keys stay bounded."""
    try:
        return _client_key(client_id)
    except ValueError:
        raise InvalidInput("the client id must be a string of 1-256 characters") from None
