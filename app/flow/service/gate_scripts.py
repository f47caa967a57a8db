"""The Redis side of flow control (gate.py, flow_state.py): its keys and the Lua scripts that
decide atomically.

Times are on Redis's clock (TIME). Start rates are in microseconds: a Lua number (a double)
holds microseconds since the epoch exactly, so any start interval down to the microsecond is
honoured as given. In-flight slots and every TTL stay in milliseconds. The scripts build no key
names of their own: a destination's keys are all passed in.
"""

from __future__ import annotations

from typing import NamedTuple


class FlowKeys(NamedTuple):
    pause: str  # a Retry-After or the breaker's cool-down, mirrored from PostgreSQL (PX)
    tat: str  # GCRA theoretical arrival time of the next start, whole µs
    slots: str  # ZSET of in-flight slot members, scored by when their lease ends (ms)
    probe: str  # the grant id of the half-open breaker's single probe (PX)
    # "<caller's mark>|<grant id>": work found no slot (or the probe busy); a release wakes it
    waiting: str
    # "<grant id> <tat>": the grant that last moved tat, and the tat it left there. Only that
    # grant may move tat back, and only from there (see RETURN_UNUSED).
    tat_by: str


def flow_keys(endpoint_id: str) -> FlowKeys:
    # The destination's id as the hash tag: on a Redis Cluster its keys share the slot every
    # script over them needs, and destinations spread over the slots.
    base = f"herald:flow:{{{endpoint_id}}}"
    # The start rate's key was ":rate" while it held milliseconds; a new name, so that workers
    # of both versions side by side during an upgrade never read each other's unit.
    return FlowKeys(
        f"{base}:pause",
        f"{base}:tat",
        f"{base}:slots",
        f"{base}:probe",
        f"{base}:waiting",
        f"{base}:tat_by",
    )


# KEYS: pause, tat, slots, probe, waiting, tat_by (FlowKeys order)
# ARGV: 1 start interval in whole µs (0: no rate), 2 max in flight (0: none), 3 grant id,
#       4 slot lease ms, 5 "1" if half-open, 6 starts wanted (>= 1), 7 rate horizon µs (how far
#       ahead starts may be scheduled), 8 the caller's mark for the waiting flag
# Returns {count, reason ('': not limited), µs until it may grant more, µs until start 0,
#          the tat it stored ('': none)}. Start i is due at start 0 + i intervals.
# Everything is decided before anything is written, so a grant of 0 changes nothing but the
# waiting flag: a refusal costs no capacity. The flag is set whenever a slot release (or the
# probe's) is what will let more start, so that release wakes the destination once.
GRANT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local lease = tonumber(ARGV[4])
local function flag_waiting()
  redis.call('SET', KEYS[5], ARGV[8] .. '|' .. ARGV[3], 'PX', lease)
end
local function earliest_slot_us()
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  return (tonumber(first[2]) - now) * 1000
end
local paused = redis.call('PTTL', KEYS[1])
if paused > 0 then return {0, 'paused', paused * 1000, 0, ''} end
local count, max, reason, wake = tonumber(ARGV[6]), tonumber(ARGV[2]), '', false
if max > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  local free = max - redis.call('ZCARD', KEYS[3])
  if free <= 0 then flag_waiting(); return {0, 'in_flight', earliest_slot_us(), 0, ''} end
  if free <= count then count, reason, wake = free, 'in_flight', true end
end
local half_open = ARGV[5] == '1'
if half_open then
  if redis.call('EXISTS', KEYS[4]) == 1 then
    flag_waiting()
    return {0, 'probing', redis.call('PTTL', KEYS[4]) * 1000, 0, ''}
  end
  count, reason, wake = 1, 'probe', true
end
local interval, reopens, first, tat_set = tonumber(ARGV[1]), 0, 0, ''
if interval > 0 then
  -- GCRA without burst: start i at tat + i intervals, every start within the horizon.
  local tat = math.max(tonumber(redis.call('GET', KEYS[2]) or now_us), now_us)
  local horizon = now_us + tonumber(ARGV[7])
  if tat > horizon then return {0, 'rate', tat - horizon, 0, ''} end
  local fit = math.floor((horizon - tat) / interval) + 1
  if fit < count then count, reason, wake = fit, 'rate', false end
  local after = tat + count * interval
  if reason == 'rate' then reopens = after - horizon end
  first, tat_set = tat - now_us, string.format('%.0f', after)
  local ttl = math.floor((after - now_us) / 1000) + 1000
  redis.call('SET', KEYS[2], tat_set, 'PX', ttl)
  redis.call('SET', KEYS[6], ARGV[3] .. ' ' .. tat_set, 'PX', ttl)
