"""Studies, participants and their event log: the operations, their rules, and their SQL (study/database.py runs it).

A teacher or researcher creates a study (`create`: its code, a secret key kept by them, the link's token) with the
instrument the app built for it (explain/instrument.py, frozen in the study's row: its answer key never changes
under a running study). A participant opens the link, reads the consent text and agrees (`consent`): only then does
the store know them, under a pseudonym (`pseudonym`), and assign a condition and the order of the test's forms
(balanced: a new participant goes to a condition, then an order, that has the fewest so far, at random among ties,
inside the transaction that adds them). Every later write names the pseudonym and is refused unless that
participant exists (`NotConsented`): nothing is recorded before consent, and an invented or deleted id records
nothing. Answers are checked against the frozen key by the store itself; each item, questionnaire answer and
phase step is recorded once (a replay is `AlreadyRecorded`); nothing is accepted after the study closed.

Deleting: the owner deletes the whole study (`delete_study`); a participant deletes their own data with their
deletion code (`delete_mine`; the code is derived from the study's key and their pseudonym, never stored, so their
own session can show it again at any time: `deletion_code`) or from their session (`delete_participant`); every
study is deleted, with everything it recorded, when its retention period ends (`purge`, run by every process at
most once a minute).

Guessing: a typed study code that matches nothing, and a wrong deletion code, count as failed attempts of the
client (its hashed address, as the class store counts joins); past `MAX_FAILED` in `WINDOW_SECONDS` the client
is refused before anything is looked up. A study's link carries a token that skips the count.
"""

from __future__ import annotations

import hmac
import json
import random
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from serving.identity import client_key
from study import schema
from study.codes import deletion_code_of, hashed, link_token, new_code, normalize_code, pseudonym_of
from study.database import Database
from study.errors import (
    AlreadyRecorded,
    Forbidden,
    InvalidInput,
    NotConsented,
    NotFound,
    RateLimited,
    StudyClosed,
    WrongPhase,
)

MAX_FAILED, WINDOW_SECONDS = 10, 60  # failed codes per client per window (class joins: the same)
STUDIES_PER_HOUR = 20  # studies one client may create per hour
MAX_PARTICIPANTS = 5_000
EVENTS_PER_MINUTE = 240  # per participant
DAY_MS = 86_400_000
PURGE_EVERY = 60.0


@dataclass(frozen=True)
class Study:
    code: str
    settings: dict
    instrument: dict
    created: int  # ms
    expires: int  # ms: everything is deleted then
    closed: bool

    @property
    def conditions(self) -> tuple[str, ...]:
        return schema.conditions(self.settings)


@dataclass(frozen=True)
class Participant:
    actor: str
    condition: str
    first_form: str  # "A" or "B": the pre-test's form; the post-test takes the other
    phase: str
    joined: int
    phase_at: int  # when the current phase began (ms)

    def form(self, phase: str) -> str:
        return self.first_form if phase in ("pre", "delayed") else "B" if self.first_form == "A" else "A"


