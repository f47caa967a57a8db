"""The audit trail: every kind of configuration change, by whom -- a key, a portal session, the
console, an admin -- before and after with no secret's value, listed newest first with a
cursor, and never another tenant's."""

from __future__ import annotations

import json
from typing import Any

import httpx

from tests.fixtures.api import new_endpoint, new_tenant, portal_bearer
from tests.fixtures.console_forms import sign_in
from tests.fixtures.stack import ADMIN


async def _trail(
    client: httpx.AsyncClient, tenant: dict[str, str], **query: Any
) -> list[dict[str, Any]]:
    """The whole trail, newest first, a page of 2 at a time (every cursor followed)."""
    records: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": 2, **query, **({"cursor": cursor} if cursor else {})}
        page = await client.get("/v1/audit-records", params=params, headers=tenant)
        assert page.status_code == 200, page.text
        records += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            return records


async def _key_id(client: httpx.AsyncClient, tenant: dict[str, str]) -> str:
    keys = (await client.get("/v1/api-keys", headers=tenant)).json()["items"]
    return str(keys[0]["id"])


async def test_an_endpoints_life_is_in_the_trail_with_no_secret(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "audited")
    key_id = await _key_id(client, tenant)
    made = await new_endpoint(client, tenant, description="Orders")
    changed = await client.patch(
        f"/v1/endpoints/{made['id']}",
        json={
            "description": "All orders",
            "secret_headers": {"Authorization": "Bearer receivers-own-token"},
            "oauth2": None,
        },
        headers=tenant,
    )
    assert changed.status_code == 200
    for rotate in ("secret/rotate", "signing-key/rotate"):
        assert (
            await client.post(f"/v1/endpoints/{made['id']}/{rotate}", headers=tenant)
        ).is_success
    assert (await client.delete(f"/v1/endpoints/{made['id']}", headers=tenant)).status_code == 204

    trail = await _trail(client, tenant, subject=made["id"])
    assert [r["action"] for r in trail] == [
        "endpoint.deleted",
        "endpoint.signing_key_rotated",
        "endpoint.secret_rotated",
        "endpoint.updated",
        "endpoint.created",
    ]
    assert all(r["actor"] == {"kind": "api_key", "id": key_id} for r in trail)
    deleted, _, _, updated, created = trail
    assert created["before"] is None and created["after"]["url"] == made["url"]
    assert created["after"]["description"] == "Orders"
    # Only what changed, as it was and as it became; a secret header by its name alone.
    assert updated["before"] == {
        "description": "Orders",
        "secret_header_names": [],
        "credentials_set": [],
    }
    assert updated["after"] == {
        "description": "All orders",
        "secret_header_names": ["Authorization"],
        "credentials_set": ["oauth2", "secret_headers"],
    }
    assert deleted["before"]["url"] == made["url"] and deleted["after"] is None
    said = json.dumps(trail)
    assert "receivers-own-token" not in said and made["secret"] not in said
    # Newest first, ids in order.
    assert [r["id"] for r in trail] == sorted((r["id"] for r in trail), reverse=True)


