"""The publish's mark: outbox rows published, their deliveries `pending -> enqueued` -- only a
delivery still pending at the attempt count it was published at."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db import create_sessionmaker, single_statements
from app.outbox.repository import outbox
from tests.fixtures.api import fast_path_settled


async def states(engine: AsyncEngine, ids: list[str]) -> list[str]:
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT id, state FROM deliveries WHERE id = ANY(:ids)"), {"ids": ids}
        )
        by_id: dict[str, str] = {row.id: row.state for row in rows}
    return [by_id[i] for i in ids]


async def test_the_mark_takes_only_deliveries_pending_at_their_published_attempt_count(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    items = [{"endpoint_id": endpoint["id"], "event_type": "t", "payload": {}}] * 1000
    batch = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    ids = [item["delivery"]["id"] for item in batch.json()["items"]]
    await fast_path_settled(engine)
    later, leased = ids[500], ids[501]
    async with engine.begin() as connection:
        await connection.execute(text("UPDATE deliveries SET state = 'pending'"))
        # Redriven since it was published (attempts made, pending again) ...
        await connection.execute(
            text("UPDATE deliveries SET attempt_count = 2 WHERE id = :d"), {"d": later}
        )
        # ... and claimed since.
        await connection.execute(
            text("UPDATE deliveries SET state = 'leased' WHERE id = :d"), {"d": leased}
        )
    async with single_statements(create_sessionmaker(engine)) as connection:
        await outbox.mark_published(connection, [(i, 0) for i in ids], [])
    expected = ["enqueued"] * 1000
    expected[500], expected[501] = "pending", "leased"
    assert await states(engine, ids) == expected
