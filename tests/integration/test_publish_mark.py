"""The publish writes the outbox alone: one wake-up per transaction and destination, deleted
once Redis holds it; no delivery row is touched."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import fast_path_settled, new_endpoint, wakeups_written
from tests.fixtures.engine import armed_destinations


async def row_versions(engine: AsyncEngine) -> dict[str, str]:
    async with engine.connect() as connection:
        rows = await connection.execute(text("SELECT id, xmin::text AS v FROM deliveries"))
        return {row.id: row.v for row in rows}


async def test_a_batch_writes_one_wakeup_a_destination_and_the_publish_no_delivery_row(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    settings: Settings,
) -> None:
    other = await new_endpoint(client, tenant)
    items = [
        {"endpoint_id": (endpoint if n % 2 else other)["id"], "event_type": "t", "payload": {}}
        for n in range(1000)
    ]
    batch = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    assert batch.json()["accepted"] == 1000
    written = await row_versions(engine)  # right after the commit, perhaps before the publish
    await fast_path_settled(engine)

    assert await wakeups_written(engine) == 2  # one for each destination
    armed = await armed_destinations(settings)
    assert sorted(armed) == sorted([endpoint["id"], other["id"]])
    # Every delivery row is as the accept wrote it, still pending: the publish wrote none.
    assert await row_versions(engine) == written
    async with engine.connect() as connection:
        states = await connection.execute(text("SELECT DISTINCT state FROM deliveries"))
        assert [row.state for row in states] == ["pending"]


async def test_a_delivery_behind_its_streams_head_needs_no_wakeup(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    ordered = await new_endpoint(client, tenant, ordering="endpoint")
    for n in range(3):
        response = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": ordered["id"], "event_type": "t", "payload": {"n": n}},
            headers=tenant,
        )
        assert response.status_code == 202
    await fast_path_settled(engine)
    # The head's wake-up alone: the two behind it wait unscheduled until the head ends.
    assert await wakeups_written(engine) == 1