class StudyStore:
    """Every operation of a study, over a `Database` (SQLite or PostgreSQL)."""

    def __init__(self, db: Database, clock: Callable[[], float] = time.time):
        self.db, self.clock = db, clock
        self._instruments: dict[str, dict] = {}
        self._purged = 0.0
        self._purge_lock = threading.Lock()

    def now(self) -> int:
        return int(self.clock() * 1000)

    # -- owner ----------------------------------------------------------------------------------------------
    def create(self, settings: dict, instrument: dict, client_id: str = "local") -> tuple[str, str]:
        """A new study: (code, secret). Keep the secret: every owner operation needs it."""
        settings = schema.check_settings(settings)
        body = json.dumps(instrument, ensure_ascii=False)
        if len(body) > schema.MAX_INSTRUMENT_BYTES or not isinstance(instrument, dict) or "forms" not in instrument:
            raise InvalidInput("the instrument is not one the app built")
        ckey, now = client_key(client_id), self.now()
        self.purge()
        with self.db.transaction() as tx:
            self._limit(tx, "create", ckey, now, STUDIES_PER_HOUR, 3600)
            tx.execute("INSERT INTO attempts (kind, client, ts) VALUES (?, ?, ?)", ("create", ckey, now))
            for _ in range(20):
                code, secret = (
                    new_code(),
                    secrets.token_urlsafe(24),
                )
                if not tx.execute("SELECT 1 FROM studies WHERE code = ?", (code,)):
                    break
            tx.execute(
                "INSERT INTO studies (code, secret_hash, actor_key, settings, instrument, created, expires, "
                "closed, owner) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?)",
                (
                    code,
                    hashed(code, secret),
                    secrets.token_hex(32),
                    json.dumps(settings),
                    body,
                    now,
                    now + settings["retention_days"] * DAY_MS,
                    ckey,
                ),
            )
        return code, secret

    def _owner(self, tx, code, secret) -> str:
        code = normalize_code(code)
        rows = tx.execute("SELECT secret_hash FROM studies WHERE code = ?", (code,)) if code else []
        if not rows:
            raise NotFound("No study with this code.")
        if (
            not isinstance(secret, str)
            or not 0 < len(secret) <= 256
            or not hmac.compare_digest(rows[0][0], hashed(code, secret))
        ):
            raise Forbidden("Only the study's owner can do this (with the study's key).")
        return code

    def is_owner(self, code, secret) -> bool:
        try:
            with self.db.transaction(write=False) as tx:
                self._owner(tx, code, secret)
            return True
        except (NotFound, Forbidden):
            return False

    def link(self, code, secret) -> str:
        """The token of the study's link (for the owner)."""
        with self.db.transaction(write=False) as tx:
            code = self._owner(tx, code, secret)
            return link_token(tx.execute("SELECT secret_hash FROM studies WHERE code = ?", (code,))[0][0])

    def close(self, code, secret, closed: bool = True) -> None:
        with self.db.transaction() as tx:
            code = self._owner(tx, code, secret)
            tx.execute("UPDATE studies SET closed = ? WHERE code = ?", (int(closed), code))

    def delete_study(self, code, secret) -> None:
        """Everything of the study, now."""
        with self.db.transaction() as tx:
            self._delete(tx, self._owner(tx, code, secret))
        self._instruments.pop(code, None)

    @staticmethod
    def _delete(tx, code: str) -> None:
        for table in ("events", "participants"):
            tx.execute(f"DELETE FROM {table} WHERE study = ?", (code,))  # noqa: S608 - fixed names
        tx.execute("DELETE FROM studies WHERE code = ?", (code,))

    def records(self, code, secret) -> tuple[Study, list[dict], list[dict]]:
        """The study, its participants and its event log (oldest first), for the owner's report and export."""
        with self.db.transaction(write=False) as tx:
            code = self._owner(tx, code, secret)
            study = self._study(tx, code)
            people = [
                {"actor": a, "condition": c, "first_form": f, "phase": p, "joined": j, "phase_at": t}
                for a, c, f, p, j, t in tx.execute(
                    "SELECT actor, condition, first_form, phase, joined, phase_at FROM participants "
                    "WHERE study = ? ORDER BY joined, actor",
                    (code,),
                )
            ]
            events = [
                {"actor": a, "verb": v, "object": o, "result": json.loads(r), "context": json.loads(c), "timestamp": t}
                for a, v, o, r, c, t in tx.execute(
                    "SELECT actor, verb, object, result, context, ts FROM events WHERE study = ? ORDER BY id", (code,)
                )
            ]
        return study, people, events

    # -- finding a study ------------------------------------------------------------------------------------
    def find(self, code, client_id: str = "local", token: str | None = None) -> Study:
        """The study a participant asked for. A code that finds nothing counts against the client (a link's
        `token` skips the count); past the limit the client is refused before the code is looked at."""
        ckey, now = client_key(client_id), self.now()
        self.purge()
        norm = normalize_code(code)
        with self.db.transaction() as tx:
            study = self._study(tx, norm) if norm else None
            trusted = (
                study is not None
                and isinstance(token, str)
                and hmac.compare_digest(
                    token.encode(),
                    link_token(tx.execute("SELECT secret_hash FROM studies WHERE code = ?", (norm,))[0][0]).encode(),
                )
            )
            if not trusted:
                self._limit(tx, "code", ckey, now, MAX_FAILED, WINDOW_SECONDS)
            if study is None:
                tx.execute("INSERT INTO attempts (kind, client, ts) VALUES (?, ?, ?)", ("code", ckey, now))
        if study is None:
            raise NotFound("No study with this code.")
        return study

    def study(self, code) -> Study | None:
        norm = normalize_code(code)
        if norm is None:
            return None
        with self.db.transaction(write=False) as tx:
            return self._study(tx, norm)

    def _study(self, tx, code: str, lock: bool = False) -> Study | None:
        rows = tx.execute(
            "SELECT settings, created, expires, closed FROM studies WHERE code = ?" + (self.db.lock if lock else ""),
            (code,),
        )
        if not rows or rows[0][2] <= self.now():
            return None
        settings, created, expires, closed = rows[0]
        return Study(code, json.loads(settings), self._instrument(tx, code), created, expires, bool(closed))

    def _instrument(self, tx, code: str) -> dict:
        if code not in self._instruments:  # frozen at creation: read once per process
            self._instruments[code] = json.loads(
                tx.execute("SELECT instrument FROM studies WHERE code = ?", (code,))[0][0]
            )
        return self._instruments[code]

    @staticmethod
    def _actor_key(tx, code: str) -> bytes:
        return bytes.fromhex(tx.execute("SELECT actor_key FROM studies WHERE code = ?", (code,))[0][0])

    def _limit(self, tx, kind: str, ckey: str, now: int, limit: int, seconds: float) -> None:
        since = now - int(seconds * 1000)
        rows = tx.execute(
            "SELECT COUNT(*), MIN(ts) FROM attempts WHERE kind = ? AND client = ? AND ts > ?", (kind, ckey, since)
        )
        n, first = rows[0]
        if n >= limit:
            raise RateLimited((first + seconds * 1000 - now) / 1000)

    # -- participants ---------------------------------------------------------------------------------------
    def pseudonym(self, code, source: str) -> str:
        """The participant's id in this study: an HMAC of `source` (the browser's id, or "code:" + a participant
        code the researcher issued) with the study's own key. The same browser gets the same id on every app
        process and after a restart; it names nobody, and ids of one browser in two studies are unrelated."""
        if not isinstance(source, str) or not 8 <= len(source) <= 200:
            raise InvalidInput("no browser to name")
        norm = normalize_code(code)
        with self.db.transaction(write=False) as tx:
            rows = tx.execute("SELECT actor_key FROM studies WHERE code = ?", (norm,)) if norm else []
        if not rows:
            raise NotFound("No study with this code.")
        return pseudonym_of(bytes.fromhex(rows[0][0]), source)

    def consent(
        self, code, actor: str, consent_version: str = schema.CONSENT_VERSION
    ) -> tuple[Participant, str | None]:
        """`actor` agreed to the consent text `consent_version`: (the participant, their deletion code; None when
        they had agreed before). Refused when the study is closed or full."""
        if consent_version not in schema.CONSENT:
            raise InvalidInput("no such consent text")
        now = self.now()
        with self.db.transaction() as tx:
            study = self._open(tx, code, lock=True)
            old = self._participant(tx, study.code, actor)
            if old is not None:
                return old, None
            delete_code = deletion_code_of(self._actor_key(tx, study.code), actor)
            rows = tx.execute(
                "SELECT condition, first_form, COUNT(*) FROM participants WHERE study = ? "
                "GROUP BY condition, first_form",
                (study.code,),
            )
            if sum(r[2] for r in rows) >= MAX_PARTICIPANTS:
                raise StudyClosed(f"This study is full ({MAX_PARTICIPANTS} participants).")
            counts = {(c, f): n for c, f, n in rows}
            per = {c: sum(counts.get((c, f), 0) for f in "AB") for c in study.conditions}
            rng = random.SystemRandom()
            condition = rng.choice([c for c in study.conditions if per[c] == min(per.values())])
            order = {f: counts.get((condition, f), 0) for f in "AB"}
            first = rng.choice([f for f in "AB" if order[f] == min(order.values())])
            tx.execute(
                "INSERT INTO participants (study, actor, condition, first_form, phase, delete_hash, consent, "
                "joined, phase_at) VALUES (?, ?, ?, ?, 'pre', ?, ?, ?, ?)",
                (study.code, actor, condition, first, hashed(study.code, delete_code), consent_version, now, now),
            )
            self._event(
                tx,
                study,
                Participant(actor, condition, first, "pre", now, now),
                "consented",
                f"consent/{consent_version}",
                {},
                {},
                now,
                "consented",
            )
            return Participant(actor, condition, first, "pre", now, now), delete_code

    def deletion_code(self, code, actor: str) -> str | None:
        """The deletion code of `actor`, again (the same one `consent` gave): derived from the study's own key and
        the pseudonym, so only a session that is this participant can ask for it. None when there is no such
        participant, or they agreed before codes were derived (their random code was shown once, and not kept)."""
        norm = normalize_code(code)
        if norm is None or not isinstance(actor, str):
            return None
        with self.db.transaction(write=False) as tx:
            rows = tx.execute("SELECT delete_hash FROM participants WHERE study = ? AND actor = ?", (norm, actor))
            if not rows:
                return None
            delete_code = deletion_code_of(self._actor_key(tx, norm), actor)
        return delete_code if hmac.compare_digest(rows[0][0], hashed(norm, delete_code)) else None

    def participant(self, code, actor: str) -> Participant | None:
        norm = normalize_code(code)
        if norm is None or not isinstance(actor, str):
            return None
        with self.db.transaction(write=False) as tx:
            return self._participant(tx, norm, actor)

    @staticmethod
    def _participant(tx, code: str, actor: str) -> Participant | None:
        rows = tx.execute(
            "SELECT condition, first_form, phase, joined, phase_at FROM participants WHERE study = ? AND actor = ?",
            (code, actor),
        )
        return Participant(actor, *rows[0]) if rows else None

    def _open(self, tx, code, lock: bool = False) -> Study:
        norm = normalize_code(code)
        study = self._study(tx, norm, lock) if norm else None
        if study is None:
            raise NotFound("No study with this code.")
        if study.closed:
            raise StudyClosed("This study is closed: nothing more is recorded.")
        return study

    def _member(self, tx, code, actor) -> tuple[Study, Participant]:
        study = self._open(tx, code)
        p = self._participant(tx, study.code, actor) if isinstance(actor, str) else None
        if p is None:
            raise NotConsented("Nothing is recorded before you agree to take part (or after your data were deleted).")
        return study, p

    def answers_of(self, code, actor: str) -> dict[tuple[str, str], int]:
        """This participant's own test answers: (phase, item id) -> the choice, e.g. ("pre", "A03") -> 2."""
        norm = normalize_code(code)
        if norm is None or not isinstance(actor, str):
            return {}
        with self.db.transaction(write=False) as tx:
            rows = tx.execute(
                "SELECT once, result FROM events WHERE study = ? AND actor = ? AND verb = 'answered' "
                "AND once IS NOT NULL",
                (norm, actor),
            )
        out = {}
        for once, result in rows:
            phase, _, item_id = once.partition(":")
            out[(phase, item_id)] = int(json.loads(result)["choice"])
        return out

    def done(self, code, actor: str) -> set[str]:
        """What this participant has recorded once already: "pre:A03" (an answer), "survey:sus2", "completed:pre"."""
        norm = normalize_code(code)
        if norm is None or not isinstance(actor, str):
            return set()
        with self.db.transaction(write=False) as tx:
            return {
                o
                for (o,) in tx.execute(
                    "SELECT once FROM events WHERE study = ? AND actor = ? AND once IS NOT NULL", (norm, actor)
                )
            }

    def advance(self, code, actor: str, to: str) -> Participant:
        """Move a participant to the next phase `to` (only the next one; the delayed test only after its days)."""
        now = self.now()
        with self.db.transaction() as tx:
            study, p = self._member(tx, code, actor)
            if to not in schema.PHASES or schema.PHASES.index(to) != schema.PHASES.index(p.phase) + 1:
                raise WrongPhase(f"You are at “{p.phase}”: “{str(to)[:20]}” is not next.")
            if to == "delayed":
                days = study.settings["delay_days"]
                if not days:
                    raise WrongPhase("This study has no delayed test.")
                if now < p.phase_at + days * DAY_MS:
                    raise WrongPhase(f"The delayed test opens {days} days after you finished.")
            if not tx.execute(
                "UPDATE participants SET phase = ?, phase_at = ? WHERE study = ? AND actor = ? AND phase = ?",
                (to, now, study.code, actor, p.phase),
            ):
                raise AlreadyRecorded("This step was already taken.")
            self._event(tx, study, p, "completed", f"phase/{p.phase}", {}, {}, now, f"completed:{p.phase}")
            p = Participant(actor, p.condition, p.first_form, to, p.joined, now)
            self._event(tx, study, p, "started", f"phase/{to}", {}, {}, now, f"started:{to}")
            return p

    def answer(
        self, code, actor: str, item_id: str, choice: int, confidence: int, reason: str = "", latency_ms: int = 0
    ) -> bool:
        """Record the answer to an item of the participant's current test; returns whether it is right (by the
        study's frozen key)."""
        reason = schema.check_text(reason, schema.MAX_REASON, "Your reason")
        for value, lo, hi, what in (
            (confidence, 1, 4, "The confidence"),
            (latency_ms, 0, DAY_MS, "The time"),
            (choice, 0, 999, "The choice"),
        ):
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
                raise InvalidInput(f"{what} must be a whole number from {lo} to {hi}.")
        now = self.now()
        with self.db.transaction() as tx:
            study, p = self._member(tx, code, actor)
            if p.phase not in schema.TEST_PHASES:
                raise WrongPhase("There is no test to answer now.")
            form = p.form(p.phase)
            item = next((it for it in study.instrument["forms"][form] if it["id"] == item_id), None)
            if item is None:
                raise InvalidInput("This item is not part of your test.")
            n = len(item["grid"]["cols"]) if item.get("grid") else len(item["options"])
            if not 0 <= choice < n:
                raise InvalidInput("No such option.")
            correct = choice == item["answer"]
            result = {
                "choice": choice,
                "correct": correct,
                "confidence": confidence,
                "latency_ms": latency_ms,
                **({"reason": reason} if reason.strip() else {}),
            }
            if not self._event(tx, study, p, "answered", f"item/{item_id}", result, {}, now, f"{p.phase}:{item_id}"):
                raise AlreadyRecorded("This answer was already recorded: the first one counts.")
        return correct

    def rate(self, code, actor: str, key: str, value: int, scale: tuple[int, int, int]) -> None:
        """A questionnaire answer (`scale`: lowest, highest, step), once per key."""
        lo, hi, step = scale
        if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi or (value - lo) % step:
            raise InvalidInput(f"An answer from {lo} to {hi} (steps of {step}).")
        with self.db.transaction() as tx:
            study, p = self._member(tx, code, actor)
            if p.phase != "survey":
                raise WrongPhase("The questionnaires come after the post-test.")
            if not self._event(
                tx,
                study,
                p,
                "rated",
                schema.check_object(f"survey/{key}"),
                {"value": value},
                {},
                self.now(),
                f"survey:{key}",
            ):
                raise AlreadyRecorded("This answer was already recorded.")

    def log(
        self, code, actor: str, verb: str, obj: str, result: dict | None = None, context: dict | None = None
    ) -> None:
        """An event of the path (viewed, changed, voted ...): refused before consent, after close, and past
        EVENTS_PER_MINUTE; a typed sentence is kept as a keyed hash and its length unless the study keeps text."""
        if verb not in schema.PATH_VERBS:
            raise InvalidInput("not an event of the path")
        obj, result = schema.check_object(obj), schema.check_result(verb, result)
        context = schema.check_context(context)
        now = self.now()
        with self.db.transaction() as tx:
            study, p = self._member(tx, code, actor)
            if "text" in result and not study.settings["keep_text"]:
                key = bytes.fromhex(tx.execute("SELECT actor_key FROM studies WHERE code = ?", (study.code,))[0][0])
                text = result.pop("text")
                result.update(text_hash=hmac.new(key, text.encode(), "sha256").hexdigest()[:16], length=len(text))
            n = tx.execute(
                "SELECT COUNT(*) FROM events WHERE study = ? AND actor = ? AND ts > ?",
                (study.code, actor, now - 60_000),
            )[0][0]
            if n >= EVENTS_PER_MINUTE:
                raise RateLimited(60)
            self._event(tx, study, p, verb, obj, result, context, now, None)

    def _event(
        self,
        tx,
        study: Study,
        p: Participant,
        verb: str,
        obj: str,
        result: dict,
        context: dict,
        now: int,
        once: str | None,
    ) -> bool:
        ctx = {
            "phase": p.phase,
            "condition": p.condition,
            "form": p.form(p.phase),
            "instrument": study.instrument.get("version", ""),
            **context,
        }
        return bool(
            tx.execute(
                "INSERT INTO events (study, actor, verb, object, result, context, ts, once) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (study.code, p.actor, verb, obj, json.dumps(result, ensure_ascii=False), json.dumps(ctx), now, once),
            )
        )

    # -- deleting -------------------------------------------------------------------------------------------
    def delete_participant(self, code, actor: str) -> bool:
        """Everything recorded about `actor` (from their own session)."""
        norm = normalize_code(code)
        if norm is None or not isinstance(actor, str):
            return False
        with self.db.transaction() as tx:
            gone = tx.execute("DELETE FROM participants WHERE study = ? AND actor = ?", (norm, actor))
            tx.execute("DELETE FROM events WHERE study = ? AND actor = ?", (norm, actor))
        return bool(gone)

    def delete_mine(self, code, delete_code, client_id: str = "local") -> None:
        """ "Delete my data" with the code shown at consent; a wrong code counts as a failed attempt."""
        ckey, now = client_key(client_id), self.now()
        norm = normalize_code(code)
        with self.db.transaction() as tx:
            self._limit(tx, "code", ckey, now, MAX_FAILED, WINDOW_SECONDS)
            ok = isinstance(delete_code, str) and 0 < len(delete_code) <= 64 and norm is not None
            rows = (
                tx.execute(
                    "SELECT actor FROM participants WHERE study = ? AND delete_hash = ?",
                    (norm, hashed(norm, delete_code.strip().upper())),
                )
                if ok
                else []
            )
            if not rows:
                tx.execute("INSERT INTO attempts (kind, client, ts) VALUES (?, ?, ?)", ("code", ckey, now))
            for (actor,) in rows:
                tx.execute("DELETE FROM participants WHERE study = ? AND actor = ?", (norm, actor))
                tx.execute("DELETE FROM events WHERE study = ? AND actor = ?", (norm, actor))
        if not rows:
            raise NotFound("No data with this study code and deletion code.")

    def purge(self, force: bool = False) -> int:
        """Delete every study past its retention period (and old attempts); at most once a minute per process
        unless `force`. Returns how many studies went."""
        with self._purge_lock:
            if not force and self.clock() - self._purged < PURGE_EVERY:
                return 0
            self._purged = self.clock()
        now = self.now()
        with self.db.transaction() as tx:
            codes = [c for (c,) in tx.execute("SELECT code FROM studies WHERE expires <= ?", (now,))]
            for code in codes:
                self._delete(tx, code)
                self._instruments.pop(code, None)
            tx.execute("DELETE FROM attempts WHERE ts < ?", (now - 2 * 3600 * 1000,))
        return len(codes)

    def close_db(self) -> None:
        self.db.close()
