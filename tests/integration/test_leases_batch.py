"""The batch lease statements against the real PostgreSQL: claim a destination's due rows, say
when it next has one, record and give back many leases at once, each fenced by its own token.
Times are compared on the database's clock."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.db import create_sessionmaker, single_statements
from app.engine.repository import delivery_leases, delivery_records
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.repository.delivery_records import Finished, Recording
from app.states import DeliveryState
from tests.support import (
    Stack,
    count_rows,
    delivery_row,
    fast_path_settled,
    new_endpoint,
    plain_dsn,
)

LEASE = 30.0


@pytest.fixture
async def connection(engine: AsyncEngine) -> AsyncIterator[asyncpg.Connection]:
    async with single_statements(create_sessionmaker(engine)) as driver:
        yield driver


async def execute(engine: AsyncEngine, statement: str, **params: Any) -> None:
    async with engine.begin() as db:
        await db.execute(text(statement), params)


async def accepted(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, endpoint_id: str, n: int
) -> list[str]:
    """``n`` deliveries to the endpoint, published (so ``enqueued``: no worker serves them here),
    in accept order, which is id order."""
    items = [
        {"endpoint_id": endpoint_id, "event_type": "a.b", "payload": {"n": i}} for i in range(n)
    ]
    response = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    assert response.status_code == 200, response.text
    await fast_path_settled(engine)
    ids = [item["delivery"]["id"] for item in response.json()["items"]]
    assert ids == sorted(ids)
    return ids


async def due_in(engine: AsyncEngine, seconds: float, *delivery_ids: str) -> None:
    """Makes the deliveries due ``seconds`` from now: one now(), so equal times are ties."""
    await execute(
        engine,
        "UPDATE deliveries SET next_attempt_at = now() + make_interval(secs => :s)"
        " WHERE id = ANY(:d)",
        s=seconds,
        d=list(delivery_ids),
    )


async def expire_lease(engine: AsyncEngine, delivery_id: str) -> None:
    """As if its worker died or stalled past the lease."""
    await execute(
        engine,
        "UPDATE deliveries SET lease_until = now() - interval '1 second' WHERE id = :d",
        d=delivery_id,
    )


async def claim(
    connection: asyncpg.Connection,
    settings: Settings,
    endpoint_id: str,
    limit: int,
    lease: float = LEASE,
) -> delivery_leases.ClaimBatch:
    return await delivery_leases.claim_batch(
        connection,
        region=settings.region,
        endpoint_id=endpoint_id,
        limit=limit,
        lease_seconds=lease,
    )


async def wake(
    connection: asyncpg.Connection, settings: Settings, endpoint_id: str
) -> float | None:
    return await delivery_leases.next_wake(
        connection, region=settings.region, endpoint_id=endpoint_id
    )


async def seconds_until(connection: asyncpg.Connection, column: str, delivery_id: str) -> float:
    """From now() to the delivery's ``column``: inside the caller's transaction, on its now()."""
    seconds: float = await connection.fetchval(
        f"SELECT extract(epoch FROM {column} - now())::float8 FROM deliveries"  # noqa: S608
        " WHERE id = $1",
        delivery_id,
    )
    return seconds


def success(row: ClaimedDelivery, **changes: Any) -> Recording:
    """The claimed row's attempt ending in a success, unless ``changes`` say otherwise."""
    finished = Finished(
        DeliveryState.SUCCEEDED,
        delay_seconds=None,
        dead_reason=None,
        attempt_number=row.attempt_number,
        outcome="success",
        status_code=200,
        started_at=datetime.now(UTC),
        duration_ms=4,
    )
    return Recording(row.id, row.token, dataclasses.replace(finished, **changes))


async def endpoint_tenant(engine: AsyncEngine, endpoint_id: str) -> str:
    async with engine.connect() as db:
        query = text("SELECT tenant_id FROM endpoints WHERE id = :e")
        tenant_id: str = (await db.execute(query, {"e": endpoint_id})).scalar_one()
    return tenant_id


