"""Reading deliveries: filters, keyset pagination that holds still under inserts, attempts."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.db import create_sessionmaker
from app.core.scope import Scope
from app.delivery.service import listings
from tests.fixtures.api import accept, fast_path_settled, new_endpoint, new_tenant


async def test_filters_by_state_endpoint_and_event_type(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    other = await new_endpoint(client, tenant)
    a = await accept(client, tenant, endpoint["id"], event_type="invoice.paid")
    b = await accept(client, tenant, other["id"], event_type="invoice.paid")
    c = await accept(client, tenant, endpoint["id"], event_type="user.created")
    await fast_path_settled(engine)
    async with engine.begin() as connection:
        await connection.execute(text("UPDATE deliveries SET state = 'pending'"))
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'dead', dead_reason = 'test', completed_at = now()"
                " WHERE id = :d"
            ),
            {"d": c},
        )

    async def ids(**params: str) -> list[str]:
        response = await client.get("/v1/deliveries", params=params, headers=tenant)
        assert response.status_code == 200
        return [item["id"] for item in response.json()["items"]]

    assert await ids() == [c, b, a]
    assert await ids(state="dead") == [c]
    assert await ids(state="pending") == [b, a]
    assert await ids(endpoint_id=endpoint["id"]) == [c, a]
    assert await ids(event_type="invoice.paid") == [b, a]
    assert await ids(event_type="invoice.paid", endpoint_id=other["id"]) == [b]
    bad = await client.get("/v1/deliveries", params={"state": "lost"}, headers=tenant)
    assert bad.status_code == 422


async def test_pagination_is_stable_while_new_deliveries_arrive(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    existing = [await accept(client, tenant, endpoint["id"]) for _ in range(7)]
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/deliveries", params=params, headers=tenant)).json()
        seen += [item["id"] for item in page["items"]]
        # New work arriving between pages must neither shift nor repeat what is paged.
        await accept(client, tenant, endpoint["id"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(existing))


async def test_attempts_are_listed_oldest_first_and_paged(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    empty = await client.get(f"/v1/deliveries/{delivery_id}/attempts", headers=tenant)
    assert empty.json() == {"items": [], "next_cursor": None}

    async with engine.begin() as connection:
        for number, (code, outcome) in enumerate(
            [(500, "retryable"), (None, "unknown"), (200, "success")], start=1
        ):
            await connection.execute(
                text(
                    "INSERT INTO attempts (delivery_id, attempt_number, started_at, duration_ms,"
                    " status_code, outcome) VALUES (:d, :n, :t, 12, :c, :o)"
                ),
                {"d": delivery_id, "n": number, "t": datetime.now(UTC), "c": code, "o": outcome},
            )
    first = await client.get(
        f"/v1/deliveries/{delivery_id}/attempts", params={"limit": 2}, headers=tenant
    )
    page = first.json()
    assert [a["attempt_number"] for a in page["items"]] == [1, 2]
    assert [a["outcome"] for a in page["items"]] == ["retryable", "unknown"]
    rest = await client.get(
        f"/v1/deliveries/{delivery_id}/attempts",
        params={"cursor": page["next_cursor"]},
        headers=tenant,
    )
    assert [a["status_code"] for a in rest.json()["items"]] == [200]
    assert rest.json()["next_cursor"] is None


async def test_listing_another_tenants_endpoint_reads_no_delivery_at_all(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    busy = await new_endpoint(client, tenant)
    small = await new_tenant(client, "small")
    own = await new_endpoint(client, small)
    for auth, endpoint_id in ((tenant, busy["id"]), (small, own["id"])):
        items = [{"endpoint_id": endpoint_id, "event_type": "a.b", "payload": {}}] * 300
        answer = await client.post("/v1/deliveries/batch", json={"items": items}, headers=auth)
        assert answer.json()["accepted"] == 300
    async with create_sessionmaker(engine)() as session, session.begin():
        small_id = await session.scalar(text("SELECT id FROM tenants WHERE name = 'small'"))
        before = await session.scalar(READS)
        rows = await listings.list_deliveries(
            session, Scope(small_id), limit=50, endpoint_id=busy["id"]
        )
        read = await session.scalar(READS) - before
    assert rows == []
    # Whichever index a plan would take -- the other tenant's endpoint, or this tenant's own
    # rows -- nothing is walked: the endpoint is not its own, so nothing is looked for.
    assert read == 0


# This transaction's reads of the deliveries table's partitions and their indexes, as
# PostgreSQL counts them (a partitioned table's own counters stay at zero).
READS = text(
    "SELECT sum(pg_stat_get_xact_tuples_returned(oid) + pg_stat_get_xact_tuples_fetched(oid))"
    " FROM pg_class WHERE oid IN (SELECT relid FROM pg_partition_tree('deliveries') WHERE isleaf)"
    " OR oid IN (SELECT indexrelid FROM pg_index WHERE indrelid IN"
    "   (SELECT relid FROM pg_partition_tree('deliveries') WHERE isleaf))"
)
