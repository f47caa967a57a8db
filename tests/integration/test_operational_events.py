"""Operational events in process: who may subscribe to Herald's own events, what an endpoint's
changes tell, that the relay makes them deliveries to the tenant's operational endpoints alone,
and that a tenant without one writes nothing. (The engine's causes, through a real worker and
receiver: tests/system/test_operational_events.py.)"""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import queue
from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.delivery.service import operational_events
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.waiting import count_rows


async def _relay(engine: AsyncEngine, settings: Settings) -> int:
    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)
    try:
        told = 0
        while one := await operational_events.relay_once(
            create_sessionmaker(engine), redis, settings
        ):
            told += one
        return told
    finally:
        await redis.aclose()


async def _told(engine: AsyncEngine, endpoint_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The operational events delivered to ``endpoint_id``: (type, payload), oldest first."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text(
                "SELECT v.event_type, v.payload FROM deliveries AS d JOIN events AS v"
                " ON v.id = d.event_id WHERE d.endpoint_id = :e ORDER BY d.id"
            ),
            {"e": endpoint_id},
        )
        return [(row[0], json.loads(bytes(row[1]))) for row in rows]


async def test_an_endpoints_changes_reach_the_tenants_operational_endpoints_alone(
    client: httpx.AsyncClient, engine: AsyncEngine, settings: Settings
) -> None:
    tenant = await new_tenant(client, "ops")
    other = await new_tenant(client, "ops-other")
    watcher = await new_endpoint(client, tenant, event_types=["herald.endpoint.*"])
    assert watcher["operational"] is True
    theirs = await new_endpoint(client, other, event_types=["herald.*"])

    made = await new_endpoint(client, tenant, event_types=["order.*"], description="Orders")
    assert made["operational"] is False
    changed = await client.patch(
        f"/v1/endpoints/{made['id']}",
        json={"description": "All orders", "secret_headers": {"X-Token": "s3cret-value"}},
        headers=tenant,
    )
    assert changed.status_code == 200, changed.text
    assert (await client.delete(f"/v1/endpoints/{made['id']}", headers=tenant)).status_code == 204

    # Five signals: each watcher's own creation (told to no one: no operational endpoint is
    # told of itself), and the three changes.
    assert await _relay(engine, settings) == 5
    told = await _told(engine, watcher["id"])
    assert [kind for kind, _ in told] == [
        "herald.endpoint.created",
        "herald.endpoint.updated",
        "herald.endpoint.deleted",
    ]
    created, updated, deleted = (payload for _, payload in told)
    assert created["endpoint_id"] == made["id"] and created["event_types"] == ["order.*"]
    assert created["description"] == "Orders" and created["customer_id"] is None
    assert updated["changed"] == ["description", "secret_headers"]
    assert "s3cret-value" not in json.dumps(updated)  # a secret's name, never its value
    assert deleted["endpoint_id"] == made["id"]
    # Each holds to the schema its type has in the catalogue.
    listed = await client.get("/v1/operational-event-types", headers=tenant)
    assert listed.status_code == 200
    schemas = {kind["name"]: kind["schema"] for kind in listed.json()}
    for kind, payload in told:
        jsonschema.validate(payload, schemas[kind])
    # The other tenant's operational endpoint heard nothing: of this tenant, nor of itself.
    assert await _told(engine, theirs["id"]) == []


async def test_a_tenant_without_an_operational_endpoint_writes_no_signal(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    tenant = await new_tenant(client, "quiet")
    made = await new_endpoint(client, tenant)
    await client.patch(f"/v1/endpoints/{made['id']}", json={"enabled": False}, headers=tenant)
    await client.delete(f"/v1/endpoints/{made['id']}", headers=tenant)
    assert await count_rows(engine, "operational_signals") == 0


async def test_a_filter_picks_the_operational_events_an_endpoint_receives(
    client: httpx.AsyncClient, engine: AsyncEngine, settings: Settings
) -> None:
    tenant = await new_tenant(client, "filtered")
    watcher = await new_endpoint(
        client,
        tenant,
        event_types=["herald.*"],
        filter='payload.url.endsWith("/important")',
    )
    await new_endpoint(client, tenant, url="http://127.0.0.1:9/minor")
    await new_endpoint(client, tenant, url="http://127.0.0.1:9/important")
    await _relay(engine, settings)
    told = await _told(engine, watcher["id"])
    assert [payload["url"] for _, payload in told] == ["http://127.0.0.1:9/important"]


async def test_who_may_subscribe_to_herald_events(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "rules")
    mixed = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "event_types": ["herald.*", "order.paid"]},
        headers=tenant,
    )
    assert mixed.status_code == 422
    assert "either Herald's own event types (herald.*) or yours" in mixed.text

    assert (await client.put("/v1/customers/acme", json={}, headers=tenant)).status_code in (
        200,
        201,
    )
    customers = await client.post(
        "/v1/endpoints",
        json={
            "url": "http://127.0.0.1:9/x",
            "customer_id": "acme",
            "event_types": ["herald.endpoint.failing"],
        },
        headers=tenant,
    )
    assert customers.status_code == 422
    assert "only to the tenant's own endpoints" in customers.json()["detail"]
    of_customer = await new_endpoint(client, tenant, customer_id="acme")
    moved = await client.patch(
        f"/v1/endpoints/{of_customer['id']}", json={"event_types": ["herald.*"]}, headers=tenant
    )
    assert moved.status_code == 422

    # Becoming operational, and ceasing to be, follow the subscription.
    own = await new_endpoint(client, tenant, event_types=["order.*"])
    became = await client.patch(
        f"/v1/endpoints/{own['id']}", json={"event_types": ["herald.delivery.dead"]}, headers=tenant
    )
    assert became.json()["operational"] is True
    ceased = await client.patch(
        f"/v1/endpoints/{own['id']}", json={"event_types": None}, headers=tenant
    )
    assert ceased.json()["operational"] is False


