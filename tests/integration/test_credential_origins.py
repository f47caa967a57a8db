"""Credentials follow the URL they were set for: a portal customer who moves its endpoint to a
receiver of its own never receives the tenant's secret headers or OAuth2 tokens, and a tenant
who moves one to another origin says what becomes of them."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.fixtures.api import new_endpoint, portal_bearer
from tests.fixtures.oauth import CLIENT_ID, CLIENT_SECRET, Authorization, running_authorization
from tests.fixtures.receiver import Receiver

SECRET = "tenant-only-7c1d"


@pytest.fixture
async def authorization() -> Any:
    async with running_authorization() as running:
        yield running


async def _credentialed(
    client: httpx.AsyncClient, tenant: dict[str, str], authorization: Authorization
) -> dict[str, Any]:
    """An endpoint the tenant made for customer cus-1, at the tenant's receiver (the token
    server's own /hook), with a secret header and an OAuth2 client."""
    await client.put("/v1/customers/cus-1", json={}, headers=tenant)
    return await new_endpoint(
        client,
        tenant,
        url=authorization.url("/hook"),
        customer_id="cus-1",
        secret_headers={"X-Api-Key": SECRET},
        oauth2={
            "token_url": authorization.url("/token"),
            "client_id": CLIENT_ID,
            "client_secret": CLIENT_SECRET,
        },
    )


def _lowered(headers: dict[str, str]) -> dict[str, str]:
    return {name.lower(): value for name, value in headers.items()}


async def test_a_customer_moving_its_url_elsewhere_never_receives_the_tenants_credentials(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authorization: Authorization,
    receiver: Receiver,
) -> None:
    endpoint = await _credentialed(client, tenant, authorization)
    manager = await portal_bearer(client, tenant, "cus-1", "manage_endpoints")

    # The attack, step by step: the customer points the endpoint at its own receiver...
    moved = await client.post(
        f"/portal/api/endpoints/{endpoint['id']}",
        data={"url": receiver.url("/mine")},
        headers=manager,
    )
    assert moved.status_code == 200, moved.text
    # ... and sends a test event.
    tested = await client.post(f"/portal/api/endpoints/{endpoint['id']}/test", headers=manager)
    assert tested.status_code == 200, tested.text

    (request,) = await receiver.wait_for("/mine", 1)
    sent = _lowered(request.headers)
    assert "x-api-key" not in sent and SECRET not in str(request.headers)
    assert "authorization" not in sent
    assert authorization.issued() == []  # no token was even minted for it
    shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert shown["url"] == receiver.url("/mine")
    assert shown["secret_header_names"] == [] and shown["oauth2"] is None


async def test_a_customer_changing_only_the_path_keeps_the_credentials(
    client: httpx.AsyncClient, tenant: dict[str, str], authorization: Authorization
) -> None:
    endpoint = await _credentialed(client, tenant, authorization)
    manager = await portal_bearer(client, tenant, "cus-1", "manage_endpoints")
    moved = await client.post(
        f"/portal/api/endpoints/{endpoint['id']}",
        data={"url": authorization.url("/hook/v2")},
        headers=manager,
    )
    assert moved.status_code == 200, moved.text
    shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert shown["secret_header_names"] == ["X-Api-Key"] and shown["oauth2"] is not None


async def test_a_tenant_moving_the_origin_says_what_becomes_of_the_credentials(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authorization: Authorization,
    receiver: Receiver,
) -> None:
    endpoint = await _credentialed(client, tenant, authorization)
    path = f"/v1/endpoints/{endpoint['id']}"

    refused = await client.patch(path, json={"url": receiver.url("/new")}, headers=tenant)
    assert refused.status_code == 422, refused.text
    detail = refused.json()["detail"]
    assert "secret_headers, oauth2 were set for the old one" in detail, detail
    unchanged = (await client.get(path, headers=tenant)).json()
    assert unchanged["url"] == authorization.url("/hook")

    # Re-stated or removed in the same change, the move is the tenant's to make.
    moved = await client.patch(
        path,
        json={"url": receiver.url("/new"), "secret_headers": {"X-Api-Key": "new"}, "oauth2": None},
        headers=tenant,
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["secret_header_names"] == ["X-Api-Key"]
    assert moved.json()["oauth2"] is None

    # Within the origin, nothing needs saying.
    kept = await client.patch(path, json={"url": receiver.url("/newer")}, headers=tenant)
    assert kept.status_code == 200, kept.text
    assert kept.json()["secret_header_names"] == ["X-Api-Key"]
