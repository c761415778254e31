"""The roster on the Redis back-end (classroom/roster.py explains the operations).

Keys of class CODE (prefix p), beside the class's own (classroom/redis_store.py): p:CODE:status (hash student ->
their last status as JSON), expiring with the class; a student's number is the class hash's field x:sender:STUDENT
(given when they first join: redis_lua.py's "join"; the gallery and the board use the same numbers). A teacher's
device: p:device:HASH (the class, the role and the wrapped secret as JSON), with its own expiry.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from redis import Redis

_ROSTER_LUA = {
    # KEYS: class, students, status. ARGV: student, status JSON, mode. A change of mode moves the tally.
    "report": "ANNOUNCE"
    + """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return -3 end
if not h[1] then return -1 end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return -6 end
local old = redis.call('HGET', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
if old and cjson.decode(old)['mode'] == ARGV[3] then return 0 end
announce(0, 0, 1)
return 1""",
    # KEYS: class, students, status, present (student -> until), poll, v1, v2. Every student: id, number, status,
    # present, voted in round 1 and 2 (of the class's current question's poll).
    "roster": """#!lua flags=no-writes
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended', 'qid')
if h[2] == '1' then return -3 end
if not h[1] then return -1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1e6
local current = redis.call('HGET', KEYS[5], 'qid') == h[3]
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local until_ = tonumber(redis.call('ZSCORE', KEYS[4], id) or '0')
  local v1, v2 = 0, 0
  if current then v1, v2 = redis.call('HEXISTS', KEYS[6], id), redis.call('HEXISTS', KEYS[7], id) end
  out[#out + 1] = {redis.call('HGET', KEYS[1], 'x:sender:' .. id) or '0', redis.call('HGET', KEYS[3], id) or '',
                   until_ > now and 1 or 0, v1, v2}
end
return out""",
}


class RedisRoster:
    """`RosterOps` on the Redis store (its client, prefix and script runner)."""

    if TYPE_CHECKING:  # what this part uses of the Redis store (classroom/redis_store.py, redis_votes.py's RedisVotes)
        _r: Redis  # (decode_responses: replies are strings)
        _p: str

        def _keys(self, code: str) -> list[str]: ...
        def _errors(self) -> contextlib.AbstractContextManager[None]: ...
        def _poll_keys(self, code: str) -> list[str]: ...
        def _vote_script(
            self, name: str, keys: list[str], args: list[Any], code: str, table: dict[str, str] | None = None
        ) -> Any: ...

    def _report(self, code: str, student_id: str, status: dict[str, Any]) -> None:
        k = self._keys(code)
        self._vote_script(
            "report",
            [k[0], k[3], f"{k[0]}:status"],
            [student_id, json.dumps(status), status["mode"]],
            code,
            _ROSTER_LUA,
        )

    def _number(self, code: str, student_id: str) -> int | None:
        with self._errors():
            n = self._r.hget(self._keys(code)[0], f"x:sender:{student_id}")
        return int(n) if n is not None and str(n).isdigit() else None

    def _roster(self, code: str) -> list[dict[str, Any]]:
        k = self._keys(code)
        poll = self._poll_keys(code)
        rows = self._vote_script(
            "roster", [k[0], k[3], f"{k[0]}:status", f"{k[0]}:here", poll[0], poll[1], poll[2]], [], code, _ROSTER_LUA
        )
        out = []
        for number, status, present, v1, v2 in rows:
            try:
                parsed = json.loads(status) if status else None
            except ValueError:
                parsed = None
            out.append(
                {
                    "number": int(number) if str(number).isdigit() else 0,
                    "status": parsed,
                    "present": present == 1,
                    "voted": (v1 == 1, v2 == 1),
                }
            )
        return out

    def _set_device(self, key: str, record: str | None, seconds: float) -> None:
        with self._errors():
            if record is None:
                self._r.delete(f"{self._p}:device:{key}")
            else:
                self._r.set(f"{self._p}:device:{key}", record, px=max(1, int(seconds * 1000)))

    def _device(self, key: str) -> str | None:
        with self._errors():
            return cast(str | None, self._r.get(f"{self._p}:device:{key}"))  # str: decode_responses
