"""Fan-out: one event, one delivery per subscribed endpoint, all in one transaction."""

from __future__ import annotations

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, new_tenant, wakeups_written
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
    assert await wakeups_written(engine) == 2
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
    assert await wakeups_written(engine) == 0


async def test_an_event_reads_back_as_accepted_with_its_deliveries(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    first = await new_endpoint(client, tenant, event_types=["order.paid"])
    second = await new_endpoint(client, tenant)
    payload = {"order": 7, "lines": [{"sku": "a", "qty": 2}], "note": "naïve ✓", "n": None}
    published = await client.post(
        "/v1/events", json={"event_type": "order.paid", "payload": payload}, headers=tenant
    )
    event_id = published.json()["id"]

    response = await client.get(f"/v1/events/{event_id}", headers=tenant)

    assert response.status_code == 200, response.text
    event = response.json()
    assert (event["id"], event["event_type"], event["payload"]) == (event_id, "order.paid", payload)
    assert event["created_at"].endswith("Z")
    told = {(d["endpoint_id"], d["id"]) for d in event["deliveries"]}
    assert told == {(d["endpoint_id"], d["id"]) for d in published.json()["deliveries"]}
    assert {d["endpoint_id"] for d in event["deliveries"]} == {first["id"], second["id"]}
    assert {d["state"] for d in event["deliveries"]} <= {"pending", "enqueued"}

    # The listing by event answers the same deliveries, and nothing else.
    other_event = await client.post(
        "/v1/events", json={"event_type": "order.paid", "payload": {}}, headers=tenant
    )
    assert other_event.status_code == 202
    listed = await client.get(f"/v1/deliveries?event_id={event_id}", headers=tenant)
    assert {d["id"] for d in listed.json()["items"]} == {d["id"] for d in event["deliveries"]}


async def test_a_delivery_intent_is_an_event_too(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant)
    accepted = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {"x": 1}},
        headers=tenant,
    )
    event = (await client.get(f"/v1/events/{accepted.json()['event_id']}", headers=tenant)).json()
    assert [d["id"] for d in event["deliveries"]] == [accepted.json()["id"]]
    assert event["payload"] == {"x": 1}


async def test_events_are_their_tenants_own(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await new_endpoint(client, tenant)
    event_id = (
        await client.post("/v1/events", json={"event_type": "a", "payload": {}}, headers=tenant)
    ).json()["id"]
    other = await new_tenant(client, "other")
    for path in (f"/v1/events/{event_id}", "/v1/events/evt_01JDQ8Z6V4Q0K9X7M3T5R2N8C1"):
        response = await client.get(path, headers=other)
        assert response.status_code == 404
        assert response.headers["content-type"] == "application/problem+json"
    listed = await client.get(f"/v1/deliveries?event_id={event_id}", headers=other)
    assert listed.json()["items"] == []
    malformed = await client.get("/v1/deliveries?event_id=dlv_nope", headers=tenant)
    assert malformed.status_code == 422
    assert "must be" in malformed.json()["detail"]


async def test_wildcard_subscriptions_match_exactly_the_family(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    family = await new_endpoint(client, tenant, event_types=["order.*"])
    everything = await new_endpoint(client, tenant, event_types=["*"])
    exact = await new_endpoint(client, tenant, event_types=["order.paid"])
    users = await new_endpoint(client, tenant, event_types=["user.created", "user.*"])
    names = {family["id"]: "family", everything["id"]: "everything", exact["id"]: "exact"}
    names[users["id"]] = "users"

    async def receivers_of(event_type: str) -> set[str]:
        response = await client.post(
            "/v1/events", json={"event_type": event_type, "payload": {}}, headers=tenant
        )
        assert response.status_code == 202, response.text
        return {names[d["endpoint_id"]] for d in response.json()["deliveries"]}

    assert await receivers_of("order.paid") == {"family", "everything", "exact"}
    assert await receivers_of("order.refunded") == {"family", "everything"}
    assert await receivers_of("order.item.shipped") == {"family", "everything"}
    assert await receivers_of("orders.x") == {"everything"}
    assert await receivers_of("order") == {"everything"}
    assert await receivers_of("user.created") == {"users", "everything"}  # one delivery, not two


async def test_listing_by_a_family_selects_its_types_only(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant)
    sent = {}
    for event_type in ("a_b.x", "a_b.y.z", "acb.x", "a_bx", "other"):
        response = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": event_type, "payload": {}},
            headers=tenant,
        )
        sent[response.json()["id"]] = event_type

    async def listed(selector: str) -> set[str]:
        response = await client.get(f"/v1/deliveries?event_type={selector}", headers=tenant)
        assert response.status_code == 200, response.text
        return {sent[d["id"]] for d in response.json()["items"]}

    # The prefix is matched as written: its _ is no LIKE wildcard.
    assert await listed("a_b.*") == {"a_b.x", "a_b.y.z"}
    assert await listed("*") == set(sent.values())
    assert await listed("a_bx") == {"a_bx"}
