"""Peer instruction on the Redis back-end (classroom/votes.py explains the operations).

Keys of class CODE (prefix p), beside the class's own (classroom/redis_store.py): p:CODE:poll (hash: qid, record
(the question's JSON: text, options, answer, kind, grid), round, open, discuss), p:CODE:poll:v1 / :v2 (hash
student -> choice, per round), p:CODE:poll:c1 / :c2 (hash choice -> count), p:CODE:results (list of the class's
earlier polls as JSON, no student ids). All expire with the class (its idle TTL). The rate limits of votes are the
rows "votes" and "votes_client" of `rules.LIMITS` (keys p:rate:votes:CODE:STUDENT, p:rate:votes_client:CLIENT).
Every update is one Lua script that checks, changes, bumps the class's counters and publishes them (the push
path), atomically.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from classroom.errors import QuestionClosed, RateLimited
from classroom.redis_lua import LIMIT
from classroom.rules import check_question, check_text
from classroom.votes import MAX_RESULTS, check_extras, check_grid

if TYPE_CHECKING:
    from redis import Redis

_MORE_ERRORS = {
    -20: (QuestionClosed, "The vote is closed."),
    -22: (QuestionClosed, "There is no vote open."),
    -23: (QuestionClosed, "The answer is revealed already."),
    -24: (QuestionClosed, "The vote is locked already."),
    -25: (QuestionClosed, "Lock the first vote first."),
    -26: (QuestionClosed, "The class voted twice."),
    -27: (QuestionClosed, "There is no question open."),
}

# `archive(same, qid, most)`: the poll (KEYS[2], its counts KEYS[5] and KEYS[6]) goes to the class's results (KEYS[7],
# the newest `most` kept) if its question is (same: true) or is not (false) the question `qid`.
_ARCHIVE = """
local function counts(key)
  local flat, out = redis.call('HGETALL', key), {}
  for i = 1, #flat, 2 do out[flat[i]] = tonumber(flat[i + 1]) end
  return out
end
local function archive(same, qid, most)
  local old = redis.call('HMGET', KEYS[2], 'qid', 'record', 'round')
  if not old[1] or (old[1] == qid) ~= same then return end
  local row = cjson.decode(old[2])
  row['qid'] = tonumber(old[1])
  row['first'] = counts(KEYS[5])
  if old[3] == '2' then row['second'] = counts(KEYS[6]) else row['second'] = cjson.null end
  redis.call('RPUSH', KEYS[7], cjson.encode(row))
  redis.call('LTRIM', KEYS[7], -tonumber(most), -1)
end
"""
_VOTES_LUA = {
    # KEYS: class, poll, v1, v2, c1, c2, results. ARGV: secret hash, idle TTL ms, qid, record, max results.
    "poll_open": "TEACHER"
    + _ARCHIVE
    + """
archive(false, ARGV[3], ARGV[5])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6])
redis.call('HSET', KEYS[2], 'qid', ARGV[3], 'record', ARGV[4], 'round', 1, 'open', 1, 'discuss', 0)
for i = 2, 7 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
announce(1, 1, 0)
return 0""",
    # KEYS: class, students, poll, v1, c1, v2, c2, the limits "votes" and "votes_client". ARGV: student, qid,
    # choice, then seconds and most of each limit.
    "vote": "ANNOUNCE"
    + LIMIT
    + """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended', 'qid', 'revealed')
if h[2] == '1' then return -3 end
if not h[1] then return -1 end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return -6 end
local p = redis.call('HMGET', KEYS[3], 'qid', 'record', 'round', 'open')
if not p[1] or p[1] ~= h[3] or p[1] ~= ARGV[2] or p[4] ~= '1' or h[4] == '1' then return -20 end
local rec = cjson.decode(p[2])
local n = #rec['options']
if type(rec['grid']) == 'table' then n = #rec['grid']['rows'] * #rec['grid']['cols'] end
if tonumber(ARGV[3]) >= n then return -5 end
local wait = limit({KEYS[8], ARGV[4], ARGV[5]}, {KEYS[9], ARGV[6], ARGV[7]})
if wait then return {-21, wait} end
local vk, ck = KEYS[4], KEYS[5]
if p[3] == '2' then vk, ck = KEYS[6], KEYS[7] end
local old = redis.call('HGET', vk, ARGV[1])
if old == ARGV[3] then return 0 end
redis.call('HSET', vk, ARGV[1], ARGV[3])
redis.call('HINCRBY', ck, ARGV[3], 1)
if old then redis.call('HINCRBY', ck, old, -1) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', vk, ttl) redis.call('PEXPIRE', ck, ttl) end
announce(0, 0, 1)
return 1""",
    # KEYS: class, poll, v1, v2, c1, c2. ARGV: secret hash, idle TTL ms, move (lock, discuss, revote).
    "poll_move": "TEACHER"
    + """
