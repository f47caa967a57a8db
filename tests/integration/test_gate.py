"""The flow-control gate against real Redis and PostgreSQL: start rates held on Redis's clock,
and batch grants: how many starts a destination may have, and when each may begin."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.flow.service.flow_state import flow_snapshot
from app.flow.service.gate import Gate, Grant
from app.flow.service.rates import RATE_HORIZON_US
from tests.fixtures.api import new_endpoint
from tests.fixtures.engine import redis_now_us
from tests.fixtures.gate import Destination, set_columns, tenant_of

CALLS = 500  # all at once: Redis runs them back to back, far faster than any rate below
WANT = 10  # CALLS * WANT starts wanted: more than the horizon holds at any rate below


Gated = Callable[..., Awaitable[Destination]]


@pytest.fixture
def gate(settings: Settings, engine: AsyncEngine, redis: ArqRedis) -> Gate:
    # Each test changes the database before its first grant: the policy read then holds for
    # the whole test, however slowly this machine runs it.
    return Gate(settings, create_sessionmaker(engine), redis, cache_seconds=60)


@pytest.fixture
def gated(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    redis: ArqRedis,
    gate: Gate,
) -> Gated:
    """Makes a new endpoint with the flow limits given, behind the test's gate."""

    async def made(**limits: Any) -> Destination:
        endpoint = await new_endpoint(client, tenant, **limits)
        tenant_id = await tenant_of(engine, endpoint["id"])
        return Destination(gate, redis, settings.region, endpoint["id"], tenant_id)

    return made


# Intervals that are no whole number of milliseconds: counted in milliseconds, 2000/s and
# 1500/s would have no interval at all and 600/s would be 1000/s.
@pytest.mark.parametrize("rate", [2000, 1500, 600, 333.3])
async def test_the_gate_holds_any_start_rate_on_redis_clock(
    gated: Gated, redis: ArqRedis, rate: float
) -> None:
    # No in-flight ceiling in the way (twice what all calls want): only the rate may refuse.
    destination = await gated(rate_limit_per_second=rate, max_in_flight=2 * CALLS * WANT)
    await destination.gate.policy(destination.endpoint_id)  # read once, before the burst
    start = await redis_now_us(redis)
    # Concurrently, so that however slow this machine is, the calls reach Redis together and
    # the rate (not the caller's own pace) decides.
    grants = await asyncio.gather(*(destination.grant(WANT) for _ in range(CALLS)))
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
    stored = await destination.flow_key("tat")
    assert stored is not None
    assert start + granted * step <= int(stored) <= end + RATE_HORIZON_US + step
    # What a status page shows: the wait for the next start, never beyond the horizon and one
    # interval.
    snapshot = await flow_snapshot(redis, destination.endpoint_id, max_in_flight=0)
    assert snapshot is not None
    assert 0 <= snapshot.next_start_in <= (RATE_HORIZON_US + step) / 1e6


async def test_a_grant_takes_only_the_free_slots_and_a_release_wakes_the_destination_once(
    gated: Gated, gate: Gate
) -> None:
    destination = await gated(max_in_flight=3)  # and no rate ceiling
    endpoint_id = destination.endpoint_id

    grant = await destination.grant(10)
    assert (grant.count, grant.reason) == (3, "in_flight")
    assert [grant.start_offset(i) for i in range(3)] == [0.0, 0.0, 0.0]
    assert await destination.slots_held() == {grant.slot(i) for i in range(3)}
    # The destination has more work than slots: the first slot freed must wake it.
    assert await destination.flow_key("waiting") == f"{destination.flag}|{grant.grant_id}"

    full = await destination.grant(10)
    assert (full.count, full.reason) == (0, "in_flight")
    assert full.reopens_in > 0  # the earliest slot's expiry: a safety wake only
    assert await destination.slots_held() == {grant.slot(i) for i in range(3)}
    assert not await destination.woken()

    # The release itself wakes the destination, in the region that parked it: no caller has
    # a flag to act on.
    await gate.release({endpoint_id: [grant.slot(0)]})
    assert await destination.woken()
    await gate.release({endpoint_id: [grant.slot(1)]})
    assert not await destination.woken()  # woken once
    assert await destination.flow_key("waiting") is None
    assert await destination.slots_held() == {grant.slot(2)}
    freed = await destination.grant(10)
    assert (freed.count, freed.reason) == (2, "in_flight")


