"""Attempts in-process (a worker's pump, and the lease statements beneath it) against real
PostgreSQL, Redis and receivers: fencing and SSRF."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker, single_statements
from app.core.states import DeliveryState
from app.engine.repository import delivery_leases, delivery_records
from tests.fixtures.api import accept, fast_path_settled, new_endpoint
from tests.fixtures.engine import arm, pump
from tests.fixtures.observed import ip_addresses_in
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import Stack
from tests.fixtures.waiting import count_rows, delivery_row, until, wait_state


async def recorded_status(engine: AsyncEngine, delivery_id: str) -> bool:
    """Whether the delivery's latest attempt is on record."""
    return (await delivery_row(engine, delivery_id))["last_status_code"] is not None


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_send_time_guard_blocks_without_connecting(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
    host: str,
) -> None:
    # Saved while loopback was allowed; the worker's allowlist is empty (the default).
    endpoint = await new_endpoint(client, tenant, url=f"http://{host}:{receiver.port}/guarded")
    delivery_id = await accept(client, tenant, endpoint["id"])
    async with pump(settings, engine, destination_allowlist=()) as (worker, _):
        worker.start()
        await wait_state(engine, delivery_id, "dead")

    row = await delivery_row(engine, delivery_id)
    assert row["state"] == "dead" and row["last_outcome"] == "blocked"
    assert row["dead_reason"].startswith("destination_blocked")
    assert receiver.requests == []
    assert await count_rows(engine, "attempts", "outcome = 'blocked'") == 1
    # What the tenant can read names the host, never an address a name resolved to.
    async with engine.connect() as connection:
        errors = (await connection.execute(text("SELECT error FROM attempts"))).scalars().all()
    for stored in (row["dead_reason"], row["last_error"], *errors):
        assert ip_addresses_in(stored) <= {host}, stored


async def test_stale_lease_holder_cannot_write(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    finished = delivery_records.Finished(
        DeliveryState.SUCCEEDED,
        delay_seconds=None,
        dead_reason=None,
        attempt_number=1,
        outcome="success",
        status_code=200,
        started_at=datetime.now(UTC),
        duration_ms=3,
    )

    async def claim(lease_seconds: float) -> list[delivery_leases.ClaimedDelivery]:
        async with single_statements(create_sessionmaker(engine)) as connection:
            batch = await delivery_leases.claim_batch(
                connection,
                region=settings.region,
                endpoint_id=endpoint["id"],
                limit=1,
                lease_seconds=lease_seconds,
            )
        return batch.rows

    async def record(token: uuid.UUID) -> bool:
        # The record that also judges a destination's health: one delivery, in a transaction.
        async with create_sessionmaker(engine)() as session, session.begin():
            return await delivery_records.record_in(
                session, delivery_id, token=token, finished=finished
            )

    [first] = await claim(0.2)
    assert await claim(30) == []  # the first lease is still live
    await asyncio.sleep(0.3)
    [takeover] = await claim(30)
    assert takeover.attempt_number == 2 and takeover.token != first.token

    assert await record(first.token) is False
    assert (await delivery_row(engine, delivery_id))["state"] == "leased"
    assert await count_rows(engine, "attempts") == 0
    assert await record(takeover.token) is True
    assert await count_rows(engine, "attempts") == 1
    assert (await delivery_row(engine, delivery_id))["state"] == "succeeded"


async def test_concurrent_runs_of_one_delivery_send_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    receiver.script("/once", Reply(200, delay=0.5))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/once"))
    delivery_id = await accept(client, tenant, endpoint["id"])
    # Two workers' pumps, and the destination woken ten times more while its one delivery is
    # in flight: every taker that gets it finds nothing it may claim.
    tenant_id = (await delivery_row(engine, delivery_id))["tenant_id"]
    async with pump(settings, engine) as (first, _), pump(settings, engine) as (second, _):
        first.start()
        second.start()
        await receiver.wait_for("/once", 1)
        for _ in range(10):
            await arm(settings, tenant_id, endpoint["id"])
        await wait_state(engine, delivery_id, "succeeded")

    assert len(receiver.on("/once")) == 1
    assert (await delivery_row(engine, delivery_id))["state"] == "succeeded"
    assert await count_rows(engine, "attempts") == 1


async def test_a_duplicate_publication_in_two_worker_processes_sends_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Any,
    settings: Settings,
) -> None:
    receiver.script("/twice-queued", Reply(200, delay=1.0))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/twice-queued"))
    with running_worker(stack, tmp_path / "a.log"), running_worker(stack, tmp_path / "b.log"):
        delivery_id = await accept(client, tenant, endpoint["id"])
        # A duplicate publication, as a relay crash after enqueue would cause.
        tenant_id = (await delivery_row(engine, delivery_id))["tenant_id"]
        for _ in range(4):
            await arm(settings, tenant_id, endpoint["id"])
        await receiver.wait_for("/twice-queued", 1)
        await wait_state(engine, delivery_id, "succeeded", timeout=15)
        await asyncio.sleep(1.5)  # room for a duplicate to arrive if fencing were broken

    assert len(receiver.on("/twice-queued")) == 1
    assert await count_rows(engine, "attempts") == 1


