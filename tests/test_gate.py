"""The flow-control gate against real Redis and PostgreSQL: start rates held on Redis's clock."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db import create_sessionmaker
from app.services.flow import Gate, flow_snapshot
from tests.support import new_endpoint, redis_now_us

CALLS = 500  # all at once: Redis runs them back to back, far faster than any rate below


# 2000/s and 1500/s were unlimited (a whole-millisecond interval of 0); 600/s was 1000/s.
@pytest.mark.parametrize("rate", [2000, 1500, 600, 333.3])
async def test_the_gate_holds_any_start_rate_on_redis_clock(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    rate: float,
) -> None:
    # No in-flight ceiling in the way: only the rate may refuse.
    endpoint = await new_endpoint(client, tenant, rate_limit_per_second=rate, max_in_flight=CALLS)
    gate = Gate(settings, create_sessionmaker(engine), redis, cache_seconds=60)
    await gate.policy(endpoint["id"])  # read once, before the burst
    start = await redis_now_us(redis)
    # Concurrently, so that however slow this machine is, the calls reach Redis together and
    # the rate (not the caller's own pace) decides.
    admissions = await asyncio.gather(*(gate.admit(endpoint["id"]) for _ in range(CALLS)))
    end = await redis_now_us(redis)
    admitted = sum(admission.admitted for admission in admissions)
    assert {a.reason for a in admissions if not a.admitted} <= {"rate"}
    for admission in admissions:
        await gate.release(admission)

    # Consecutive starts are at least one interval apart on Redis's clock, so the span that
    # the loop took (by that clock) bounds how many starts it can have been granted.
    interval_us = 1_000_000 / rate
    assert 1 <= admitted <= (end - start) / interval_us + 1, (admitted, end - start)
    assert admitted < CALLS  # the burst came faster than the rate: some calls were refused
    # The stored theoretical arrival time moved one interval per start, in whole microseconds.
    stored = await redis.get(f"herald:flow:{endpoint['id']}:tat")
    assert stored is not None
    step = math.ceil(interval_us)
    assert start + admitted * step <= int(stored) <= end + step
    # What a status page shows: the wait for the next start, never more than one interval.
    snapshot = await flow_snapshot(redis, endpoint["id"], max_in_flight=0)
    assert snapshot is not None and 0 <= snapshot.next_start_in <= step / 1e6
