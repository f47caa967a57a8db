"""API keys over HTTP and from the CLI: a tenant manages its own, an admin any tenant's; the
secret is shown once and never listed; a revoked key is refused."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.main import create_app
from tests.fixtures.api import new_tenant
from tests.fixtures.stack import ADMIN, Stack, client_for
from tests.fixtures.waiting import count_rows

REPO = Path(__file__).resolve().parents[2]


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def tenant_id_of(client: httpx.AsyncClient, headers: dict[str, str]) -> str:
    [first] = (await client.get("/v1/api-keys", headers=headers)).json()["items"]
    tenant_id: str = first["tenant_id"]
    return tenant_id


async def test_a_tenant_lists_creates_and_revokes_its_own_keys(settings: Settings) -> None:
    # Keys cached for five minutes: the process that revokes a key still refuses it at once.
    app = create_app(settings.model_copy(update={"api_key_cache_seconds": 300}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        tenant = await new_tenant(client, "keys")
        [first] = (await client.get("/v1/api-keys", headers=tenant)).json()["items"]
        assert first["label"] == "first key" and first["revoked_at"] is None

        created = await client.post("/v1/api-keys", json={"label": "billing"}, headers=tenant)
        assert created.status_code == 201, created.text
        new = created.json()
        assert new["key"].startswith(new["prefix"]) and new["label"] == "billing"
        assert new["tenant_id"] == first["tenant_id"] and new["last_used_at"] is None
        assert (await client.get("/v1/endpoints", headers=bearer(new["key"]))).status_code == 200

        listed = await client.get("/v1/api-keys", headers=tenant)
        assert [k["id"] for k in listed.json()["items"]] == [new["id"], first["id"]]  # newest first
        assert new["key"] not in listed.text and "key" not in listed.json()["items"][0]
        assert listed.json()["items"][0]["last_used_at"] is not None  # it was just used

        revoked = await client.post(f"/v1/api-keys/{new['id']}/revoke", headers=tenant)
        assert revoked.status_code == 200, revoked.text
        assert revoked.json()["revoked_at"] is not None
        refused = await client.get("/v1/endpoints", headers=bearer(new["key"]))
        assert refused.status_code == 401
        again = await client.post(f"/v1/api-keys/{new['id']}/revoke", headers=tenant)
        assert again.json()["revoked_at"] == revoked.json()["revoked_at"]  # the first time kept
        assert (await client.get("/v1/endpoints", headers=tenant)).status_code == 200


async def test_keys_are_their_tenants_own(client: httpx.AsyncClient) -> None:
    mine = await new_tenant(client, "mine")
    theirs = await new_tenant(client, "theirs")
    their_id = await tenant_id_of(client, theirs)
    [their_key] = (await client.get("/v1/api-keys", headers=theirs)).json()["items"]

    for method, path, body in (
        ("GET", f"/v1/api-keys?tenant_id={their_id}", None),
        ("POST", "/v1/api-keys", {"tenant_id": their_id}),
        ("POST", f"/v1/api-keys/{their_key['id']}/revoke", None),
    ):
        response = await client.request(method, path, json=body, headers=mine)
        assert response.status_code == 404, (method, path, response.text)
        assert response.headers["content-type"] == "application/problem+json"
    assert (await client.get("/v1/endpoints", headers=theirs)).status_code == 200
    assert (await client.get("/v1/tenants", headers=mine)).status_code == 403


async def test_an_admin_manages_any_tenants_keys_and_lists_tenants(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    acme = await new_tenant(client, "acme")
    await new_tenant(client, "globex")
    acme_id = await tenant_id_of(client, acme)

    made = await client.post(
        "/v1/api-keys", json={"tenant_id": acme_id, "label": "by admin"}, headers=ADMIN
    )
    assert made.status_code == 201, made.text
    assert made.json()["tenant_id"] == acme_id
    nameless = await client.post("/v1/api-keys", json={"label": "x"}, headers=ADMIN)
    assert nameless.status_code == 422
    assert "an admin creates a key for a named tenant" in nameless.json()["detail"]

    of_acme = (await client.get(f"/v1/api-keys?tenant_id={acme_id}", headers=ADMIN)).json()
    assert {k["label"] for k in of_acme["items"]} == {"first key", "by admin"}
    every = (await client.get("/v1/api-keys", headers=ADMIN)).json()["items"]
    assert len(every) == await count_rows(engine, "api_keys") == 3

    revoked = await client.post(f"/v1/api-keys/{made.json()['id']}/revoke", headers=ADMIN)
    assert revoked.status_code == 200
    assert (
        await client.get("/v1/endpoints", headers=bearer(made.json()["key"]))
    ).status_code == 401

    tenants = (await client.get("/v1/tenants?limit=1", headers=ADMIN)).json()
    assert [t["name"] for t in tenants["items"]] == ["globex"]  # newest first, paged
    rest = await client.get(f"/v1/tenants?cursor={tenants['next_cursor']}", headers=ADMIN)
    assert [t["name"] for t in rest.json()["items"]] == ["acme"]


def herald(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERALD_DATABASE_URL": stack.database_url}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "keys", *args],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


async def test_the_cli_creates_lists_and_revokes_keys(settings: Settings, stack: Stack) -> None:
    created = herald(stack, "create", "--tenant", "cli-co", "--label", "from the shell")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()

    listed = herald(stack, "list", "--tenant", "cli-co")
    assert listed.returncode == 0, listed.stderr
    header, row = listed.stdout.strip().splitlines()
    assert header.split("\t")[:4] == ["id", "tenant", "prefix", "label"]
    key_id, _, prefix, label, *_ = row.split("\t")
    assert (prefix, label) == (f"{key[:12]}...", "from the shell")
    assert key not in listed.stdout

    # An API process that caches no key sees the CLI's revocation on the next request; one
    # that does, within its cache time (the test above).
    uncached = create_app(settings.model_copy(update={"api_key_cache_seconds": 0}))
    async with uncached.router.lifespan_context(uncached), client_for(uncached) as client:
        assert (await client.get("/v1/endpoints", headers=bearer(key))).status_code == 200
        revoked = herald(stack, "revoke", key_id)
        assert revoked.returncode == 0, revoked.stderr
        assert (await client.get("/v1/endpoints", headers=bearer(key))).status_code == 401
    unknown = herald(stack, "revoke", "key_01JDQ8Z6V4Q0K9X7M3T5R2N8C1")
    assert unknown.returncode == 1
    assert "no API key key_01JDQ8Z6V4Q0K9X7M3T5R2N8C1" in unknown.stderr


async def test_an_admin_key_bound_to_a_tenant_is_not_the_tenants_to_see_or_revoke(
    client: httpx.AsyncClient, stack: Stack
) -> None:
    operator = herald(stack, "create", "--tenant", "bound-co", "--admin", "--label", "ops")
    assert operator.returncode == 0, operator.stderr
    admin_key = operator.stdout.strip()
    tenant_key = herald(stack, "create", "--tenant", "bound-co").stdout.strip()
    tenant = bearer(tenant_key)

    seen = (await client.get("/v1/api-keys", headers=tenant)).json()["items"]
    assert [k["label"] for k in seen] == [None]  # its own key only
    every = (await client.get("/v1/api-keys", headers=ADMIN)).json()["items"]
    [bound] = [k for k in every if k["label"] == "ops"]
    refused = await client.post(f"/v1/api-keys/{bound['id']}/revoke", headers=tenant)
    assert refused.status_code == 404
    assert (await client.get("/v1/tenants", headers=bearer(admin_key))).status_code == 200