async def test_the_timeline_shows_a_claim_that_sent_nothing_and_the_redrive(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    receiver.script("/gap", Reply(500), Reply(500))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/gap"))
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    url = f"/v1/endpoints/{endpoint['id']}"

    async def attempt_now(number: int) -> None:
        """Attempt ``number``, made now and recorded."""
        async with engine.begin() as connection:  # the retry is due now, not after its backoff
            await connection.execute(
                text("UPDATE deliveries SET next_attempt_at = now() WHERE id = :d"),
                {"d": delivery_id},
            )
        # The pump, once started, runs throughout: woken now, it makes the attempt (a redriven
        # delivery's own publication may have woken it already).
        if number == 1:
            worker.start()
        tenant_id = (await delivery_row(engine, delivery_id))["tenant_id"]
        await arm(settings, tenant_id, endpoint["id"])

        async def recorded() -> bool:
            row = await delivery_row(engine, delivery_id)
            return bool(row["attempt_count"] >= number and row["state"] != "leased")

        await until(recorded, timeout=30, every=0.02)

    async with pump(settings, engine) as (worker, _):
        await attempt_now(1)
        await attempt_now(2)
        await client.patch(url, json={"enabled": False}, headers=tenant)
        await attempt_now(3)  # the endpoint is disabled, nothing is sent
        assert (await delivery_row(engine, delivery_id))["state"] == "dead"
        await client.patch(url, json={"enabled": True}, headers=tenant)
        redriven = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
        assert redriven.status_code == 202
        await fast_path_settled(engine)
        await attempt_now(4)

    assert len(receiver.on("/gap")) == 3
    body = (await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)).json()
    assert body["state"] == "succeeded"
    steps = [(step["event"], step["detail"] or "") for step in body["timeline"]]
    assert [event for event, _ in steps] == [
        "accepted",
        "attempt",
        "attempt",
        "dead",
        "redriven",
        "attempt",
        "succeeded",
    ]
    assert [detail.split(":")[0] for event, detail in steps if event == "attempt"] == [
        "#1",
        "#2",
        "#4",
    ]
    assert ("dead", "endpoint_disabled (attempt #3 was not sent)") in steps


async def test_a_retry_after_closes_the_gate_before_the_answers_body_arrives(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    body = asyncio.Event()
    receiver.script("/later", Reply(429, headers={"Retry-After": "60"}, body_hold=body))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/later"))
    delivery_id = await accept(client, tenant, endpoint["id"])
    patient = {"request_timeout_seconds": 60, "lease_seconds": 120}
    tenant_id = (await delivery_row(engine, delivery_id))["tenant_id"]
    async with (
        pump(settings, engine, **patient) as (worker, _),
        pump(settings, engine) as (_, gate),  # another worker's view of the destination
    ):
        worker.start()
        attempt = asyncio.create_task(until(lambda: recorded_status(engine, delivery_id)))
        await receiver.wait_for("/later", 1)
        # The status and headers are out; the body is held back for as long as this waits.
        deadline = asyncio.get_running_loop().time() + 30
        while (grant := await gate.grant(endpoint["id"], tenant_id=tenant_id, want=1)).count:
            await gate.return_unused(grant, used=0)
            assert asyncio.get_running_loop().time() < deadline, "the gate never closed"
            await asyncio.sleep(0.02)
        assert grant.reason == "paused"
        assert not attempt.done()
        body.set()
        await attempt

    row = await delivery_row(engine, delivery_id)
    assert row["state"] == "enqueued" and row["last_status_code"] == 429
    assert len(receiver.on("/later")) == 1
