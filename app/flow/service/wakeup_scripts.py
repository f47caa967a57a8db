"""The wake-ups' Lua scripts (wakeups.py says what the keys hold and why a take holds rather
than removes). Each runs atomically on one Redis node."""

# Every script reads Redis's clock itself: takers, relays and reconcile on different machines
# then agree on "now". Milliseconds: a Lua number (a double) holds them exactly.

# KEYS: 1 tenants, 2 hold, 3 bell. ARGV: 1 tenant-key prefix, 2 slack ms, then (tenant,
# endpoint, in ms)... Returns how many entries were created or moved earlier by more than the
# slack (any earlier is moved; the slack only says which moves are news).
ARM = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local head_at = head[2] and tonumber(head[2]) or math.huge
local slack = tonumber(ARGV[2])
local moved, rings = 0, 0
for i = 3, #ARGV, 3 do
  local tenant, endpoint = ARGV[i], ARGV[i + 1]
  local at = now + tonumber(ARGV[i + 2])
  local tkey = ARGV[1] .. tenant
  -- Even an arm that moves nothing breaks the hold: the holder's claim may predate this arm's
  -- work, so its settle must not remove or postpone the entry (that wake-up would be lost).
  redis.call('HDEL', KEYS[2], endpoint)
  local cur = redis.call('ZSCORE', tkey, endpoint)
  if not cur or tonumber(cur) > at then
    redis.call('ZADD', tkey, at, endpoint)
    redis.call('ZADD', KEYS[1], 'LT', at, tenant)  -- LT still adds an absent tenant
    if not cur or tonumber(cur) > at + slack then moved = moved + 1 end
    if at <= now or at < head_at then rings = rings + 1; head_at = math.min(head_at, at) end
  end
end
if rings > 0 then
  for _ = 1, math.min(rings, 4) do redis.call('LPUSH', KEYS[3], '1') end
  redis.call('LTRIM', KEYS[3], 0, 3)
end
return moved
"""

# KEYS: 1 tenants, 2 hold. ARGV: 1 tenant-key prefix, 2 hold ms, 3 token.
# Returns {1, tenant, endpoint, other tenants due} or {0, ms until the head (-1: none)}.
# A rotated tenant goes strictly behind every tenant due now, even one due in this same
# millisecond (a fraction of a millisecond later), so a tenant counts as due while its score
# is below now + 1.
TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due_below = now + 1
for _ = 1, 16 do  -- repairs a few stale tenant scores, then lets the caller come back
  local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if not head[1] then return {0, -1} end
  local tenant, score = head[1], tonumber(head[2])
  if score >= due_below then return {0, score - now} end
  local tkey = ARGV[1] .. tenant
  local first = redis.call('ZRANGE', tkey, 0, 0, 'WITHSCORES')
  if not first[1] then
    redis.call('ZREM', KEYS[1], tenant)
  elseif tonumber(first[2]) > now then
    redis.call('ZADD', KEYS[1], first[2], tenant)
  else
    local endpoint = first[1]
    redis.call('ZADD', tkey, now + tonumber(ARGV[2]), endpoint)  -- held, not removed
    redis.call('HSET', KEYS[2], endpoint, ARGV[3])
    local rotated = tonumber(redis.call('ZRANGE', tkey, 0, 0, 'WITHSCORES')[2])
    if rotated <= now then
      rotated = now
      local line = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(' .. string.format('%.0f', due_below),
                              '-inf', 'WITHSCORES', 'LIMIT', 0, 2)
      for i = 1, #line, 2 do
        if line[i] ~= tenant then rotated = math.max(rotated, tonumber(line[i + 1]) + 1 / 1024) end
      end
    end
    redis.call('ZADD', KEYS[1], rotated, tenant)
    local others = redis.call('ZCOUNT', KEYS[1], '-inf', '(' .. string.format('%.0f', due_below))
    if rotated < due_below then others = others - 1 end
    return {1, tenant, endpoint, others}
  end
end
return {0, 0}
"""

# KEYS: 1 tenants, 2 hold, 3 bell, 4 the tenant's set. ARGV: 1 tenant, 2 endpoint, 3 token,
# 4 in ms (-1: nothing live).
SETTLE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local in_ms = tonumber(ARGV[4])
local at = now + math.max(in_ms, 0)
if redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[3] then  -- still ours: exactly as asked
  redis.call('HDEL', KEYS[2], ARGV[2])
  if in_ms < 0 then redis.call('ZREM', KEYS[4], ARGV[2])
  else redis.call('ZADD', KEYS[4], at, ARGV[2]) end
elseif in_ms >= 0 then  -- armed (or taken) meanwhile: only ever earlier
  redis.call('ZADD', KEYS[4], 'LT', at, ARGV[2])
else
  return 0
end
local head = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local first = redis.call('ZRANGE', KEYS[4], 0, 0, 'WITHSCORES')
if not first[1] then redis.call('ZREM', KEYS[1], ARGV[1]); return 1 end
local first_at = tonumber(first[2])
if first_at > now then
  redis.call('ZADD', KEYS[1], first_at, ARGV[1])  -- nothing due: exactly its earliest
else
  -- Something due: a tenant already in line keeps its place (a settle must not bring a
  -- rotated tenant back to the front); one that was not joins the back.
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not cur or tonumber(cur) >= now + 1 then redis.call('ZADD', KEYS[1], now, ARGV[1]) end
end
if first_at <= now or not head[2] or first_at < tonumber(head[2]) then
  redis.call('LPUSH', KEYS[3], '1'); redis.call('LTRIM', KEYS[3], 0, 3)
end
return 1
"""

# KEYS: 1 the tenant's set, 2 hold. ARGV: 1 endpoint. Returns {exists, ms until due, held}.
SNAPSHOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score then return {0, 0, 0} end
local due_in = tonumber(score) - now
local held = due_in > 0 and redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1
return {1, due_in, held and 1 or 0}
"""
