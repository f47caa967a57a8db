"""The console's locks on every form, without a browser: the page a form came from must be this
site -- scheme, host and port -- and the sign-in form's token must be one this server issued.
(test_console_inputs.py has the rest of the hostile input; tests/browser the operator's view.)"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.console.service.sign_in_forms import LIFETIME_SECONDS, PURPOSE, mint
from app.core.config import Settings
from app.core.sealing import KeyRing
from app.main import create_app
from tests.fixtures.console_forms import hidden, sign_in
from tests.fixtures.stack import ADMIN_KEY, SECRET_KEYS, client_for
from tests.fixtures.waiting import count_rows


@pytest.fixture
async def behind_tls_proxy(settings: Settings) -> AsyncIterator[FastAPI]:
    """An API told it is served over HTTPS by a proxy it does not trust for X-Forwarded-Proto."""
    application = create_app(settings.model_copy(update={"console_secure_cookie": "always"}))
    async with application.router.lifespan_context(application):
        yield application


async def post_sign_in(http: httpx.AsyncClient, origin: str) -> httpx.Response:
    """The sign-in page's own form, posted with the Origin a browser would send, and its cookie
    by hand: httpx keeps a Secure cookie from this plain-HTTP test site, where the browser
    behind the TLS proxy, speaking HTTPS, sends it."""
    token = hidden((await http.get("/console/sign-in")).text, "form_token")
    return await http.post(
        "/console/sign-in",
        data={"key": ADMIN_KEY, "form_token": token},
        headers={"Origin": origin, "Cookie": f"herald_console_form={token}"},
    )


async def test_a_form_from_this_host_over_the_other_scheme_is_refused(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    # The test client's site is http://herald.test: its https page is another origin.
    refused = await post_sign_in(client, "https://herald.test")
    assert refused.status_code == 403
    assert "came from another site" in refused.text
    assert await count_rows(engine, "console_sessions") == 0
    # A session's forms are held to the same: the Origin, else the Referer.
    csrf = await sign_in(client, ADMIN_KEY)
    for header in ({"Origin": "https://herald.test"}, {"Referer": "https://herald.test/console"}):
        answer = await client.post("/console/sign-out", data={"csrf_token": csrf}, headers=header)
        assert answer.status_code == 403, header
        assert await count_rows(engine, "console_sessions") == 1
    # Another port or host is refused as before; the page's own origin, its port spelled out
    # or not, is this site.
    for elsewhere in ("http://herald.test:8080", "http://evil.test", "null"):
        answer = await client.post(
            "/console/sign-out", data={"csrf_token": csrf}, headers={"Origin": elsewhere}
        )
        assert answer.status_code == 403, elsewhere
    signed_out = await client.post(
        "/console/sign-out", data={"csrf_token": csrf}, headers={"Origin": "http://herald.test:80"}
    )
    assert signed_out.status_code == 303
    assert await count_rows(engine, "console_sessions") == 0


async def test_behind_a_tls_proxy_only_the_https_page_is_this_site(
    behind_tls_proxy: FastAPI, engine: AsyncEngine
) -> None:
    # The proxy speaks plain HTTP to Herald; HERALD_CONSOLE_SECURE_COOKIE=always says the
    # browser's pages are HTTPS, so a plain-HTTP page of the same host is not the console's.
    async with client_for(behind_tls_proxy) as http:
        assert (await post_sign_in(http, "http://herald.test")).status_code == 403
        assert await count_rows(engine, "console_sessions") == 0
        assert (await post_sign_in(http, "https://herald.test")).status_code == 303
        assert await count_rows(engine, "console_sessions") == 1


async def signing_key(engine: AsyncEngine) -> tuple[bytes, int]:
    """The sign-in forms' key as the database holds it (sealed), and the database's time."""
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT sealed, floor(extract(epoch FROM now()))::bigint AS now "
                    "FROM console_secrets WHERE purpose = :purpose"
                ),
                {"purpose": PURPOSE},
            )
        ).one()
    return KeyRing.parse(SECRET_KEYS).open(row.sealed, f"console:{PURPOSE}"), int(row.now)


async def post_planted(http: httpx.AsyncClient, token: str) -> httpx.Response:
    """A sign-in form posted with ``token`` in both the form and the cookie, as someone who can
    write this browser's cookies (a sibling subdomain, a plain-HTTP answer on the way) could."""
    return await http.post(
        "/console/sign-in",
        data={"key": ADMIN_KEY, "form_token": token},
        headers={"Cookie": f"herald_console_form={token}"},
    )


async def test_a_sign_in_token_the_server_did_not_issue_signs_nobody_in(
    app: FastAPI, engine: AsyncEngine
) -> None:
    async with client_for(app) as http:
        # A value of one's own, matching in form and cookie, in the old shape or the new one.
        for made_up in ("A" * 43, "1700000000.nonce.mac"):
            answer = await post_planted(http, made_up)
            assert answer.status_code == 403, made_up
            assert "stale or came from another site" in answer.text
        secret, now = await signing_key(engine)  # made for the first form, shown just now
        for planted in (
            mint(b"another key" * 3, now, "nonce"),  # the right shape under another key
            mint(secret, now - LIFETIME_SECONDS, "nonce"),  # the server's, an hour old
            mint(secret, now + 60, "nonce"),  # the server's key, a time yet to come
            mint(secret, now, "nonce") + "x",  # the server's, altered
        ):
            assert (await post_planted(http, planted)).status_code == 403, planted
        assert await count_rows(engine, "console_sessions") == 0
        # The server's own, within the hour: one session.
        assert (await post_planted(http, mint(secret, now - 60, "nonce"))).status_code == 303
        assert await count_rows(engine, "console_sessions") == 1
    assert await count_rows(engine, "console_secrets") == 1


async def test_a_held_sign_in_token_is_kept_while_fresh_and_its_cookie_goes_with_it(
    client: httpx.AsyncClient, engine: AsyncEngine
) -> None:
    first = await client.get("/console/sign-in")
    token = hidden(first.text, "form_token")
    assert f"Max-Age={LIFETIME_SECONDS}" in first.headers["set-cookie"]
    assert hidden((await client.get("/console/sign-in")).text, "form_token") == token
    # A token past half its hour is not handed out again: the next page gets a new one.
    secret, now = await signing_key(engine)
    aged = mint(secret, now - LIFETIME_SECONDS // 2, "nonce")
    client.cookies.set("herald_console_form", aged, domain="herald.test", path="/console/sign-in")
    renewed = await client.get("/console/sign-in")
    assert hidden(renewed.text, "form_token") not in (aged, token)
