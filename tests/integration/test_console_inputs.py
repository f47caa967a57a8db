"""The console against hostile and careless input, without a browser: a sign-in form posted from
elsewhere, junk where ids and keys go, a tenant asking for the region's reconcile runs, cookies
over HTTP and HTTPS. (tests/browser drives the same pages as an operator does.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.main import create_app
from tests.fixtures.console_forms import hidden, sign_in, tenant_key
from tests.fixtures.stack import ADMIN_KEY, client_for
from tests.fixtures.waiting import count_rows

WELL_FORMED = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
JUNK = ["\x00", "dlv_\x00", f"dlv_{WELL_FORMED[:-1]}\x00", "evt_\x00", "key\x00", "x" * 300]


async def test_a_sign_in_form_not_from_this_site_signs_nobody_in(
    app: FastAPI, client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    # No form token (a form on another site knows neither the token nor the cookie).
    bare = await client.post("/console/sign-in", data={"key": ADMIN_KEY})
    assert bare.status_code == 403
    assert "stale or came from another site" in bare.text
    # A token from one browser's form, posted by another browser (the attacker's own token).
    async with client_for(app) as other:
        theirs = hidden((await other.get("/console/sign-in")).text, "form_token")
    await client.get("/console/sign-in")  # this browser's cookie holds its own token
    crossed = await client.post("/console/sign-in", data={"key": ADMIN_KEY, "form_token": theirs})
    assert crossed.status_code == 403
    # The right token, but not the cookie beside it (gone, or never set by this browser).
    mine = hidden((await client.get("/console/sign-in")).text, "form_token")
    client.cookies.clear()
    cookieless = await client.post("/console/sign-in", data={"key": ADMIN_KEY, "form_token": mine})
    assert cookieless.status_code == 403
    # A second sign-in tab gets the same token: neither makes the other's form stale.
    mine = hidden((await client.get("/console/sign-in")).text, "form_token")
    assert hidden((await client.get("/console/sign-in")).text, "form_token") == mine
    # The right token, but the browser says the form was on another site.
    elsewhere = await client.post(
        "/console/sign-in",
        data={"key": ADMIN_KEY, "form_token": mine},
        headers={"Origin": "https://evil.example"},
    )
    assert elsewhere.status_code == 403
    assert await count_rows(engine, "console_sessions") == 0
    # The page's own form, as sent: one session.
    await sign_in(client, ADMIN_KEY)
    assert await count_rows(engine, "console_sessions") == 1


async def test_signing_in_again_ends_the_session_the_browser_had(
    app: FastAPI, client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    await sign_in(client, ADMIN_KEY)
    first = client.cookies.get("herald_console")
    await sign_in(client, await tenant_key(client, "ours"))
    assert await count_rows(engine, "console_sessions") == 1
    assert client.cookies.get("herald_console") != first
    async with client_for(app) as stale:
        stale.cookies.set("herald_console", first or "", domain="herald.test", path="/console")
        answer = await stale.get("/console")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/console/sign-in?next=/console"


async def test_junk_where_an_id_or_key_goes_is_not_found_never_a_500(
    client: httpx.AsyncClient,
) -> None:
    csrf = await sign_in(client, await tenant_key(client, "ours"))
    for junk in JUNK:
        found = await client.get("/console/search", params={"q": junk})
        assert found.status_code == 200, (junk, found.status_code)
        assert "Nothing" in found.text, junk
        for action in ("cancel", "redrive"):
            path = f"/console/deliveries/{quote(junk, safe='')}/{action}"
            acted = await client.post(path, data={"csrf_token": csrf})
            assert acted.status_code == 404, (junk, action, acted.status_code)
            assert "text/html" in acted.headers["content-type"]


async def test_reconcile_runs_are_an_admins_to_see(client: httpx.AsyncClient) -> None:
    await sign_in(client, await tenant_key(client, "ours"))
    overview = await client.get("/console")
    assert overview.status_code == 200
    assert "since reconcile last succeeded" in overview.text  # its health, as /readyz says
    assert "Reconcile runs" not in overview.text
    assert 'href="/console/reconcile"' not in overview.text
    refused = await client.get("/console/reconcile")
    assert refused.status_code == 403
    assert "admin key" in refused.text
    await sign_in(client, ADMIN_KEY)
    assert "Reconcile runs" in (await client.get("/console")).text
    assert (await client.get("/console/reconcile")).status_code == 200


@pytest.fixture
async def always_secure(settings: Settings) -> AsyncIterator[FastAPI]:
    application = create_app(settings.model_copy(update={"console_secure_cookie": "always"}))
    async with application.router.lifespan_context(application):
        yield application


def secure_flags(answer: httpx.Response) -> list[bool]:
    cookies = answer.headers.get_list("set-cookie")
    assert cookies
    return ["; secure" in cookie.lower() for cookie in cookies]


async def test_cookies_are_secure_over_https_or_when_told_always(
    app: FastAPI, always_secure: FastAPI
) -> None:
    async with client_for(app) as http:
        assert secure_flags(await http.get("/console/sign-in")) == [False]
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="https://herald.test") as https:
        assert secure_flags(await https.get("/console/sign-in")) == [True]
        token = hidden((await https.get("/console/sign-in")).text, "form_token")
        signed_in = await https.post(
            "/console/sign-in", data={"key": ADMIN_KEY, "form_token": token}
        )
        assert signed_in.status_code == 303
        session_cookie = [
            c for c in signed_in.headers.get_list("set-cookie") if "herald_console=" in c
        ]
        assert "; secure" in session_cookie[0].lower()
    async with client_for(always_secure) as http:
        assert secure_flags(await http.get("/console/sign-in")) == [True]
