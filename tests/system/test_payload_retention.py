"""A tenant's payload retention on a populated day: its payloads go as one table once past their
days, while the records of its deliveries -- the deliveries, their attempts, their timelines --
stay, and another tenant's payloads in the same day are untouched. Real worker, real receiver:
every delivery of the day is sent first (the claim finds each event in its payload class), a
live one holds its class past its days, and an expired one is refused a redrive.

The day is one made ahead (ids minted in it by the real accept statement), and retention is
asked as of a moment after it: nothing here waits for a clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker, single_statements
from app.core.ids import id_floor, sibling_id
from app.delivery.repository import intents
from app.operations.repository.partitions import TABLES, name_of
from app.operations.service import partitions
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.processes import HeraldProcess
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import eventually

PER_TENANT = 100
DAY_AHEAD = 3  # a day made ahead: partitioned by payload class, and empty


@pytest.fixture
async def day(engine: AsyncEngine, settings: Settings) -> AsyncIterator[datetime]:
    """The start of a day made ahead. Retention asked as of after it drops the empty classes of
    the days before it too: those days, and it, are made again for the tests after."""
    today = datetime.now(UTC).date()
    start = datetime.combine(today + timedelta(days=DAY_AHEAD), time(), UTC)
    await partitions.make_ahead(engine, DAY_AHEAD + 1, settings.retention_days)
    try:
        yield start
    finally:
        async with engine.begin() as connection:
            for n in range(1, DAY_AHEAD + 1):
                for spec in TABLES:
                    name = name_of(spec.table, today + timedelta(days=n))
                    await connection.execute(text(f"DROP TABLE IF EXISTS {name}"))
        await partitions.make_ahead(engine, 14, settings.retention_days)


async def _accept(
    engine: AsyncEngine,
    settings: Settings,
    tenant_id: str,
    endpoint_id: str,
    moment: datetime,
    n: int,
    deliver_after: datetime | None = None,
) -> tuple[str, str]:
    """One intent through the accept statement, its ids minted at ``moment``."""
    event_id = id_floor("evt", moment)[:14] + f"{n:016d}"
    delivery_id = sibling_id("dlv", event_id)
    async with single_statements(create_sessionmaker(engine)) as connection:
        inserted = await intents.insert_for_endpoint(
            connection,
            tenant_id=tenant_id,
            endpoint_id=endpoint_id,
            event_id=event_id,
            event_type="order.paid",
            payload=f'{{"n": {n}}}'.encode(),
            delivery_id=delivery_id,
            region=settings.region,
            deliver_after=deliver_after,
            traceparent=None,
        )
    assert inserted.delivery is not None
    return event_id, delivery_id


async def _scalar(engine: AsyncEngine, sql: str, **binds: Any) -> Any:
    async with engine.connect() as connection:
        return (await connection.execute(text(sql), binds)).scalar_one()


async def _tenant_of(engine: AsyncEngine, endpoint_id: str) -> str:
    return str(
        await _scalar(engine, "SELECT tenant_id FROM endpoints WHERE id = :e", e=endpoint_id)
    )


async def test_a_tenants_payloads_go_as_a_table_and_the_records_stay(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    worker: HeraldProcess,
    engine: AsyncEngine,
    settings: Settings,
    day: datetime,
) -> None:
    brief = await new_tenant(client, "brief")
    changed = await client.patch(
        "/v1/tenant", json={"retention_days": 3, "payload_retention_days": 1}, headers=brief
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["payload_retention_days"] == 1
    # As the next reconcile run does: the empty days ahead made again, split by payload class.
    assert await partitions.remake_for_classes(engine, DAY_AHEAD + 1, settings.retention_days) > 0
    kept = await new_endpoint(client, tenant, url=receiver.url("/kept"))
    short = await new_endpoint(client, brief, url=receiver.url("/brief"))
    refusing = await new_endpoint(client, brief, url=receiver.url("/refusing"))
    receiver.script("/refusing", Reply(status=400))
    kept_tenant, brief_tenant = (
        await _tenant_of(engine, kept["id"]),
        await _tenant_of(engine, short["id"]),
    )

    # The day, populated: each tenant's events side by side, and one that will die.
    for n in range(PER_TENANT):
        moment = day + timedelta(minutes=n)
        await _accept(engine, settings, kept_tenant, kept["id"], moment, n)
        await _accept(engine, settings, brief_tenant, short["id"], moment, n)
    dead_event, dead = await _accept(
        engine, settings, brief_tenant, refusing["id"], day + timedelta(hours=5), 1
    )
    _, waiting = await _accept(
        engine,
        settings,
        brief_tenant,
        short["id"],
        day + timedelta(hours=6),
        2,
        deliver_after=datetime.now(UTC) + timedelta(days=1),
    )
    classes = await _scalar(
        engine,
        "SELECT array_agg(e.tableoid::regclass::text ORDER BY e.tableoid::regclass::text)"
        " FROM (SELECT DISTINCT tableoid FROM events WHERE id >= :a AND id < :b) AS e",
        a=id_floor("evt", day),
        b=id_floor("evt", day + timedelta(days=1)),
    )
    brief_class = f"{name_of('events', day.date())}_p1"
    assert brief_class in classes and len(classes) == 2, classes  # one class for each tenant

    # Every due delivery of the day is sent: the claim finds each event in its class.
    await eventually(
        lambda: _count(receiver), lambda seen: seen == (PER_TENANT, PER_TENANT, 1), timeout=120
    )

    # A day and a day after the day, the brief tenant's payloads are past their day, but one
    # live delivery of theirs still has its payload to send: the class stays.
    later = day + timedelta(days=2, hours=2)  # past the class's day and its grace
    await partitions.expire_payloads(engine, now=later)
    assert await _scalar(engine, "SELECT to_regclass(:n) IS NOT NULL", n=brief_class)
    assert await _events_of(engine, brief_tenant) == PER_TENANT + 2
    cancelled = await client.post(f"/v1/deliveries/{waiting}/cancel", headers=brief)
    assert cancelled.status_code == 200, cancelled.text

    assert await partitions.expire_payloads(engine, now=later) == 1  # that class alone

    assert await _events_of(engine, brief_tenant) == 0
    assert await _events_of(engine, kept_tenant) == PER_TENANT
    assert await _scalar(engine, "SELECT to_regclass(:n) IS NULL", n=brief_class)
    # The records stay: every delivery, every attempt made, the dead one's end.
    assert await _scalar(
        engine, "SELECT count(*) FROM deliveries WHERE tenant_id = :t", t=brief_tenant
    ) == (PER_TENANT + 2)
    assert await _scalar(
        engine,
        "SELECT count(*) FROM attempts AS a JOIN deliveries AS d ON d.id = a.delivery_id"
        " WHERE d.tenant_id = :t",
        t=brief_tenant,
    ) == (PER_TENANT + 1)

    # As the clock will have it then: the status and the event say the payload expired, and
    # the dead delivery cannot be sent again -- the receiver sees nothing more.
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET created_at = created_at - interval '2 days'"
                " WHERE tenant_id = :t"
            ),
            {"t": brief_tenant},
        )
    status = (await client.get(f"/v1/deliveries/{dead}", headers=brief)).json()
    assert status["state"] == "dead" and status["payload_expired"] is True
    assert status["payload_expires_at"] is not None
    assert [step["event"] for step in status["timeline"]] == ["accepted", "attempt", "dead"]
    event = await client.get(f"/v1/events/{dead_event}", headers=brief)
    assert event.status_code == 200, event.text
    assert event.json()["payload"] is None and event.json()["payload_expired"] is True
    assert [d["id"] for d in event.json()["deliveries"]] == [dead]
    refused = await client.post(f"/v1/deliveries/{dead}/redrive", headers=brief)
    assert refused.status_code == 409
    assert "payload" in refused.json()["detail"] and "expired" in refused.json()["detail"]
    assert (await client.get(f"/v1/deliveries/{dead}", headers=brief)).json()["state"] == "dead"
    assert len(receiver.on("/refusing")) == 1

    # The other tenant's, in the same day, are whole.
    first = receiver.on("/kept")[0]
    kept_event = (
        await client.get(f"/v1/deliveries/{first.headers['webhook-id']}", headers=tenant)
    ).json()
    assert kept_event["payload_expires_at"] is None and kept_event["payload_expired"] is False
    shown = (await client.get(f"/v1/events/{kept_event['event_id']}", headers=tenant)).json()
    assert shown["payload"] is not None and shown["payload_expired"] is False


async def _count(receiver: Receiver) -> tuple[int, int, int]:
    return len(receiver.on("/kept")), len(receiver.on("/brief")), len(receiver.on("/refusing"))


async def _events_of(engine: AsyncEngine, tenant_id: str) -> int:
    return int(
        await _scalar(engine, "SELECT count(*) FROM events WHERE tenant_id = :t", t=tenant_id)
    )