local p = redis.call('HMGET', KEYS[2], 'qid', 'round', 'open')
local h = redis.call('HMGET', KEYS[1], 'qid', 'revealed')
if not p[1] or p[1] ~= h[1] then return -22 end
if h[2] == '1' then return -23 end
if ARGV[3] == 'show' then redis.call('HSET', KEYS[2], 'shown', 1)
elseif ARGV[3] == 'lock' then
  if p[3] ~= '1' then return -24 end
  redis.call('HSET', KEYS[2], 'open', 0)
elseif p[2] ~= '1' then return -26
elseif p[3] == '1' then return -25
elseif ARGV[3] == 'discuss' then redis.call('HSET', KEYS[2], 'discuss', 1)
else redis.call('HSET', KEYS[2], 'round', 2, 'open', 1, 'discuss', 0) end
redis.call('PEXPIRE', KEYS[6], ARGV[2])
announce(1, 1, 0)
return 0""",
    # KEYS: class, poll, v1, v2, c1, c2. ARGV: student (or "").
    "poll_read": """#!lua flags=no-writes
local mine = {false, false}
if ARGV[1] ~= '' then mine = {redis.call('HGET', KEYS[3], ARGV[1]), redis.call('HGET', KEYS[4], ARGV[1])} end
return {redis.call('HMGET', KEYS[1], 'secret', 'ended', 'qid', 'revealed'),
        redis.call('HMGET', KEYS[2], 'qid', 'record', 'round', 'open', 'discuss', 'shown'),
        redis.call('HGETALL', KEYS[5]), redis.call('HGETALL', KEYS[6]), redis.call('HLEN', KEYS[3]),
        redis.call('HLEN', KEYS[4]), mine[1], mine[2]}""",
    # KEYS: class, poll, v1, v2, c1, c2, results, answers, counts. ARGV: secret hash, idle TTL ms, max results. The
    # question leaves the class; its poll goes to the results.
    "close_question": "TEACHER"
    + _ARCHIVE
    + """
