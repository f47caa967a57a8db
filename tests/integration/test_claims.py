"""Claims that wait, leases too short to send on, leases held by others: a worker's pump in this
process against real PostgreSQL, Redis and a receiver. None of them may spin, and none may
leave a delivery to wait for the reconciler."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
from prometheus_client import REGISTRY
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_engine, create_sessionmaker, single_statements
from app.engine.repository import delivery_leases
from app.engine.service.pump import HOLD_SECONDS
from tests.fixtures.api import fast_path_settled, one_delivery, post_deliveries
from tests.fixtures.engine import arm, armed_destinations, pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.recovery import transitions
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, delivery_row, until, wait_state

# A worker sends only while at least 0.5 + (6 - 0.5) / 2 = 3.25 s of its lease is left: a
# claim that costs it more than 2.75 s of the lease leaves too little.
SHORT_REQUESTS = {"request_timeout_seconds": 0.5, "lease_seconds": 6.0}
LONGER_THAN_THE_MARGIN = 3.25


def given_back() -> float:
    return REGISTRY.get_sample_value("herald_leases_given_back_total") or 0.0


async def test_a_claim_that_waited_for_a_pooled_connection_still_sends(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
) -> None:
    delivery_id, endpoint_id = await one_delivery(client, tenant, engine, receiver.url("/pool"))
    pool = create_engine(stack.database_url, pool_size=1)
    try:
        async with pump(settings, pool, policy_cache_seconds=600, **SHORT_REQUESTS) as (
            running,
            gate,
        ):
            await gate.policy(endpoint_id)  # granting it needs no connection now
            async with pool.connect():  # the pool's only connection is busy
                running.start()
                await asyncio.sleep(LONGER_THAN_THE_MARGIN)
            await wait_state(engine, delivery_id, "succeeded")
    finally:
        await pool.dispose()

    # Waiting for a connection cost the lease nothing: the lease starts with the claim.
    assert len(receiver.on("/pool")) == 1
    row = await delivery_row(engine, delivery_id)
    assert row["state"] == "succeeded" and row["attempt_count"] == 1


async def test_a_lease_too_short_to_send_on_is_given_back_and_claimed_again(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    delivery_id, _ = await one_delivery(client, tenant, engine, receiver.url("/back"))
    before = given_back()
    async with pump(settings, engine, **SHORT_REQUESTS) as (running, _):
        # A batch claim skips locked rows: the table's lock is what makes it wait.
        async with deliveries_locked(engine):
            running.start()
            await asyncio.sleep(LONGER_THAN_THE_MARGIN)
        await wait_state(engine, delivery_id, "succeeded")
    # Given back uncounted, and its destination woken at once: the next claim (with a whole
    # lease) sent it, once. No pause first: a claim that skips nothing is not held up by the
    # table lock any more.
    assert len(receiver.on("/back")) == 1
    assert (await delivery_row(engine, delivery_id))["attempt_count"] == 1
    assert await transitions(engine, delivery_id) == [
        ("pending", "leased"),
        ("leased", "pending"),
        ("pending", "leased"),
        ("leased", "succeeded"),
    ]
    assert given_back() == before + 1


async def test_a_lease_that_ran_out_before_it_could_be_given_back_is_claimed_again(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    delivery_id, _ = await one_delivery(client, tenant, engine, receiver.url("/out"))
    lease = {"request_timeout_seconds": 0.5, "lease_seconds": 1.0}
    async with pump(settings, engine, **lease) as (running, _):
        async with deliveries_locked(engine):
            running.start()
            await asyncio.sleep(1.5)  # the lease runs out while its claim waits
        await wait_state(engine, delivery_id, "succeeded")
    # The give-back was refused (the lease had ended), but it woke the destination anyway: its
    # next claim took the expired lease over (the lost claim counts) and sent it.
    assert (await delivery_row(engine, delivery_id))["attempt_count"] == 2
    assert len(receiver.on("/out")) == 1
    assert await count_rows(engine, "reconcile_runs") == 0


async def test_wakes_that_find_a_live_lease_leave_one_wakeup_for_when_it_ends(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    endpoint: dict[str, Any],
) -> None:
    [delivery_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    await fast_path_settled(engine)
    endpoint_id = endpoint["id"]
    # A claim that committed but whose worker never heard back (or a live worker's): however
    # often its destination is woken while that lease is live, it keeps one wake-up, due when
    # the lease ends.
    async with single_statements(create_sessionmaker(engine)) as connection:
        held = await delivery_leases.claim_batch(
            connection,
            region=settings.region,
            endpoint_id=endpoint_id,
            limit=1,
            lease_seconds=30,
        )
    [claimed] = held.rows
    tenant_id = claimed.tenant_id
    async with pump(settings, engine) as (running, _):
        running.start()
        for _ in range(3):  # woken again, as by a duplicate publication
            await arm(settings, tenant_id, endpoint_id)

            async def settled_for_the_lease_end() -> bool:
                # Later than a taker's hold: settled by what the claim saw.
                due_in = (await armed_destinations(settings)).get(endpoint_id, 0.0)
                return due_in > HOLD_SECONDS

            await until(settled_for_the_lease_end, timeout=30, every=0.02)

    armed = await armed_destinations(settings)
    row = await delivery_row(engine, delivery_id)
    async with engine.connect() as connection:
        lease_left = (
            await connection.execute(
                text(
                    "SELECT extract(epoch FROM lease_until - now()) FROM deliveries WHERE id = :d"
                ),
                {"d": delivery_id},
            )
        ).scalar_one()
    assert list(armed) == [endpoint_id] and armed[endpoint_id] >= float(lease_left)
    # Nothing claimed, nothing sent: the live lease is its holder's.
    assert row["state"] == "leased" and row["attempt_count"] == 1
    assert row["lease_token"] == claimed.token


@asynccontextmanager
async def deliveries_locked(engine: AsyncEngine) -> AsyncIterator[None]:
    """Hold a lock on the deliveries table that a claim (which skips locked rows) must wait
    for: its lease (now() + lease) counts from when it started waiting."""
    async with engine.begin() as connection:
        await connection.execute(text("LOCK TABLE deliveries IN EXCLUSIVE MODE"))
        yield
