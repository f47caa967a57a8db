"""The flow-control gate against real Redis and PostgreSQL: start rates held on Redis's clock,
and batch grants: how many starts a destination may have, and when each may begin."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import httpx
import pytest
from arq.connections import ArqRedis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.flow.service.flow_state import flow_snapshot
from app.flow.service.gate import Gate, Grant
from app.flow.service.rates import RATE_HORIZON_US
from app.flow.service.wakeups import Wakeups, waiting_flag
from tests.fixtures.api import new_endpoint
from tests.fixtures.engine import redis_now_us

CALLS = 500  # all at once: Redis runs them back to back, far faster than any rate below
WANT = 10  # CALLS * WANT starts wanted: more than the horizon holds at any rate below


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
    # No in-flight ceiling in the way (twice what all calls want): only the rate may refuse.
    endpoint = await new_endpoint(
        client, tenant, rate_limit_per_second=rate, max_in_flight=2 * CALLS * WANT
    )
    endpoint_id, tenant_id = endpoint["id"], await tenant_of(engine, endpoint["id"])
    flag = waiting_flag(settings.region, tenant_id)
    gate = Gate(settings, create_sessionmaker(engine), redis, cache_seconds=60)
    await gate.policy(endpoint_id)  # read once, before the burst
    start = await redis_now_us(redis)
    # Concurrently, so that however slow this machine is, the calls reach Redis together and
    # the rate (not the caller's own pace) decides.
    grants = await asyncio.gather(
        *(gate.grant(endpoint_id, tenant_id=flag, want=WANT) for _ in range(CALLS))
    )
    end = await redis_now_us(redis)
    granted = sum(grant.count for grant in grants)
    assert {grant.reason for grant in grants if grant.count < WANT} <= {"rate"}

    # Consecutive starts are at least one interval apart on Redis's clock, each within the
    # horizon of its grant, so the span that the calls took (by that clock) and the horizon
    # bound how many starts can have been granted; and the horizon itself is filled.
    interval_us = 1_000_000 / rate
    step = math.ceil(interval_us)
    assert granted <= (end - start + RATE_HORIZON_US) / interval_us + 1, (granted, end - start)
    assert granted >= RATE_HORIZON_US // step + 1, granted
    # The stored theoretical arrival time moved one interval per start, in whole microseconds.
    stored = await redis.get(f"herald:flow:{endpoint_id}:tat")
    assert stored is not None
    assert start + granted * step <= int(stored) <= end + RATE_HORIZON_US + step
    # What a status page shows: the wait for the next start, never beyond the horizon and one
    # interval.
    snapshot = await flow_snapshot(redis, endpoint_id, max_in_flight=0)
    assert snapshot is not None
    assert 0 <= snapshot.next_start_in <= (RATE_HORIZON_US + step) / 1e6


async def tenant_of(engine: AsyncEngine, endpoint_id: str) -> str:
    async with engine.connect() as connection:
        statement = text("SELECT tenant_id FROM endpoints WHERE id = :e")
        return str((await connection.execute(statement, {"e": endpoint_id})).scalar_one())


@pytest.fixture
def gate(settings: Settings, engine: AsyncEngine, redis: ArqRedis) -> Gate:
    return Gate(settings, create_sessionmaker(engine), redis)


async def gated(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, **limits: Any
) -> tuple[str, str]:
    """A new endpoint with these flow limits: its id, and its tenant's."""
    endpoint = await new_endpoint(client, tenant, **limits)
    return endpoint["id"], await tenant_of(engine, endpoint["id"])


async def flow_key(redis: ArqRedis, endpoint_id: str, name: str) -> str | None:
    value = await redis.get(f"herald:flow:{endpoint_id}:{name}")
    return None if value is None else value.decode()


async def slots_held(redis: ArqRedis, endpoint_id: str) -> set[str]:
    return {m.decode() for m in await redis.zrange(f"herald:flow:{endpoint_id}:slots", 0, -1)}


async def woken(redis: ArqRedis, settings: Settings, tenant_id: str, endpoint_id: str) -> bool:
    """Whether the destination's wake-up is armed for now; then forgets it, as a take would
    (so that the next question asks about a wake after this one)."""
    wakeups = Wakeups(redis, settings.region)
    due_in = (await wakeups.snapshot(tenant_id, endpoint_id)).due_in
    await redis.zrem(f"herald:wake:{settings.region}:t:{tenant_id}", endpoint_id)
    return due_in is not None and due_in <= 0


