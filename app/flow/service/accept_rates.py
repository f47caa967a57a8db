"""A tenant's accept rate: the intents it may have accepted a second, across every API process,
set by the operator (``accept_rate``, app/tenants/service/limits.py).

Counted in Redis, where every API process sees the same count: one GCRA per tenant, on Redis's
clock. An accept is let in while the tenant's theoretical arrival time is at most a second
ahead of now (a second's worth may come at once), and then moves it on by one interval per
intent -- a batch of a thousand moves it a thousand intervals, so the rate holds on average
whatever the batch size. Past it, 429 with the time until it is let in again, before anything
is written: nothing refused is stored, and the retry (the same idempotency key included) is
judged afresh.

Redis is a pressure buffer, never the truth: when it cannot be asked, the accept goes through
(logged), as the accept itself does without Redis. Each process reads a tenant's rate at most
every RATE_CACHE_SECONDS.
"""

from __future__ import annotations

import asyncio
import math

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.caches import SharedCache
from app.core.config import Settings
from app.core.errors import TooManyRequests
from app.core.redis_clients import FlowRedis, LuaScript
from app.tenants.service import limits

log = structlog.get_logger("herald.flow")

RATE_CACHE_SECONDS = 5.0
BURST_US = 1_000_000  # a second's worth may come at once
ADMIT_SECONDS = 1.0  # past this the accept goes through uncounted, as with Redis down

# KEYS: the tenant's tat (µs). ARGV: 1 interval µs, 2 intents, 3 burst µs.
# Returns 0 when let in (the tat moved on), else the µs until it would be.
_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = math.max(tonumber(redis.call('GET', KEYS[1]) or now), now)
local ahead = tat - now - tonumber(ARGV[3])
if ahead > 0 then return math.ceil(ahead) end
tat = tat + tonumber(ARGV[1]) * tonumber(ARGV[2])
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1000)
return 0
"""


def accepts_key(tenant_id: str) -> str:
    return f"herald:tenant:{tenant_id}:accepts"


class AcceptRates:
    """Built once in the API's lifespan."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: FlowRedis,
    ) -> None:
        self._defaults = limits.Limits.defaults(settings)
        self._sessionmaker = sessionmaker
        self._redis = redis
        self._admit = LuaScript(redis, _ADMIT)
        self._rates: SharedCache[str, float] = SharedCache(
            per_tenant=1, total=100_000, seconds=RATE_CACHE_SECONDS
        )

    async def admit(self, tenant_id: str, intents: int = 1) -> None:
        """TooManyRequests when the tenant is past its rate; nothing counted then."""
        rate = await self._rate_of(tenant_id)
        if rate <= 0 or intents < 1:
            return
        interval_us = 1_000_000 / rate
        try:
            async with asyncio.timeout(ADMIT_SECONDS):  # a Redis that hangs must not hold it
                wait_us = int(
                    await self._admit(
                        keys=[accepts_key(tenant_id)], args=[interval_us, intents, BURST_US]
                    )
                )
        except Exception as exc:  # Redis down: let it in, as the accept itself does
            log.warning("throttle.unavailable", tenant_id=tenant_id, error=type(exc).__name__)
            return
        if wait_us > 0:
            seconds = max(1, math.ceil(wait_us / 1_000_000))
            raise TooManyRequests(
                f"this tenant may have {rate:g} intents accepted a second (accept_rate, "
                f"GET /v1/limits), and is past it: retry in {seconds} s; nothing was stored",
                headers={"Retry-After": str(seconds)},
            )

    async def _rate_of(self, tenant_id: str) -> float:
        rate = self._rates.get(tenant_id)
        if rate is None:
            async with self._sessionmaker() as session, session.begin():
                tenant = await limits.tenant_of(session, tenant_id)
            rate = self._defaults.of(tenant).accept_rate
            self._rates.put(tenant_id, tenant_id, rate)
        return rate
