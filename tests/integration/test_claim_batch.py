"""The batch claim against the real PostgreSQL: a destination's due rows leased in due order,
each with its own token, exactly once under concurrency; and when the destination next has one.
Times are compared on the database's clock."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.core.sealing import KeyRing
from app.engine.repository import delivery_leases, delivery_records
from tests.fixtures.api import new_endpoint
from tests.fixtures.database import sql
from tests.fixtures.leases import (
    LEASE,
    accepted,
    claim,
    due_in,
    endpoint_tenant,
    expire_lease,
    seconds_until,
    success,
    wake,
)
from tests.fixtures.stack import SECRET_KEYS, Stack, plain_dsn
from tests.fixtures.waiting import count_rows, delivery_row


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
    assert {row["state"] for row in before.values()} == {"pending"}  # no worker serves them here
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
        assert row.url == endpoint["url"] and row.payload
        # The claim reads the secret sealed, as stored; it opens to the one the API gave.
        assert [
            KeyRing.parse(SECRET_KEYS).open_text(s, f"endpoint:{endpoint['id']}:signing")
            for s in row.sealed_secrets
        ] == [endpoint["secret"]]
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
    await sql(engine, "UPDATE deliveries SET region = 'elsewhere' WHERE id = :d", d=mine[2])
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


async def test_a_lease_is_no_longer_held_to_start_once_cancelled_or_expired(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    await accepted(client, tenant, engine, endpoint["id"], 3)
    kept, cancelled, expired = (await claim(connection, settings, endpoint["id"], limit=3)).rows
    assert (await client.post(f"/v1/deliveries/{cancelled.id}/cancel", headers=tenant)).json()[
        "state"
    ] == "cancelled"
    await expire_lease(engine, expired.id)

    held = {
        row.id: await delivery_leases.still_held(connection, row.id, row.token)
        for row in (kept, cancelled, expired)
    }
    assert held == {kept.id: True, cancelled.id: False, expired.id: False}
    assert not await delivery_leases.still_held(connection, kept.id, uuid.uuid4())  # another's


async def test_hot_paths_run_one_plan_and_sessions_plan_for_their_values(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    """Planned for its values, the claim was planned over every day's partition each time;
    its plan is the same whatever the destination, so it is made once per connection. A
    session's statements are planned for theirs (listings rely on it)."""
    ids = await accepted(client, tenant, engine, endpoint["id"], 3)

    async def plans() -> tuple[int, int]:
        # On a pooled connection, which an earlier claim may have prepared the statement on.
        row = await connection.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
            delivery_leases._CLAIMS["push"],
        )
        return (0, 0) if row is None else (row["generic_plans"], row["custom_plans"])

    generic_before, custom_before = await plans()
    for _ in ids:
        assert len((await claim(connection, settings, endpoint["id"], limit=1)).rows) == 1

    assert await plans() == (generic_before + len(ids), custom_before)
    assert {(await delivery_row(engine, d))["state"] for d in ids} == {"leased"}
    async with create_sessionmaker(engine)() as session, session.begin():
        shown = await session.execute(text("SHOW plan_cache_mode"))
        assert shown.scalar_one() == "force_custom_plan"
    assert await connection.fetchval("SHOW plan_cache_mode") == "force_generic_plan"
