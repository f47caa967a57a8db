"""A portal session's bearer on the customer-scoped subset of /v1 -- its endpoints, their
deliveries and attempts, the catalogue -- so that a tenant can build its own UI on what the
portal reads. Held to the portal's isolation: another customer's ids, and the tenant's own,
answer 404 to every route; writes need the session's capability; every other route is the
tenant's alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.fixtures.api import accept, new_endpoint, portal_bearer


@dataclass(frozen=True)
class Tenancy:
    tenant: dict[str, str]
    mine: dict[str, Any]  # acme's endpoint
    theirs: dict[str, Any]  # globex's
    tenants_own: dict[str, Any]  # the tenant's, of no customer
    delivered: dict[str, str]  # endpoint id -> a delivery to it


@pytest.fixture
async def tenancy(client: httpx.AsyncClient, tenant: dict[str, str]) -> Tenancy:
    for customer_id in ("acme", "globex"):
        await client.put(f"/v1/customers/{customer_id}", json={}, headers=tenant)
    made = await client.post(
        "/v1/event-types", json={"name": "invoice.paid", "example": {"n": 1}}, headers=tenant
    )
    assert made.status_code == 201, made.text
    mine = await new_endpoint(client, tenant, customer_id="acme")
    theirs = await new_endpoint(client, tenant, customer_id="globex")
    tenants_own = await new_endpoint(client, tenant)
    delivered = {
        e["id"]: await accept(client, tenant, e["id"]) for e in (mine, theirs, tenants_own)
    }
    return Tenancy(tenant, mine, theirs, tenants_own, delivered)


def _probes(endpoint_id: str, delivery_id: str) -> list[tuple[str, str, Any]]:
    """Every customer-scoped route that names an id, with a body it would accept."""
    return [
        ("GET", f"/v1/endpoints/{endpoint_id}", None),
        ("GET", f"/v1/endpoints/{endpoint_id}/stats", None),
        ("GET", f"/v1/endpoints/{endpoint_id}/streams", None),
        ("GET", f"/v1/endpoints/{endpoint_id}/secret", None),
        ("POST", f"/v1/endpoints/{endpoint_id}/secret/rotate", None),
        ("POST", f"/v1/endpoints/{endpoint_id}/signing-key/rotate", None),
        ("POST", f"/v1/endpoints/{endpoint_id}/test", None),
        ("POST", f"/v1/endpoints/{endpoint_id}/test-events", None),
        (
            "POST",
            f"/v1/endpoints/{endpoint_id}/transformation/test",
            {"transformation": "{}", "event_type": "a.b", "payload": {}},
        ),
        ("GET", f"/v1/endpoints/{endpoint_id}/poll", None),
        (
            "POST",
            f"/v1/endpoints/{endpoint_id}/poll/ack",
            {"receipts": ["dlv_01JF3Q6W9ZKTR8V4M2N5PXC7BD.0123456789abcdef0123456789abcdef"]},
        ),
        ("PATCH", f"/v1/endpoints/{endpoint_id}", {"description": "mine now"}),
        ("DELETE", f"/v1/endpoints/{endpoint_id}", None),
        ("GET", f"/v1/deliveries/{delivery_id}", None),
        ("GET", f"/v1/deliveries/{delivery_id}/attempts", None),
        ("POST", f"/v1/deliveries/{delivery_id}/redrive", None),
        ("POST", f"/v1/deliveries/{delivery_id}/retry", None),
    ]


async def test_a_session_reads_its_customers_endpoints_deliveries_and_the_catalogue(
    client: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    bearer = await portal_bearer(client, tenancy.tenant, "acme")
    mine, delivery = tenancy.mine["id"], tenancy.delivered[tenancy.mine["id"]]

    listed = (await client.get("/v1/endpoints", headers=bearer)).json()
    assert [e["id"] for e in listed["items"]] == [mine]
    got = await client.get(f"/v1/endpoints/{mine}", headers=bearer)
    assert got.status_code == 200 and got.json()["customer_id"] == "acme"
    deliveries = (await client.get("/v1/deliveries", headers=bearer)).json()
    assert [d["id"] for d in deliveries["items"]] == [delivery]
    detail = await client.get(f"/v1/deliveries/{delivery}", headers=bearer)
    assert detail.status_code == 200 and detail.json()["timeline"]
    attempts = await client.get(f"/v1/deliveries/{delivery}/attempts", headers=bearer)
    assert attempts.status_code == 200 and attempts.json()["items"] == []
    catalogue = (await client.get("/v1/event-types", headers=bearer)).json()
    assert [t["name"] for t in catalogue["items"]] == ["invoice.paid"]
    assert (await client.get("/v1/event-types/invoice.paid", headers=bearer)).status_code == 200


@pytest.mark.parametrize(
    "capabilities", [(), ("manage_endpoints", "replay", "transform_endpoints", "poll_endpoints")]
)
async def test_another_customers_ids_and_the_tenants_own_are_not_found(
    client: httpx.AsyncClient, tenancy: Tenancy, capabilities: tuple[str, ...]
) -> None:
    """With the rights to write, still 404: the scope, not the right, decides what is found.
    Without them a write is refused before anything is looked up, whatever the id."""
    bearer = await portal_bearer(client, tenancy.tenant, "acme", *capabilities)
    for other in (tenancy.theirs, tenancy.tenants_own):
        for method, path, body in _probes(other["id"], tenancy.delivered[other["id"]]):
            answer = await client.request(method, path, json=body, headers=bearer)
            writes = method != "GET" or path.endswith(("/secret", "/poll"))
            expected = 403 if writes and not capabilities else 404
            assert answer.status_code == expected, (method, path, answer.text)
        # Listings narrowed to it find nothing; asking for the other customer widens nothing.
        by_endpoint = await client.get(f"/v1/deliveries?endpoint_id={other['id']}", headers=bearer)
        assert by_endpoint.json()["items"] == []
    widened = await client.get("/v1/endpoints?customer_id=globex", headers=bearer)
    assert widened.status_code == 200 and widened.json()["items"] == []
    # Nothing of theirs was changed or sent by any of it.
    for other in (tenancy.theirs, tenancy.tenants_own):
        kept = await client.get(f"/v1/endpoints/{other['id']}", headers=tenancy.tenant)
        assert kept.json()["description"] is None
        sent = await client.get(f"/v1/deliveries?endpoint_id={other['id']}", headers=tenancy.tenant)
        assert len(sent.json()["items"]) == 1


async def test_writes_need_the_sessions_capability(
    client: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    reader = await portal_bearer(client, tenancy.tenant, "acme")
    mine = tenancy.mine["id"]
    for method, path, body in _probes(mine, tenancy.delivered[mine]):
        if method == "GET" and not path.endswith(("/secret", "/poll")):
            continue
        answer = await client.request(method, path, json=body, headers=reader)
        assert answer.status_code == 403, (method, path, answer.text)
        assert "this portal session may not" in answer.json()["detail"]
    made = await client.post("/v1/endpoints", json={"url": "http://127.0.0.1:9/x"}, headers=reader)
    assert made.status_code == 403
    listed = await client.get("/v1/endpoints", headers=tenancy.tenant)
    assert len(listed.json()["items"]) == 3  # nothing made


async def test_a_managing_session_sets_its_receivers_fields_and_not_its_tenants(
    client: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    manager = await portal_bearer(client, tenancy.tenant, "acme", "manage_endpoints")
    made = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/new", "payload_format": "standard"},
        headers=manager,
    )
    assert made.status_code == 201, made.text
    assert made.json()["customer_id"] == "acme" and made.json()["secret"].startswith("whsec_")
    for spec in (
        {"url": "http://127.0.0.1:9/x", "rate_limit_per_second": 1000},
        {"url": "http://127.0.0.1:9/x", "headers": {"X-Tenant": "t"}},
    ):
        refused = await client.post("/v1/endpoints", json=spec, headers=manager)
        assert refused.status_code == 403, refused.text
        assert "its tenant sets those" in refused.json()["detail"]
    elsewhere = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "customer_id": "globex"},
        headers=manager,
    )
    assert elsewhere.status_code == 404

    mine = tenancy.mine["id"]
    changed = await client.patch(
        f"/v1/endpoints/{mine}", json={"description": "d"}, headers=manager
    )
    assert changed.status_code == 200 and changed.json()["description"] == "d"
    ceiling = await client.patch(
        f"/v1/endpoints/{mine}", json={"max_in_flight": 1}, headers=manager
    )
    assert ceiling.status_code == 403
    assert "max_in_flight" in ceiling.json()["detail"]
    tested = await client.post(f"/v1/endpoints/{mine}/test-events", headers=manager)
    assert tested.status_code == 202, tested.text
    # A test of its receiver, not an event of its tenant's: the example payload, never its own.
    own = await client.post(
        f"/v1/endpoints/{mine}/test-events",
        json={"event_type": "invoice.paid", "payload": {"n": 2}},
        headers=manager,
    )
    assert own.status_code == 403 and "example payload" in own.json()["detail"]
    listed = (await client.get("/v1/deliveries", headers=manager)).json()
    assert tested.json()["id"] in [d["id"] for d in listed["items"]]


async def test_every_other_route_is_the_tenants_alone(
    client: httpx.AsyncClient, tenancy: Tenancy
) -> None:
    bearer = await portal_bearer(client, tenancy.tenant, "acme", "manage_endpoints", "replay")
    delivery = tenancy.delivered[tenancy.mine["id"]]
    for method, path, body in (
        (
            "POST",
            "/v1/deliveries",
            {"endpoint_id": tenancy.mine["id"], "event_type": "a.b", "payload": {}},
        ),
        ("POST", "/v1/events", {"event_type": "a.b", "payload": {}, "customer_id": "acme"}),
        ("POST", f"/v1/deliveries/{delivery}/cancel", None),
        ("POST", "/v1/deliveries/redrive", {"endpoint_id": tenancy.mine["id"]}),
        ("POST", "/v1/event-types", {"name": "x.y"}),
        ("GET", "/v1/customers", None),
        ("POST", "/v1/portal-sessions", {"customer_id": "acme"}),
        ("GET", "/v1/api-keys", None),
        ("GET", "/v1/limits", None),
        ("GET", "/v1/portal-settings", None),
    ):
        answer = await client.request(method, path, json=body, headers=bearer)
        assert answer.status_code == 403, (method, path, answer.text)
        assert "this route needs an API key" in answer.json()["detail"]


async def test_an_ended_session_opens_nothing(client: httpx.AsyncClient, tenancy: Tenancy) -> None:
    bearer = await portal_bearer(client, tenancy.tenant, "acme")
    assert (await client.get("/v1/endpoints", headers=bearer)).status_code == 200
    revoked = await client.post(
        "/v1/portal-sessions/revoke", json={"customer_id": "acme"}, headers=tenancy.tenant
    )
    assert revoked.status_code == 200, revoked.text
    answer = await client.get("/v1/endpoints", headers=bearer)
    assert answer.status_code == 401
    assert "open the portal again" in answer.json()["detail"]