async def test_claims_due_rows_in_due_order_each_with_its_own_token(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    ids = await accepted(client, tenant, engine, endpoint["id"], 8)
    # Due order differs from id order; equal due times fall back to id order.
    await due_in(engine, -180, ids[7], ids[6])
    await due_in(engine, -120, ids[0])
    await due_in(engine, -60, ids[5], ids[4], ids[2], ids[1])
    await due_in(engine, 3600, ids[3])
    before = {d: await delivery_row(engine, d) for d in ids}
    assert {row["state"] for row in before.values()} == {"enqueued"}  # no worker serves them here
    assert before[ids[6]]["next_attempt_at"] == before[ids[7]]["next_attempt_at"]

    batch = await claim(connection, settings, endpoint["id"], limit=5)

    assert [row.id for row in batch.rows] == [ids[6], ids[7], ids[0], ids[1], ids[2]]
    assert len({row.token for row in batch.rows}) == 5
    assert batch.next_wake is not None and batch.next_wake <= 0  # ids[4] and ids[5] are due
    tenant_id = await endpoint_tenant(engine, endpoint["id"])
    for row in batch.rows:
        stored = await delivery_row(engine, row.id)
        assert (stored["state"], stored["lease_token"], stored["attempt_count"]) == (
            "leased",
            row.token,
            1,
        )
        assert stored["next_attempt_at"] == before[row.id]["next_attempt_at"]
        assert (row.tenant_id, row.endpoint_id, row.attempt_number, row.attempts_used) == (
            tenant_id,
            endpoint["id"],
            1,
            1,
        )
        assert row.url == endpoint["url"] and len(row.secrets) == 1 and row.payload
        assert row.endpoint_enabled and not row.endpoint_deleted
        assert 0 < row.lease_left <= LEASE
    for untouched in (ids[3], ids[4], ids[5]):  # not yet due; over the limit
        assert await delivery_row(engine, untouched) == before[untouched]


async def test_live_leases_are_skipped_and_expired_ones_taken_over(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    live, expired, waiting = await accepted(client, tenant, engine, endpoint["id"], 3)
    first = await claim(connection, settings, endpoint["id"], limit=2)
    assert [row.id for row in first.rows] == [live, expired]
    await expire_lease(engine, expired)
    held = await delivery_row(engine, live)

    second = await claim(connection, settings, endpoint["id"], limit=10)

    assert [row.id for row in second.rows] == [expired, waiting]
    taken_over = second.rows[0]
    assert taken_over.attempt_number == 2 and taken_over.token != first.rows[1].token
    assert await delivery_row(engine, live) == held
    # Only the live lease is left: the destination wakes when it ends.
    assert second.next_wake is not None and 0 < second.next_wake <= LEASE


async def test_claims_only_its_own_destination_in_its_own_region(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    other = await new_endpoint(client, tenant, url="http://127.0.0.1:9/other")
    mine = await accepted(client, tenant, engine, endpoint["id"], 3)
    theirs = await accepted(client, tenant, engine, other["id"], 2)
    await execute(engine, "UPDATE deliveries SET region = 'elsewhere' WHERE id = :d", d=mine[2])
    before = {d: await delivery_row(engine, d) for d in (*theirs, mine[2])}

    batch = await claim(connection, settings, endpoint["id"], limit=10)

    assert [row.id for row in batch.rows] == mine[:2]
    # Not due now: the due rows of the other region and the other endpoint do not count.
    assert batch.next_wake == pytest.approx(LEASE)
    for untouched, row in before.items():
        assert await delivery_row(engine, untouched) == row
    elsewhere = await delivery_leases.claim_batch(
        connection, region="elsewhere", endpoint_id=endpoint["id"], limit=10, lease_seconds=LEASE
    )
    assert [row.id for row in elsewhere.rows] == [mine[2]]


async def test_concurrent_claims_take_each_row_exactly_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    stack: Stack,
) -> None:
    ids = await accepted(client, tenant, engine, endpoint["id"], 100)

    async def claimer() -> list[str]:
        own = await asyncpg.connect(plain_dsn(stack.database_url))
        taken: list[str] = []
        try:
            while rows := (await claim(own, settings, endpoint["id"], limit=7)).rows:
                taken += [row.id for row in rows]
        finally:
            await own.close()
        return taken

    claims = await asyncio.gather(*(claimer() for _ in range(4)))

    everything = [delivery_id for taken in claims for delivery_id in taken]
    assert sorted(everything) == ids  # each row once, none left behind
    assert await count_rows(engine, "deliveries", "state = 'leased' AND attempt_count = 1") == 100


async def test_next_wake_is_due_now_while_due_rows_remain(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    await accepted(client, tenant, engine, endpoint["id"], 3)
    batch = await claim(connection, settings, endpoint["id"], limit=2)
    assert len(batch.rows) == 2
    assert batch.next_wake is not None and batch.next_wake <= 0
    alone = await wake(connection, settings, endpoint["id"])
    assert alone is not None and alone <= 0


async def test_next_wake_is_the_soonest_due_time_when_only_future_rows_remain(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    first, second, third, fourth = await accepted(client, tenant, engine, endpoint["id"], 4)
    await due_in(engine, 300, first)
    await due_in(engine, 120, second)  # the soonest, though not the first by id
    async with connection.transaction():  # one now() for the claim and the expectation
        # A full claim (its limit reached) still tells what is left; its own leases end later.
        full = await claim(connection, settings, endpoint["id"], limit=2, lease=3600)
        soonest = await seconds_until(connection, "next_attempt_at", second)
    assert [row.id for row in full.rows] == [third, fourth]
    assert full.next_wake == pytest.approx(soonest, abs=1e-6)
    assert 0 < soonest <= 120

    async with connection.transaction():
        empty = await claim(connection, settings, endpoint["id"], limit=2)
        alone = await wake(connection, settings, endpoint["id"])
        soonest = await seconds_until(connection, "next_attempt_at", second)
    assert empty.rows == [] and empty.next_wake == pytest.approx(soonest, abs=1e-6)
    assert alone == pytest.approx(soonest, abs=1e-6)


async def test_next_wake_is_the_lease_end_when_only_leased_rows_remain(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    first, second = await accepted(client, tenant, engine, endpoint["id"], 2)
    [leased_first] = (await claim(connection, settings, endpoint["id"], limit=1)).rows
    # The rows a claim takes are live too: they wake the destination when their leases end.
    batch = await claim(connection, settings, endpoint["id"], limit=5, lease=3600)
    assert [row.id for row in batch.rows] == [second]

    async with connection.transaction():
        alone = await wake(connection, settings, endpoint["id"])
        lease_end = await seconds_until(connection, "lease_until", first)
    assert leased_first.id == first and 0 < lease_end <= LEASE
    assert alone == pytest.approx(lease_end, abs=1e-6)
    assert alone is not None and batch.next_wake is not None
    assert alone <= batch.next_wake <= LEASE


async def test_next_wake_is_none_when_nothing_is_live(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    assert await claim(connection, settings, endpoint["id"], limit=5) == (
        delivery_leases.ClaimBatch([], None)
    )
    await accepted(client, tenant, engine, endpoint["id"], 2)
    batch = await claim(connection, settings, endpoint["id"], limit=2)
    assert len(batch.rows) == 2 and batch.next_wake is not None  # their leases
    await delivery_records.record_batch(connection, [success(row) for row in batch.rows])

    assert await wake(connection, settings, endpoint["id"]) is None
    assert await claim(connection, settings, endpoint["id"], limit=5) == (
        delivery_leases.ClaimBatch([], None)
    )


async def test_next_wake_past_its_probe_is_early_never_late(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    # More long leases than the probe reads, and behind them one row due in 60 s: the probe
    # cannot see that row, and must not answer later than it.
    count = delivery_leases.WAKE_PROBE_ROWS + 10
    ids = await accepted(client, tenant, engine, endpoint["id"], count + 1)
    await due_in(engine, 60, ids[-1])
    leased = await claim(connection, settings, endpoint["id"], limit=count, lease=3600)
    assert len(leased.rows) == count

    async with connection.transaction():
        alone = await wake(connection, settings, endpoint["id"])
        due = await seconds_until(connection, "next_attempt_at", ids[-1])
    assert alone is not None and alone <= due


async def test_record_batch_is_fenced_row_by_row(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    await accepted(client, tenant, engine, endpoint["id"], 5)
    batch = await claim(connection, settings, endpoint["id"], limit=5)
    lost = batch.rows[2]
    await expire_lease(engine, lost.id)  # its worker stalled; another took it over
    [taken_over] = (await claim(connection, settings, endpoint["id"], limit=5)).rows
    assert taken_over.id == lost.id
    before = await delivery_row(engine, lost.id)

    recorded = await delivery_records.record_batch(connection, [success(row) for row in batch.rows])

    assert recorded == {row.id for row in batch.rows} - {lost.id}
    assert await count_rows(engine, "attempts") == 4
    assert await count_rows(engine, "attempts", "delivery_id = :d", d=lost.id) == 0
    assert await delivery_row(engine, lost.id) == before
    for row in batch.rows:
        if row.id in recorded:
            stored = await delivery_row(engine, row.id)
            assert stored["state"] == "succeeded" and stored["completed_at"] is not None
            assert stored["lease_token"] is None and stored["last_status_code"] == 200


async def test_a_success_marks_its_endpoint_healthy_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    await accepted(client, tenant, engine, endpoint["id"], 4)
    await execute(
        engine,
        "UPDATE endpoints SET consecutive_failures = 3, failing_since = now(), breaker_trips = 1,"
        " paused_until = now() + interval '1 minute', pause_reason = 'breaker' WHERE id = :e",
        e=endpoint["id"],
    )
    batch = await claim(connection, settings, endpoint["id"], limit=2)

    await delivery_records.record_batch(connection, [success(row) for row in batch.rows])

    async with engine.connect() as db:
        marked = (
            (await db.execute(text("SELECT * FROM endpoints WHERE id = :e"), {"e": endpoint["id"]}))
            .mappings()
            .one()
        )
    assert marked["last_success_at"] is not None
    assert (marked["consecutive_failures"], marked["failing_since"], marked["breaker_trips"]) == (
        0,
        None,
        0,
    )
    assert (marked["paused_until"], marked["pause_reason"]) == (None, None)

    # Healthy and marked within the second: more successes leave the endpoint's row alone.
    await execute(
        engine,
        "UPDATE endpoints SET last_success_at = now() + interval '1 minute' WHERE id = :e",
        e=endpoint["id"],
    )
    async with engine.connect() as db:
        query = text("SELECT xmin::text FROM endpoints WHERE id = :e")
        version = (await db.execute(query, {"e": endpoint["id"]})).scalar_one()
        more = await claim(connection, settings, endpoint["id"], limit=2)
        assert (
            len(await delivery_records.record_batch(connection, [success(r) for r in more.rows]))
            == 2
        )
        assert (await db.execute(query, {"e": endpoint["id"]})).scalar_one() == version


async def test_a_retry_lands_enqueued_at_its_new_due_time(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    await accepted(client, tenant, engine, endpoint["id"], 1)
    [row] = (await claim(connection, settings, endpoint["id"], limit=1)).rows
    before_record = await connection.fetchval("SELECT now()")
    retry = success(
        row,
        state=DeliveryState.ENQUEUED,
        delay_seconds=45.0,
        outcome="retryable",
        status_code=503,
    )

    assert await delivery_records.record_batch(connection, [retry]) == {row.id}

    stored = await delivery_row(engine, row.id)
    assert (stored["state"], stored["lease_token"], stored["lease_until"]) == (
        "enqueued",
        None,
        None,
    )
    assert stored["completed_at"] is None and stored["last_outcome"] == "retryable"
    assert stored["next_attempt_at"] >= before_record + timedelta(seconds=45)
    # Both from the record's own now().
    assert stored["next_attempt_at"] - stored["updated_at"] == timedelta(seconds=45)
    assert await count_rows(engine, "attempts", "outcome = 'retryable'") == 1
    # Not claimable before then.
    later = await claim(connection, settings, endpoint["id"], limit=1)
    assert later.rows == [] and later.next_wake is not None and 0 < later.next_wake <= 45


async def test_a_dead_record_finishes_the_delivery(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    await accepted(client, tenant, engine, endpoint["id"], 2)
    sent, refused = (await claim(connection, settings, endpoint["id"], limit=2)).rows
    before_record = await connection.fetchval("SELECT now()")
    dead = dict(
        state=DeliveryState.DEAD,
        outcome="permanent",
        status_code=400,
        dead_reason="permanent_failure (HTTP 400)",
    )
    unsent = dict(
        state=DeliveryState.DEAD,
        outcome=None,
        status_code=None,
        started_at=None,
        duration_ms=None,
        dead_reason="endpoint_disabled",
    )

    recorded = await delivery_records.record_batch(
        connection, [success(sent, **dead), success(refused, **unsent)]
    )

    assert recorded == {sent.id, refused.id}
    for row, reason in ((sent, dead["dead_reason"]), (refused, "endpoint_disabled")):
        stored = await delivery_row(engine, row.id)
        assert (stored["state"], stored["dead_reason"]) == ("dead", reason)
        assert stored["completed_at"] >= before_record and stored["lease_token"] is None
    assert await count_rows(engine, "attempts") == 1  # nothing was sent for the refused one
    assert await wake(connection, settings, endpoint["id"]) is None


async def test_release_batch_gives_back_uncounted_and_due_and_refuses_a_stale_token(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    ids = await accepted(client, tenant, engine, endpoint["id"], 2)
    accepted_rows = {d: await delivery_row(engine, d) for d in ids}
    given, stale = (await claim(connection, settings, endpoint["id"], limit=2)).rows
    await expire_lease(engine, stale.id)
    [holder] = (await claim(connection, settings, endpoint["id"], limit=2)).rows
    held = await delivery_row(engine, stale.id)

    released = await delivery_records.release_batch(
        connection, [(given.id, given.token), (stale.id, stale.token)]
    )

    assert released == {given.id}
    back = await delivery_row(engine, given.id)
    assert (back["state"], back["attempt_count"], back["lease_token"], back["lease_until"]) == (
        "pending",
        0,
        None,
        None,
    )
    assert back["next_attempt_at"] == accepted_rows[given.id]["next_attempt_at"]
    assert await delivery_row(engine, stale.id) == held and holder.id == stale.id
    # Due at once, and the claim that follows is its first attempt again.
    [again] = (await claim(connection, settings, endpoint["id"], limit=2)).rows
    assert (again.id, again.attempt_number) == (given.id, 1)


async def test_batches_of_nothing_touch_nothing(connection: asyncpg.Connection) -> None:
    assert await delivery_records.record_batch(connection, []) == set()
    assert await delivery_records.release_batch(connection, []) == set()
    token = uuid.uuid4()
    assert await delivery_records.release_batch(connection, [("no-such-delivery", token)]) == set()
