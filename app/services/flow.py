"""Per-destination flow control shared by every worker, kept in Redis.

Two ceilings, because they protect against different overloads: an in-flight ceiling (sockets,
memory, the receiver's concurrent capacity) and a start-rate ceiling (a receiver allowing N
requests per interval). Plus pauses (a receiver's Retry-After, the circuit breaker's cool-down)
and the breaker's single probe. One Lua script decides atomically, on Redis's clock.

Losing Redis only resets these counters: limits start over, nothing blocks forever. In-flight
slots are leases that expire by themselves, so a dead worker's slot frees itself.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
import uuid
from dataclasses import dataclass

import structlog
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.config import Settings
from app.repositories import endpoints
from app.services.status import FlowSnapshot

log = structlog.get_logger("herald.flow")

# Times in microseconds on Redis's clock (TIME): a Lua number (a double) holds microseconds
# since the epoch exactly, so any start interval down to the microsecond is honoured as given.
# KEYS: 1 pause, 2 rate (GCRA theoretical arrival time, whole µs), 3 in-flight slots, 4 probe
# ARGV: 1 start interval in whole µs (0: no rate), 2 max in flight (0: none), 3 slot id,
#       4 slot lease ms, 5 "1" if half-open (one probe at a time)
# Returns {admitted, µs to wait, reason}. Nothing is changed unless the caller is admitted, so
# a refusal costs no capacity. In-flight slots stay in milliseconds.
_GATE = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local paused = redis.call('PTTL', KEYS[1])
if paused > 0 then return {0, paused * 1000, 'paused'} end
local max = tonumber(ARGV[2])
if max > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
  if redis.call('ZCARD', KEYS[3]) >= max then return {0, 0, 'in_flight'} end
end
if ARGV[5] == '1' and redis.call('EXISTS', KEYS[4]) == 1 then
  return {0, redis.call('PTTL', KEYS[4]) * 1000, 'probing'}
end
local interval = tonumber(ARGV[1])
if interval > 0 then
  local tat = tonumber(redis.call('GET', KEYS[2]) or now_us)
  if tat > now_us then return {0, tat - now_us, 'rate'} end
  redis.call('SET', KEYS[2], string.format('%.0f', now_us + interval),
             'PX', math.floor(interval / 1000) + 1000)
end
if ARGV[5] == '1' then redis.call('SET', KEYS[4], ARGV[3], 'PX', ARGV[4]) end
if max > 0 then
  redis.call('ZADD', KEYS[3], now + tonumber(ARGV[4]), ARGV[3])
  redis.call('PEXPIRE', KEYS[3], tonumber(ARGV[4]))
end
return {1, 0, 'ok'}
"""

# KEYS: 2 rate, 3 slots (as in _GATE). Returns {live slots, µs until the next start is allowed}.
_SNAPSHOT = """
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local live = redis.call('ZCOUNT', KEYS[2], math.floor(now_us / 1000), '+inf')
local tat = tonumber(redis.call('GET', KEYS[1]) or now_us)
return {live, math.max(0, tat - now_us)}
"""

_RELEASE = """
redis.call('ZREM', KEYS[1], ARGV[1])
if redis.call('GET', KEYS[2]) == ARGV[1] then redis.call('DEL', KEYS[2]) end
return 1
"""

_PAUSE = """
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], '1', 'PX', ARGV[1])
end
return 1
"""


# Slower than one start in 35 years counts as one start in 35 years: it keeps every time in
# the script below 2**53 µs, where doubles are exact.
MAX_INTERVAL_US = 2**50


def start_interval_us(rate_per_second: float) -> int:
    """Whole microseconds between starts at ``rate_per_second`` (0: no ceiling). Rounded up,
    so the rate is never exceeded: at most one microsecond per start slower than asked."""
    if rate_per_second <= 0:
        return 0
    return min(math.ceil(1_000_000 / rate_per_second), MAX_INTERVAL_US)


def _spread(wait: float, reason: str, interval_us: int = 0) -> float:
    """When to look again. Callers refused together must not all come back together: each
    waits its turn plus a random share of the time the others need."""
    if reason == "in_flight":
        return random.uniform(0.05, 0.25)  # noqa: S311  (slots free as attempts finish)
    if reason == "rate":
        return wait + random.uniform(0, max(1.0, 20 * interval_us / 1e6))  # noqa: S311
    return wait + random.uniform(0, min(5.0, 0.1 * wait + 0.5))  # noqa: S311


def _keys(endpoint_id: str) -> list[str]:
    base = f"herald:flow:{endpoint_id}"
    # The start rate's key was ":rate" while it held milliseconds; a new name, so that workers
    # of both versions side by side during an upgrade never read each other's unit.
    return [f"{base}:pause", f"{base}:tat", f"{base}:slots", f"{base}:probe"]


@dataclass(frozen=True)
class Policy:
    interval_us: int  # between starts; 0 = no rate ceiling
    max_in_flight: int  # 0 = no ceiling
    paused_for: float  # seconds the database says the destination is paused
    half_open: bool  # the breaker tripped: after its cool-down, one probe at a time


@dataclass(frozen=True)
class Admission:
    admitted: bool
    wait_seconds: float
    reason: str  # ok | paused | in_flight | probing | rate
    slot: str
    endpoint_id: str


