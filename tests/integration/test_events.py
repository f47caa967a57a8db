"""Fan-out: one event, one delivery per subscribed endpoint, all in one transaction."""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.waiting import count_rows


async def test_event_fans_out_to_every_subscribed_enabled_endpoint(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    everything = await new_endpoint(client, tenant)
    invoices = await new_endpoint(client, tenant, event_types=["invoice.paid"])
    await new_endpoint(client, tenant, event_types=["user.created"])
    await new_endpoint(client, tenant, enabled=False)

    response = await client.post(
        "/v1/events", json={"event_type": "invoice.paid", "payload": {"id": 7}}, headers=tenant
    )

    assert response.status_code == 202
    body = response.json()
    assert body["id"].startswith("evt_") and body["event_type"] == "invoice.paid"
    assert {d["endpoint_id"] for d in body["deliveries"]} == {everything["id"], invoices["id"]}
    assert await count_rows(engine, "deliveries", "event_id = :e", e=body["id"]) == 2
    assert await count_rows(engine, "outbox") == 2
    # The payload is stored once, however many endpoints receive it.
    assert await count_rows(engine, "events") == 1
    for delivery in body["deliveries"]:
        fetched = await client.get(f"/v1/deliveries/{delivery['id']}", headers=tenant)
        assert fetched.json()["event_id"] == body["id"]
        assert fetched.json()["state"] in ("pending", "enqueued")


async def test_event_replay_returns_the_same_deliveries(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await new_endpoint(client, tenant)
    await new_endpoint(client, tenant)
    headers = {**tenant, "Idempotency-Key": "evt-1"}
    body = {"event_type": "a.b", "payload": {"x": 1}}
    first = await client.post("/v1/events", json=body, headers=headers)
    again = await client.post("/v1/events", json=body, headers=headers)
    assert first.status_code == 202 and again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert await count_rows(engine, "deliveries") == 2

    reused = await client.post(
        "/v1/events", json={"event_type": "a.b", "payload": {"x": 2}}, headers=headers
    )
    assert reused.status_code == 422


async def test_a_key_used_on_one_route_cannot_be_replayed_on_another(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant)
    headers = {**tenant, "Idempotency-Key": "cross-route"}
    await client.post("/v1/events", json={"event_type": "a.b", "payload": {}}, headers=headers)
    response = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
        headers=headers,
    )
    assert response.status_code == 422


async def test_event_with_no_subscribers_is_recorded_with_no_deliveries(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    response = await client.post(
        "/v1/events", json={"event_type": "nobody.cares", "payload": {}}, headers=tenant
    )
    assert response.status_code == 202
    assert response.json()["deliveries"] == []
    assert await count_rows(engine, "events") == 1
    assert await count_rows(engine, "outbox") == 0