async def test_one_release_frees_the_slots_of_many_destinations_and_wakes_those_waiting(
    gated: Gated, gate: Gate
) -> None:
    full = await gated(max_in_flight=1)
    spare = await gated(max_in_flight=5)  # its grant was not limited
    held = await full.grant(1)
    refused = await full.grant(1)
    alone = await spare.grant(1)
    assert (held.count, refused.count, alone.count, alone.reason) == (1, 0, 1, None)

    await gate.release({full.endpoint_id: [held.slot(0)], spare.endpoint_id: [alone.slot(0)]})
    assert await full.slots_held() == await spare.slots_held() == set()
    # Only the destination that had work waiting for its slot is woken.
    assert await full.woken()
    assert not await spare.woken()


async def test_slots_handed_back_wake_a_destination_refused_meanwhile_but_not_their_own(
    gated: Gated, gate: Gate
) -> None:
    destination = await gated(max_in_flight=1)

    # Alone: a grant whose claim found nothing has no one to wake (its own flag only said
    # "there may be more than the slots"); waking would grant, find nothing, flag, forever.
    alone = await destination.grant(5)
    assert (alone.count, alone.reason) == (1, "in_flight")
    await gate.return_unused(alone, used=0)
    assert await destination.flow_key("waiting") is None
    assert not await destination.woken()

    # Another taker was refused for want of the slot this grant held: handing it back wakes
    # the destination, or its work would wait for the refused taker's safety wake.
    holder = await destination.grant(5)
    refused = await destination.grant(5)
    assert (holder.count, refused.count, refused.reason) == (1, 0, "in_flight")
    await gate.return_unused(holder, used=0)
    assert await destination.slots_held() == set()
    assert await destination.woken()


async def test_rate_grants_start_a_whole_interval_apart_across_grants(
    gated: Gated, redis: ArqRedis
) -> None:
    destination = await gated(rate_limit_per_second=5, max_in_flight=100)
    await destination.gate.policy(destination.endpoint_id)
    interval_us = 200_000

    async def granted(want: int) -> tuple[Grant, int]:
        """The grant, and when (µs, Redis's clock) its start 0 is due, bracketed by Redis's
        clock around the call: the stored tat is one interval past the grant's last start."""
        before = await redis_now_us(redis)
        grant = await destination.grant(want)
        after = await redis_now_us(redis)
        first_us = round(grant.first_start_in * 1e6)
        start_0 = await destination.tat() - grant.count * interval_us
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


async def test_a_rate_grant_fits_the_horizon_and_a_refusal_costs_nothing(gated: Gated) -> None:
    # One start in 100 s: within the 1 s horizon only "now" fits, so the refusal is certain.
    destination = await gated(rate_limit_per_second=0.01, max_in_flight=100)

    grant = await destination.grant(5)
    assert (grant.count, grant.reason, grant.first_start_in) == (1, "rate", 0.0)
    assert grant.reopens_in == 99.0  # next start at 100 s, granted once it is within 1 s
    tat = await destination.flow_key("tat")

    refused = await destination.grant(5)
    assert (refused.count, refused.reason) == (0, "rate")
    assert 0 < refused.reopens_in <= 99.0
    assert await destination.flow_key("tat") == tat
    assert await destination.slots_held() == {grant.slot(0)}
    assert await destination.flow_key("waiting") is None  # the rate, not a slot, opens


async def test_return_unused_moves_the_rate_back_only_when_no_grant_came_after(
    gated: Gated, gate: Gate
) -> None:
    destination = await gated(rate_limit_per_second=10, max_in_flight=100)
    interval_us = 100_000

    alone = await destination.grant(5)
    tat = await destination.tat()
    await gate.return_unused(alone, used=2)
    assert await destination.tat() == tat - 3 * interval_us
    assert await destination.slots_held() == {alone.slot(0), alone.slot(1)}

    earlier = await destination.grant(3)
    later = await destination.grant(2)
    assert (earlier.count, later.count) == (3, 2)
    tat_of_later = await destination.flow_key("tat")
    await gate.return_unused(earlier, used=1)
    # The later grant's starts follow the earlier's: pulling the tat back would overlap them.
    assert await destination.flow_key("tat") == tat_of_later
    assert await destination.slots_held() == {
        alone.slot(0),
        alone.slot(1),
        earlier.slot(0),
        later.slot(0),
        later.slot(1),
    }


