"""Customers of a tenant: made under the tenant's own id, owning endpoints, receiving events --
and a tenant that never names one sees no change."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.waiting import count_rows


async def put_customer(
    client: httpx.AsyncClient, tenant: dict[str, str], customer_id: str, name: str = "Acme"
) -> httpx.Response:
    return await client.put(f"/v1/customers/{customer_id}", json={"name": name}, headers=tenant)


async def publish(
    client: httpx.AsyncClient, tenant: dict[str, str], **fields: object
) -> httpx.Response:
    body = {"event_type": "invoice.paid", "payload": {"n": 1}, **fields}
    return await client.post("/v1/events", json=body, headers=tenant)


async def test_put_makes_a_customer_then_renames_it(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    made = await put_customer(client, tenant, "cus_42")
    assert made.status_code == 201 and made.headers["location"] == "/v1/customers/cus_42"
    renamed = await put_customer(client, tenant, "cus_42", "Acme Ltd")
    assert renamed.status_code == 200 and renamed.json()["name"] == "Acme Ltd"
    assert renamed.json()["created_at"] == made.json()["created_at"]

    listed = await client.get("/v1/customers", headers=tenant)
    assert [c["id"] for c in listed.json()["items"]] == ["cus_42"]
    fetched = await client.get("/v1/customers/cus_42", headers=tenant)
    assert fetched.json()["name"] == "Acme Ltd"


async def test_customers_are_listed_by_id_a_page_at_a_time(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for customer_id in ("c", "a", "b"):
        await put_customer(client, tenant, customer_id)
    first = (await client.get("/v1/customers?limit=2", headers=tenant)).json()
    assert [c["id"] for c in first["items"]] == ["a", "b"]
    rest = await client.get(f"/v1/customers?limit=2&cursor={first['next_cursor']}", headers=tenant)
    assert [c["id"] for c in rest.json()["items"]] == ["c"] and rest.json()["next_cursor"] is None


async def test_a_customer_id_that_breaks_the_rule_is_refused_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    refused = await put_customer(client, tenant, "-starts-with-a-dash")
    assert refused.status_code == 422
    assert refused.headers["content-type"] == "application/problem+json"
    assert "letters, digits" in refused.json()["detail"]
    too_long = await client.put(f"/v1/customers/{'x' * 129}", json={}, headers=tenant)
    assert too_long.status_code == 422
    missing = await client.get("/v1/customers/-x", headers=tenant)
    assert missing.status_code == 404 and "-x" not in missing.json()["detail"]
    endpoint = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/h", "customer_id": "a b"},
        headers=tenant,
    )
    assert endpoint.status_code == 422
    assert "customer_id" in str(endpoint.json()["errors"])


@pytest.mark.parametrize("junk", ["%00", "a%20b", "x" * 129, "%27%3B%20DROP%20TABLE%20x", "%C4%B0"])
@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_a_junk_customer_id_in_a_path_is_404_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], method: str, junk: str
) -> None:
    response = await client.request(method, f"/v1/customers/{junk}", headers=tenant)
    assert response.status_code == 404
    assert response.json()["detail"].startswith("no such customer: a customer's id must be")
    # Never echoed in the detail (the instance is the path as sent, percent-encoded).
    assert "DROP" not in response.json()["detail"] and "\\u0000" not in response.text


@pytest.mark.parametrize("junk", ["", " ", "a\x00", "x" * 129, "-x", "\u0130"])
@pytest.mark.parametrize(
    ("method", "path", "loc"),
    [
        ("POST", "/v1/endpoints", "body"),
        ("POST", "/v1/events", "body"),
        ("GET", "/v1/endpoints", "query"),
    ],
)
async def test_a_junk_customer_id_in_a_body_or_query_is_422_naming_the_field(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    method: str,
    path: str,
    loc: str,
    junk: str,
) -> None:
    if loc == "query":
        response = await client.get(path, params={"customer_id": junk}, headers=tenant)
    else:
        body = {"url": "http://127.0.0.1:9/h", "event_type": "a", "payload": {}}
        body = {k: v for k, v in body.items() if (k == "url") == (path == "/v1/endpoints")}
        response = await client.post(path, json={**body, "customer_id": junk}, headers=tenant)
    assert response.status_code == 422, response.text
    [error] = response.json()["errors"]
    assert error["loc"] == [loc, "customer_id"]
    assert "letters, digits" in error["msg"] or "at most" in error["msg"]
    assert await count_rows(engine, "endpoints") + await count_rows(engine, "events") == 0


async def test_a_cursor_the_customer_list_did_not_hand_out_is_422(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    response = await client.get("/v1/customers", params={"cursor": "bm9wZSBu"}, headers=tenant)
    assert response.status_code == 422
    assert response.json()["errors"][0]["loc"] == ["query", "cursor"]


async def test_another_tenants_customer_is_not_found(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    other = await new_tenant(client, "other")
    await put_customer(client, other, "shared-id")
    assert (await client.get("/v1/customers/shared-id", headers=tenant)).status_code == 404
    endpoint = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/h", "customer_id": "shared-id"},
        headers=tenant,
    )
    assert endpoint.status_code == 404
    assert "customer shared-id not found" in endpoint.json()["detail"]
    # The same id is the tenant's own to use: customers are keyed by tenant and id.
    assert (await put_customer(client, tenant, "shared-id")).status_code == 201


async def test_an_event_to_a_customer_reaches_its_endpoints_alone(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await put_customer(client, tenant, "acme")
    await put_customer(client, tenant, "globex")
    acme = await new_endpoint(client, tenant, customer_id="acme")
    globex = await new_endpoint(client, tenant, customer_id="globex")
    own = await new_endpoint(client, tenant)  # the tenant's, no customer's
    assert acme["customer_id"] == "acme" and own["customer_id"] is None

    to_acme = (await publish(client, tenant, customer_id="acme")).json()
    assert [d["endpoint_id"] for d in to_acme["deliveries"]] == [acme["id"]]
    to_nobody = (await publish(client, tenant)).json()
    assert [d["endpoint_id"] for d in to_nobody["deliveries"]] == [own["id"]]
    assert globex["id"] not in {d["endpoint_id"] for d in to_acme["deliveries"]}
    assert await count_rows(engine, "events", "customer_id = 'acme'") == 1
    assert await count_rows(engine, "events", "customer_id IS NULL") == 1


async def test_an_event_to_an_unknown_customer_is_refused_and_writes_nothing(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    refused = await publish(client, tenant, customer_id="nobody")
    assert refused.status_code == 404
    assert refused.json()["detail"] == "customer nobody not found"
    assert await count_rows(engine, "events") == 0


async def test_a_tenant_without_customers_sees_every_endpoint_and_fans_out_as_before(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    first = await new_endpoint(client, tenant)
    second = await new_endpoint(client, tenant)
    body = (await publish(client, tenant)).json()
    assert {d["endpoint_id"] for d in body["deliveries"]} == {first["id"], second["id"]}


async def test_the_tenant_lists_its_customers_endpoints_beside_its_own(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await put_customer(client, tenant, "acme")
    theirs = await new_endpoint(client, tenant, customer_id="acme")
    own = await new_endpoint(client, tenant)
    listed = await client.get("/v1/endpoints", headers=tenant)
    assert {e["id"] for e in listed.json()["items"]} == {theirs["id"], own["id"]}
    filtered = await client.get("/v1/endpoints?customer_id=acme", headers=tenant)
    assert [e["id"] for e in filtered.json()["items"]] == [theirs["id"]]


async def test_deleting_a_customer_deletes_its_endpoints_and_keeps_their_history(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await put_customer(client, tenant, "acme")
    endpoint = await new_endpoint(client, tenant, customer_id="acme")
    delivered = (await publish(client, tenant, customer_id="acme")).json()
    assert len(delivered["deliveries"]) == 1

    assert (await client.delete("/v1/customers/acme", headers=tenant)).status_code == 204
    assert (await client.get("/v1/customers/acme", headers=tenant)).status_code == 404
    assert (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).status_code == 404
    assert (await publish(client, tenant, customer_id="acme")).status_code == 404
    assert await count_rows(engine, "deliveries") == 1  # the history stays
    assert (await client.delete("/v1/customers/acme", headers=tenant)).status_code == 404

    back = await put_customer(client, tenant, "acme")
    assert back.status_code == 201  # brought back, with nothing from its earlier life
    assert (await publish(client, tenant, customer_id="acme")).json()["deliveries"] == []