local h = redis.call('HMGET', KEYS[1], 'question', 'qid')
if not h[1] then return -27 end
archive(true, h[2], ARGV[3])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[8], KEYS[9])
redis.call('HDEL', KEYS[1], 'question')
redis.call('HSET', KEYS[1], 'revealed', 0)
announce(1, 1, 0)
return 0""",
}


class RedisVotes:
    """`PeerVotes` on the Redis store (its client, prefix and script runner)."""

    if TYPE_CHECKING:  # what this part (and `RedisRoster`) uses of the Redis store (classroom/redis_store.py)
        _r: Redis  # (decode_responses: replies are strings)
        _p: str
        channel: str
        _LUA_PRELUDES: dict[str, str]
        _LUA_ERRORS: Mapping[int, tuple[type[Exception], str]]

        def _rate(self, name: str, **parts: str) -> list[Any]: ...
        @property
        def _ttl_ms(self) -> int: ...
        def _keys(self, code: str) -> list[str]: ...
        def _errors(self) -> contextlib.AbstractContextManager[None]: ...

    def _vote_script(
        self, name: str, keys: list[str], args: list[Any], code: str, table: dict[str, str] | None = None
    ) -> Any:
        """Run script `name` of `table` (this module's by default; classroom/redis_roster.py passes its own)."""
        scripts: dict[str, Any] = self.__dict__.setdefault("_votes_scripts", {})
        if name not in scripts:  # the class store's own preludes (checks, announce) go first
            src = (table or _VOTES_LUA)[name]
            for prelude, lua in self._LUA_PRELUDES.items():
                src = src.replace(prelude, lua, 1) if src.startswith(prelude) else src
            scripts[name] = self._r.register_script(src if src.startswith("#!") else "#!lua\n" + src)
        with self._errors():
            result = scripts[name](keys=keys, args=[*args, self.channel, code])
        status = (result[0] if result else None) if isinstance(result, list) else result
        if not isinstance(status, int):  # (a read: no status)
            return result
        if status == -21:
            raise RateLimited(max(int(result[1]), 0) / 1000)
        if status in _MORE_ERRORS or status in self._LUA_ERRORS:
            kind, message = _MORE_ERRORS.get(status) or self._LUA_ERRORS[status]
            raise kind(message)
        return result

    def _poll_keys(self, code: str) -> list[str]:
        k = f"{self._p}:{code}:poll"
        return [k, f"{k}:v1", f"{k}:v2", f"{k}:c1", f"{k}:c2"]

    def _poll_open(self, code: str, shash: str, qid: int, record: dict[str, Any]) -> None:
        poll, v1, v2, c1, c2 = self._poll_keys(code)
        self._vote_script(
            "poll_open",
            [self._keys(code)[0], poll, v1, v2, c1, c2, f"{self._p}:{code}:results"],
            [shash, self._ttl_ms, str(qid), json.dumps(record), MAX_RESULTS],
            code,
        )

    def _vote(self, code: str, student_id: str, question_id: int, choice: int, ckey: str) -> None:
        poll, v1, v2, c1, c2 = self._poll_keys(code)
        mine, *mine_args = self._rate("votes", code=code, student=student_id)
        theirs, *their_args = self._rate("votes_client", client=ckey)
        self._vote_script(
            "vote",
            [self._keys(code)[0], self._keys(code)[3], poll, v1, c1, v2, c2, mine, theirs],
            [student_id, str(question_id), str(choice), *mine_args, *their_args],
            code,
        )

    def _poll_move(self, code: str, shash: str, move: str) -> None:
        self._vote_script("poll_move", [self._keys(code)[0], *self._poll_keys(code)], [shash, self._ttl_ms, move], code)

    def _poll_read(self, code: str, student_id: str | None) -> dict[str, Any] | None:
        poll, v1, v2, c1, c2 = self._poll_keys(code)
        h: list[Any]  # the class's fields, then the poll's (strings, or None where missing)
        p: list[Any]
        h, p, flat1, flat2, n1, n2, m1, m2 = self._vote_script(
            "poll_read", [self._keys(code)[0], poll, v1, v2, c1, c2], [student_id or ""], code
        )
        h, p = ([x if x is not False else None for x in (list(v) + [None] * 6)[:6]] for v in (h, p))
        m1, m2 = (None if m is False else m for m in (m1, m2))
        secret, ended, qid, revealed, _, _ = h
        if ended == "1" or secret is None or p[0] is None or p[0] != qid:
            return None
        with self._errors():  # what Redis holds is checked again as it is read: only our own records pass
            record = json.loads(p[1])
            q = check_question(record["text"], record["options"], record["answer"])
            grid = check_grid(record["grid"])
            record = {
                **q,
                "kind": check_text(record["kind"], 32, "the kind"),
                "grid": grid.as_dict() if grid else None,
                **check_extras(record),
            }
            return {
                **record,
                "qid": int(p[0]),
                "round": int(p[2]),
                "open": p[3] == "1",
                "discuss": p[4] == "1",
                "shown": p[5] == "1",
                "revealed": revealed == "1",
                "counts": [dict(zip(f[::2], f[1::2], strict=True)) for f in (flat1, flat2)],
                "voted": [int(n1), int(n2)],
                "mine": [int(m) if m is not None else None for m in (m1, m2)],
            }

    def _poll_results(self, code: str) -> list[dict[str, Any]]:
        with self._errors():
            rows: list[dict[str, Any]] = [json.loads(x) for x in self._r.lrange(f"{self._p}:{code}:results", 0, -1)]
            for r in rows:  # checked as they are read, like every record
                check_question(r["text"], r["options"], r["answer"])
                check_grid(r["grid"])
                r["first"] = {int(k): int(v) for k, v in (r.get("first") or {}).items()}
                if r.get("second") is not None:
                    r["second"] = {int(k): int(v) for k, v in r["second"].items()}
        return rows

    def _close_question(self, code: str, shash: str) -> None:
        k = self._keys(code)
        self._vote_script(
            "close_question",
            [k[0], *self._poll_keys(code), f"{self._p}:{code}:results", k[1], k[2]],
            [shash, self._ttl_ms, MAX_RESULTS],
            code,
        )

    def _end_votes(self, code: str) -> None:
        with self._errors():
            self._r.delete(*self._poll_keys(code), f"{self._p}:{code}:results")
