"""The Redis back-end of the class store (GLASS_REDIS_URL): several app processes or machines share a class."""

from __future__ import annotations

import contextlib
import json
import logging

from classroom.errors import (
    ClassEnded,
    ClassFull,
    Forbidden,
    InvalidInput,
    NotFound,
    QuestionClosed,
    RateLimited,
    StoreUnavailable,
)
from classroom.rules import MAX_OPTIONS, check_question, check_state
from classroom.store import ClassSnapshot, ClassStore, _snapshot_of

_log = logging.getLogger("glass.classroom")
UNREADABLE = "The class's record on the server could not be read (see the server's log)."

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
    # KEYS: class, answers, counts, students. ARGV: student (or ""). One consistent read, one round trip; a
    # read-only script, so it still runs when Redis is full and refuses writes (noeviction).
    "snapshot": """#!lua flags=no-writes
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended', 'version', 'state', 'qid', 'question', 'revealed')
local mine = false
if ARGV[1] ~= '' then mine = redis.call('HGET', KEYS[2], ARGV[1]) end
return {h, redis.call('HGETALL', KEYS[3]), redis.call('SCARD', KEYS[4]), mine}""",
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
        """Redis away, full, or holding a record this code did not write: a message, never a traceback."""
        import redis

        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as e:
            raise StoreUnavailable("The class service cannot be reached right now.") from e
        except redis.exceptions.OutOfMemoryError as e:
            _log.warning("class store: Redis refused a write (its memory is full): %s", e)
            raise StoreUnavailable("The class service is full right now; try again in a few minutes.") from e
        except (ValueError, TypeError, KeyError, IndexError) as e:  # InvalidInput too: a record that fails our rules
            _log.warning("class store: a record could not be read (%s: %s)", type(e).__name__, e)
            raise StoreUnavailable(UNREADABLE) from e

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

    def _stamp(self, code):
        with self._errors():  # one HMGET (qid is 0 until the first question; revealed only with one)
            secret, ended, version, qid, revealed = self._r.hmget(self._keys(code)[0], "secret", "ended", "version",
                                                                  "qid", "revealed")
            if ended == "1":
                return ("ended",)
            if secret is None:
                return None
            return (int(version), int(qid), revealed == "1")

    def _snapshot(self, code, teacher, student_id):
        with self._errors():
            fields, flat_counts, n_students, my = self._scripts["snapshot"](keys=self._keys(code),
                                                                           args=[student_id or ""])
        fields = (list(fields) + [None] * 7)[:7]
        secret, ended, version, state, qid, question, revealed = fields
        count_map = dict(zip(flat_counts[::2], flat_counts[1::2], strict=True))
        if ended == "1":
            return ClassSnapshot(code=code, ended=True)
        if secret is None:
            return None
        with self._errors():  # what Redis holds is checked again as it is read: only our own records pass
            per_option = [0] * MAX_OPTIONS
            for option, n in count_map.items():
                per_option[int(option)] = max(0, int(n))
            q = json.loads(question) if question else None
            if q is not None:
                q = check_question(q["text"], q["options"], q["answer"])
            return _snapshot_of(code, check_state(json.loads(state)), int(version), int(qid), q, per_option,
                                revealed == "1", int(n_students), teacher, int(my) if my is not None else None)