end
if half_open then redis.call('SET', KEYS[4], ARGV[3], 'PX', lease); reopens = lease * 1000 end
if wake then flag_waiting() end
if max > 0 then
  for i = 0, count - 1 do redis.call('ZADD', KEYS[3], now + lease, ARGV[3] .. ':' .. i) end
  redis.call('PEXPIRE', KEYS[3], lease)
  if reason == 'in_flight' then reopens = earliest_slot_us() end
end
return {count, reason, reopens, first, tat_set}
"""

# KEYS: tat, slots, probe, waiting, tat_by   ARGV: 1 grant id, 2 used, 3 count, 4 the tat the
# grant stored ('': none), 5 interval µs. The tat moves back to just after this grant's last
# used start, and only if no grant moved it since: a later grant has already placed its starts
# after where the tat stood, and pulling the tat under them would overlap. "Since" is told by
# tat_by naming this grant and the tat as it is now, not by the tat's value alone: a grant
# handed back twice (the pump's capacity fell short, then its claim) would otherwise take a
# later grant that stored the same tat for itself -- and overlap that grant's starts. Handing
# back again is harmless: the target is absolute, and the tat only ever moves back.
# Slots handed back are slots freed: like a release, this takes the waiting flag and returns it
# if another grant set it (refused while this grant held them).
RETURN_UNUSED = """
local used, count = tonumber(ARGV[2]), tonumber(ARGV[3])
for i = used, count - 1 do redis.call('ZREM', KEYS[2], ARGV[1] .. ':' .. i) end
local tat = redis.call('GET', KEYS[1])
if ARGV[4] ~= '' and tat and redis.call('GET', KEYS[5]) == ARGV[1] .. ' ' .. tat then
  local back = tonumber(ARGV[4]) - (count - used) * tonumber(ARGV[5])
  if back < tonumber(tat) then
    local back_set = string.format('%.0f', back)
    redis.call('SET', KEYS[1], back_set, 'KEEPTTL')
    redis.call('SET', KEYS[5], ARGV[1] .. ' ' .. back_set, 'KEEPTTL')
  end
end
if used == 0 and redis.call('GET', KEYS[3]) == ARGV[1] then redis.call('DEL', KEYS[3]) end
local flag = redis.call('GETDEL', KEYS[4])
-- This grant's own flag only said "there may be more than the slots": the claim just showed
-- there was not, so nobody is woken (waking would find nothing, and grant, and flag again).
if flag and string.sub(flag, -(#ARGV[1] + 1)) == '|' .. ARGV[1] then return false end
return flag
"""

# KEYS: slots, probe, waiting   ARGV: slot members ("<grant id>:<i>"). Returns the waiting
# flag it took, or nil.
RELEASE_SLOTS = """
local probe = redis.call('GET', KEYS[2])
for i = 1, #ARGV do
  redis.call('ZREM', KEYS[1], ARGV[i])
  if probe and string.match(ARGV[i], '^(.*):%d+$') == probe then
    redis.call('DEL', KEYS[2]); probe = false
  end
end
return redis.call('GETDEL', KEYS[3])
"""

# A stream continued on the worker that ended its head (app/engine/service/continuing.py):
# the head's in-flight slot is carried over to its successor -- one out, one in -- and lives
# as long as the successor's lease. Unless the destination is paused: returns the pause's ms
# left (the slot is left as it was, to be released); -1 when the slot has expired (its place
# may have been granted to another since: never put back); 0 when the successor may start.
# KEYS: pause, slots   ARGV: 1 slot member, 2 lease ms, 3 max in flight (0: no slots kept)
CARRY_SLOT = """
local paused = redis.call('PTTL', KEYS[1])
if paused > 0 then return paused end
if tonumber(ARGV[3]) > 0 then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ends = redis.call('ZSCORE', KEYS[2], ARGV[1])
  if not ends or tonumber(ends) <= now then return -1 end
  redis.call('ZADD', KEYS[2], 'XX', now + tonumber(ARGV[2]), ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return 0
"""

# KEYS: tat, slots. Returns {live slots, µs until the next start is allowed}.
SNAPSHOT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local live = redis.call('ZCOUNT', KEYS[2], math.floor(now_us / 1000), '+inf')
local tat = tonumber(redis.call('GET', KEYS[1]) or now_us)
return {live, math.max(0, tat - now_us)}
"""

# KEYS: pause   ARGV: 1 ms. Only ever lengthens a pause.
PAUSE = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 1
"""
