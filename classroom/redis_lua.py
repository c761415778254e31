"""The Lua scripts of the Redis class store (classroom/redis_store.py): each one change or read of a class, atomic.

Keys and error codes: classroom/redis_store.py. Every script returns a number >= 0 on success, or an error code.
"""

# Every script that changes what a page shows bumps the class's counters and publishes them (`CODE seq q tally
# ended`) on the events channel, in the same atomic step as the change: no subscriber can see the event before
# the change. The channel and the code are the last two ARGV of every script.
ANNOUNCE = """
local function announce_key(key, code, seq, q, tally)
  local c = {redis.call('HINCRBY', key, 'seq', seq), redis.call('HINCRBY', key, 'q', q),
             redis.call('HINCRBY', key, 'tally', tally), redis.call('HGET', key, 'ended') or '0'}
  redis.call('PUBLISH', ARGV[#ARGV - 1], code .. ' ' .. table.concat(c, ' '))
end
local function announce(seq, q, tally) announce_key(KEYS[1], ARGV[#ARGV], seq, q, tally) end
"""
# KEYS: class, answers, counts, students. ARGV[1] secret hash, ARGV[2] idle TTL in ms.
TEACHER = (
    ANNOUNCE
    + """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return -3 end
if not h[1] then return -1 end
if h[1] ~= ARGV[1] then return -2 end
for i = 1, 5 do redis.call('PEXPIRE', KEYS[i], ARGV[2]) end
"""
)
# Rate limits (classroom/rules.py `Limit`: sliding windows, as the memory store's `Windows`): per limit and key a
# sorted set of the times of the sends it allowed, kept for the limit's seconds. `wait_ms(key, seconds, most)`: ms
# until one more send fits (nil: it fits now); `spend(key, seconds)`: one send; `limit({key, seconds, most}, ...)`:
# one send under each, or none and the longest wait (ms).
LIMIT = """
local rate_time = redis.call('TIME')
local rate_t = tonumber(rate_time[1]) + tonumber(rate_time[2]) / 1e6
local function wait_ms(key, seconds, most)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. (rate_t - tonumber(seconds)))
  if redis.call('ZCARD', key) >= tonumber(most) then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return math.max(1, math.ceil((tonumber(first[2]) + tonumber(seconds) - rate_t) * 1000))
  end
end
local function spend(key, seconds)
  redis.call('ZADD', key, rate_t, string.format('%.6f:%d', rate_t, redis.call('ZCARD', key)))
  redis.call('PEXPIRE', key, math.ceil(tonumber(seconds) * 1000) + 1000)
end
local function limit(...)
  local wait = nil
  for _, l in ipairs({...}) do
    local ms = wait_ms(l[1], l[2], l[3])
    if ms and (not wait or ms > wait) then wait = ms end
  end
  if wait then return wait end
  for _, l in ipairs({...}) do spend(l[1], l[2]) end
end
"""
# A student's change of their class. KEYS[1] class, KEYS[2] students; ARGV[1] the student. Refuses an ended (-3),
# missing (-1) class or a non-member (-6) as {code, 0}; then gives `limit` (above) and `sender()` (the student's
# number on the class's board, given at their first send).
MEMBER = (
    ANNOUNCE
    + LIMIT
    + """
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return {-3, 0} end
if not h[1] then return {-1, 0} end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then return {-6, 0} end
local function sender()
  local who = redis.call('HGET', KEYS[1], 'x:sender:' .. ARGV[1])
  if not who then
    who = redis.call('HINCRBY', KEYS[1], 'x:senders', 1)
    redis.call('HSET', KEYS[1], 'x:sender:' .. ARGV[1], who)
  end
  return who
end
"""
)
LUA = {
    # KEYS: class, client's classes, client's starts (the limit "starts"), live classes, owner. ARGV: secret hash,
    # idle TTL ms, state, code, classes per client, starts' most, max classes, prefix, tombstone ms, client, owner
    # given (0/1), starts' seconds. Returns {1, 0, the owner's previous class if this ended it, else ''}, {0, 0} (the
    # code is taken), or {-10|-11|-12, ms to wait} (a limit).
    "create": ANNOUNCE
    + LIMIT
    + """
if redis.call('EXISTS', KEYS[1]) == 1 then return {0, 0} end
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
    redis.call('DEL', k, k .. ':answers', k .. ':counts', k .. ':students', k .. ':joined', k .. ':here',
               k .. ':status')
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
local wait = wait_ms(KEYS[3], ARGV[12], ARGV[6])
if wait then return {-11, wait} end
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
spend(KEYS[3], ARGV[12])
redis.call('ZADD', KEYS[4], rate_t, ARGV[4])
if ARGV[11] == '1' then redis.call('SET', KEYS[5], ARGV[4], 'PX', ARGV[2]) end
return {1, 0, ended}""",
    "touch": TEACHER + "return 0",
    "set_state": TEACHER
    + """
redis.call('HSET', KEYS[1], 'state', ARGV[3])
local version = redis.call('HINCRBY', KEYS[1], 'version', 1)
announce(1, 0, 0)
return version""",
    "ask": TEACHER
    + """
redis.call('DEL', KEYS[2], KEYS[3])
redis.call('HSET', KEYS[1], 'question', ARGV[3], 'revealed', 0)
local qid = redis.call('HINCRBY', KEYS[1], 'qid', 1)
announce(1, 1, 0)
return qid""",
    "reveal": TEACHER
    + """
if not redis.call('HGET', KEYS[1], 'question') then return -9 end
redis.call('HSET', KEYS[1], 'revealed', 1)
announce(1, 1, 0)
return 0""",
    # ARGV[4]: the prefix, ARGV[5]: the code (the class leaves its client's classes and the live ones).
    "end": TEACHER
    + """
local client = redis.call('HGET', KEYS[1], 'client')
if client then redis.call('SREM', ARGV[4] .. ':client:' .. client, ARGV[5]) end
redis.call('ZREM', ARGV[4] .. ':live', ARGV[5])
local c = redis.call('HMGET', KEYS[1], 'seq', 'q', 'tally')
redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[1] .. ':here', KEYS[1] .. ':status')
redis.call('HSET', KEYS[1], 'ended', 1, 'version', 0, 'seq', tonumber(c[1] or '0'), 'q', tonumber(c[2] or '0'),
           'tally', tonumber(c[3] or '0'))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
announce(1, 1, 0)
return 0""",
    # ARGV: student, question id, option
    "answer": ANNOUNCE
    + """
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
    # KEYS: the class's pages (sorted set "where|student" -> until), its students present (student -> until), its
    # students, the class. ARGV: where, seconds, presence seconds, students...
    "mark_connected": ANNOUNCE
    + """
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
    # KEYS: class, students, failures (the limit "joinfail"), joined, present (student -> until). ARGV: student,
    # failures' most, failures' seconds, max students (present), trusted (the join link's token was right: 1),
    # client, students per client, presence seconds. Returns -7 with the ms to wait when the client is over its
    # limit of failures.
    "join": ANNOUNCE
    + LIMIT
    + """
if ARGV[5] ~= '1' then
  local wait = wait_ms(KEYS[3], ARGV[3], ARGV[2])
  if wait then return {-7, wait} end
end
local h = redis.call('HMGET', KEYS[1], 'secret', 'ended')
if h[2] == '1' then return {-3, 0} end
if not h[1] then
  spend(KEYS[3], ARGV[3])
  return {-1, 0}
end
local now = rate_t
local gone = redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
local here = redis.call('ZSCORE', KEYS[5], ARGV[1])
if not here then
  if redis.call('ZCARD', KEYS[5]) >= tonumber(ARGV[4]) then return {-8, 0} end
  if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 0 then
    if tonumber(redis.call('HGET', KEYS[4], ARGV[6]) or '0') >= tonumber(ARGV[7]) then return {-13, 0} end
    redis.call('SADD', KEYS[2], ARGV[1])
    redis.call('HINCRBY', KEYS[4], ARGV[6], 1)
    if not redis.call('HGET', KEYS[1], 'x:sender:' .. ARGV[1]) then  -- the student's number: in the order they came
      redis.call('HSET', KEYS[1], 'x:sender:' .. ARGV[1], redis.call('HINCRBY', KEYS[1], 'x:senders', 1))
    end
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
# x:plan and x:pace (JSON), x:shot:N (a snapshot, JSON), x:shot_n, x:senders and x:sender:STUDENT (the students'
# numbers, given when a student first joins: "join" above).
LUA.update(
    {
        # KEYS: the class's five. ARGV: secret hash, idle TTL ms, plan JSON, the default pace JSON.
        "set_plan": TEACHER
        + """
local old = redis.call('HGET', KEYS[1], 'x:pace')
local pace = cjson.decode(old or ARGV[4])
pace['plan'] = (tonumber(pace['plan']) or 0) + 1
pace['stop'] = 0
pace['reveal'] = false
redis.call('HSET', KEYS[1], 'x:plan', ARGV[3], 'x:pace', cjson.encode(pace))
announce(1, 1, 0)
return pace['plan']""",
        # ARGV: secret hash, idle TTL ms, field name, JSON.
        # KEYS: class, answers, counts, students, joined, the classes with a model (set). ARGV: secret hash, idle TTL
        # ms, weights and meta (base64: no quote, no backslash), budget in bytes, key prefix. Every class's model
        # together (their stored length, HSTRLEN: an ended or expired class has none, and leaves the set) within the
        # budget, or -15.
        "set_model": TEACHER
        + """
local held = 0
for _, other in ipairs(redis.call('SMEMBERS', KEYS[6])) do
  if other ~= ARGV[#ARGV] then
    local n = redis.call('HSTRLEN', ARGV[6] .. ':' .. other, 'x:model')
    if n == 0 then redis.call('SREM', KEYS[6], other) else held = held + n end
  end
end
local size = #ARGV[3] + #ARGV[4] + 64
if held + size > tonumber(ARGV[5]) then return -15 end
local old = redis.call('HGET', KEYS[1], 'x:model_v')
local v = 1
if old then v = tonumber(cjson.decode(old)['v']) + 1 end
local record = '{"v": ' .. v .. ', "weights": "' .. ARGV[3] .. '", "meta": "' .. ARGV[4] .. '"}'
redis.call('HSET', KEYS[1], 'x:model', record, 'x:model_v', '{"v": ' .. v .. '}')
redis.call('SADD', KEYS[6], ARGV[#ARGV])
announce(1, 1, 0)
return v""",
        "set_extra": TEACHER
        + """
redis.call('HSET', KEYS[1], 'x:' .. ARGV[3], ARGV[4])
announce(1, 1, 0)
return 0""",
        # KEYS: class, students, the limits "shots" and "shots_client". ARGV: student, shot JSON, shots kept, then
        # seconds and most of each limit. Returns {n, 0}, or {-14, ms to wait} over a limit.
        "send_shot": MEMBER
        + """
local wait = limit({KEYS[3], ARGV[4], ARGV[5]}, {KEYS[4], ARGV[6], ARGV[7]})
if wait then return {-14, wait} end
local n = redis.call('HINCRBY', KEYS[1], 'x:shot_n', 1)
local who = sender()
redis.call('HSET', KEYS[1], 'x:shot:' .. n, '{"n":' .. n .. ',"student":' .. who .. ',"shot":' .. ARGV[2] .. '}')
if n > tonumber(ARGV[3]) then redis.call('HDEL', KEYS[1], 'x:shot:' .. (n - tonumber(ARGV[3]))) end
announce(0, 0, 1)
return {n, 0}""",
        # KEYS: class, students, the limit "runs". ARGV: student, run JSON, its seconds and most. Returns {number, 0},
        # or {-14, ms to wait}. The board: fields x:run:NUMBER of the class's hash.
        "post_run": MEMBER
        + """
local wait = limit({KEYS[3], ARGV[3], ARGV[4]})
if wait then return {-14, wait} end
local who = sender()
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
    }
)
