"""The record that ends an ordered head (``delivery_records.record_ordered``) against the real
PostgreSQL: one round trip for the lock, the record, the hand-on and the next head's lease --
and, though one call, its hand-on sees a delivery that a writer holding the stream's lock
committed while the call waited for it (a single statement would read the snapshot it started
with, and leave that delivery stranded behind a stream with no head)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_engine, create_sessionmaker, single_statements
from app.engine.repository import delivery_records
from tests.fixtures.api import new_endpoint
from tests.fixtures.leases import LEASE, accepted, claim, success
from tests.fixtures.stack import Stack, plain_dsn
from tests.fixtures.waiting import delivery_row, eventually
from tests.fixtures.wire import PostgresReader, counting_proxy

# A copy of a stream's only delivery, numbered second and waiting behind it: what an accept
# holding the stream's lock writes ($1 the copy's id, in the same day as the original $2).
_ACCEPTED_BEHIND = """
INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                        stream, stream_seq, ordering_key)
SELECT $1, tenant_id, endpoint_id, event_id, event_type, region, 'pending', stream, 2,
       ordering_key
  FROM deliveries WHERE id = $2
"""


async def _ordered_head(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    connection: asyncpg.Connection,
    settings: Settings,
    deliveries: int,
) -> tuple[dict[str, Any], Any]:
    """An endpoint ordering all its deliveries, ``deliveries`` accepted, and its head claimed."""
    endpoint = await new_endpoint(client, tenant, ordering="endpoint")
    await accepted(client, tenant, engine, endpoint["id"], deliveries)
    [head] = (await claim(connection, settings, endpoint["id"], limit=10)).rows
    return endpoint, head


async def test_ending_a_head_hands_on_and_leases_the_next_in_one_round_trip(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
    stack: Stack,
) -> None:
    endpoint, first = await _ordered_head(client, tenant, engine, connection, settings, 3)
    stream = (endpoint["id"], "")

    async with counting_proxy(stack.database_url, PostgresReader) as (url, postgres):
        counted = create_engine(url, pool_size=1)
        try:
            async with single_statements(create_sessionmaker(counted)) as proxied:
                # The first record prepares the statement on the connection; the second is
                # what every record after it costs.
                warm = await delivery_records.record_ordered(
                    proxied, [success(first)], [stream], continued=[stream], lease_seconds=LEASE
                )
                [head] = warm.leased
                postgres.clear()
                record = await delivery_records.record_ordered(
                    proxied, [success(head)], [stream], continued=[stream], lease_seconds=LEASE
                )
                round_trips = postgres.round_trips
        finally:
            await counted.dispose()

    assert round_trips == 1
    assert record.recorded == {head.id}
    [(next_id, *_)] = record.heads
    [leased] = record.leased
    assert leased.id == next_id != head.id
    # Leased as a claim leases, with what its attempt needs.
    assert leased.url == endpoint["url"] and leased.payload and leased.stream == ""
    assert (await delivery_row(engine, head.id))["state"] == "succeeded"
    stored = await delivery_row(engine, next_id)
    assert stored["state"] == "leased" and stored["lease_token"] == leased.token


async def test_the_hand_on_sees_what_the_streams_lock_holder_committed_meanwhile(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    settings: Settings,
    connection: asyncpg.Connection,
    stack: Stack,
) -> None:
    endpoint, head = await _ordered_head(client, tenant, engine, connection, settings, 1)
    stream = (endpoint["id"], "")
    behind = f"{head.id}z"  # sorts after the head: the same day's partition

    writer = await asyncpg.connect(plain_dsn(stack.database_url))
    try:
        holding = writer.transaction()
        await holding.start()
        await writer.execute(
            "SELECT FROM streams WHERE endpoint_id = $1 AND stream = '' FOR UPDATE", endpoint["id"]
        )
        record = asyncio.create_task(
            delivery_records.record_ordered(
                connection, [success(head)], [stream], continued=[stream], lease_seconds=LEASE
            )
        )

        async def waiting_for_the_lock() -> int:
            waiting: int = await writer.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock'",
                connection.get_server_pid(),
            )
            return waiting

        await eventually(waiting_for_the_lock, lambda waiting: waiting == 1)
        await writer.execute(_ACCEPTED_BEHIND, behind, head.id)
        await writer.execute(
            "UPDATE streams SET next_seq = 3 WHERE endpoint_id = $1 AND stream = ''",
            endpoint["id"],
        )
        await holding.commit()
        written = await record
    finally:
        await writer.close()

    assert written.recorded == {head.id}
    assert [new_head[0] for new_head in written.heads] == [behind]
    assert [leased.id for leased in written.leased] == [behind]