async def test_every_kind_of_change_names_who_made_it(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "everything")
    key_id = await _key_id(client, tenant)
    tenant_id = (await client.get("/v1/tenant", headers=tenant)).json()["id"]

    issued = await client.post("/v1/api-keys", json={"label": "ci"}, headers=tenant)
    new_key = issued.json()
    await client.post(f"/v1/api-keys/{new_key['id']}/revoke", headers=tenant)
    await client.post("/v1/event-types", json={"name": "order.paid"}, headers=tenant)
    await client.patch(
        "/v1/event-types/order.paid", json={"description": "An order was paid."}, headers=tenant
    )
    await client.put("/v1/customers/acme", json={"name": "Acme"}, headers=tenant)
    await client.put("/v1/customers/acme", json={"name": "Acme Ltd"}, headers=tenant)
    await client.patch(
        "/v1/portal-settings", json={"name": "Shop", "accent_color": "#112233"}, headers=tenant
    )
    await client.patch("/v1/tenant", json={"failing_after": 3}, headers=tenant)
    limited = await client.patch(
        f"/v1/tenants/{tenant_id}/limits", json={"max_endpoints": 40}, headers=ADMIN
    )
    assert limited.status_code == 200, limited.text
    # A customer's own change, through its portal session.
    bearer = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    theirs = await new_endpoint(client, tenant, customer_id="acme")
    by_customer = await client.patch(
        f"/v1/endpoints/{theirs['id']}", json={"description": "mine"}, headers=bearer
    )
    assert by_customer.status_code == 200, by_customer.text
    assert (await client.delete("/v1/customers/acme", headers=tenant)).status_code == 204

    trail = list(reversed(await _trail(client, tenant)))
    seen = [(r["action"], r["subject_id"]) for r in trail]
    assert seen == [
        ("api_key.created", key_id),  # the tenant's first key, by the admin who made it
        ("api_key.created", new_key["id"]),
        ("api_key.revoked", new_key["id"]),
        ("event_type.created", "order.paid"),
        ("event_type.updated", "order.paid"),
        ("customer.created", "acme"),
        ("customer.updated", "acme"),
        ("portal_settings.updated", None),
        ("tenant.updated", tenant_id),
        ("limits.updated", tenant_id),
        ("customer.updated", "acme"),  # portal_bearer puts the customer again
        ("endpoint.created", theirs["id"]),
        ("endpoint.updated", theirs["id"]),
        ("customer.deleted", "acme"),
        ("endpoint.deleted", theirs["id"]),
    ]
    actors = {(r["action"], r["subject_id"]): r["actor"] for r in trail}
    assert actors[("api_key.created", key_id)] == {"kind": "admin", "id": None}
    assert actors[("limits.updated", tenant_id)] == {"kind": "admin", "id": None}
    assert actors[("api_key.revoked", new_key["id"])] == {"kind": "api_key", "id": key_id}
    assert actors[("endpoint.updated", theirs["id"])]["kind"] == "portal_session"
    assert actors[("endpoint.updated", theirs["id"])]["id"].startswith("pts_")
    by_subject = {(r["action"], r["subject_id"]): r for r in trail}
    renamed = next(r for r in trail if r["action"] == "customer.updated")
    assert renamed["after"] == {"name": "Acme Ltd"}
    settings = by_subject[("portal_settings.updated", None)]
    assert settings["before"] == {"name": None, "accent_color": None}
    assert settings["after"] == {"name": "Shop", "accent_color": "#112233"}
    assert by_subject[("tenant.updated", tenant_id)]["after"] == {"failing_after": 3}
    assert by_subject[("limits.updated", tenant_id)]["after"] == {"max_endpoints": 40}
    assert by_subject[("event_type.updated", "order.paid")]["after"] == {
        "description": "An order was paid."
    }
    assert new_key["key"] not in json.dumps(trail)  # a key is never shown again

    only = await _trail(client, tenant, action="customer.created")
    assert [r["subject_id"] for r in only] == ["acme"]


async def test_the_console_is_named_as_the_actor(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "consoled")
    made = await new_endpoint(client, tenant)
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
    disabled = await client.post(
        f"/console/endpoints/{made['id']}/enabled",
        data={"csrf_token": csrf, "enabled": "false"},
    )
    assert disabled.status_code == 303
    [record] = await _trail(client, tenant, action="endpoint.updated")
    assert record["actor"]["kind"] == "console" and record["actor"]["id"].startswith("ses_")
    assert record["before"]["enabled"] is True and record["after"]["enabled"] is False


async def test_the_trail_is_the_tenants_own(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "mine")
    other = await new_tenant(client, "theirs")
    made = await new_endpoint(client, tenant)
    assert await _trail(client, other, subject=made["id"]) == []
    assert [r["action"] for r in await _trail(client, other)] == ["api_key.created"]
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    bearer = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    refused = await client.get("/v1/audit-records", headers=bearer)
    assert refused.status_code == 403
    bad = await client.get("/v1/audit-records?action=drop%20table", headers=tenant)
    assert bad.status_code == 422 and "such as endpoint.updated" in bad.text
    forged = await client.get("/v1/audit-records?cursor=bm90LWFuLWlk", headers=tenant)
    assert forged.status_code == 422


async def test_a_new_secret_value_under_the_same_name_is_in_the_trail(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "rotated-by-hand")
    made = await new_endpoint(client, tenant, secret_headers={"Authorization": "Bearer first"})
    changed = await client.patch(
        f"/v1/endpoints/{made['id']}",
        json={"secret_headers": {"Authorization": "Bearer second"}},
        headers=tenant,
    )
    assert changed.status_code == 200
    [record] = await _trail(client, tenant, action="endpoint.updated")
    assert record["before"] == {"credentials_set": []}
    assert record["after"] == {"credentials_set": ["secret_headers"]}
    assert "Bearer" not in json.dumps(record)


async def test_a_customer_renamed_says_its_name_before_and_one_put_again_nothing(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "renamed")
    for name in ("Acme", "Acme Ltd", "Acme Ltd"):
        await client.put("/v1/customers/acme", json={"name": name}, headers=tenant)
    trail = await _trail(client, tenant, subject="acme")
    assert [(r["action"], r["before"], r["after"]) for r in trail] == [
        ("customer.updated", {"name": "Acme"}, {"name": "Acme Ltd"}),
        ("customer.created", None, {"name": "Acme"}),
    ]
