"""Recording and giving back many leases in one statement against the real PostgreSQL, each
fenced by its own token: a stale token changes nothing, a success heals its endpoint once."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.states import DeliveryState
from app.engine.repository import delivery_records
from tests.fixtures.database import sql
from tests.fixtures.leases import accepted, claim, expire_lease, success, wake
from tests.fixtures.waiting import count_rows, delivery_row


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
    await sql(
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
    await sql(
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


async def test_a_lease_cancelled_under_its_holder_is_recorded_and_stays_cancelled(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
) -> None:
    await accepted(client, tenant, engine, endpoint["id"], 3)
    retried, succeeded, unsent = (await claim(connection, settings, endpoint["id"], limit=3)).rows
    for row in (retried, succeeded, unsent):
        cancelled = await client.post(f"/v1/deliveries/{row.id}/cancel", headers=tenant)
        assert cancelled.json()["state"] == "cancelled"
    before = {row.id: await delivery_row(engine, row.id) for row in (retried, succeeded, unsent)}
    retry = success(
        retried,
        state=DeliveryState.ENQUEUED,
        delay_seconds=60.0,
        outcome="retryable",
        status_code=503,
    )

    recorded = await delivery_records.record_batch(connection, [retry, success(succeeded)])
    given_back = await delivery_records.release_batch(connection, [(unsent.id, unsent.token)])

    # Each lease still ended -- recorded or given back -- and none left its row cancelled.
    assert recorded == {retried.id, succeeded.id} and given_back == {unsent.id}
    for row, status in ((retried, 503), (succeeded, 200), (unsent, None)):
        stored = await delivery_row(engine, row.id)
        assert stored["state"] == "cancelled"
        assert stored["completed_at"] == before[row.id]["completed_at"]
        assert stored["lease_token"] is None and stored["dead_reason"] is None
        assert stored["last_status_code"] == status
        wanted_attempts = 0 if status is None else 1
        assert await count_rows(engine, "attempts", "delivery_id = :d", d=row.id) == wanted_attempts
    assert await wake(connection, settings, endpoint["id"]) is None  # nothing live is left
