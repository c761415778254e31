"""The Redis back-end of the class store (GLASS_REDIS_URL): several app processes or machines share a class."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from classroom import plans as _plans
from classroom.errors import (
    ClassEnded,
    ClassFull,
    ClassStoreError,
    Forbidden,
    InvalidInput,
    NotFound,
    QuestionClosed,
    RateLimited,
    StoreFull,
    StoreUnavailable,
)
from classroom.reads import ClassReads
from classroom.redis_lua import ANNOUNCE as _ANNOUNCE
from classroom.redis_lua import LUA as _LUA
from classroom.redis_lua import TEACHER as _TEACHER
from classroom.redis_roster import RedisRoster
from classroom.redis_votes import RedisVotes
from classroom.rules import MAX_OPTIONS, check_question, check_state
from classroom.snapshot import ClassSnapshot, Counters, _snapshot_of
from classroom.store import ClassStore, too_many_classes, too_many_students

if TYPE_CHECKING:
    from redis import Redis

_log = logging.getLogger("glass.classroom")
UNREADABLE = "The class's record on the server could not be read (see the server's log)."
FULL = "The class service is full right now; try again in a few minutes."


# -- Redis (its scripts: classroom/redis_lua.py) ---------------------------------------------------------
# Keys of class CODE (prefix p): p:CODE (hash: secret, version, state, qid, question, revealed, ended, client, and
# the counters seq, q, tally: classroom.snapshot.Counters),
# p:CODE:answers (hash student -> option), p:CODE:counts (hash option -> count), p:CODE:students (set),
# p:CODE:joined (hash client -> students it added), p:CODE:here (sorted set: student -> present until),
# p:CODE:pages (sorted set: "process|student" -> until); p:client:CLIENT (set of the classes a client started),
# p:owner:OWNER (the class a teacher's browser runs), p:live (sorted set of the classes not ended); p:rate:NAME:KEY
# (the rate limits, rules.LIMITS: sorted sets, kept for their window; KEY: CLIENT, or CODE:STUDENT, CODE:CLIENT).
# Clients and owners are hashed. All expire: a class's keys with the class's idle TTL.
# Every script returns a number >= 0 on success, or one of these:
_ERRORS = {
    -1: (NotFound, "No class with this code."),
    -2: (Forbidden, "Only the teacher can do this."),
    -3: (ClassEnded, "This class has ended."),
    -4: (QuestionClosed, "This question is closed."),
    -5: (InvalidInput, "no such option"),
    -6: (NotFound, "Join the class first."),
    -8: (ClassFull, "This class is full."),
    -9: (QuestionClosed, "There is no question to reveal."),
}


class RedisClassStore(RedisVotes, RedisRoster, ClassStore):
    """Classes in Redis: any number of app processes (or machines) share them."""

    _LUA_PRELUDES = {"TEACHER": _TEACHER, "ANNOUNCE": _ANNOUNCE}  # for the peer-instruction scripts (redis_votes.py)
    _LUA_ERRORS = _ERRORS

    def __init__(
        self, url: str | None = None, prefix: str = "glass:class", client: Redis | None = None, **kw: Any
    ) -> None:
        super().__init__(**kw)
        if client is None:
            import redis  # only needed with this back-end

            # (url None as well: redis-py's own error, as before)
            client = redis.Redis.from_url(
                cast(str, url),
                decode_responses=True,
                socket_timeout=5,
                socket_connect_timeout=5,
                health_check_interval=30,
            )
        self._r = client
        self._p = prefix
        self.channel = f"{prefix}:events"  # every class's events (`watch`)
        self._listener: threading.Thread | None = None
        self._closed = threading.Event()
        self.reads = ClassReads()  # in use once this process subscribes to the events (`watch`)
        # A script without a shebang is checked against Redis' memory ceiling only until its first write (then
        # it may grow past it, to stay atomic); with one, a script that may write is refused before it starts.
        self._scripts = {
            name: client.register_script(src if src.startswith("#!") else "#!lua\n" + src) for name, src in _LUA.items()
        }

    def _keys(self, code: str) -> list[str]:
        k = f"{self._p}:{code}"
        return [k, f"{k}:answers", f"{k}:counts", f"{k}:students", f"{k}:joined"]

    @contextlib.contextmanager
    def _errors(self) -> Iterator[None]:
        """Redis away, full, or holding a record this code did not write: a message, never a traceback."""
        import redis

        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise StoreUnavailable("The class service cannot be reached right now.") from e
        except redis.exceptions.OutOfMemoryError as e:
            _log.warning("class store: Redis refused a write (its memory is full): %s", e)
            raise StoreFull(FULL) from e
        except (ValueError, TypeError, KeyError, IndexError) as e:  # InvalidInput too: a record that fails our rules
            _log.warning("class store: a record could not be read (%s: %s)", type(e).__name__, e)
            raise StoreUnavailable(UNREADABLE) from e

    def _run(self, name: str, keys: list[str], *args: Any) -> Any:
        return self._script(name, keys, list(args), keys[0][len(self._p) + 1 :])

    def _script(self, name: str, keys: list[str], args: list[Any], code: str) -> Any:
        """Run one of the scripts (the events channel and the class's code go last: `_ANNOUNCE`)."""
        try:
            with self._errors():
                result = self._scripts[name](keys=keys, args=[*args, self.channel, code])
        finally:
            self.reads.changed(code)  # a change made here is read back at once (its event may still be on its way)
        status = result[0] if isinstance(result, list) else result
        if status in _ERRORS:
            kind, message = _ERRORS[status]
            raise kind(message)
        return result

    def _rate(self, name: str, **parts: str) -> list[Any]:
        """The rate limit `name` (`ClassStore.limit`) as the Lua `limit` takes it: its key for `parts`, its seconds
        and its most."""
        limit = self.limit(name)
        return [f"{self._p}:rate:{name}:{limit.key(**parts)}", limit.seconds, limit.most]

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.idle_seconds * 1000))

    def close(self) -> None:
        self.reads.status(False)
        self._closed.set()
        self._r.close()

    # -- events ----------------------------------------------------------------------------------------
    def watch(
        self, on_event: Callable[[str, Counters], None], on_status: Callable[[bool], None] | None = None
    ) -> Callable[[], None]:
        stop = super().watch(on_event, on_status)
        with self._watch_lock:
            if self._listener is None:
                self._listener = threading.Thread(target=self._listen, name="class-events", daemon=True)
                self._listener.start()
        return stop

    def _listen(self) -> None:
        """One subscription of this process to the events channel, kept up: Redis restarted or a connection
        dropped is retried with a growing pause (0.2 s to 5 s); the log says so once per outage, and the
        watchers hear `on_status(False)`, then `on_status(True)` once it is back (and read the counters again:
        pub/sub keeps nothing for a subscriber that was away)."""
        import redis

        up, pause = None, 0.2
        while not self._closed.is_set():
            pubsub = self._r.pubsub()  # type: ignore[no-untyped-call]  # (redis-py leaves pubsub() unannotated)
            try:
                pubsub.subscribe(self.channel)
                confirmed = pubsub.get_message(timeout=5.0)  # Redis confirms: events from here on reach us
                if confirmed is None or confirmed.get("type") != "subscribe":
                    raise redis.ConnectionError("no confirmation of the subscription")
                if up is not True:
                    if up is False:
                        _log.warning("class events: Redis is back; the classes' counters are read again")
                    up, pause = True, 0.2
                    self.reads.status(True)
                    self._announce_status(True)
                while not self._closed.is_set():
                    msg = pubsub.get_message(timeout=1.0)
                    if msg is not None and msg.get("type") == "message":
                        self._event(msg["data"])
            except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
                self.reads.status(False)
                if up is not False:
                    _log.warning("class events: Redis is unreachable (%s); reconnecting", e)
                    up = False
                    self._announce_status(False)
                self._closed.wait(pause)
                pause = min(pause * 2, 5.0)
            except Exception:  # noqa: BLE001 - never let the listener die
                self.reads.status(False)
                up = None  # (subscribed again: the status is told again, and the reads kept again)
                _log.exception("class events: the listener failed; it starts again")
                self._closed.wait(1.0)
            finally:
                with contextlib.suppress(Exception):
                    pubsub.close()

    def _event(self, data: str) -> None:
        try:
            code, seq, q, tally, ended = data.split(" ")
            counters = Counters(int(seq), int(q), int(tally), ended == "1")
        except ValueError:
            _log.warning("class events: an unreadable event was ignored")
            return
        self.reads.changed(code)  # before anyone hears it
        self._announce(code, counters)

    def _mark_connected(self, code: str, where: str, students: list[str], seconds: float) -> None:
        k = self._keys(code)
        self._script(
            "mark_connected",
            [f"{k[0]}:pages", f"{k[0]}:here", k[3], k[0]],
            [where.replace("|", "_"), seconds, self.presence_seconds, *students],
            code,
        )

    def _connected(self, code: str) -> set[str]:
        with self._errors():
            members = self._scripts["connected"](keys=[f"{self._p}:{code}:pages"], args=[])
        return {m.split("|", 1)[1] for m in members if "|" in m}

    def _counters(self, code: str) -> Counters | None:
        with self._errors():
            secret, ended, seq, q, tally = self._r.hmget(self._keys(code)[0], "secret", "ended", "seq", "q", "tally")
        if secret is None and ended != "1":
            return None
        return Counters(int(seq or 0), int(q or 0), int(tally or 0), ended == "1")

    def _create(
        self, code: str, shash: str, state: dict[str, Any], ckey: str, okey: str | None
    ) -> tuple[bool, str | None]:
        starts, seconds, most = self._rate("starts", client=ckey)
        keys = [
            self._keys(code)[0],
            f"{self._p}:client:{ckey}",
            starts,
            f"{self._p}:live",
            f"{self._p}:owner:{okey or '-'}",
        ]
        status, wait_ms, *ended = self._script(
            "create",
            keys,
            [
                shash,
                self._ttl_ms,
                json.dumps(state),
                code,
                self.classes_per_client,
                most,
                self.max_classes,
                self._p,
                max(1, int(self.tombstone_seconds * 1000)),
                ckey,
                int(okey is not None),
                seconds,
            ],
            code,
        )
        if status == -10:
            raise ClassStoreError(too_many_classes(self.classes_per_client))
        if status == -11:
            raise RateLimited(max(int(wait_ms), 0) / 1000)
        if status == -12:
            raise ClassStoreError("Too many classes on this server: try again later.")
        return status == 1, (ended[0] or None) if ended else None

    def _secret_hash(self, code: str) -> str:
        with self._errors():
            secret, ended = cast(list[str | None], self._r.hmget(self._keys(code)[0], "secret", "ended"))  # (decoded)
        if ended == "1":
            raise ClassEnded("This class has ended.")
        if secret is None:
            raise NotFound("No class with this code.")
        return secret

    def _set_state(self, code: str, shash: str, state: dict[str, Any]) -> int:
        return int(self._run("set_state", self._keys(code), shash, self._ttl_ms, json.dumps(state)))

    def _ask(self, code: str, shash: str, q: dict[str, Any]) -> int:
        return int(self._run("ask", self._keys(code), shash, self._ttl_ms, json.dumps(q)))

    def _reveal(self, code: str, shash: str) -> None:
        self._run("reveal", self._keys(code), shash, self._ttl_ms)

    def _end(self, code: str, shash: str) -> None:
        self._run(
            "end", self._keys(code), shash, self._ttl_ms, max(1, int(self.tombstone_seconds * 1000)), self._p, code
        )

    def _touch(self, code: str, shash: str) -> None:
        self._run("touch", self._keys(code), shash, self._ttl_ms)

    def _join(self, code: str | None, ckey: str, student_id: str, trusted: bool) -> None:
        keys = self._keys(code or "-")
        fails, seconds, most = self._rate("joinfail", client=ckey)
        status, wait_ms = self._run(
            "join",
            [keys[0], keys[3], fails, keys[4], f"{keys[0]}:here"],
            student_id,
            most,
            seconds,
            self.max_students,
            int(trusted),
            ckey,
            self.students_per_client,
            self.presence_seconds,
        )
        if status == -7:
            raise RateLimited(max(wait_ms, 0) / 1000)
        if status == -13:
            raise ClassFull(too_many_students(self.students_per_client))

    def _answer(self, code: str, student_id: str, question_id: int, option: int) -> None:
        self._run("answer", self._keys(code), student_id, str(question_id), str(option))

    def _snapshot(self, code: str, teacher: bool, student_id: str | None) -> ClassSnapshot | None:
        def read(student: str) -> tuple[Any, ...]:
            with self._errors():
                reply = self._scripts["snapshot"](keys=[*self._keys(code), f"{self._p}:{code}:here"], args=[student])
            return tuple(tuple(x) if isinstance(x, list) else x for x in reply)

        fields, flat_counts, n_students, my = self.reads.get(code, "snapshot", lambda: read(""))
        if student_id and len(fields) > 5 and fields[5]:  # a question is open: the student's own answer too
            fields, flat_counts, n_students, my = read(student_id)
        fields = [x if x is not False else None for x in (list(fields) + [None] * 10)[:10]]
        secret, ended, version, state, qid, question, revealed, *figures = fields
        counters = Counters(int(figures[0] or 0), int(figures[1] or 0), int(figures[2] or 0), ended == "1")
        count_map = dict(zip(flat_counts[::2], flat_counts[1::2], strict=True))
        if ended == "1":
            return ClassSnapshot(code=code, ended=True, seq=counters.seq, q=counters.q, tally=counters.tally)
        if secret is None:
            return None
        with self._errors():  # what Redis holds is checked again as it is read: only our own records pass
            per_option = [0] * MAX_OPTIONS
            for option, n in count_map.items():
                per_option[int(option)] = max(0, int(n))
            q = json.loads(question) if question else None
            if q is not None:
                q = check_question(q["text"], q["options"], q["answer"])
            return _snapshot_of(
                code,
                check_state(json.loads(state)),
                int(version),
                int(qid),
                q,
                per_option,
                revealed == "1",
                int(n_students),
                teacher,
                int(my) if my is not None else None,
                counters,
            )

    # -- lesson plans, pacing and snapshots ------------------------------------------------------------------
    def _set_plan(self, code: str, shash: str, plan: dict[str, Any]) -> int:
        return int(
            self._run(
                "set_plan", self._keys(code), shash, self._ttl_ms, json.dumps(plan), json.dumps(_plans.DEFAULT_PACE)
            )
        )

    def _extra(self, code: str, name: str) -> Any:
        def read() -> tuple[Any, ...]:
            with self._errors():
                return tuple(self._r.hmget(self._keys(code)[0], "secret", "ended", f"x:{name}"))

        key = f"x:{name}"
        secret, ended, raw = self.reads.get(code, key, read) if key in ClassReads.NAMES else read()
        if ended == "1":
            raise ClassEnded("This class has ended.")
        if secret is None:
            raise NotFound("No class with this code.")
        if raw is None:
            return None
        with self._errors():
            return json.loads(raw)

    def _set_extra(self, code: str, shash: str, name: str, value: dict[str, Any]) -> None:
        self._run("set_extra", self._keys(code), shash, self._ttl_ms, name, json.dumps(value))

    def _set_model(self, code: str, shash: str, weights: str, meta: str, budget: int) -> int:
        version = int(
            self._run(
                "set_model",
                [*self._keys(code), f"{self._p}:models"],
                shash,
                self._ttl_ms,
                weights,
                meta,
                budget,
                self._p,
            )
        )
        if version == -15:
            raise ClassStoreError(_plans.too_many_models(budget // 2**20))
        return version

    def _send_shot(self, code: str, student_id: str, ckey: str, shot: dict[str, Any]) -> int:
        k = self._keys(code)
        mine, *mine_args = self._rate("shots", code=code, student=student_id)
        theirs, *their_args = self._rate("shots_client", code=code, client=ckey)
        n, wait_ms = self._run(
            "send_shot",
            [k[0], k[3], mine, theirs],
            student_id,
            json.dumps(shot),
            _plans.SHOTS_KEPT,
            *mine_args,
            *their_args,
        )
        if n == -14:
            raise RateLimited(max(int(wait_ms), 0) / 1000)
        return int(n)

    def _shots(self, code: str) -> list[dict[str, Any]]:
        with self._errors():
            raw = self._scripts["shots"](keys=[self._keys(code)[0]], args=[_plans.SHOTS_KEPT])
        out = []
        for item in raw:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                d = json.loads(item)
                out.append({"n": d["n"], "student": d["student"], **d["shot"]})
        return out

    def _post_run(self, code: str, student_id: str, run: dict[str, Any]) -> int:
        k = self._keys(code)
        runs, *args = self._rate("runs", code=code, student=student_id)
        n, wait_ms = self._run("post_run", [k[0], k[3], runs], student_id, json.dumps(run), *args)
        if n == -14:
            raise RateLimited(max(int(wait_ms), 0) / 1000)
        return int(n)

    def _board(self, code: str) -> list[dict[str, Any]]:
        with self._errors():
            raw = self._scripts["board"](keys=[self._keys(code)[0]], args=[])
        out = []
        for item in raw:
            with contextlib.suppress(ValueError):
                out.append(json.loads(item))
        return out