async def test_a_grant_takes_only_the_free_slots_and_a_release_wakes_the_destination_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> None:
    endpoint_id, tenant_id = await gated(
        client, tenant, engine, max_in_flight=3
    )  # and no rate ceiling
    flag = waiting_flag(settings.region, tenant_id)

    grant = await gate.grant(endpoint_id, tenant_id=flag, want=10)
    assert (grant.count, grant.reason) == (3, "in_flight")
    assert [grant.start_offset(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert await slots_held(redis, endpoint_id) == {grant.slot(i) for i in range(3)}
    # The destination has more work than slots: the first slot freed must wake it.
    assert await flow_key(redis, endpoint_id, "waiting") == f"{flag}|{grant.grant_id}"

    full = await gate.grant(endpoint_id, tenant_id=flag, want=10)
    assert (full.count, full.reason) == (0, "in_flight")
    assert full.reopens_in > 0  # the earliest slot's expiry: a safety wake only
    assert await slots_held(redis, endpoint_id) == {grant.slot(i) for i in range(3)}
    assert not await woken(redis, settings, tenant_id, endpoint_id)

    # The release itself wakes the destination, in the region that parked it: no caller has
    # a flag to act on.
    await gate.release({endpoint_id: [grant.slot(0)]})
    assert await woken(redis, settings, tenant_id, endpoint_id)
    await gate.release({endpoint_id: [grant.slot(1)]})
    assert not await woken(redis, settings, tenant_id, endpoint_id)  # woken once
    assert await flow_key(redis, endpoint_id, "waiting") is None
    assert await slots_held(redis, endpoint_id) == {grant.slot(2)}
    freed = await gate.grant(endpoint_id, tenant_id=flag, want=10)
    assert (freed.count, freed.reason) == (2, "in_flight")


async def test_one_release_frees_the_slots_of_many_destinations_and_wakes_those_waiting(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> None:
    full = await new_endpoint(client, tenant, max_in_flight=1)
    spare = await new_endpoint(client, tenant, max_in_flight=5)  # its grant was not limited
    tenant_id = await tenant_of(engine, full["id"])
    flag = waiting_flag(settings.region, tenant_id)
    held = await gate.grant(full["id"], tenant_id=flag, want=1)
    refused = await gate.grant(full["id"], tenant_id=flag, want=1)
    alone = await gate.grant(spare["id"], tenant_id=flag, want=1)
    assert (held.count, refused.count, alone.count, alone.reason) == (1, 0, 1, None)

    await gate.release({full["id"]: [held.slot(0)], spare["id"]: [alone.slot(0)]})
    assert await slots_held(redis, full["id"]) == await slots_held(redis, spare["id"]) == set()
    # Only the destination that had work waiting for its slot is woken.
    assert await woken(redis, settings, tenant_id, full["id"])
    assert not await woken(redis, settings, tenant_id, spare["id"])


async def test_slots_handed_back_wake_a_destination_refused_meanwhile_but_not_their_own(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> None:
    endpoint_id, tenant_id = await gated(client, tenant, engine, max_in_flight=1)
    flag = waiting_flag(settings.region, tenant_id)

    # Alone: a grant whose claim found nothing has no one to wake (its own flag only said
    # "there may be more than the slots"); waking would grant, find nothing, flag, forever.
    alone = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    assert (alone.count, alone.reason) == (1, "in_flight")
    await gate.return_unused(alone, used=0)
    assert await flow_key(redis, endpoint_id, "waiting") is None
    assert not await woken(redis, settings, tenant_id, endpoint_id)

    # Another taker was refused for want of the slot this grant held: handing it back wakes
    # the destination, or its work would wait for the refused taker's safety wake.
    holder = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    refused = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    assert (holder.count, refused.count, refused.reason) == (1, 0, "in_flight")
    await gate.return_unused(holder, used=0)
    assert await slots_held(redis, endpoint_id) == set()
    assert await woken(redis, settings, tenant_id, endpoint_id)


async def test_rate_grants_start_a_whole_interval_apart_across_grants(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
) -> None:
    endpoint_id, tenant_id = await gated(
        client, tenant, engine, rate_limit_per_second=5, max_in_flight=100
    )
    flag = waiting_flag(settings.region, tenant_id)
    gate = Gate(settings, create_sessionmaker(engine), redis, cache_seconds=60)
    await gate.policy(endpoint_id)
    interval_us = 200_000

    async def granted(want: int) -> tuple[Grant, int]:
        """The grant, and when (µs, Redis's clock) its start 0 is due, bracketed by Redis's
        clock around the call: the stored tat is one interval past the grant's last start."""
        before = await redis_now_us(redis)
        grant = await gate.grant(endpoint_id, tenant_id=flag, want=want)
        after = await redis_now_us(redis)
        tat = int(await flow_key(redis, endpoint_id, "tat") or 0)
        first_us = round(grant.first_start_in * 1e6)
        start_0 = tat - grant.count * interval_us
        assert before <= start_0 - first_us <= after  # offsets count from the grant itself
        return grant, start_0

    first, first_start = await granted(3)
    assert (first.count, first.reason, first.first_start_in) == (3, None, 0.0)
    assert first.interval == interval_us / 1e6
    assert [round((first.start_offset(i) - first.first_start_in) * 1e6) for i in range(3)] == [
        0,
        interval_us,
        2 * interval_us,
    ]
    second, second_start = await granted(3)
    assert second.count == 3
    # The second grant's first start comes a whole interval (or, had this machine dawdled past
    # it, more) after the first grant's last: together their starts keep to the rate.
    assert second_start >= first_start + 3 * interval_us


async def test_a_rate_grant_fits_the_horizon_and_a_refusal_costs_nothing(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> None:
    # One start in 100 s: within the 1 s horizon only "now" fits, so the refusal is certain.
    endpoint_id, tenant_id = await gated(
        client, tenant, engine, rate_limit_per_second=0.01, max_in_flight=100
    )
    flag = waiting_flag(settings.region, tenant_id)

    grant = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    assert (grant.count, grant.reason, grant.first_start_in) == (1, "rate", 0.0)
    assert grant.reopens_in == 99.0  # next start at 100 s, granted once it is within 1 s
    tat = await flow_key(redis, endpoint_id, "tat")

    refused = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    assert (refused.count, refused.reason) == (0, "rate")
    assert 0 < refused.reopens_in <= 99.0
    assert await flow_key(redis, endpoint_id, "tat") == tat
    assert await slots_held(redis, endpoint_id) == {grant.slot(0)}
    assert await flow_key(redis, endpoint_id, "waiting") is None  # the rate, not a slot, opens


async def test_return_unused_moves_the_rate_back_only_when_no_grant_came_after(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> None:
    endpoint_id, tenant_id = await gated(
        client, tenant, engine, rate_limit_per_second=10, max_in_flight=100
    )
    flag = waiting_flag(settings.region, tenant_id)
    interval_us = 100_000

    alone = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    tat = int(await flow_key(redis, endpoint_id, "tat") or 0)
    await gate.return_unused(alone, used=2)
    assert int(await flow_key(redis, endpoint_id, "tat") or 0) == tat - 3 * interval_us
    assert await slots_held(redis, endpoint_id) == {alone.slot(0), alone.slot(1)}

    earlier = await gate.grant(endpoint_id, tenant_id=flag, want=3)
    later = await gate.grant(endpoint_id, tenant_id=flag, want=2)
    assert (earlier.count, later.count) == (3, 2)
    tat_of_later = await flow_key(redis, endpoint_id, "tat")
    await gate.return_unused(earlier, used=1)
    # The later grant's starts follow the earlier's: pulling the tat back would overlap them.
    assert await flow_key(redis, endpoint_id, "tat") == tat_of_later
    assert await slots_held(redis, endpoint_id) == {
        alone.slot(0),
        alone.slot(1),
        earlier.slot(0),
        later.slot(0),
        later.slot(1),
    }


async def test_a_grant_handed_back_twice_never_pulls_the_rate_under_a_later_grant(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> None:
    # The pump hands a grant back twice when its capacity fell short (before the claim) and the
    # claim then found fewer rows still. A later grant that fills exactly what the first hand-
    # back freed stores the very tat the first grant had stored.
    endpoint_id, tenant_id = await gated(
        client, tenant, engine, rate_limit_per_second=10, max_in_flight=100
    )
    flag = waiting_flag(settings.region, tenant_id)
    interval_us = 100_000

    first = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    start_0 = int(await flow_key(redis, endpoint_id, "tat") or 0) - 5 * interval_us
    await gate.return_unused(first, used=3)
    later = await gate.grant(endpoint_id, tenant_id=flag, want=2)
    assert later.count == 2
    later_tat = int(await flow_key(redis, endpoint_id, "tat") or 0)
    assert later_tat == start_0 + 5 * interval_us  # the later grant's starts are 3 and 4
    await gate.return_unused(first, used=1)

    # Start 1 and 2 of the first grant are free again, but the later grant's are not: the next
    # grant starts after them.
    assert int(await flow_key(redis, endpoint_id, "tat") or 0) == later_tat
    next_grant = await gate.grant(endpoint_id, tenant_id=flag, want=1)
    next_start = int(await flow_key(redis, endpoint_id, "tat") or 0) - interval_us
    assert next_grant.count == 1 and next_start >= start_0 + 5 * interval_us


async def test_half_open_grants_one_probe_at_a_time(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
) -> None:
    endpoint_id, tenant_id = await gated(client, tenant, engine, max_in_flight=10)
    flag = waiting_flag(settings.region, tenant_id)
    async with engine.begin() as connection:  # tripped, and its cool-down is over
        await connection.execute(
            text("UPDATE endpoints SET breaker_trips = 1 WHERE id = :e"), {"e": endpoint_id}
        )
    gate = Gate(settings, create_sessionmaker(engine), redis, cache_seconds=60)

    grants = await asyncio.gather(
        *(gate.grant(endpoint_id, tenant_id=flag, want=5) for _ in range(10))
    )
    [probe] = [grant for grant in grants if grant.count]
    assert (probe.count, probe.reason) == (1, "probe")
    assert {(g.count, g.reason) for g in grants if g is not probe} == {(0, "probing")}
    assert all(grant.reopens_in > 0 for grant in grants)
    assert await flow_key(redis, endpoint_id, "probe") == probe.grant_id
    assert await slots_held(redis, endpoint_id) == {probe.slot(0)}

    # A probe that found no row gives the probe back at once.
    await gate.return_unused(probe, used=0)
    assert await flow_key(redis, endpoint_id, "probe") is None
    retried = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    assert (retried.count, retried.reason) == (1, "probe")
    # Its record frees the probe and wakes the destination, whose other grants waited for it.
    await gate.release({endpoint_id: [retried.slot(0)]})
    assert await woken(redis, settings, tenant_id, endpoint_id)
    assert await flow_key(redis, endpoint_id, "probe") is None
    assert await slots_held(redis, endpoint_id) == set()


async def test_a_probe_refused_by_the_rate_is_not_taken(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
) -> None:
    endpoint_id, tenant_id = await gated(
        client, tenant, engine, rate_limit_per_second=0.01, max_in_flight=10
    )
    flag = waiting_flag(settings.region, tenant_id)
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE endpoints SET breaker_trips = 1 WHERE id = :e"), {"e": endpoint_id}
        )
    gate = Gate(settings, create_sessionmaker(engine), redis, cache_seconds=60)
    probe = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    assert (probe.count, probe.reason) == (1, "probe")
    await gate.release({endpoint_id: [probe.slot(0)]})

    # The next start is 100 s away: the rate refuses, and the probe stays free for whoever
    # comes when it is due.
    refused = await gate.grant(endpoint_id, tenant_id=flag, want=5)
    assert (refused.count, refused.reason) == (0, "rate")
    for name in ("probe", "waiting"):
        assert await flow_key(redis, endpoint_id, name) is None
    assert await slots_held(redis, endpoint_id) == set()


async def test_a_paused_destination_is_granted_nothing_and_nothing_is_reserved(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> None:
    by_redis = await new_endpoint(client, tenant, rate_limit_per_second=10, max_in_flight=3)
    by_database = await new_endpoint(client, tenant, rate_limit_per_second=10, max_in_flight=3)
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE endpoints SET paused_until = now() + interval '1 minute' WHERE id = :e"),
            {"e": by_database["id"]},
        )
    await gate.pause(by_redis["id"], 30)  # a Retry-After seen by some worker a moment ago

    for endpoint, longest in ((by_redis, 30.0), (by_database, 60.0)):
        flag = waiting_flag(settings.region, await tenant_of(engine, endpoint["id"]))
        grant = await gate.grant(endpoint["id"], tenant_id=flag, want=5)
        assert (grant.count, grant.reason) == (0, "paused")
        assert 0 < grant.reopens_in <= longest
        for name in ("tat", "waiting", "probe"):
            assert await flow_key(redis, endpoint["id"], name) is None
        assert await slots_held(redis, endpoint["id"]) == set()