async def test_a_grant_handed_back_twice_never_pulls_the_rate_under_a_later_grant(
    gated: Gated, gate: Gate
) -> None:
    # The pump hands a grant back twice when its capacity fell short (before the claim) and the
    # claim then found fewer rows still. A later grant that fills exactly what the first hand-
    # back freed stores the very tat the first grant had stored.
    destination = await gated(rate_limit_per_second=10, max_in_flight=100)
    interval_us = 100_000

    first = await destination.grant(5)
    start_0 = await destination.tat() - 5 * interval_us
    await gate.return_unused(first, used=3)
    later = await destination.grant(2)
    assert later.count == 2
    later_tat = await destination.tat()
    assert later_tat == start_0 + 5 * interval_us  # the later grant's starts are 3 and 4
    await gate.return_unused(first, used=1)

    # Start 1 and 2 of the first grant are free again, but the later grant's are not: the next
    # grant starts after them.
    assert await destination.tat() == later_tat
    next_grant = await destination.grant(1)
    next_start = await destination.tat() - interval_us
    assert next_grant.count == 1 and next_start >= start_0 + 5 * interval_us


async def test_half_open_grants_one_probe_at_a_time(
    gated: Gated, gate: Gate, engine: AsyncEngine
) -> None:
    destination = await gated(max_in_flight=10)
    await set_columns(engine, destination, "breaker_trips = 1")  # its cool-down is over

    grants = await asyncio.gather(*(destination.grant(5) for _ in range(10)))
    [probe] = [grant for grant in grants if grant.count]
    assert (probe.count, probe.reason) == (1, "probe")
    assert {(g.count, g.reason) for g in grants if g is not probe} == {(0, "probing")}
    assert all(grant.reopens_in > 0 for grant in grants)
    assert await destination.flow_key("probe") == probe.grant_id
    assert await destination.slots_held() == {probe.slot(0)}

    # A probe that found no row gives the probe back at once.
    await gate.return_unused(probe, used=0)
    assert await destination.flow_key("probe") is None
    retried = await destination.grant(5)
    assert (retried.count, retried.reason) == (1, "probe")
    # Its record frees the probe and wakes the destination, whose other grants waited for it.
    await gate.release({destination.endpoint_id: [retried.slot(0)]})
    assert await destination.woken()
    assert await destination.flow_key("probe") is None
    assert await destination.slots_held() == set()


async def test_a_probe_refused_by_the_rate_is_not_taken(
    gated: Gated, gate: Gate, engine: AsyncEngine
) -> None:
    destination = await gated(rate_limit_per_second=0.01, max_in_flight=10)
    await set_columns(engine, destination, "breaker_trips = 1")
    probe = await destination.grant(5)
    assert (probe.count, probe.reason) == (1, "probe")
    await gate.release({destination.endpoint_id: [probe.slot(0)]})

    # The next start is 100 s away: the rate refuses, and the probe stays free for whoever
    # comes when it is due.
    refused = await destination.grant(5)
    assert (refused.count, refused.reason) == (0, "rate")
    for name in ("probe", "waiting"):
        assert await destination.flow_key(name) is None
    assert await destination.slots_held() == set()


async def test_a_paused_destination_is_granted_nothing_and_nothing_is_reserved(
    gated: Gated, gate: Gate, engine: AsyncEngine
) -> None:
    by_redis = await gated(rate_limit_per_second=10, max_in_flight=3)
    by_database = await gated(rate_limit_per_second=10, max_in_flight=3)
    await set_columns(engine, by_database, "paused_until = now() + interval '1 minute'")
    await gate.pause(by_redis.endpoint_id, 30)  # a Retry-After seen by some worker a moment ago

    for destination, longest in ((by_redis, 30.0), (by_database, 60.0)):
        grant = await destination.grant(5)
        assert (grant.count, grant.reason) == (0, "paused")
        assert 0 < grant.reopens_in <= longest
        for name in ("tat", "waiting", "probe"):
            assert await destination.flow_key(name) is None
        assert await destination.slots_held() == set()
