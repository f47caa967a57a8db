"""Portal sessions: minted by a tenant for one of its customers, the link used once and only
before it expires, the session ended by expiry, revocation or the customer's deletion."""

from __future__ import annotations

import asyncio
import base64
from datetime import datetime, timedelta
from typing import Any

import asyncpg
import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.core.errors import Unauthorized
from app.operations.service import retention
from app.portal.service.sessions import visitor_for
from tests.fixtures.api import new_tenant
from tests.fixtures.stack import Stack, plain_dsn
from tests.fixtures.waiting import count_rows, eventually


async def mint(
    client: httpx.AsyncClient, tenant: dict[str, str], customer_id: str = "acme", /, **fields: Any
) -> httpx.Response:
    body = {"customer_id": customer_id, **fields}
    return await client.post("/v1/portal-sessions", json=body, headers=tenant)


async def minted_link(client: httpx.AsyncClient, tenant: dict[str, str], **fields: Any) -> str:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    response = await mint(client, tenant, **fields)
    assert response.status_code == 201, response.text
    url: str = response.json()["url"]
    return url.split("#t=", 1)[1]


async def open_link(client: httpx.AsyncClient, link: str) -> httpx.Response:
    return await client.post("/portal/api/session", json={"link": link})


async def test_a_minted_session_answers_a_portal_url_with_its_token_in_the_fragment(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    response = await mint(client, tenant, lifetime_seconds=300, capabilities=["replay"])
    assert response.status_code == 201
    body = response.json()
    assert body["id"].startswith("pts_") and body["customer_id"] == "acme"
    assert body["capabilities"] == ["replay"]
    assert body["url"].startswith(f"http://herald.test/portal/s/{body['id']}#t=hpl_")
    expires = datetime.fromisoformat(body["expires_at"])
    link_expires = datetime.fromisoformat(body["link_expires_at"])
    assert link_expires == expires  # a lifetime shorter than a link's ten minutes bounds both
    token = body["url"].split("#t=", 1)[1]
    longer = (await mint(client, tenant)).json()  # the default hour
    gap = datetime.fromisoformat(longer["expires_at"]) - datetime.fromisoformat(
        longer["link_expires_at"]
    )
    assert gap == timedelta(minutes=50)
    # Only their SHA-256 is stored.
    async with engine.connect() as connection:
        rows = text("SELECT string_agg(portal_sessions::text, ' ') FROM portal_sessions")
        stored = (await connection.execute(rows)).scalar_one()
    assert token not in stored and token[4:] not in stored


async def test_the_link_works_once_and_a_second_use_says_so(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    link = await minted_link(client, tenant, capabilities=["manage_endpoints"])
    first = await open_link(client, link)
    assert first.status_code == 200
    assert first.headers["cache-control"] == "no-store"
    opened = first.json()
    assert opened["session_token"].startswith("hps_")
    assert (opened["customer_id"], opened["capabilities"]) == ("acme", ["manage_endpoints"])

    second = await open_link(client, link)
    assert second.status_code == 401
    assert second.headers["content-type"] == "application/problem+json"
    assert "already used (each works once)" in second.json()["detail"]
    assert link not in second.text


async def test_two_uses_at_once_open_exactly_one_session(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    link = await minted_link(client, tenant)
    answers = await asyncio.gather(*(open_link(client, link) for _ in range(8)))
    assert sorted(a.status_code for a in answers) == [200] + [401] * 7


async def test_an_expired_link_says_when_it_expired(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    link = await minted_link(client, tenant)
    async with engine.begin() as connection:
        await connection.execute(
            text("UPDATE portal_sessions SET link_expires_at = '2026-01-02T03:04:05Z'")
        )
    refused = await open_link(client, link)
    assert refused.status_code == 401
    assert "expired at 2026-01-02 03:04:05 UTC" in refused.json()["detail"]


async def test_an_unknown_or_malformed_link_is_refused_in_words(client: httpx.AsyncClient) -> None:
    for link in ("hpl_nope", "x", "\x00"):
        refused = await open_link(client, link)
        assert refused.status_code == 401
        assert refused.json()["detail"].startswith("this portal link is not valid")
    too_long = await open_link(client, "x" * 101)
    assert too_long.status_code == 422


async def test_the_session_ends_when_revoked_or_its_customer_is_deleted(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    sessionmaker = create_sessionmaker(engine)

    async def visitor(token: str) -> str:
        async with sessionmaker() as session, session.begin():
            try:
                found = await visitor_for(session, token)
            except Unauthorized as exc:
                return str(exc)
        return f"{found.scope.tenant_id}/{found.scope.customer_id}"

    first = (await open_link(client, await minted_link(client, tenant))).json()["session_token"]
    second = (await open_link(client, await minted_link(client, tenant))).json()["session_token"]
    assert (await visitor(first)).endswith("/acme")

    async with engine.connect() as connection:
        first_id = text("SELECT id FROM portal_sessions ORDER BY id LIMIT 1")
        revoked = (await connection.execute(first_id)).scalar_one()
    assert (
        await client.delete(f"/v1/portal-sessions/{revoked}", headers=tenant)
    ).status_code == 204
    assert "has ended" in await visitor(first)
    assert (await visitor(second)).endswith("/acme")
    assert (
        await client.delete(f"/v1/portal-sessions/{revoked}", headers=tenant)
    ).status_code == 404

    unused = await minted_link(client, tenant)
    await client.delete("/v1/customers/acme", headers=tenant)
    assert "has ended" in await visitor(second)
    # Put again, the customer starts anew: nothing minted in its earlier life opens.
    assert (await client.put("/v1/customers/acme", json={}, headers=tenant)).status_code == 201
    assert "has ended" in await visitor(second)
    refused = await open_link(client, unused)
    assert refused.status_code == 401 and "was deleted" in refused.json()["detail"]
    assert "not valid" in await visitor("not-a-token")


async def test_minting_for_an_unknown_or_another_tenants_customer_is_404_and_writes_nothing(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    other = await new_tenant(client, "other")
    await client.put("/v1/customers/theirs", json={}, headers=other)
    for customer_id in ("nobody", "theirs"):
        refused = await mint(client, tenant, customer_id)
        assert refused.status_code == 404
        assert refused.json()["detail"] == f"customer {customer_id} not found"
    assert await count_rows(engine, "portal_sessions") == 0
    # Another tenant's session is not this tenant's to revoke.
    link = await minted_link(client, other)
    del link
    async with engine.connect() as connection:
        theirs = (await connection.execute(text("SELECT id FROM portal_sessions"))).scalar_one()
    assert (await client.delete(f"/v1/portal-sessions/{theirs}", headers=tenant)).status_code == 404


async def test_lifetimes_and_capabilities_outside_the_rules_are_422_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    for fields, said in (
        ({"lifetime_seconds": 59}, "greater than or equal to 60"),
        ({"lifetime_seconds": 86_401}, "less than or equal to 86400"),
        (
            {"capabilities": ["admin"]},
            "'manage_endpoints', 'replay', 'transform_endpoints' or 'poll_endpoints'",
        ),
    ):
        refused = await mint(client, tenant, **fields)
        assert refused.status_code == 422
        assert said in refused.text


async def test_portal_settings_are_set_read_and_checked(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    defaults = await client.get("/v1/portal-settings", headers=tenant)
    assert defaults.json()["allowed_origins"] == [] and defaults.json()["updated_at"] is None
    settings = {
        "name": "Acme webhooks",
        "logo_url": "https://app.acme.test/logo.svg",
        "accent_color": "#0b5fff",
        "allowed_origins": ["https://app.acme.test", "http://127.0.0.1:8123"],
    }
    stored = await client.put("/v1/portal-settings", json=settings, headers=tenant)
    assert stored.status_code == 200 and stored.json()["name"] == "Acme webhooks"
    assert (await client.get("/v1/portal-settings", headers=tenant)).json()[
        "accent_color"
    ] == "#0b5fff"

    off_origin = {**settings, "logo_url": "https://elsewhere.test/logo.svg"}
    refused = await client.put("/v1/portal-settings", json=off_origin, headers=tenant)
    assert refused.status_code == 422 and "one of allowed_origins" in refused.json()["detail"]
    for field, bad, said in (
        ("allowed_origins", ["https://app.acme.test/"], "no path, no trailing slash"),
        ("allowed_origins", ["javascript:alert(1)"], "must be an origin"),
        ("allowed_origins", ["*"], "must be an origin"),
        ("accent_color", "red", "#rrggbb"),
        ("logo_url", "ftp://app.acme.test/logo.svg", "an http:// or https:// URL"),
        ("name", "two\nlines", "one line"),
    ):
        refused = await client.put(
            "/v1/portal-settings", json={**settings, field: bad}, headers=tenant
        )
        assert refused.status_code == 422, (field, bad)
        assert said in refused.text, (field, refused.text)


async def test_retention_purges_sessions_a_day_after_they_end(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, settings: Settings
) -> None:
    for _ in range(3):
        await minted_link(client, tenant)
    ended = text(
        "UPDATE portal_sessions SET expires_at = now() - CAST(:ago AS interval),"
        " link_expires_at = now() - interval '3 days' WHERE id = :s"
    )
    async with engine.begin() as connection:
        listed = text("SELECT id FROM portal_sessions ORDER BY id")
        long_gone, just_ended, live = list((await connection.execute(listed)).scalars())
        for session_id, ago in ((long_gone, timedelta(days=2)), (just_ended, timedelta(hours=1))):
            await connection.execute(ended, {"s": session_id, "ago": ago})
    counts = await retention.purge(settings, create_sessionmaker(engine))
    assert counts["purged_portal_sessions"] == 1
    async with engine.connect() as connection:
        left = set((await connection.execute(text("SELECT id FROM portal_sessions"))).scalars())
    assert left == {just_ended, live}


# The smallest PNG there is: one transparent pixel.
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)


async def test_an_uploaded_logo_is_checked_by_its_bytes_and_served_by_herald(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    def upload(media_type: str, data: bytes) -> dict[str, str]:
        return {"logo_upload": f"data:{media_type};base64,{base64.b64encode(data).decode()}"}

    stored = await client.put(
        "/v1/portal-settings", json=upload("image/png", PIXEL), headers=tenant
    )
    assert stored.status_code == 200, stored.text
    assert stored.json()["logo_uploaded"] is True and stored.json()["logo_url"] is None
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    minted = (await mint(client, tenant)).json()
    page = await client.get(f"/portal/s/{minted['id']}")
    assert f'src="/portal/s/{minted["id"]}/logo"' in page.text
    logo = await client.get(f"/portal/s/{minted['id']}/logo")
    assert logo.content == PIXEL and logo.headers["content-type"] == "image/png"
    assert logo.headers["x-content-type-options"] == "nosniff"

    for body, said in (
        (upload("image/svg+xml", b"<svg onload='alert(1)'/>"), "PNG, JPEG or WebP"),
        (upload("image/png", b"\xff\xd8\xff\xe0 a jpeg"), "not a png image"),
        (upload("image/png", PIXEL + b"\x00" * (64 * 1024)), "at most 64 KiB"),
        ({"logo_upload": "data:image/png;base64,@@@"}, "not base64"),
        ({"logo_upload": "https://x.test/logo.png"}, "must be a data URL"),
        (
            {
                **upload("image/png", PIXEL),
                "logo_url": "https://a.test/l.png",
                "allowed_origins": ["https://a.test"],
            },
            "not both",
        ),
    ):
        refused = await client.put("/v1/portal-settings", json=body, headers=tenant)
        assert refused.status_code == 422, (said, refused.text)
        assert said in refused.json()["detail"], refused.text
    # Settings put again without one: the portal has no uploaded logo any more.
    await client.put("/v1/portal-settings", json={}, headers=tenant)
    assert (await client.get(f"/portal/s/{minted['id']}/logo")).status_code == 404


async def test_a_patch_changes_what_it_names_and_keeps_the_rest(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    origins = ["https://app.acme.test"]
    logo = f"data:image/png;base64,{base64.b64encode(PIXEL).decode()}"
    full = {"accent_color": "#0b5fff", "allowed_origins": origins, "logo_upload": logo}
    assert (await client.put("/v1/portal-settings", json=full, headers=tenant)).status_code == 200

    async def patch(change: dict[str, Any]) -> httpx.Response:
        return await client.patch("/v1/portal-settings", json=change, headers=tenant)

    renamed = await patch({"name": "Acme Hooks"})
    assert renamed.status_code == 200, renamed.text
    kept = {k: renamed.json()[k] for k in ("accent_color", "allowed_origins", "logo_uploaded")}
    assert kept == {"accent_color": "#0b5fff", "allowed_origins": origins, "logo_uploaded": True}
    assert renamed.json()["name"] == "Acme Hooks"

    cleared = (await patch({"accent_color": None})).json()
    assert cleared["accent_color"] is None and cleared["name"] == "Acme Hooks"

    # One logo at a time: a URL given replaces the upload, and the upload's removal is null.
    by_url = (await patch({"logo_url": "https://app.acme.test/logo.png"})).json()
    assert by_url["logo_url"] == "https://app.acme.test/logo.png"
    assert by_url["logo_uploaded"] is False

    # Checked against what the settings would become: the logo's origin may not go.
    before = (await client.get("/v1/portal-settings", headers=tenant)).json()
    refused = await patch({"allowed_origins": []})
    assert refused.status_code == 422 and "one of allowed_origins" in refused.json()["detail"]
    for bad, said in (
        ({"logo_url": "https://app.acme.test/a.png", "logo_upload": logo}, "not both"),
        ({"origins": []}, "origins"),
        ({"accent_color": "red"}, "#rrggbb"),
    ):
        refused = await patch(bad)
        assert refused.status_code == 422 and said in refused.text, (bad, refused.text)
    assert (await client.get("/v1/portal-settings", headers=tenant)).json() == before

    # PUT replaces: what it leaves out is the default again.
    replaced = (await client.put("/v1/portal-settings", json={"name": "A"}, headers=tenant)).json()
    assert replaced["allowed_origins"] == [] and replaced["logo_url"] is None


async def test_two_patches_at_once_both_land(
    client: httpx.AsyncClient, tenant: dict[str, str], stack: Stack
) -> None:
    await client.put("/v1/portal-settings", json={}, headers=tenant)
    holder = await asyncpg.connect(plain_dsn(stack.database_url))
    try:
        # Both patches start while another transaction holds the row: each has read (or waits
        # to read) before either writes -- where a patch that did not lock what it read would
        # write back the other's field as it found it.
        held = holder.transaction()
        await held.start()
        await holder.execute("SELECT FROM portal_settings FOR UPDATE")
        patches = asyncio.gather(
            client.patch("/v1/portal-settings", json={"name": "Acme"}, headers=tenant),
            client.patch("/v1/portal-settings", json={"accent_color": "#112233"}, headers=tenant),
        )

        async def waiting() -> int:
            count: int = await holder.fetchval(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                " AND pid <> pg_backend_pid()"
            )
            return count

        await eventually(waiting, lambda count: count == 2)
        await held.commit()
        assert [r.status_code for r in await patches] == [200, 200]
    finally:
        await holder.close()
    both = (await client.get("/v1/portal-settings", headers=tenant)).json()
    assert (both["name"], both["accent_color"]) == ("Acme", "#112233")
