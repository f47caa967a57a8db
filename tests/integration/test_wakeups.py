"""Per-destination wake-ups against the session's real Redis: arm, take, settle, the bell."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from typing import cast

import pytest
from arq.connections import ArqRedis
from prometheus_client import REGISTRY
from redis.asyncio import ConnectionPool

from app.core.config import Settings
from app.flow.service.wakeups import Arm, Taken, WakeSnapshot, Wakeups
from tests.fixtures.engine import redis_now_us

REGION = "test"
TENANTS = f"herald:wake:{{{REGION}}}:tenants"
BELL = f"herald:wake:{{{REGION}}}:bell"
HOLD = 10.0  # seconds: longer than any test here runs between a take and its settle


@pytest.fixture
def wakeups(redis: ArqRedis) -> Wakeups:
    return Wakeups(redis, REGION)


@pytest.fixture
async def bell_connection(settings: Settings) -> AsyncIterator[ArqRedis]:
    """A connection of its own for BLPOP, without a socket timeout (as a taker's would be)."""
    assert settings.redis_url is not None
    connection = ArqRedis(ConnectionPool.from_url(settings.redis_url))
    yield connection
    await connection.aclose()


async def take(wakeups: Wakeups, token: str = "t1", hold: float = HOLD) -> Taken:  # noqa: S107
    return await wakeups.take(hold_seconds=hold, token=token)


async def bell_tokens(redis: ArqRedis) -> int:
    # redis-py types LLEN for its sync and asyncio clients at once; this one is asyncio.
    return await cast("Awaitable[int]", redis.llen(BELL))


def taken_total() -> float:
    return REGISTRY.get_sample_value("herald_wakeups_total") or 0.0


async def test_arm_only_ever_moves_an_entry_earlier(wakeups: Wakeups, redis: ArqRedis) -> None:
    key = f"herald:wake:{{{REGION}}}:t:tenant-a"
    assert await wakeups.arm([Arm("tenant-a", "ep-1", 60), Arm("tenant-a", "ep-2", 60)]) == 2
    score = await redis.zscore(key, "ep-1")

    assert await wakeups.arm([Arm("tenant-a", "ep-1", 120)]) == 0
    assert await redis.zscore(key, "ep-1") == score
    assert await wakeups.arm([Arm("tenant-a", "ep-1", 60)]) == 0  # not earlier either

    assert await wakeups.arm([Arm("tenant-a", "ep-1", 30)]) == 1
    snapshot = await wakeups.snapshot("tenant-a", "ep-1")
    assert snapshot.due_in is not None and 0 < snapshot.due_in <= 30
    assert not snapshot.held
    assert await wakeups.arm([Arm("tenant-a", "ep-1")]) == 1  # now
    due_in = (await wakeups.snapshot("tenant-a", "ep-1")).due_in
    assert due_in is not None and due_in <= 0  # due now (how long ago depends on the machine)
    assert await wakeups.snapshot("tenant-a", "ep-9") == WakeSnapshot(None, held=False)


async def test_takes_rotate_tenants_so_a_big_tenant_gets_one_turn_per_round(
    wakeups: Wakeups,
) -> None:
    # Tenant a has 5 due destinations, b 2, c 1; all armed by one call, so all at one instant.
    arms = [Arm("tenant-a", f"a{i}") for i in range(5)]
    arms += [Arm("tenant-b", "b0"), Arm("tenant-b", "b1"), Arm("tenant-c", "c0")]
    assert await wakeups.arm(arms) == 8
    before = taken_total()

    turns = [await take(wakeups, token=f"take-{i}") for i in range(8)]

    assert [t.tenant_id for t in turns] == [f"tenant-{name}" for name in "abcabaaa"]
    assert [t.others_due for t in turns] == [True] * 5 + [False] * 3
    assert sorted(t.endpoint_id or "" for t in turns) == sorted(a.endpoint_id for a in arms)
    assert [t.token for t in turns] == [f"take-{i}" for i in range(8)]
    assert taken_total() == before + 8
    nothing = await take(wakeups)  # everything is held now
    assert nothing.tenant_id is None and nothing.endpoint_id is None
    assert not nothing.others_due
    assert 0 < nothing.retry_in <= 1.0


async def test_a_settle_does_not_bring_a_rotated_tenant_back_to_the_front(
    wakeups: Wakeups,
) -> None:
    await wakeups.arm([Arm("tenant-a", f"a{i}") for i in range(3)] + [Arm("tenant-b", "b0")])
    first = await take(wakeups)
    assert first.tenant_id == "tenant-a"

    # a still has due destinations: it keeps its place at the back, behind b.
    await wakeups.settle(first, in_seconds=30)

    assert (await take(wakeups, token="t2")).tenant_id == "tenant-b"
    assert (await take(wakeups, token="t3")).tenant_id == "tenant-a"


async def test_a_taken_entry_is_held_and_comes_due_again_when_the_hold_ends(
    wakeups: Wakeups, redis: ArqRedis, bell_connection: ArqRedis
) -> None:
    await wakeups.arm([Arm("tenant-a", "ep-1")])
    first = await take(wakeups, token="crashed", hold=0.05)
    assert (first.tenant_id, first.endpoint_id) == ("tenant-a", "ep-1")
    held = await wakeups.snapshot("tenant-a", "ep-1")
    assert held.held and held.due_in is not None and held.due_in > 0

    # The taker that held it never settles (it crashed): another takes it once the hold ends.
    while (again := await take(wakeups, token="second")).endpoint_id is None:
        assert 0 < again.retry_in <= 1.0
        await wakeups.wait_bell(bell_connection, again.retry_in)
    assert (again.tenant_id, again.endpoint_id, again.token) == ("tenant-a", "ep-1", "second")

    await wakeups.settle(first, in_seconds=None)  # no longer its hold: the entry stays
    assert (await wakeups.snapshot("tenant-a", "ep-1")).held
    await wakeups.settle(again, in_seconds=None)
    assert (await wakeups.snapshot("tenant-a", "ep-1")).due_in is None


async def test_settle_with_our_hold_sets_the_entry_exactly_or_removes_it(
    wakeups: Wakeups, redis: ArqRedis
) -> None:
    await wakeups.arm([Arm("tenant-a", "ep-1"), Arm("tenant-a", "ep-2", 60)])
    taken = await take(wakeups)
    assert taken.endpoint_id == "ep-1"

    await wakeups.settle(taken, in_seconds=30)  # later than the hold: set exactly, no longer held
    snapshot = await wakeups.snapshot("tenant-a", "ep-1")
    assert snapshot.due_in is not None and HOLD < snapshot.due_in <= 30
    assert not snapshot.held
    assert (await take(wakeups, token="t2")).endpoint_id is None

    assert await wakeups.arm([Arm("tenant-a", "ep-1")]) == 1
    taken = await take(wakeups, token="t3")
    await wakeups.settle(taken, in_seconds=None)
    assert await wakeups.snapshot("tenant-a", "ep-1") == WakeSnapshot(None, held=False)
    assert await wakeups.count_entries() == 1
    # The tenant's score follows its remaining entry, a minute away.
    assert (await take(wakeups, token="t4")).retry_in == 1.0

    await wakeups.arm([Arm("tenant-a", "ep-2")])
    taken = await take(wakeups, token="t6")
    await wakeups.settle(taken, in_seconds=None)
    # Nothing left: no key of the region stays behind but the bell.
    assert await wakeups.count_entries() == 0
    assert set(await redis.keys(f"herald:wake:{{{REGION}}}:*")) <= {BELL.encode()}


async def test_an_arm_between_take_and_settle_wins(wakeups: Wakeups) -> None:
    await wakeups.arm([Arm("tenant-a", "ep-1")])
    taken = await take(wakeups)
    assert await wakeups.arm([Arm("tenant-a", "ep-1")]) == 1  # held until later: now is earlier
    assert not (await wakeups.snapshot("tenant-a", "ep-1")).held

    # The holder's claim predates the new work: its settle may not push the entry later.
    await wakeups.settle(taken, in_seconds=60)
    due_in = (await wakeups.snapshot("tenant-a", "ep-1")).due_in
    assert due_in is not None and due_in <= 0

    taken = await take(wakeups, token="t2")
    assert await wakeups.arm([Arm("tenant-a", "ep-1")]) == 1
    await wakeups.settle(taken, in_seconds=None)  # nor remove it
    due_in = (await wakeups.snapshot("tenant-a", "ep-1")).due_in
    assert due_in is not None and due_in <= 0


async def test_an_arm_that_moves_nothing_still_breaks_the_hold(wakeups: Wakeups) -> None:
    # A retry recorded while the destination is held, due after the hold ends: the holder's
    # claim did not see it, so the holder must not remove the entry.
    await wakeups.arm([Arm("tenant-a", "ep-1")])
    taken = await take(wakeups)
    assert await wakeups.arm([Arm("tenant-a", "ep-1", 30)]) == 0
    await wakeups.settle(taken, in_seconds=None)
    due_in = (await wakeups.snapshot("tenant-a", "ep-1")).due_in
    assert due_in is not None and due_in <= HOLD


async def test_a_future_entry_is_not_taken_before_it_is_due(
    wakeups: Wakeups, redis: ArqRedis, bell_connection: ArqRedis
) -> None:
    await wakeups.arm([Arm("tenant-a", "later", 60)])
    nothing = await take(wakeups)
    assert nothing.tenant_id is None
    assert nothing.retry_in == 1.0  # capped: the entry is a minute away

    armed_at = await redis_now_us(redis)
    await wakeups.arm([Arm("tenant-b", "soon", 0.2)])
    while (taken := await take(wakeups)).endpoint_id is None:
        assert 0 < taken.retry_in <= 0.2
        await wakeups.wait_bell(bell_connection, taken.retry_in)
    assert taken.endpoint_id == "soon"
    assert await redis_now_us(redis) - armed_at >= 200_000


async def test_take_repairs_stale_tenant_scores(wakeups: Wakeups, redis: ArqRedis) -> None:
    await wakeups.arm([Arm("tenant-a", "later", 60), Arm("tenant-b", "now")])
    await redis.zadd(TENANTS, {"ghost": 0, "tenant-a": 0})  # an emptied tenant, a stale score

    taken = await take(wakeups)

    assert taken.endpoint_id == "now"
    assert not taken.others_due
    assert await redis.zscore(TENANTS, "ghost") is None
    assert await redis.zscore(TENANTS, "tenant-a") == await redis.zscore(
        f"herald:wake:{{{REGION}}}:t:tenant-a", "later"
    )


async def test_the_bell_rings_only_when_something_comes_due_earlier(
    wakeups: Wakeups, redis: ArqRedis, bell_connection: ArqRedis
) -> None:
    await wakeups.arm([Arm("tenant-a", "later", 60)])  # the first entry is the head: it rings
    assert await bell_tokens(redis) == 1
    await wakeups.wait_bell(bell_connection, 3600)  # a token waiting: returns at once, takes it
    assert await bell_tokens(redis) == 0

    assert await wakeups.arm([Arm("tenant-b", "even-later", 120)]) == 1
    assert await bell_tokens(redis) == 0
    assert await wakeups.arm([Arm("tenant-b", "sooner", 30)]) == 1
    assert await bell_tokens(redis) == 1
    await redis.delete(BELL)

    assert await wakeups.arm([Arm("tenant-c", "now")]) == 1
    assert await bell_tokens(redis) == 1
    await redis.delete(BELL)
    assert await wakeups.arm([Arm("tenant-c", "also-later", 45)]) == 1  # behind a due head
    assert await bell_tokens(redis) == 0

    # The bell never holds more than a few tokens, however many destinations come due.
    await wakeups.arm([Arm("tenant-d", f"ep-{i}") for i in range(20)])
    assert await bell_tokens(redis) == 4


async def test_a_settle_that_leaves_work_due_rings_the_bell(
    wakeups: Wakeups, redis: ArqRedis
) -> None:
    await wakeups.arm([Arm("tenant-a", "ep-1")])
    taken = await take(wakeups)
    await redis.delete(BELL)
    await wakeups.settle(taken, in_seconds=60)
    assert await bell_tokens(redis) == 0  # nothing due, and no earlier than the head was

    await wakeups.arm([Arm("tenant-a", "ep-1")])
    taken = await take(wakeups, token="t2")
    await redis.delete(BELL)
    await wakeups.settle(taken, in_seconds=0)  # more due rows: another taker may continue
    assert await bell_tokens(redis) == 1


async def test_wait_bell_returns_when_an_arm_makes_something_due(
    wakeups: Wakeups, redis: ArqRedis, bell_connection: ArqRedis
) -> None:
    waiting = asyncio.create_task(wakeups.wait_bell(bell_connection, 3600))
    await wakeups.arm([Arm("tenant-a", "ep-1")])
    await waiting
    assert await bell_tokens(redis) == 0  # the waiter took the arm's token


async def test_count_entries_is_one_per_destination_whatever_the_arms(
    wakeups: Wakeups, redis: ArqRedis
) -> None:
    destinations = [Arm(f"tenant-{i % 7}", f"ep-{i}", i % 5) for i in range(1200)]
    assert await wakeups.arm(destinations) == 1200  # more than one script call, one pipeline
    await redis.script_flush()  # Redis forgot the scripts (a restart): loaded again on demand
    for _ in range(3):
        assert await wakeups.arm([*destinations, Arm("tenant-0", "ep-0", 99)]) == 0
    assert await wakeups.count_entries() == 1200
    assert await redis.zcard(TENANTS) == 7
    assert await wakeups.arm([]) == 0

    elsewhere = Wakeups(redis, "elsewhere")
    assert await elsewhere.count_entries() == 0
    assert (await elsewhere.take(hold_seconds=HOLD, token="t")).endpoint_id is None
