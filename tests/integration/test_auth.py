"""Every /v1 route authenticates, admin routes need admin keys, tenants never see each other."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.cli.openapi import openapi_document
from app.core.config import Settings
from app.main import create_app
from app.tenants.service.api_keys import hash_key
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.stack import ADMIN, client_for

PROBLEM = "application/problem+json"

TENANT_ROUTES = [
    ("GET", "/v1/endpoints"),
    ("POST", "/v1/endpoints"),
    ("GET", "/v1/endpoints/ep_x"),
    ("GET", "/v1/endpoints/ep_x/stats"),
    ("GET", "/v1/endpoints/ep_x/secret"),
    ("GET", "/v1/endpoints/ep_x/streams"),
    ("POST", "/v1/endpoints/ep_x/secret/rotate"),
    ("POST", "/v1/endpoints/ep_x/signing-key/rotate"),
    ("POST", "/v1/endpoints/ep_x/test"),
    ("POST", "/v1/endpoints/ep_x/test-events"),
    ("POST", "/v1/endpoints/ep_x/transformation/test"),
    ("GET", "/v1/endpoints/ep_x/poll"),
    ("POST", "/v1/endpoints/ep_x/poll/ack"),
    ("PATCH", "/v1/endpoints/ep_x"),
    ("DELETE", "/v1/endpoints/ep_x"),
    ("POST", "/v1/deliveries"),
    ("GET", "/v1/deliveries"),
    ("GET", "/v1/deliveries/dlv_x"),
    ("GET", "/v1/deliveries/dlv_x/attempts"),
    ("POST", "/v1/deliveries/dlv_x/redrive"),
    ("POST", "/v1/deliveries/dlv_x/cancel"),
    ("POST", "/v1/deliveries/dlv_x/skip"),
    ("GET", "/v1/events/evt_x"),
    ("POST", "/v1/deliveries/redrive"),
    ("POST", "/v1/deliveries/batch"),
    ("GET", "/v1/deliveries/redrive/rdv_x"),
    ("POST", "/v1/events"),
    ("POST", "/v1/event-types"),
    ("GET", "/v1/event-types"),
    ("GET", "/v1/event-types/order.paid"),
    ("PATCH", "/v1/event-types/order.paid"),
    ("GET", "/v1/operational-event-types"),
    ("GET", "/v1/operational-event-types/order.paid"),
    ("GET", "/v1/audit-records"),
    ("POST", "/v1/deliveries/dlv_x/retry"),
    ("PUT", "/v1/customers/cus_x"),
    ("GET", "/v1/customers"),
    ("GET", "/v1/customers/cus_x"),
    ("DELETE", "/v1/customers/cus_x"),
    ("POST", "/v1/portal-sessions"),
    ("GET", "/v1/portal-sessions"),
    ("POST", "/v1/portal-sessions/revoke"),
    ("DELETE", "/v1/portal-sessions/pts_x"),
    ("GET", "/v1/limits"),
    ("GET", "/v1/tenant"),
    ("PATCH", "/v1/tenant"),
    ("PUT", "/v1/portal-settings"),
    ("PATCH", "/v1/portal-settings"),
    ("GET", "/v1/portal-settings"),
]
ADMIN_ROUTES = [
    ("POST", "/v1/tenants"),
    ("GET", "/v1/tenants"),
    ("GET", "/v1/tenants/ten_x/limits"),
    ("PATCH", "/v1/tenants/ten_x/limits"),
    ("POST", "/v1/reconcile"),
    ("GET", "/v1/reconcile/runs"),
    ("GET", "/v1/reconcile/runs/run_x"),
]
# Routes for any key: a tenant acts on its own keys, an admin on any tenant's.
ANY_KEY_ROUTES = [
    ("GET", "/v1/api-keys"),
    ("POST", "/v1/api-keys"),
    ("POST", "/v1/api-keys/key_x/revoke"),
]


def test_every_v1_route_is_covered_here() -> None:
    """A new /v1 route must be added to the auth tests; this fails until it is."""
    documented = {
        (method.upper(), path)
        for path, operations in openapi_document()["paths"].items()
        if path.startswith("/v1")
        for method in operations
    }
    normalised = {
        (
            m,
            p.replace("{endpoint_id}", "ep_x")
            .replace("{delivery_id}", "dlv_x")
            .replace("{run_id}", "run_x")
            .replace("{job_id}", "rdv_x")
            .replace("{event_id}", "evt_x")
            .replace("{key_id}", "key_x")
            .replace("{customer_id}", "cus_x")
            .replace("{session_id}", "pts_x")
            .replace("{tenant_id}", "ten_x")
            .replace("{name}", "order.paid"),
        )
        for m, p in documented
    }
    assert normalised == set(TENANT_ROUTES) | set(ADMIN_ROUTES) | set(ANY_KEY_ROUTES)


@pytest.mark.parametrize(("method", "path"), TENANT_ROUTES + ADMIN_ROUTES + ANY_KEY_ROUTES)
@pytest.mark.parametrize(
    "authorization", [None, "Bearer ", "Bearer hrk_unknown", "Basic abc", "hrk_no_scheme"]
)
async def test_missing_or_unknown_key_is_401(
    client: httpx.AsyncClient, method: str, path: str, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    response = await client.request(method, path, headers=headers, json={})
    assert response.status_code == 401
    assert response.headers["content-type"] == PROBLEM
    assert response.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("method", "path"), ADMIN_ROUTES)
async def test_tenant_key_on_admin_route_is_403(
    client: httpx.AsyncClient, tenant: dict[str, str], method: str, path: str
) -> None:
    response = await client.request(method, path, json={"name": "sneaky"}, headers=tenant)
    assert response.status_code == 403
    assert response.headers["content-type"] == PROBLEM


async def test_bootstrap_admin_key_is_not_a_tenant(client: httpx.AsyncClient) -> None:
    response = await client.get("/v1/endpoints", headers=ADMIN)
    assert response.status_code == 403


async def test_tenant_creation_returns_a_working_key_once(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    response = await client.post("/v1/tenants", json={"name": "globex"}, headers=ADMIN)
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("ten_") and body["name"] == "globex"
    key = body["api_key"]
    listed = await client.get("/v1/endpoints", headers={"Authorization": f"Bearer {key}"})
    assert listed.status_code == 200
    async with engine.connect() as connection:
        stored = (await connection.execute(text("SELECT key_hash FROM api_keys"))).scalars().all()
    # Only the hash is kept.
    assert stored == [hash_key(key)]

    duplicate = await client.post("/v1/tenants", json={"name": "globex"}, headers=ADMIN)
    assert duplicate.status_code == 409


async def test_revoked_key_is_401(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    async with engine.begin() as connection:
        await connection.execute(text("UPDATE api_keys SET revoked_at = now()"))
    response = await client.get("/v1/endpoints", headers=tenant)
    assert response.status_code == 401


async def test_a_revoked_key_that_was_cached_stops_working_within_the_cache_window(
    settings: Settings, engine: AsyncEngine
) -> None:
    cached = create_app(settings.model_copy(update={"api_key_cache_seconds": 0.5}))
    async with cached.router.lifespan_context(cached), client_for(cached) as other:
        tenant = await new_tenant(other, "cached")
        assert (await other.get("/v1/endpoints", headers=tenant)).status_code == 200
        async with engine.begin() as connection:
            await connection.execute(text("UPDATE api_keys SET revoked_at = now()"))
        # Within the window this process still trusts the key it looked up: no database read.
        assert (await other.get("/v1/endpoints", headers=tenant)).status_code == 200
        await asyncio.sleep(0.6)
        assert (await other.get("/v1/endpoints", headers=tenant)).status_code == 401


async def test_without_a_bootstrap_admin_key_none_is_accepted(settings: Settings) -> None:
    bare = create_app(settings.model_copy(update={"admin_api_key": None}))
    async with bare.router.lifespan_context(bare), client_for(bare) as other:
        response = await other.post("/v1/tenants", json={"name": "x"}, headers=ADMIN)
    assert response.status_code == 401


async def test_other_tenants_resources_answer_404_on_every_route(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    delivery = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
        headers=tenant,
    )
    delivery_id = delivery.json()["id"]
    intruder = await new_tenant(client, "intruder")
    endpoint_id = endpoint["id"]

    probes = [
        ("GET", f"/v1/endpoints/{endpoint_id}", None),
        ("GET", f"/v1/endpoints/{endpoint_id}/stats", None),
        ("GET", f"/v1/endpoints/{endpoint_id}/secret", None),
        ("GET", f"/v1/endpoints/{endpoint_id}/streams", None),
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
        ("POST", f"/v1/deliveries/{delivery_id}/cancel", None),
        ("POST", f"/v1/deliveries/{delivery_id}/skip", None),
        ("POST", "/v1/deliveries", {"endpoint_id": endpoint_id, "event_type": "a", "payload": {}}),
    ]
    for method, path, body in probes:
        response = await client.request(method, path, json=body, headers=intruder)
        assert response.status_code == 404, (method, path, response.text)
        assert response.headers["content-type"] == PROBLEM

    listed_endpoints = await client.get("/v1/endpoints", headers=intruder)
    listed_deliveries = await client.get("/v1/deliveries", headers=intruder)
    assert listed_endpoints.json()["items"] == []
    assert listed_deliveries.json()["items"] == []
    fanout = await client.post(
        "/v1/events", json={"event_type": "a.b", "payload": {}}, headers=intruder
    )
    assert fanout.json()["deliveries"] == []

    # The owner still sees everything, untouched.
    owned = await client.get(f"/v1/endpoints/{endpoint_id}", headers=tenant)
    assert owned.status_code == 200 and owned.json()["description"] is None
    other_endpoint = await new_endpoint(client, intruder)
    assert other_endpoint["id"] != endpoint_id