async def test_no_tenant_may_publish_or_define_herald_events(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "spoof")
    watcher = await new_endpoint(client, tenant, event_types=["herald.*"])
    spoofs = (
        ("/v1/events", {"event_type": "herald.endpoint.disabled", "payload": {}}),
        (
            "/v1/deliveries",
            {"endpoint_id": watcher["id"], "event_type": "herald.delivery.dead", "payload": {}},
        ),
        ("/v1/event-types", {"name": "herald.endpoint.failing"}),
    )
    for path, body in spoofs:
        refused = await client.post(path, json=body, headers=tenant)
        assert refused.status_code == 422, (path, refused.text)
        assert "herald. is Herald's own" in refused.text or "must not start with herald." in (
            refused.text
        )


async def test_the_catalogue_of_herald_events(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "catalogue")
    listed = (await client.get("/v1/operational-event-types", headers=tenant)).json()
    names = [kind["name"] for kind in listed]
    assert set(names) >= {
        "herald.endpoint.created",
        "herald.endpoint.updated",
        "herald.endpoint.deleted",
        "herald.endpoint.disabled",
        "herald.endpoint.enabled",
        "herald.endpoint.failing",
        "herald.endpoint.recovered",
        "herald.delivery.dead",
        "herald.stream.halted",
    }
    for kind in listed:
        jsonschema.validate(kind["example"], kind["schema"])
    one = await client.get("/v1/operational-event-types/herald.stream.halted", headers=tenant)
    assert one.status_code == 200 and one.json()["schema"]["required"]
    missing = await client.get("/v1/operational-event-types/herald.nope", headers=tenant)
    assert missing.status_code == 404
    assert (await client.get("/v1/operational-event-types")).status_code == 401


async def test_failing_after_is_the_tenants_own(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "threshold")
    assert (await client.get("/v1/tenant", headers=tenant)).json()["failing_after"] == 5
    changed = await client.patch("/v1/tenant", json={"failing_after": 2}, headers=tenant)
    assert changed.status_code == 200 and changed.json()["failing_after"] == 2
    refused = await client.patch("/v1/tenant", json={"failing_after": 0}, headers=tenant)
    assert refused.status_code == 422
    reset = await client.patch("/v1/tenant", json={"failing_after": None}, headers=tenant)
    assert reset.json()["failing_after"] == 5


async def test_a_signal_that_cannot_be_told_is_dropped_alone(
    client: httpx.AsyncClient, engine: AsyncEngine, settings: Settings
) -> None:
    tenant = await new_tenant(client, "poisoned")
    watcher = await new_endpoint(client, tenant, event_types=["herald.*"])
    tenant_id = (await client.get("/v1/tenant", headers=tenant)).json()["id"]
    await new_endpoint(client, tenant, description="before")
    # A signal no event can be made of (a payload past what Herald's own may be), between two
    # good ones.
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "INSERT INTO operational_signals (tenant_id, type, payload)"
                " VALUES (:t, 'herald.endpoint.updated', CAST(:p AS jsonb))"
            ),
            {"t": tenant_id, "p": json.dumps({"endpoint_id": "x", "junk": "x" * 300_000})},
        )
    await new_endpoint(client, tenant, description="after")
    assert await _relay(engine, settings) == 4  # the watcher's creation, two, and the poison
    told = await _told(engine, watcher["id"])
    assert [payload["description"] for _, payload in told] == ["before", "after"]
    assert await count_rows(engine, "operational_signals") == 0


async def test_a_test_event_cannot_be_one_of_heralds(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "test-events")
    watcher = await new_endpoint(client, tenant, event_types=["herald.*"])
    refused = await client.post(
        f"/v1/endpoints/{watcher['id']}/test-events",
        json={"event_type": "herald.endpoint.disabled", "payload": {"endpoint_id": "ep_x"}},
        headers=tenant,
    )
    assert refused.status_code == 422 and "only Herald sends" in refused.json()["detail"]
    plain = await client.post(f"/v1/endpoints/{watcher['id']}/test-events", json={}, headers=tenant)
    assert plain.status_code == 202 and plain.json()["event_type"] == "herald.test"
