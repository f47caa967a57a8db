"""A value that ends in a line break is refused like any other character a rule does not allow:
422 with a message in words, and nothing stored. (Python's ``$`` matches before a final "\\n",
so rules checked with ``re.match`` let these through: a header that made every attempt fail,
an event type whose row could then be neither read nor sent in a ``Location`` header.)"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"
EVENT_TYPE = "must be 1-255 characters: letters, digits and _ . : - /"
ONE_LINE = "must be printable text on one line"


def refused(response: httpx.Response, says: str) -> str:
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    detail: str = response.json()["detail"]
    assert says in detail, detail
    return detail


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"Content-Type\n": "text/html"}, "body.headers: a header name must be"),
        ({"Host\n": "evil"}, "body.headers: a header name must be"),
        ({"X-A": "abc\n"}, "body.headers: the value of the header X-A must be printable ASCII"),
    ],
)
async def test_a_header_ending_in_a_line_break_is_refused_on_create_and_update(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    headers: dict[str, str],
    says: str,
) -> None:
    kept = await new_endpoint(client, tenant, headers={"X-Team": "billing"})
    created = await client.post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/x", "headers": headers}, headers=tenant
    )
    updated = await client.patch(
        f"/v1/endpoints/{kept['id']}", json={"headers": headers}, headers=tenant
    )
    for response in (created, updated):
        detail = refused(response, says)
        assert "evil" not in detail and "text/html" not in detail and "abc" not in detail
    assert await count_rows(engine, "endpoints") == 1
    unchanged = await client.get(f"/v1/endpoints/{kept['id']}", headers=tenant)
    assert unchanged.json()["headers"] == {"X-Team": "billing"}


async def test_an_event_type_name_ending_in_a_line_break_is_refused_and_not_stored(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    body = {"name": "cat.b\n", "description": "a type"}
    refused(await client.post("/v1/event-types", json=body, headers=tenant), EVENT_TYPE)
    assert await count_rows(engine, "event_types") == 0
    # The name without the line break is free, and is the only one there is.
    created = await client.post("/v1/event-types", json={"name": "cat.b"}, headers=tenant)
    assert created.status_code == 201 and created.headers["location"] == "/v1/event-types/cat.b"
    listed = await client.get("/v1/event-types", headers=tenant)
    assert [t["name"] for t in listed.json()["items"]] == ["cat.b"]
    named = await client.get("/v1/event-types/cat.b", headers=tenant)
    assert named.status_code == 200 and named.json()["name"] == "cat.b"


@pytest.mark.parametrize("route", ["/v1/events", "/v1/deliveries"])
async def test_an_event_type_ending_in_a_line_break_is_refused_before_any_fan_out(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    route: str,
) -> None:
    everything = await new_endpoint(client, tenant, event_types=["*"])
    schema = {"type": "object", "required": ["n"]}
    described = {"name": "nl.test", "schema": schema}
    assert (await client.post("/v1/event-types", json=described, headers=tenant)).status_code == 201
    body: dict[str, Any] = {"event_type": "nl.test\n", "payload": {}}
    if route == "/v1/deliveries":
        body["endpoint_id"] = everything["id"]
    for key in (None, "nl-key"):
        headers = {**tenant, **({"Idempotency-Key": key} if key else {})}
        refused(
            await client.post(route, json=body, headers=headers), f"body.event_type: {EVENT_TYPE}"
        )
    for table in ("events", "deliveries", "outbox", "idempotency_keys"):
        assert await count_rows(engine, table) == 0, table


async def test_a_tenant_name_or_key_label_ending_in_a_line_break_is_refused(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    tenants, keys = await count_rows(engine, "tenants"), await count_rows(engine, "api_keys")
    named = await client.post("/v1/tenants", json={"name": "acme\n"}, headers=ADMIN)
    refused(named, f"body.name: {ONE_LINE}")
    labelled = await client.post("/v1/api-keys", json={"label": "ci\n"}, headers=tenant)
    refused(labelled, f"body.label: {ONE_LINE}")
    assert await count_rows(engine, "tenants") == tenants
    assert await count_rows(engine, "api_keys") == keys
