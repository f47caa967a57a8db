"""Endpoints behind an OAuth2 gateway (client credentials), against a real token endpoint and a
resource that checks the tokens it issued: one token fetch for a burst, a new one once the old
expires, a revoked token refreshed once on 401 within the attempt, a failing token endpoint an
outcome of its own that never trips the breaker, and the token URL held to the SSRF guard."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.oauth import CLIENT_ID, CLIENT_SECRET, Authorization, running_authorization
from tests.fixtures.waiting import attempts_of, eventually, wait_state


@pytest.fixture
async def authorization() -> Any:
    async with running_authorization() as running:
        yield running


def oauth2(authorization: Authorization, **changes: Any) -> dict[str, Any]:
    return {
        "token_url": authorization.url("/token"),
        "client_id": CLIENT_ID,
        "client_secret": CLIENT_SECRET,
        "scope": "webhooks:write",
        "audience": "https://receiver.example",
        **changes,
    }


async def test_a_burst_shares_one_token_and_every_request_carries_it(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authorization: Authorization,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=authorization.url("/hook"), oauth2=oauth2(authorization)
    )
    assert endpoint["oauth2"] == {
        "token_url": authorization.url("/token"),
        "client_id": CLIENT_ID,
        "scope": "webhooks:write",
        "audience": "https://receiver.example",
    }
    shown = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert CLIENT_SECRET not in shown.text
    ids = await post_deliveries(client, tenant, endpoint["id"], 20)
    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in ids:
            await wait_state(engine, delivery_id, "succeeded")

    assert len(authorization.token_requests) == 1
    [asked] = authorization.token_requests
    assert (asked.grant_type, asked.scope, asked.audience) == (
        "client_credentials",
        "webhooks:write",
        "https://receiver.example",
    )
    assert len(authorization.accepted) == 20
    assert set(authorization.presented) == set(authorization.issued())


async def test_an_expired_token_is_replaced_before_it_is_sent(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authorization: Authorization,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    authorization.expires_in = 1
    endpoint = await new_endpoint(
        client, tenant, url=authorization.url("/hook"), oauth2=oauth2(authorization)
    )
    async with pump(settings, engine) as (running, _):
        running.start()
        [first] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await wait_state(engine, first, "succeeded")
        await asyncio.sleep(1.2)  # the token's lifetime (the server's clock) is over
        [second] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await wait_state(engine, second, "succeeded")
    assert len(authorization.token_requests) == 2
    assert authorization.presented == authorization.issued()  # each token once, no 401
    assert [a["outcome"] for a in await attempts_of(engine, second)] == ["success"]


async def test_a_revoked_token_is_refreshed_once_on_401_within_the_attempt(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authorization: Authorization,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=authorization.url("/hook"), oauth2=oauth2(authorization)
    )
    async with pump(settings, engine) as (running, _):
        running.start()
        [first] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await wait_state(engine, first, "succeeded")
        revoked = authorization.issued()[0]
        authorization.revoke_all()
        [second] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await wait_state(engine, second, "succeeded")

    # The receiver saw the revoked token refused, then the fresh one taken: one attempt.
    assert authorization.presented[1:] == [revoked, authorization.issued()[0]]
    assert len(authorization.token_requests) == 2
    assert [(a["outcome"], a["status_code"]) for a in await attempts_of(engine, second)] == [
        ("success", 204)
    ]


async def test_a_fresh_token_refused_is_the_receivers_answer_not_a_loop(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authorization: Authorization,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """A receiver that refuses even a token just issued (wrong audience, say) answers 401 to
    it: that is its verdict for this attempt, once -- not a refresh loop against the token
    endpoint. (A 404, as here, is retried later: a receiver being deployed answers it.)"""
    endpoint = await new_endpoint(
        client, tenant, url=authorization.url("/elsewhere"), oauth2=oauth2(authorization)
    )
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, delivery, "enqueued")
    assert len(authorization.token_requests) == 1
    [attempt] = await attempts_of(engine, delivery)
    assert (attempt["outcome"], attempt["status_code"]) == ("retryable", 404)


async def test_a_failing_token_endpoint_is_auth_failed_retried_and_never_trips_the_breaker(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    authorization: Authorization,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    authorization.fail_with = 503
    endpoint = await new_endpoint(
        client, tenant, url=authorization.url("/hook"), oauth2=oauth2(authorization)
    )
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, retry_schedule=(0.2,), breaker_failures=2) as (
        running,
        _,
    ):
        running.start()

        async def outcomes() -> list[str]:
            return [a["outcome"] for a in await attempts_of(engine, delivery)]

        await eventually(outcomes, lambda seen: len(seen) >= 3, timeout=20)
        authorization.fail_with = None  # the token endpoint recovers: so does the delivery
        await wait_state(engine, delivery, "succeeded")
    tried = await attempts_of(engine, delivery)
    assert {a["outcome"] for a in tried[:-1]} == {"auth_failed"}
    assert tried[0]["error"] == "token endpoint: HTTP 503" and tried[0]["status_code"] is None
    assert tried[-1]["outcome"] == "success"
    assert authorization.presented == [authorization.issued()[0]]  # nothing sent without one
    stats = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert (stats["circuit"], stats["consecutive_failures"]) == ("closed", 0)


async def test_the_token_url_is_held_to_the_ssrf_guard_and_authorization_is_herald_s(
    client: httpx.AsyncClient, tenant: dict[str, str], authorization: Authorization
) -> None:
    metadata = await client.post(
        "/v1/endpoints",
        json={
            "url": authorization.url("/hook"),
            "oauth2": oauth2(authorization, token_url="http://169.254.169.254/token"),
        },
        headers=tenant,
    )
    assert metadata.status_code == 422
    assert metadata.json()["detail"].startswith("oauth2.token_url: ")
    assert "link-local" in metadata.json()["detail"] and CLIENT_SECRET not in metadata.text

    clash = await client.post(
        "/v1/endpoints",
        json={
            "url": authorization.url("/hook"),
            "oauth2": oauth2(authorization),
            "secret_headers": {"authorization": "Bearer mine"},
        },
        headers=tenant,
    )
    assert clash.status_code == 422 and "carries the OAuth2 token" in clash.text

    endpoint = await new_endpoint(client, tenant, headers={"Authorization": "Bearer static"})
    added = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"oauth2": oauth2(authorization)}, headers=tenant
    )
    assert added.status_code == 422 and "carries the OAuth2 token" in added.text
    removed = await client.patch(
        f"/v1/endpoints/{endpoint['id']}",
        json={"headers": None, "oauth2": oauth2(authorization)},
        headers=tenant,
    )
    assert removed.status_code == 200 and removed.json()["oauth2"]["client_id"] == CLIENT_ID
    cleared = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"oauth2": None}, headers=tenant
    )
    assert cleared.status_code == 200 and cleared.json()["oauth2"] is None
