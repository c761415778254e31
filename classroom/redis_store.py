"""The Redis back-end of the class store (GLASS_REDIS_URL): several app processes or machines share a class."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time

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
    StoreUnavailable,
)
from classroom.redis_votes import RedisVotes
from classroom.rules import MAX_OPTIONS, check_question, check_state
from classroom.store import ClassSnapshot, ClassStore, Counters, _snapshot_of, too_many_classes, too_many_students

_log = logging.getLogger("glass.classroom")
UNREADABLE = "The class's record on the server could not be read (see the server's log)."
KEEP_SECONDS = 1.0  # a class-wide read is kept at most this long (`ClassReads`)


class ClassReads:
    """What every student of a class reads alike (its record with no question open, its pace, the teacher's
    training run), kept in this process until the class's next event, and at most `KEEP_SECONDS`.

    A teacher's change wakes a hundred followers at once, and each read the same few fields: one read a class
    and process instead. Sound because every change publishes its event in the same atomic step (`_ANNOUNCE`),
    and this process's subscriber drops a class's reads (`changed`) before anyone hears that event: a read kept
    is never older than the last event heard, and a read that an event overtook is not kept. Only while the
    subscription is up (`status`); `KEEP_SECONDS` bounds what moves with no event (a class expiring, the
    students present). A change made through this store drops its class's reads too, as soon as it is made: a
    teacher's run reads back its own change. Raw replies are kept (strings and numbers), so every reader parses
    its own copy."""

    NAMES = ("snapshot", "x:pace", "x:run")

    def __init__(self, clock=time.monotonic):
        self._clock = clock
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str], tuple[float, object]] = {}
        self._moves: dict[str, int] = {}  # class -> events heard (a read overtaken by one is not kept)
        self._epoch = 0  # moves with the subscription's status
        self.up = False

    def get(self, code: str, name: str, read):
        now = self._clock()
        with self._lock:
            if not self.up:
                mark = None
            else:
                hit = self._kept.get((code, name))
                if hit is not None and now - hit[0] < KEEP_SECONDS:
                    return hit[1]
                mark = (self._epoch, self._moves.get(code, 0))
        value = read()
        with self._lock:
            if mark is not None and self.up and mark == (self._epoch, self._moves.get(code, 0)):
                if len(self._kept) >= 3000:  # (a few per class: bounded by the classes of a server)
                    self._kept.clear()
                self._kept[(code, name)] = (now, value)
        return value

    def changed(self, code: str) -> None:
        with self._lock:
            if len(self._moves) >= 10_000:
                self._moves.clear()
                self._epoch += 1
            self._moves[code] = self._moves.get(code, 0) + 1
            for name in self.NAMES:
                self._kept.pop((code, name), None)

    def status(self, up: bool) -> None:
        with self._lock:
            self.up = up
            self._epoch += 1
            self._kept.clear()

# -- Redis --------------------------------------------------------------------------------------------
# Keys of class CODE (prefix p): p:CODE (hash: secret, version, state, qid, question, revealed, ended, client, and
# the counters seq, q, tally: classroom.store.Counters),
# p:CODE:answers (hash student -> option), p:CODE:counts (hash option -> count), p:CODE:students (set),
# p:CODE:joined (hash client -> students it added), p:CODE:here (sorted set: student -> present until),
# p:CODE:pages (sorted set: "process|student" -> until); p:joinfail:CLIENT (failed-join counter), p:client:CLIENT
# (set of the classes a client started), p:starts:CLIENT (sorted set: its recent starts), p:owner:OWNER (the
# class a teacher's browser runs), p:live (sorted set of the classes not ended). Clients and owners are hashed.
# All expire: a class's keys with the class's idle TTL.
# Every script returns a number >= 0 on success, or one of these:
_ERRORS = {-1: (NotFound, "No class with this code."), -2: (Forbidden, "Only the teacher can do this."),
           -3: (ClassEnded, "This class has ended."), -4: (QuestionClosed, "This question is closed."),
           -5: (InvalidInput, "no such option"), -6: (NotFound, "Join the class first."),
           -8: (ClassFull, "This class is full."), -9: (QuestionClosed, "There is no question to reveal.")}

# Every script that changes what a page shows bumps the class's counters and publishes them (`CODE seq q tally
# ended`) on the events channel, in the same atomic step as the change: no subscriber can see the event before
# the change. The channel and the code are the last two ARGV of every script.
_ANNOUNCE = """
local function announce_key(key, code, seq, q, tally)
  local c = {redis.call('HINCRBY', key, 'seq', seq), redis.call('HINCRBY', key, 'q', q),
             redis.call('HINCRBY', key, 'tally', tally), redis.call('HGET', key, 'ended') or '0'}
  redis.call('PUBLISH', ARGV[#ARGV - 1], code .. ' ' .. table.concat(c, ' '))
end
local function announce(seq, q, tally) announce_key(KEYS[1], ARGV[#ARGV], seq, q, tally) end
"""
# KEYS: class, answers, counts, students. ARGV[1] secret hash, ARGV[2] idle TTL in ms.
_TEACHER = _ANNOUNCE + """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return -3 end
if not h[1] then return -1 end
if h[1] ~= ARGV[1] then return -2 end
for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
"""
_LUA = {
    # KEYS: class, client's classes, client's starts, live classes, owner. ARGV: secret hash, idle TTL ms, state,
    # code, classes per client, starts per minute, max classes, prefix, tombstone ms, client, owner given (0/1).
    # Returns {1, 0, the owner's previous class if this ended it, else ''}, {0, 0} (the code is taken), or
    # {-10|-11|-12, ms to wait} (a limit).
    "create": _ANNOUNCE + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local function running(code)
  local h = redis.call('HMGET', ARGV[8] .. ':' .. code, 'secret', 'ended')
  return h[1] and h[2] ~= '1'
end
local ended = ''
if ARGV[11] == '1' then
  local previous = redis.call('GET', KEYS[5])
  if previous and running(previous) then
    ended = previous
    local k = ARGV[8] .. ':' .. previous
    local c = redis.call('HMGET', k, 'seq', 'q', 'tally')
    redis.call('DEL', k, k .. ':answers', k .. ':counts', k .. ':students', k .. ':joined', k .. ':here')
    redis.call('HSET', k, 'ended', 1, 'version', 0, 'seq', tonumber(c[1] or '0'), 'q', tonumber(c[2] or '0'),
               'tally', tonumber(c[3] or '0'))
    redis.call('PEXPIRE', k, ARGV[9])
    announce_key(k, previous, 1, 1, 0)
  end
end
for _, code in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if not running(code) then redis.call('SREM', KEYS[2], code) end
end
if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[5]) then return {-10, 0} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (t - 60))
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[6]) then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  return {-11, math.floor((tonumber(first[2]) + 60 - t) * 1000)}
end
if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[7]) then
  for _, code in ipairs(redis.call('ZRANGE', KEYS[4], 0, -1)) do
    if not running(code) then redis.call('ZREM', KEYS[4], code) end
  end
  if redis.call('ZCARD', KEYS[4]) >= tonumber(ARGV[7]) then return {-12, 0} end
end
redis.call('HSET', KEYS[1], 'secret', ARGV[1], 'version', 1, 'state', ARGV[3], 'qid', 0, 'revealed', 0, 'ended', 0,
           'client', ARGV[10], 'seq', 1, 'q', 0, 'tally', 0)
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('SADD', KEYS[2], ARGV[4])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], t, ARGV[4])
redis.call('EXPIRE', KEYS[3], 120)
redis.call('ZADD', KEYS[4], t, ARGV[4])
if ARGV[11] == '1' then redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[2]) end
return {1, 0, ended}""",
    "touch": _TEACHER + "return 0",
    "set_state": _TEACHER + """
redis.call('HSET', KEYS[1], 'state', ARGV[3])
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
announce(1, 0, 0)
return version""",
    "ask": _TEACHER + """
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'question', ARGV[3], 'revealed', 0)
local qid = redis.call('HINCRBY', KEYS[1], 'qid', 1)
announce(1, 1, 0)
return qid""",
    "reveal": _TEACHER + """
if not redis.call('HGET', KEYS[1], 'question') then return -9 end
redis.call('HSET', KEYS[1], 'revealed', 1)
announce(1, 1, 0)
return 0""",
    # ARGV[4]: the prefix, ARGV[5]: the code (the class leaves its client's classes and the live ones).
    "end": _TEACHER + """
local client = redis.call('HGET', KEYS[1], 'client')
if client then redis.call('SREM', ARGV[4] .. ':client:' .. client, ARGV[5]) end
redis.call('ZREM', ARGV[4] .. ':live', ARGV[5])
local c = redis.call('HMGET', KEYS[1], 'seq', 'q', 'tally')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[1] .. ':here')
redis.call('HSET', KEYS[1], 'ended', 1, 'version', 0, 'seq', tonumber(c[1] or '0'), 'q', tonumber(c[2] or '0'),
           'tally', tonumber(c[3] or '0'))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
announce(1, 1, 0)
return 0""",
    # ARGV: student, question id, option
    "answer": _ANNOUNCE + """
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
announce(0, 0, 1)
return 1""",
    # KEYS: class, answers, counts, students. ARGV: student (or ""). One consistent read, one round trip; a
    # read-only script, so it still runs when Redis is full and refuses writes (noeviction).
    "snapshot": """#!lua flags=no-writes
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended', 'version', 'state', 'qid', 'question', 'revealed', 'seq',
                    'q', 'tally')
local mine = false
if ARGV[1] ~= '' then mine = redis.call('HGET', KEYS[2], ARGV[1]) end
local t = redis.call('TIME')  -- the students present (KEYS[6]: student -> present until)
local present = redis.call('ZCOUNT', KEYS[6], '(' .. (tonumber(t[1]) + tonumber(t[2]) / 1e6), '+inf')
return {h, redis.call('HGETALL', KEYS[3]), present, mine}""",
    # KEYS: class, students, failures, joined, present (student -> until). ARGV: student, max failures, window ms,
    # max students (present), trusted (the join link's token was right: 1), client, students per client, presence
    # seconds. Returns -7 with the ms to wait when the client is over its limit of failures.
    # KEYS: the class's pages (sorted set "where|student" -> until), its students present (student -> until), its
    # students, the class. ARGV: where, seconds, presence seconds, students...
    "mark_connected": _ANNOUNCE + """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local n = #ARGV - 2  -- (the events channel and the code come last)
local h = redis.call('HMGET', KEYS[4], 'secret', 'ended')
if h[1] and h[2] ~= '1' then  -- the students named are present for longer; those whose presence ran out leave
  local gone = redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  for i = 4, n do
    if redis.call('SISMEMBER', KEYS[3], ARGV[i]) == 1 then
      redis.call('ZADD', KEYS[2], 'GT', now + tonumber(ARGV[3]), ARGV[i])
    end
  end
  local keep = math.floor(tonumber(ARGV[3]) * 1000) + 1000
  redis.call('PEXPIRE', KEYS[2], math.max(1, math.min(redis.call('PTTL', KEYS[4]), keep)))
  if gone > 0 then announce_key(KEYS[4], ARGV[#ARGV], 0, 0, 1) end
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local mine = ARGV[1] .. '|'
for _, m in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if string.sub(m, 1, #mine) == mine then redis.call('ZREM', KEYS[1], m) end
end
for i = 4, n do redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), mine .. ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], math.floor(tonumber(ARGV[2]) * 2000) + 1)
return 0""",
    "connected": """#!lua flags=no-writes
local t = redis.call('TIME')
return redis.call('ZRANGEBYSCORE', KEYS[1], tonumber(t[1]) + tonumber(t[2]) / 1e6, '+inf')""",
    "join": _ANNOUNCE + """
local fails = tonumber(redis.call('GET', KEYS[3]) or '0')
if ARGV[5] ~= '1' and fails >= tonumber(ARGV[2]) then return {-7, redis.call('PTTL', KEYS[3])} end
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return {-3, 0} end
if not h[1] then
  if redis.call('INCR', KEYS[3]) == 1 then redis.call('PEXPIRE', KEYS[3], ARGV[3]) end
  return {-1, 0}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local gone = redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
local here = redis.call('ZSCORE', KEYS[5], ARGV[1])
if not here then
  if redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[4]) then return {-8, 0} end
  if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
    if tonumber(redis.call('HGET', KEYS[4], ARGV[6]) or '0') >= tonumber(ARGV[7]) then return {-13, 0} end
    redis.call('SADD', KEYS[2], ARGV[1])
    redis.call('HINCRBY', KEYS[4], ARGV[6], 1)
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) redis.call('PEXPIRE', KEYS[4], ttl) end
  end
end
redis.call('ZADD', KEYS[5], now + tonumber(ARGV[8]), ARGV[1])
local keep = math.floor(tonumber(ARGV[8]) * 1000) + 1000
redis.call('PEXPIRE', KEYS[5], math.max(1, math.min(redis.call('PTTL', KEYS[1]), keep)))
if not here or gone > 0 then announce(0, 0, 1) end
return {1, 0}""",
}
# Lesson plans, pacing and snapshots (classroom/plans.py) live in the class's own hash, so they end with it: fields
# x:plan and x:pace (JSON), x:shot:N (a snapshot, JSON), x:shot_n, x:senders and x:sender:STUDENT (the gallery's
# numbering of students). Rate windows: p:CODE:shots:STUDENT and p:CODE:shots:CLIENT (sorted sets, 2 minutes).
_LUA.update({
    # KEYS: the class's five. ARGV: secret hash, idle TTL ms, plan JSON, the default pace JSON.
    "set_plan": _TEACHER + """
local old = redis.call('HGET', KEYS[1], 'x:pace')
local pace = cjson.decode(old or ARGV[4])
pace['plan'] = (tonumber(pace['plan']) or 0) + 1
pace['stop'] = 0
pace['reveal'] = false
redis.call('HSET', KEYS[1], 'x:plan', ARGV[3], 'x:pace', cjson.encode(pace))
announce(1, 1, 0)
return pace['plan']""",
    # ARGV: secret hash, idle TTL ms, field name, JSON.
    "set_extra": _TEACHER + """
redis.call('HSET', KEYS[1], 'x:' .. ARGV[3], ARGV[4])
announce(1, 1, 0)
return 0""",
    # KEYS: class, students, the student's window, the client's window. ARGV: student, shot JSON, per student,
    # per client, shots kept. Returns {n, 0}, or {-14, ms to wait} over a limit.
    "send_shot": _ANNOUNCE + """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return {-3, 0} end
if not h[1] then return {-1, 0} end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return {-6, 0} end
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
for i = 3, 4 do
  redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. (t - 60))
  if redis.call('ZCARD', KEYS[i]) >= tonumber(ARGV[i]) then
    local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    return {-14, math.floor((tonumber(first[2]) + 60 - t) * 1000)}
  end
end
local n = redis.call('HINCRBY', KEYS[1], 'x:shot_n', 1)
for i = 3, 4 do
  redis.call('ZADD', KEYS[i], t, n)
  redis.call('EXPIRE', KEYS[i], 120)
end
local who = redis.call('HGET', KEYS[1], 'x:sender:' .. ARGV[1])
if not who then
  who = redis.call('HINCRBY', KEYS[1], 'x:senders', 1)
  redis.call('HSET', KEYS[1], 'x:sender:' .. ARGV[1], who)
end
redis.call('HSET', KEYS[1], 'x:shot:' .. n, '{"n":' .. n .. ',"student":' .. who .. ',"shot":' .. ARGV[2] .. '}')
if n > tonumber(ARGV[5]) then redis.call('HDEL', KEYS[1], 'x:shot:' .. (n - tonumber(ARGV[5]))) end
announce(0, 0, 1)
return {n, 0}""",
    # KEYS: class, students, the student's window. ARGV: student, run JSON, posts per minute. Returns {number, 0},
    # or {-14, ms to wait}. The board: fields x:run:NUMBER of the class's hash.
    "post_run": _ANNOUNCE + """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return {-3, 0} end
if not h[1] then return {-1, 0} end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return {-6, 0} end
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', '(' .. (t - 60))
if redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  return {-14, math.floor((tonumber(first[2]) + 60 - t) * 1000)}
end
redis.call('ZADD', KEYS[3], t, t)
redis.call('EXPIRE', KEYS[3], 120)
local who = redis.call('HGET', KEYS[1], 'x:sender:' .. ARGV[1])
if not who then
  who = redis.call('HINCRBY', KEYS[1], 'x:senders', 1)
  redis.call('HSET', KEYS[1], 'x:sender:' .. ARGV[1], who)
end
redis.call('HSET', KEYS[1], 'x:run:' .. who, '{"student":' .. who .. ',"run":' .. ARGV[2] .. '}')
announce(0, 0, 1)
return {tonumber(who), 0}""",
    # KEYS: class. The board's runs (students are numbered from 1 without gaps).
    "board": """#!lua flags=no-writes
local n = tonumber(redis.call('HGET', KEYS[1], 'x:senders') or '0')
local out = {}
for i = 1, n do
  local run = redis.call('HGET', KEYS[1], 'x:run:' .. i)
  if run then out[#out + 1] = run end
end
return out""",
    # KEYS: class. ARGV: shots kept. The gallery, oldest first.
    "shots": """#!lua flags=no-writes
local n = tonumber(redis.call('HGET', KEYS[1], 'x:shot_n') or '0')
local out = {}
for i = math.max(1, n - tonumber(ARGV[1]) + 1), n do
  local shot = redis.call('HGET', KEYS[1], 'x:shot:' .. i)
  if shot then out[#out + 1] = shot end
end
return out""",
})


class RedisClassStore(RedisVotes, ClassStore):
    """Classes in Redis: any number of app processes (or machines) share them."""
    _LUA_PRELUDES = {"TEACHER": _TEACHER, "ANNOUNCE": _ANNOUNCE}  # for the peer-instruction scripts (redis_votes.py)
    _LUA_ERRORS = _ERRORS

    def __init__(self, url: str | None = None, prefix: str = "glass:class", client=None, **kw):
        super().__init__(**kw)
        if client is None:
            import redis  # only needed with this back-end

            client = redis.Redis.from_url(url, decode_responses=True, socket_timeout=5, socket_connect_timeout=5,
                                          health_check_interval=30)
        self._r = client
        self._p = prefix
        self.channel = f"{prefix}:events"  # every class's events (`watch`)
        self._listener: threading.Thread | None = None
        self._closed = threading.Event()
        self.reads = ClassReads()  # in use once this process subscribes to the events (`watch`)
        # A script without a shebang is checked against Redis' memory ceiling only until its first write (then
        # it may grow past it, to stay atomic); with one, a script that may write is refused before it starts.
        self._scripts = {name: client.register_script(src if src.startswith("#!") else "#!lua\n" + src)
                         for name, src in _LUA.items()}

    def _keys(self, code: str) -> list[str]:
        k = f"{self._p}:{code}"
        return [k, f"{k}:answers", f"{k}:counts", f"{k}:students", f"{k}:joined"]

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
        return self._script(name, keys, list(args), keys[0][len(self._p) + 1:])

    def _script(self, name: str, keys: list[str], args: list, code: str):
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

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.idle_seconds * 1000))

    def close(self) -> None:
        self.reads.status(False)
        self._closed.set()
        self._r.close()

    # -- events ----------------------------------------------------------------------------------------
    def watch(self, on_event, on_status=None):
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
            pubsub = self._r.pubsub()
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

    def _mark_connected(self, code, where, students, seconds):
        k = self._keys(code)
        self._script("mark_connected", [f"{k[0]}:pages", f"{k[0]}:here", k[3], k[0]],
                     [where.replace("|", "_"), seconds, self.presence_seconds, *students], code)

    def _connected(self, code):
        with self._errors():
            members = self._scripts["connected"](keys=[f"{self._p}:{code}:pages"], args=[])
        return {m.split("|", 1)[1] for m in members if "|" in m}

    def _counters(self, code):
        with self._errors():
            secret, ended, seq, q, tally = self._r.hmget(self._keys(code)[0], "secret", "ended", "seq", "q", "tally")
        if secret is None and ended != "1":
            return None
        return Counters(int(seq or 0), int(q or 0), int(tally or 0), ended == "1")

    def _create(self, code, shash, state, ckey, okey):
        keys = [self._keys(code)[0], f"{self._p}:client:{ckey}", f"{self._p}:starts:{ckey}", f"{self._p}:live",
                f"{self._p}:owner:{okey or '-'}"]
        status, wait_ms, *ended = self._script("create", keys, [
            shash, self._ttl_ms, json.dumps(state), code, self.classes_per_client, self.class_starts_per_minute,
            self.max_classes, self._p, max(1, int(self.tombstone_seconds * 1000)), ckey, int(okey is not None)], code)
        if status == -10:
            raise ClassStoreError(too_many_classes(self.classes_per_client))
        if status == -11:
            raise RateLimited(max(int(wait_ms), 0) / 1000)
        if status == -12:
            raise ClassStoreError("Too many classes on this server: try again later.")
        return status == 1, (ended[0] or None) if ended else None

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
        self._run("end", self._keys(code), shash, self._ttl_ms, max(1, int(self.tombstone_seconds * 1000)), self._p,
                  code)

    def _touch(self, code, shash):
        self._run("touch", self._keys(code), shash, self._ttl_ms)

    def _join(self, code, ckey, student_id, trusted):
        keys = self._keys(code or "-")
        status, wait_ms = self._run("join", [keys[0], keys[3], f"{self._p}:joinfail:{ckey}", keys[4],
                                             f"{keys[0]}:here"], student_id,
                                    self.max_failed_joins, max(1, int(self.join_window_seconds * 1000)),
                                    self.max_students, int(trusted), ckey, self.students_per_client,
                                    self.presence_seconds)
        if status == -7:
            raise RateLimited(max(wait_ms, 0) / 1000)
        if status == -13:
            raise ClassFull(too_many_students(self.students_per_client))

    def _answer(self, code, student_id, question_id, option):
        self._run("answer", self._keys(code), student_id, str(question_id), str(option))

    def _snapshot(self, code, teacher, student_id):
        def read(student):
            with self._errors():
                reply = self._scripts["snapshot"](keys=[*self._keys(code), f"{self._p}:{code}:here"], args=[student])
            return tuple(tuple(x) if isinstance(x, list) else x for x in reply)

        fields, flat_counts, n_students, my = self.reads.get(code, "snapshot", lambda: read(""))
        if student_id and len(fields) > 5 and fields[5]:  # a question is open: the student's own answer too
            fields, flat_counts, n_students, my = read(student_id)
        fields = [x if x is not False else None for x in (list(fields) + [None] * 10)[:10]]
        secret, ended, version, state, qid, question, revealed, *counters = fields
        counters = Counters(*(int(x or 0) for x in counters), ended == "1")
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
            return _snapshot_of(code, check_state(json.loads(state)), int(version), int(qid), q, per_option,
                                revealed == "1", int(n_students), teacher, int(my) if my is not None else None,
                                counters)



    # -- lesson plans, pacing and snapshots ------------------------------------------------------------------
    def _set_plan(self, code, shash, plan):
        return int(self._run("set_plan", self._keys(code), shash, self._ttl_ms, json.dumps(plan),
                             json.dumps(_plans.DEFAULT_PACE)))

    def _extra(self, code, name):
        def read():
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

    def _set_extra(self, code, shash, name, value):
        self._run("set_extra", self._keys(code), shash, self._ttl_ms, name, json.dumps(value))

    def _send_shot(self, code, student_id, ckey, shot, per_client):
        k = self._keys(code)
        n, wait_ms = self._run("send_shot", [k[0], k[3], f"{k[0]}:shots:{student_id}", f"{k[0]}:shots:{ckey}"],
                               student_id, json.dumps(shot), _plans.SHOTS_PER_STUDENT, per_client, _plans.SHOTS_KEPT)
        if n == -14:
            raise RateLimited(max(int(wait_ms), 0) / 1000)
        return int(n)

    def _shots(self, code):
        with self._errors():
            raw = self._scripts["shots"](keys=[self._keys(code)[0]], args=[_plans.SHOTS_KEPT])
        out = []
        for item in raw:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                d = json.loads(item)
                out.append({"n": d["n"], "student": d["student"], **d["shot"]})
        return out

    def _post_run(self, code, student_id, run):
        k = self._keys(code)
        n, wait_ms = self._run("post_run", [k[0], k[3], f"{k[0]}:runs:{student_id}"], student_id, json.dumps(run),
                               _plans.RUNS_PER_STUDENT)
        if n == -14:
            raise RateLimited(max(int(wait_ms), 0) / 1000)
        return int(n)

    def _board(self, code):
        with self._errors():
            raw = self._scripts["board"](keys=[self._keys(code)[0]], args=[])
        out = []
        for item in raw:
            with contextlib.suppress(ValueError):
                out.append(json.loads(item))
        return out
