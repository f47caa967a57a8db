"""The event-type catalogue: types with a description and an optional JSON Schema; a payload of
a type with a schema is checked at accept -- on every accept route -- and refused with 422
naming the JSON pointer that fails, before anything is stored."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.receiver import Receiver
from tests.fixtures.waiting import count_rows

ORDER_PAID = {
    "type": "object",
    "required": ["order_id", "amount"],
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "integer", "minimum": 0},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
    },
    "$defs": {"line": {"type": "object", "properties": {"qty": {"type": "integer"}}}},
}


async def define(
    client: httpx.AsyncClient, tenant: dict[str, str], name: str, schema: Any = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "description": f"{name} happened"}
    if schema is not None:
        body["schema"] = schema
    response = await client.post("/v1/event-types", json=body, headers=tenant)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


async def test_a_tenant_keeps_a_catalogue_of_its_event_types(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    created = await define(client, tenant, "order.paid", ORDER_PAID)
    assert (created["version"], created["schema"]) == (1, ORDER_PAID)
    await define(client, tenant, "billing/invoice.sent")
    again = await client.post("/v1/event-types", json={"name": "order.paid"}, headers=tenant)
    assert again.status_code == 409

    slashed = await client.get("/v1/event-types/billing/invoice.sent", headers=tenant)
    assert slashed.status_code == 200 and slashed.json()["schema"] is None
    first = (await client.get("/v1/event-types?limit=1", headers=tenant)).json()
    rest = await client.get(f"/v1/event-types?cursor={first['next_cursor']}", headers=tenant)
    assert [t["name"] for t in first["items"] + rest.json()["items"]] == [
        "billing/invoice.sent",
        "order.paid",
    ]

    described = await client.patch(
        "/v1/event-types/order.paid", json={"description": "paid in full"}, headers=tenant
    )
    assert (described.json()["description"], described.json()["version"]) == ("paid in full", 1)
    loosened = await client.patch(
        "/v1/event-types/order.paid", json={"schema": {"type": "object"}}, headers=tenant
    )
    assert (loosened.json()["schema"], loosened.json()["version"]) == ({"type": "object"}, 2)
    removed = await client.patch(
        "/v1/event-types/order.paid", json={"schema": None}, headers=tenant
    )
    assert (removed.json()["schema"], removed.json()["version"]) == (None, 3)

    for junk in ("%%%", "bm9wZSBub3Bl", "\x00"):  # not one this list handed out
        bad = await client.get("/v1/event-types", params={"cursor": junk}, headers=tenant)
        assert bad.status_code == 422, (junk, bad.text)

    other = await new_tenant(client, "other")
    for path in ("/v1/event-types/order.paid", "/v1/event-types/nope", "/v1/event-types/a%20b"):
        response = await client.get(path, headers=other)
        assert response.status_code == 404, (path, response.text)
    assert (await client.get("/v1/event-types", headers=other)).json()["items"] == []


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        ({"type": "nonsense"}, "not a valid JSON Schema"),
        ({"properties": {"a": {"pattern": "("}}}, "not a valid JSON Schema"),
        ({"$ref": "https://example.com/schema.json"}, "$ref must point inside the schema"),
        ({"properties": {"a": {"$ref": "other.json#/x"}}}, "Herald fetches nothing"),
        ({"enum": ["x" * 1000] * 70}, "a schema is at most 65536 bytes"),
        ({"$schema": "file:///etc/hostname"}, "$schema must name a JSON Schema draft"),
        ({"$schema": "http://169.254.169.254/latest"}, "Herald fetches no meta-schema"),
    ],
)
async def test_a_schema_herald_cannot_use_is_refused(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, schema: Any, says: str
) -> None:
    response = await client.post(
        "/v1/event-types", json={"name": "a.b", "schema": schema}, headers=tenant
    )
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith("body.schema: ")
    assert says in response.json()["detail"]
    assert await count_rows(engine, "event_types") == 0


# (route, how the request carries the payload) for each accept route
ROUTES = ["POST /v1/deliveries", "POST /v1/deliveries (keyed)", "POST /v1/events"]


async def accept(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    route: str,
    endpoint_id: str,
    payload: dict[str, Any],
    key: str = "k-1",
) -> httpx.Response:
    if route == "POST /v1/events":
        body = {"event_type": "order.paid", "payload": payload}
        return await client.post("/v1/events", json=body, headers=tenant)
    headers = {**tenant, "Idempotency-Key": key} if "keyed" in route else tenant
    body = {"endpoint_id": endpoint_id, "event_type": "order.paid", "payload": payload}
    return await client.post("/v1/deliveries", json=body, headers=headers)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"order_id": "o1"}, 'at /: the required property "amount" is missing'),
        ({"order_id": "o1", "amount": "SECRET-VALUE"}, "at /amount: must be of type integer"),
        ({"order_id": "o1", "amount": -5}, 'at /amount: fails the schema\'s "minimum" rule'),
        (
            {"order_id": "o1", "amount": 1, "lines": [{"qty": 1}, {"qty": "two"}]},
            "at /lines/1/qty: must be of type integer",
        ),
    ],
)
async def test_a_payload_that_fails_its_types_schema_is_refused_before_anything_is_stored(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    route: str,
    payload: dict[str, Any],
    says: str,
) -> None:
    endpoint = await new_endpoint(client, tenant)
    await define(client, tenant, "order.paid", ORDER_PAID)

    refused = await accept(client, tenant, route, endpoint["id"], payload)

    assert refused.status_code == 422, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    detail = refused.json()["detail"]
    assert (
        detail == f"payload does not match the schema of event type order.paid (version 1): {says}"
    )
    assert "SECRET-VALUE" not in refused.text
    for table in ("events", "deliveries", "outbox", "idempotency_keys"):
        assert await count_rows(engine, table) == 0
    good = await accept(client, tenant, route, endpoint["id"], {"order_id": "o1", "amount": 5})
    assert good.status_code == 202, good.text


async def test_a_batch_refuses_the_items_that_fail_and_accepts_the_rest(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant)
    await define(client, tenant, "order.paid", ORDER_PAID)
    item = {"endpoint_id": endpoint["id"], "event_type": "order.paid"}
    items = [
        {**item, "payload": {"order_id": "a", "amount": 1}, "idempotency_key": "good"},
        {**item, "payload": {"order_id": "b"}, "idempotency_key": "bad"},
        {**item, "event_type": "untyped", "payload": {"anything": True}},
    ]
    response = await client.post("/v1/deliveries/batch", json={"items": items}, headers=tenant)
    assert response.status_code == 200, response.text
    statuses = [i["status"] for i in response.json()["items"]]
    assert statuses == [202, 422, 202]
    assert "the required property" in response.json()["items"][1]["error"]["detail"]
    assert await count_rows(engine, "deliveries") == 2
    # The failed item's key was not kept: the same key with a valid payload is accepted.
    retried = [{**items[1], "payload": {"order_id": "b", "amount": 2}}]
    again = await client.post("/v1/deliveries/batch", json={"items": retried}, headers=tenant)
    assert [i["status"] for i in again.json()["items"]] == [202]


async def test_a_schema_change_applies_at_once_and_a_replay_still_answers_as_before(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant)
    await define(client, tenant, "order.paid", {"type": "object"})
    loose = {"order_id": "o1"}
    first = await accept(client, tenant, "POST /v1/deliveries (keyed)", endpoint["id"], loose)
    assert first.status_code == 202

    tightened = await client.patch(
        "/v1/event-types/order.paid", json={"schema": ORDER_PAID}, headers=tenant
    )
    assert tightened.json()["version"] == 2
    fresh = await accept(client, tenant, "POST /v1/deliveries", endpoint["id"], loose)
    assert fresh.status_code == 422
    assert "(version 2)" in fresh.json()["detail"]
    # The same keyed request again: it was accepted once, so it answers that, not the schema.
    replay = await accept(client, tenant, "POST /v1/deliveries (keyed)", endpoint["id"], loose)
    assert (replay.status_code, replay.json()["id"]) == (200, first.json()["id"])


async def test_a_schema_naming_a_meta_schema_on_the_network_fetches_nothing(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    for schema in (
        {"$schema": receiver.url("/meta"), "type": "object"},
        {"$id": receiver.url("/base"), "properties": {"a": {"$ref": receiver.url("/a.json")}}},
    ):
        response = await client.post(
            "/v1/event-types", json={"name": "a.b", "schema": schema}, headers=tenant
        )
        assert response.status_code == 422, response.text
    assert receiver.requests == []  # nothing asked the network for a schema
