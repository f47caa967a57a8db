"""Days of events made ahead follow the tenants' payload retention: split by payload class once
a tenant keeps its payloads shorter -- each while still empty, never today's or tomorrow's, and
a class once made stays, so that a setting turned on and off costs no re-make every run."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.ids import id_floor
from app.operations.repository import partitions as partition_rows
from app.operations.repository.partitions import TABLES, name_of
from app.operations.service import partitions

AHEAD = 4


@pytest.fixture
async def days(engine: AsyncEngine, settings: Settings) -> AsyncIterator[list[date]]:
    """Today and the next AHEAD days, made; afterwards emptied and made again as they were."""
    today = datetime.now(UTC).date()
    await partitions.make_ahead(engine, AHEAD, settings.retention_days)
    try:
        yield [today + timedelta(days=n) for n in range(AHEAD + 1)]
    finally:
        async with engine.begin() as connection:
            await connection.execute(text("DELETE FROM events WHERE tenant_id = 'ahead'"))
            for n in range(2, AHEAD + 1):
                for spec in TABLES:
                    name = name_of(spec.table, today + timedelta(days=n))
                    await connection.execute(text(f"DROP TABLE IF EXISTS {name}"))
        await partitions.make_ahead(engine, 14, settings.retention_days)


async def _layout(engine: AsyncEngine, days: list[date]) -> list[list[int]]:
    async with engine.connect() as connection:
        found = await partition_rows.existing(connection)
    named = {p.name: p for p in found}
    return [partition_rows.classes_of(named[name_of("events", day)], found) for day in days]


async def test_the_days_ahead_are_split_for_a_tenants_payloads_and_flapping_costs_little(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    settings: Settings,
    days: list[date],
) -> None:
    remake = partitions.remake_for_classes
    assert await _layout(engine, days) == [[1]] * len(days)
    # A row already in a day ahead (a clock far ahead put it there): that day stays as made.
    held = datetime.combine(days[3], time(12), UTC)
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO events (id, tenant_id, event_type, payload)"
                " VALUES (:e, 'ahead', 'a', '{}')"
            ),
            {"e": id_floor("evt", held)},
        )

    set_ = await client.patch("/v1/tenant", json={"payload_retention_days": 3}, headers=tenant)
    assert set_.status_code == 200, set_.text
    assert await remake(engine, AHEAD, settings.retention_days) > 0  # from day 2 on, empty
    assert await _layout(engine, days) == [[1], [1], [1, 4], [1], [1, 4]]
    assert await remake(engine, AHEAD, settings.retention_days) == 0  # as wanted now

    # Turned off, and on again with another step, and off: classes are only ever added to a
    # day, so flapping a setting costs each day one re-make a step, not one every run.
    back = {"payload_retention_days": None}
    assert (await client.patch("/v1/tenant", json=back, headers=tenant)).status_code == 200
    assert await remake(engine, AHEAD, settings.retention_days) == 0
    week = {"payload_retention_days": 7}
    for body in (week, back, week, back):
        assert (await client.patch("/v1/tenant", json=body, headers=tenant)).status_code == 200
        await remake(engine, AHEAD, settings.retention_days)
    assert await _layout(engine, days) == [[1], [1], [1, 4, 8], [1], [1, 4, 8]]
    assert await remake(engine, AHEAD, settings.retention_days) == 0
    # A day made from now on takes only the steps in use: none.
    async with engine.begin() as connection:
        await connection.execute(text(f"DROP TABLE {name_of('events', days[4])}"))
    await partitions.make_ahead(engine, AHEAD, settings.retention_days)
    assert (await _layout(engine, days))[4] == [1]
