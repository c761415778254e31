"""The Lua scripts of the training queue over Redis (training/redis_queue.py): the fair submission, the fair share
of the slots, the queue workers alive and the ended runs kept, each one atomic step on Redis's clock.

Keys: training/redis_queue.py's docstring. The scripts that only remove or read run when Redis is full too
(``flags=allow-oom``); those that add refuse to start then (a plain ``#!lua``).
"""

# KEYS: owner, client set, client starts, active, rq queue list, clients (hash id -> client). ARGV: id, jobs/client,
# starts/minute, max queue, ttl, client. Returns {"ok", id} | {"existing", id} | {"share", n, limit} |
# {"rate", n, limit, seconds to wait} | {"full", n}.
SUBMIT = """#!lua
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local cur = redis.call('GET', KEYS[1])
if cur and redis.call('ZSCORE', KEYS[4], cur) then return {'existing', cur} end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if not redis.call('ZSCORE', KEYS[4], id) then redis.call('SREM', KEYS[2], id) end
end
local n = redis.call('SCARD', KEYS[2])
if n >= tonumber(ARGV[2]) then return {'share', tostring(n), ARGV[2]} end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', t - 60)
local s = redis.call('ZCARD', KEYS[3])
if s >= tonumber(ARGV[3]) then
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  return {'rate', tostring(s), ARGV[3], tostring(tonumber(first[2]) + 60 - t)}
end
local waiting = redis.call('LLEN', KEYS[5])
if waiting >= tonumber(ARGV[4]) then return {'full', tostring(waiting)} end
redis.call('ZADD', KEYS[4], t, ARGV[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[5])
redis.call('ZADD', KEYS[3], t, ARGV[1])
redis.call('EXPIRE', KEYS[3], 120)
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[5])
redis.call('HSET', KEYS[6], ARGV[1], ARGV[6])
return {'ok', ARGV[1]}
"""

# The fair share of the slots (training.contract: `fair_share`, `fair_next`, `over_share`), on Redis's clock, for
# every worker alike. FAIR_COUNTS: the runs under way per client (`running`: id -> started, kept by the workers; a
# run no longer active is dropped), the clients queued in order (the first 200), and the share. KEYS: running,
# clients, rq queue list, active, workers; ARGV[1]: the workers' ttl.
FAIR_COUNTS = """
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
local running, starts, seen, n = {}, {}, {}, 0
local flat = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #flat, 2 do
  local id = flat[i]
  if redis.call('ZSCORE', KEYS[4], id) then
    local c = redis.call('HGET', KEYS[2], id) or id
    running[c] = (running[c] or 0) + 1
    starts[id] = {c, tonumber(flat[i + 1])}
    if not seen[c] then seen[c] = true; n = n + 1 end
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
local ids = redis.call('LRANGE', KEYS[3], 0, 199)
local queued = {}
for i, id in ipairs(ids) do
  local c = redis.call('HGET', KEYS[2], id) or id
  queued[i] = c
  if not seen[c] then seen[c] = true; n = n + 1 end
end
local slots = redis.call('ZCOUNT', KEYS[5], t - tonumber(ARGV[1]), '+inf')
local share = math.max(1, math.floor(slots / math.max(1, n)))
"""
# A worker's next job (its queue's `lmove`, `FairQueue`): the first queued job of the clients running fewest, moved
# to RQ's intermediate list as BLMOVE does; nil when the queue is empty. KEYS as FAIR_COUNTS, then the intermediate
# list.
PICK = (
    "#!lua\n"
    + FAIR_COUNTS
    + """
if #ids == 0 then return false end
local best, fewest = 1, nil
for i, c in ipairs(queued) do
  local r = running[c] or 0
  if fewest == nil or r < fewest then best, fewest = i, r end
  if r == 0 then break end
end
redis.call('LREM', KEYS[3], 1, ids[best])
redis.call('RPUSH', KEYS[6], ids[best])
return ids[best]
"""
)
# Whether the run ARGV[2] gives its slot back now (`over_share`): a client under its share waits, the run's client is
# over its share, the run is that client's newest and has trained ARGV[3] seconds. It only reads (and drops runs that
# ended), so it runs when Redis is full too.
YIELD = (
    "#!lua flags=allow-oom\n"
    + FAIR_COUNTS
    + """
local waits = false
for _, c in ipairs(queued) do
  if (running[c] or 0) < share then waits = true; break end
end
local mine = starts[ARGV[2]]
if not waits or not mine or running[mine[1]] <= share or t - mine[2] < tonumber(ARGV[3]) then return 0 end
for id, s in pairs(starts) do
  if s[1] == mine[1] and s[2] > mine[2] then return 0 end
end
return 1
"""
)

# KEYS: workers. ARGV: ttl. The queue workers alive now, on Redis's clock (dead ones are dropped). It only removes,
# so it runs when Redis is full too (allow-oom); the scripts that add refuse to start then (a plain "#!lua").
WORKERS = """#!lua flags=allow-oom
local now = redis.call('TIME')
local t = tonumber(now[1]) + tonumber(now[2]) / 1e6
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', t - tonumber(ARGV[1]))
return redis.call('ZCARD', KEYS[1])
"""

# KEYS: ended, ended:bytes. ARGV: id, bytes, budget, key prefix. An ended run joins the kept ones; while
# they hold more than the budget, the oldest ended run's stream and record are deleted (never the newest). It frees
# memory, so it runs when Redis is full too.
KEEP = """#!lua flags=allow-oom
local now = redis.call('TIME')
redis.call('ZADD', KEYS[1], tonumber(now[1]) + tonumber(now[2]) / 1e6, ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
local total = 0
for _, id in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if redis.call('EXISTS', ARGV[4] .. 'job:' .. id .. ':events') == 0 then
    redis.call('ZREM', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
  else
    total = total + tonumber(redis.call('HGET', KEYS[2], id) or '0')
  end
end
while total > tonumber(ARGV[3]) and redis.call('ZCARD', KEYS[1]) > 1 do
  local oldest = redis.call('ZPOPMIN', KEYS[1])[1]
  total = total - tonumber(redis.call('HGET', KEYS[2], oldest) or '0')
  redis.call('HDEL', KEYS[2], oldest)
  redis.call('DEL', ARGV[4] .. 'job:' .. oldest .. ':events', ARGV[4] .. 'job:' .. oldest .. ':meta')
end
return total
"""
