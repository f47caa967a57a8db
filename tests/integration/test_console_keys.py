"""The console's keys page: a key made there is shown once and works, revoking it ends it, both
are in the audit trail under the console's sign-in, and the forms keep the console's rules
(CSRF, the tenant's own keys, a label in words)."""

from __future__ import annotations

import re

import httpx

from tests.fixtures.api import new_tenant
from tests.fixtures.console_forms import sign_in


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def test_a_key_made_in_the_console_is_shown_once_works_and_can_be_revoked(
    client: httpx.AsyncClient,
) -> None:
    tenant = await new_tenant(client, "keys")
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))

    made = await client.post("/console/keys", data={"csrf_token": csrf, "label": "billing"})
    assert made.status_code == 200
    found = re.search(r'id="new-key-value">(hrk_[^<]+)<', made.text)
    assert found is not None
    key = found.group(1)
    named = re.search(r"New key <code>(key_[0-9A-Z]+)</code>", made.text)
    assert named is not None
    key_id = named.group(1)
    assert (await client.get("/v1/tenant", headers=_bearer(key))).status_code == 200
    listed = await client.get("/console/keys")
    assert "billing" in listed.text and key not in listed.text  # never shown again

    revoked = await client.post(f"/console/keys/{key_id}/revoke", data={"csrf_token": csrf})
    assert revoked.status_code == 303
    assert (await client.get("/v1/tenant", headers=_bearer(key))).status_code == 401

    trail = (await client.get("/v1/audit-records", headers=tenant)).json()["items"]
    console = [(r["action"], r["actor"]["kind"]) for r in trail if r["subject_id"] == key_id]
    assert console == [("api_key.revoked", "console"), ("api_key.created", "console")]


async def test_the_key_forms_keep_the_consoles_rules(client: httpx.AsyncClient) -> None:
    tenant = await new_tenant(client, "rules")
    other = await new_tenant(client, "other")
    theirs = (await client.get("/v1/api-keys", headers=other)).json()["items"][0]["id"]
    csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))

    stale = await client.post("/console/keys", data={"label": "no token"})
    assert stale.status_code == 403
    bad = await client.post("/console/keys", data={"csrf_token": csrf, "label": "bell\x07"})
    assert bad.status_code == 422 and 'role="alert"' in bad.text and "The label " in bad.text
    not_ours = await client.post(f"/console/keys/{theirs}/revoke", data={"csrf_token": csrf})
    assert not_ours.status_code == 404
    assert (await client.get("/v1/tenant", headers=other)).status_code == 200
    assert len((await client.get("/v1/api-keys", headers=tenant)).json()["items"]) == 1
