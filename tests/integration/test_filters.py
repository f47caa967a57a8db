"""Endpoint filters in CEL: checked when saved (a 422 says where), evaluated at fan-out; an
event a filter says no to makes no delivery for that endpoint, and the event says why."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.waiting import count_rows

BIG_EUROS = 'payload.amount > 100 && payload.currency == "EUR"'


@pytest.mark.parametrize(
    ("expression", "says"),
    [
        ("payload.amount >", "at line 1, column 17: the expression ends too early"),
        ("payload.amount > 100 &&& x", "at line 1, column 24"),
        ("paylod.amount > 100", "unknown name paylod: a filter sees type and payload"),
        (
            "payload.a.exists(x, x > 1) && payload.b.all(y, y > 1)",
            "at most one all, exists, exists_one, map or filter",
        ),
        ("payload.a == 1 || " * 60 + "true", "a filter is at most 1000 characters"),
        # A comment could hide a second comprehension from the count.
        ("payload.a.//c\nall(x, payload.a.//c\nall(y, true))", "a filter may not hold comments"),
        # One comprehension over the payload per element would be quadratic.
        ("payload.a.all(x, x in payload.a)", "use the element's variable, not payload"),
        ("", "at least 1 character"),
    ],
)
async def test_a_filter_that_cannot_run_is_refused_where_it_is_wrong(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    endpoint: dict[str, Any],
    expression: str,
    says: str,
) -> None:
    created = await client.post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/x", "filter": expression}, headers=tenant
    )
    updated = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"filter": expression}, headers=tenant
    )
    for response in (created, updated):
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        detail = response.json()["detail"]
        assert detail.startswith("body.filter: ") and says in detail, detail
    assert await count_rows(engine, "endpoints") == 1  # only the fixture's
    assert (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()[
        "filter"
    ] is None


async def test_an_event_reaches_only_the_endpoints_whose_filter_says_yes(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    big = await new_endpoint(client, tenant, filter=BIG_EUROS)
    orders = await new_endpoint(client, tenant, filter='type.startsWith("order.")')
    everything = await new_endpoint(client, tenant)
    assert big["filter"] == BIG_EUROS
    names = {big["id"]: "big", orders["id"]: "orders", everything["id"]: "everything"}

    async def publish(event_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        response = await client.post(
            "/v1/events", json={"event_type": event_type, "payload": payload}, headers=tenant
        )
        assert response.status_code == 202, response.text
        body: dict[str, Any] = response.json()
        return body

    rich = await publish("order.paid", {"amount": 150, "currency": "EUR"})
    assert {names[d["endpoint_id"]] for d in rich["deliveries"]} == {"big", "orders", "everything"}
    assert rich["filtered_out"] == []

    small = await publish("invoice.paid", {"amount": 50, "currency": "EUR"})
    assert {names[d["endpoint_id"]] for d in small["deliveries"]} == {"everything"}
    assert {(names[f["endpoint_id"]], f["reason"]) for f in small["filtered_out"]} == {
        ("big", "the filter said false"),
        ("orders", "the filter said false"),
    }
    assert await count_rows(engine, "deliveries", "event_id = :e", e=small["id"]) == 1

    # A field the filter needs is missing: the filter fails, so it lets nothing through.
    missing = await publish("order.paid", {"currency": "EUR"})
    assert {names[d["endpoint_id"]] for d in missing["deliveries"]} == {"orders", "everything"}
    [failed] = missing["filtered_out"]
    assert (names[failed["endpoint_id"]], failed["reason"]) == (
        "big",
        "the filter failed on this event: no field amount",
    )

    # The event tells it again when read back.
    read = (await client.get(f"/v1/events/{small['id']}", headers=tenant)).json()
    assert read["filtered_out"] == small["filtered_out"]


async def test_a_replayed_publish_answers_the_same_filtered_out(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await new_endpoint(client, tenant, filter=BIG_EUROS)
    keyed = {**tenant, "Idempotency-Key": "publish-once"}
    body = {"event_type": "x", "payload": {"amount": 1, "currency": "EUR"}}
    first = await client.post("/v1/events", json=body, headers=keyed)
    again = await client.post("/v1/events", json=body, headers=keyed)
    assert (first.status_code, again.status_code) == (202, 200)
    assert again.json()["filtered_out"] == first.json()["filtered_out"] != []


async def test_removing_a_filter_lets_everything_through_again(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant, filter="false")
    body = {"event_type": "x", "payload": {}}
    before = (await client.post("/v1/events", json=body, headers=tenant)).json()
    cleared = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"filter": None}, headers=tenant
    )
    assert cleared.json()["filter"] is None
    after = (await client.post("/v1/events", json=body, headers=tenant)).json()
    assert (len(before["deliveries"]), len(after["deliveries"])) == (0, 1)


async def test_strings_may_hold_what_code_may_not(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    # "//" and ".all(" inside string literals are text, not a comment or a comprehension.
    expression = 'payload.url.startsWith("https://") && payload.note != "a.all(x, y)"'
    endpoint = await new_endpoint(client, tenant, filter=expression)
    body = {"event_type": "x", "payload": {"url": "https://a.example", "note": "n"}}
    published = (await client.post("/v1/events", json=body, headers=tenant)).json()
    assert [d["endpoint_id"] for d in published["deliveries"]] == [endpoint["id"]]
