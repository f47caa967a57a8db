"""A tenant's delivery rate: the attempts its deliveries may start a second, across every worker,
set by the operator (``delivery_rate``, app/tenants/service/limits.py).

A ceiling beside each destination's own, kept like them in Redis on Redis's clock: one GCRA
per tenant, over the same horizon as a destination's start rate (rates.RATE_HORIZON_US). The
gate takes the tenant's starts after the destination's (a grant is the smaller of the two,
the rest of the destination's given back), and gives back what a claim did not use, so a
pump that asks for more than is due costs the tenant nothing. A destination the tenant's rate
holds back is parked until the rate lets it start again, and its deliveries say so
(delivery/service/status.py). Losing Redis resets the count, as it resets every ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.core.redis_clients import FlowRedis, LuaScript


def deliveries_key(tenant_id: str) -> str:
    return f"herald:tenant:{tenant_id}:deliveries"


# KEYS: the tenant's tat (µs). ARGV: 1 interval µs, 2 starts wanted, 3 horizon µs.
# Returns {starts taken, µs until more may be taken (0 when all were)}.
TAKE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or now), now)
local horizon = now + tonumber(ARGV[3])
if tat > horizon then return {0, math.ceil(tat - horizon)} end
local interval, wanted = tonumber(ARGV[1]), tonumber(ARGV[2])
local count = math.min(wanted, math.floor((horizon - tat) / interval) + 1)
tat = tat + count * interval
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
local wait = 0
if count < wanted then wait = math.max(1, math.ceil(tat - horizon)) end
return {count, wait}
"""

# KEYS: the tenant's tat. ARGV: 1 µs to give back (unused starts x interval).
GIVE_BACK = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
tat = math.max(now, tat - tonumber(ARGV[1]))
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return 1
"""

# KEYS: the tenant's tat. ARGV: 1 horizon µs. Returns µs until a start may be taken.
WAIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
return math.max(0, math.ceil(tat - now - tonumber(ARGV[1])))
"""


@dataclass(frozen=True)
class Taken:
    count: int
    wait: float  # seconds until more may be taken (0: all wanted were taken)


class DeliveryRates:
    def __init__(self, redis: FlowRedis, horizon_us: int) -> None:
        self._horizon_us = horizon_us
        self._take = LuaScript(redis, TAKE)
        self._give_back = LuaScript(redis, GIVE_BACK)
        self._wait = LuaScript(redis, WAIT)

    async def take(self, tenant_id: str, interval_us: int, wanted: int) -> Taken:
        count, wait_us = await self._take(
            keys=[deliveries_key(tenant_id)], args=[interval_us, wanted, self._horizon_us]
        )
        return Taken(int(count), int(wait_us) / 1e6)

    async def give_back(self, tenant_id: str, interval_us: int, unused: int) -> None:
        await self._give_back(keys=[deliveries_key(tenant_id)], args=[interval_us * unused])

    async def wait(self, tenant_id: str) -> float:
        """Seconds until the tenant's rate lets a start be taken (0: now)."""
        return (
            int(await self._wait(keys=[deliveries_key(tenant_id)], args=[self._horizon_us])) / 1e6
        )