class Gate:
    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: ArqRedis,
        cache_seconds: float = 1.0,
    ) -> None:
        self._settings = settings
        self._sessionmaker = sessionmaker
        self._redis = redis
        self._cache_seconds = cache_seconds
        self._policies: dict[str, tuple[float, Policy]] = {}
        self._reading: dict[str, asyncio.Future[Policy]] = {}
        self._generations: dict[str, int] = {}
        self._gate = redis.register_script(_GATE)
        self._release = redis.register_script(_RELEASE)
        self._pause = redis.register_script(_PAUSE)

    async def policy(self, endpoint_id: str) -> Policy:
        cached = self._policies.get(endpoint_id)
        if cached is not None and cached[0] > time.monotonic():
            return cached[1]
        # Every attempt in flight to this endpoint misses at once when the entry expires: one
        # of them reads, the rest wait for that read (shielded: a waiter's cancellation must
        # not cancel the read the others are waiting for).
        reading = self._reading.get(endpoint_id)
        if reading is None:
            reading = asyncio.ensure_future(self._read_policy(endpoint_id))
            self._reading[endpoint_id] = reading
            reading.add_done_callback(lambda done: self._read_done(endpoint_id, done))
        return await asyncio.shield(reading)

    def _read_done(self, endpoint_id: str, done: asyncio.Future[Policy]) -> None:
        if self._reading.get(endpoint_id) is done:
            del self._reading[endpoint_id]

    async def _read_policy(self, endpoint_id: str) -> Policy:
        generation = self._generations.get(endpoint_id, 0)
        async with self._sessionmaker() as session, session.begin():
            limits = await endpoints.flow_limits(session, endpoint_id)
        rate = self._settings.default_rate_limit_per_second
        in_flight = self._settings.default_max_in_flight
        policy = Policy(0, 0, 0.0, False)
        if limits is not None:
            rate = limits.rate_limit_per_second or rate
            policy = Policy(
                interval_us=start_interval_us(rate),
                max_in_flight=limits.max_in_flight or in_flight,
                paused_for=limits.paused_for,
                half_open=limits.breaker_trips > 0,
            )
        if self._generations.get(endpoint_id, 0) == generation:
            # Not when forget() ran meanwhile: this read may predate what it forgot.
            self._policies[endpoint_id] = (time.monotonic() + self._cache_seconds, policy)
        return policy

    def forget(self, endpoint_id: str) -> None:
        """This process just changed the endpoint's flow state: read it afresh next time (and
        not from a read that was already under way)."""
        self._policies.pop(endpoint_id, None)
        self._reading.pop(endpoint_id, None)
        self._generations[endpoint_id] = self._generations.get(endpoint_id, 0) + 1

    def succeeded(self, endpoint_id: str) -> None:
        """A success closes a tripped breaker (the record statement did that in the database):
        a half-open policy must be read afresh. A healthy one has not changed, and keeping it
        spares every success a policy read."""
        cached = self._policies.get(endpoint_id)
        if cached is not None and (cached[1].half_open or cached[1].paused_for > 0):
            self.forget(endpoint_id)

    async def admit(self, endpoint_id: str) -> Admission:
        policy = await self.policy(endpoint_id)
        slot = uuid.uuid4().hex
        if policy.paused_for > 0:
            return Admission(
                False, _spread(policy.paused_for, "paused"), "paused", slot, endpoint_id
            )
        lease_ms = int(self._settings.lease_duration * 1000)
        try:
            admitted, wait_us, reason = await self._gate(
                keys=_keys(endpoint_id),
                args=[
                    policy.interval_us, policy.max_in_flight, slot, lease_ms,
                    "1" if policy.half_open else "0",
                ],
            )  # fmt: skip
        except Exception as exc:
            log.warning("flow.gate_unavailable", endpoint_id=endpoint_id, error=type(exc).__name__)
            return Admission(True, 0.0, "ok", slot, endpoint_id)
        reason = reason.decode() if isinstance(reason, bytes) else str(reason)
        wait = _spread(int(wait_us) / 1e6, reason, policy.interval_us)
        return Admission(bool(admitted), wait, reason, slot, endpoint_id)

    async def release(self, admission: Admission) -> None:
        if not admission.admitted:
            return
        try:
            await self._release(keys=_keys(admission.endpoint_id)[2:4], args=[admission.slot])
        except Exception as exc:
            log.warning(
                "flow.release_failed", endpoint_id=admission.endpoint_id, error=type(exc).__name__
            )

    async def pause(self, endpoint_id: str, seconds: float) -> None:
        self.forget(endpoint_id)
        try:
            await self._pause(keys=_keys(endpoint_id)[:1], args=[max(1, int(seconds * 1000))])
        except Exception as exc:
            log.warning("flow.pause_failed", endpoint_id=endpoint_id, error=type(exc).__name__)


async def flow_snapshot(
    redis: ArqRedis, endpoint_id: str, max_in_flight: int
) -> FlowSnapshot | None:
    """What the gate would see now; None if Redis cannot say."""
    try:
        snapshot = redis.register_script(_SNAPSHOT)
        live, wait_us = await snapshot(keys=_keys(endpoint_id)[1:3])
    except Exception as exc:
        log.warning("flow.snapshot_failed", endpoint_id=endpoint_id, error=type(exc).__name__)
        return None
    return FlowSnapshot(int(live), max_in_flight, int(wait_us) / 1e6)


async def clear_flow_state(redis: ArqRedis, endpoint_id: str) -> None:
    """A re-enabled endpoint starts afresh: no pause, no probe in the way. Best effort: a
    leftover pause expires by itself."""
    keys = _keys(endpoint_id)
    try:
        await redis.delete(keys[0], keys[3])
    except Exception as exc:
        log.warning("flow.clear_failed", endpoint_id=endpoint_id, error=type(exc).__name__)
