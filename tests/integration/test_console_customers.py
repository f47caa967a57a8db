"""The console's customers and portal settings: a customer's portal sessions shown with their
state and ended from the console (one, or all of a customer's), and the portal's settings
changed under the API's rules -- each the tenant's own, behind the console's CSRF check."""

from __future__ import annotations

import httpx

from tests.fixtures.api import new_tenant, portal_bearer
from tests.fixtures.console_forms import sign_in


async def _works(client: httpx.AsyncClient, bearer: dict[str, str]) -> bool:
    return (await client.get("/v1/endpoints", headers=bearer)).status_code == 200


async def test_a_customers_portal_sessions_are_ended_from_the_console(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "sessions")
    first = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    second = await portal_bearer(client, tenant, "acme")
    other = await portal_bearer(client, tenant, "globex")
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))

    page = await client.get("/console/customers")
    assert page.status_code == 200
    assert 'data-customer="acme"' in page.text and 'data-customer="globex"' in page.text
    assert page.text.count('class="session-state">open<') == 3
    sessions = (await client.get("/v1/portal-sessions?customer_id=acme", headers=tenant)).json()[
        "items"
    ]
    newest = sessions[0]["id"]  # the second session minted

    one = await client.post(
        f"/console/customers/acme/sessions/{newest}/revoke", data={"csrf_token": csrf}
    )
    assert one.status_code == 303
    assert not await _works(client, second) and await _works(client, first)
    every = await client.post("/console/customers/acme/sessions/revoke", data={"csrf_token": csrf})
    assert every.status_code == 303
    assert not await _works(client, first) and await _works(client, other)
    after = await client.get("/console/customers")
    assert after.text.count('class="session-state">revoked<') == 2

    stale = await client.post("/console/customers/globex/sessions/revoke", data={})
    assert stale.status_code == 403 and await _works(client, other)
    someone = await new_tenant(client, "someone")
    await client.put("/v1/customers/theirs", json={}, headers=someone)
    not_ours = await client.post(
        "/console/customers/theirs/sessions/revoke", data={"csrf_token": csrf}
    )
    assert not_ours.status_code == 404


async def test_the_portals_settings_are_changed_from_the_console(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "look")
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
    saved = await client.post(
        "/console/portal-settings",
        data={
            "csrf_token": csrf,
            "name": "Shop Hooks",
            "accent_color": "#3355ff",
            "logo_url": "https://app.example.com/logo.png",
            "allowed_origins": "https://app.example.com\n\nhttps://admin.example.com\n",
        },
    )
    assert saved.status_code == 303, saved.text
    stored = (await client.get("/v1/portal-settings", headers=tenant)).json()
    assert stored["name"] == "Shop Hooks" and stored["accent_color"] == "#3355ff"
    assert stored["allowed_origins"] == ["https://app.example.com", "https://admin.example.com"]
    page = await client.get("/console/portal-settings")
    assert "Shop Hooks" in page.text and "https://admin.example.com" in page.text

    # A logo on an origin that may not frame the portal: the API's rule, in its words.
    refused = await client.post(
        "/console/portal-settings",
        data={
            "csrf_token": csrf,
            "name": "Changed",
            "logo_url": "https://elsewhere.example.net/logo.png",
            "allowed_origins": "https://app.example.com",
        },
    )
    assert refused.status_code == 422
    assert "logo_url must be on one of allowed_origins" in refused.text
    assert "Changed" in refused.text  # what was typed stays to be mended
    bad_colour = await client.post(
        "/console/portal-settings", data={"csrf_token": csrf, "accent_color": "blue"}
    )
    assert bad_colour.status_code == 422 and "accent_color" in bad_colour.text
    unchanged = (await client.get("/v1/portal-settings", headers=tenant)).json()
    assert unchanged["name"] == "Shop Hooks"

    trail = (await client.get("/v1/audit-records", headers=tenant)).json()["items"]
    assert [(r["action"], r["actor"]["kind"]) for r in trail[:1]] == [
        ("portal_settings.updated", "console")
    ]
