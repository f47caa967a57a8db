"""The CloudEvents webhook validation handshake (HTTP 1.1 Web Hooks for Event Delivery, section
4), against a real receiver on 127.0.0.1: an OPTIONS with Herald's origin before the endpoint
is saved with a URL, the save refused -- nothing written -- without the receiver's consent,
the allowed rate a ceiling beside the endpoint's own, the origin on every delivery."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.endpoints.service.endpoints import flow_limits
from tests.fixtures.api import new_endpoint, portal_bearer, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply, running_receiver
from tests.fixtures.waiting import count_rows, wait_state

CONSENT = {"WebHook-Allowed-Origin": "*", "Allow": "POST"}


async def ceiling(engine: AsyncEngine, endpoint_id: str, default: float = 0.0) -> float:
    """The rate ceiling the gate holds the endpoint to, with ``default`` the operator's."""
    async with create_sessionmaker(engine)() as session:
        limits = await flow_limits(session, endpoint_id)
    assert limits is not None
    return limits.rate(default)


async def test_a_consenting_receiver_is_asked_once_and_its_rate_is_a_ceiling(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    receiver.script("/consents", Reply(headers={**CONSENT, "WebHook-Allowed-Rate": "30"}))
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/consents"),
        webhook_handshake=True,
        rate_limit_per_second=2,
        secret_headers={"X-Gateway-Key": "gw-1"},
    )
    [asked] = receiver.on("/consents")
    assert asked.method == "OPTIONS" and asked.body == b""
    assert asked.headers["WebHook-Request-Origin"] == settings.webhook_origin
    assert asked.headers["WebHook-Request-Rate"] == "120"  # 2 a second, asked in a minute
    assert asked.headers["X-Gateway-Key"] == "gw-1"  # a gateway in front may ask for it
    assert asked.headers["User-Agent"] == settings.user_agent  # as every delivery says
    assert endpoint["webhook_handshake"] is True
    assert endpoint["webhook_allowed_rate_per_minute"] == 30
    assert endpoint["webhook_validated_at"] is not None
    assert await ceiling(engine, endpoint["id"]) == 0.5  # 30 a minute, below its own 2/s

    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, delivery, "succeeded")
    [_, sent] = receiver.on("/consents")
    assert sent.method == "POST"
    assert sent.headers["WebHook-Request-Origin"] == settings.webhook_origin


async def test_without_consent_nothing_is_saved_and_the_answer_says_why(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, engine: AsyncEngine
) -> None:
    before = await count_rows(engine, "endpoints")
    cases = {
        "/plain-200": (Reply(), "HTTP 200 without WebHook-Allowed-Origin"),
        "/other-origin": (
            Reply(headers={"WebHook-Allowed-Origin": "someone-else.example"}),
            "WebHook-Allowed-Origin names another origin",
        ),
        "/bad-rate": (
            Reply(headers={**CONSENT, "WebHook-Allowed-Rate": "lots"}),
            "WebHook-Allowed-Rate is neither * nor a positive number",
        ),
        "/not-allowed": (Reply(status=405), "HTTP 405 without WebHook-Allowed-Origin"),
    }
    for path, (reply, why) in cases.items():
        receiver.script(path, reply)
        answer = await client.post(
            "/v1/endpoints",
            json={"url": receiver.url(path), "webhook_handshake": True},
            headers=tenant,
        )
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"] == "application/problem+json"
        assert why in answer.json()["detail"], answer.json()
        assert answer.json()["detail"].startswith("url: the receiver did not consent")
    assert await count_rows(engine, "endpoints") == before
    assert all(r.method == "OPTIONS" for r in receiver.requests)


async def test_a_new_url_is_asked_first_and_kept_out_without_consent(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, engine: AsyncEngine
) -> None:
    receiver.script("/first", Reply(headers=CONSENT))
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/first"), webhook_handshake=True
    )
    assert endpoint["webhook_allowed_rate_per_minute"] is None  # `*`: no ceiling of its own
    path = f"/v1/endpoints/{endpoint['id']}"
    refused = await client.patch(path, json={"url": receiver.url("/silent")}, headers=tenant)
    assert refused.status_code == 422
    kept = (await client.get(path, headers=tenant)).json()
    assert kept["url"] == receiver.url("/first")
    # A change that is not the URL asks no one.
    described = await client.patch(path, json={"description": "billing"}, headers=tenant)
    assert described.status_code == 200
    assert len(receiver.on("/first")) == 1

    receiver.script("/second", Reply(headers={**CONSENT, "WebHook-Allowed-Rate": "600"}))
    moved = await client.patch(path, json={"url": receiver.url("/second")}, headers=tenant)
    assert moved.status_code == 200, moved.text
    assert moved.json()["webhook_allowed_rate_per_minute"] == 600
    assert await ceiling(engine, endpoint["id"]) == 10.0
    # Without a ceiling of its own: the operator's default holds, and the allowed rate never
    # raises it.
    assert await ceiling(engine, endpoint["id"], default=5.0) == 5.0
    assert await ceiling(engine, endpoint["id"], default=50.0) == 10.0

    # No longer required: the ceiling goes with it, and a new URL is not asked.
    off = await client.patch(path, json={"webhook_handshake": False}, headers=tenant)
    assert off.json()["webhook_handshake"] is False and off.json()["webhook_origin"] is None
    assert await ceiling(engine, endpoint["id"]) == 0.0  # none
    assert await ceiling(engine, endpoint["id"], default=5.0) == 5.0
    again = await client.patch(path, json={"url": receiver.url("/third")}, headers=tenant)
    assert again.status_code == 200 and receiver.on("/third") == []


async def test_the_handshake_is_held_to_the_ssrf_guard(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    answer = await client.post(
        "/v1/endpoints",
        json={"url": "http://169.254.169.254/latest", "webhook_handshake": True},
        headers=tenant,
    )
    assert answer.status_code in (400, 422) and "169.254.169.254" in answer.text


async def test_the_saves_rules_hold_before_any_receiver_is_asked(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    """Whatever a save would refuse is refused before the OPTIONS goes out: no request is
    made on a tenant's word that the save itself would not allow."""
    refused: list[dict[str, Any]] = [
        {"url": receiver.url("/x").replace("http://", "http://user:pw@")},
        {"url": receiver.url("/x"), "headers": {"Webhook-Id": "mine"}},
        {"url": receiver.url("/x"), "egress_proxy": {"url": "http://169.254.169.254:3128"}},
        {"url": "https://a..example.com/hook"},
    ]
    for body in refused:
        answer = await client.post(
            "/v1/endpoints", json={**body, "webhook_handshake": True}, headers=tenant
        )
        assert answer.status_code in (400, 422), (body, answer.text)
    assert receiver.requests == []


async def test_handshakes_are_counted_against_the_tenants_minute(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    """Each handshake is a request to a URL of the tenant's choosing, consent or not: ten a
    minute, as test events are. (21 tries: even if a minute turns among them, one minute
    holds eleven.)"""
    answers = [
        await client.post(
            "/v1/endpoints",
            json={"url": receiver.url(f"/ask-{n}"), "webhook_handshake": True},
            headers=tenant,
        )
        for n in range(21)
    ]
    statuses = [answer.status_code for answer in answers]
    assert set(statuses) == {422, 429} and statuses[:10] == [422] * 10
    assert len(receiver.requests) == statuses.count(422)  # refused ones asked no one
    assert "at most 10 webhook handshakes a minute" in answers[statuses.index(429)].text


async def test_the_test_event_carries_the_consented_origin(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, settings: Settings
) -> None:
    receiver.script("/tested", Reply(headers=CONSENT))
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/tested"), webhook_handshake=True
    )
    tested = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=tenant)
    assert tested.json()["delivered"] is True
    [_, sent] = receiver.on("/tested")
    assert sent.headers["WebHook-Request-Origin"] == settings.webhook_origin


async def test_a_move_to_another_origin_asks_it_without_the_old_receivers_credentials(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    """The handshake for a new origin goes out before the change is saved: it must not carry
    the secret headers set for the old receiver -- from a customer (who never saw them) nor
    from a tenant that did not restate them."""
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    receiver.script("/old", Reply(headers=CONSENT), Reply(headers=CONSENT))
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/old"),
        webhook_handshake=True,
        secret_headers={"Authorization": "Bearer old-receivers-token"},
        customer_id="acme",
    )
    path = f"/v1/endpoints/{endpoint['id']}"
    bearer = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    async with running_receiver() as elsewhere:
        elsewhere.script("/new", Reply(headers=CONSENT), Reply(headers=CONSENT))
        unsaid = await client.patch(path, json={"url": elsewhere.url("/new")}, headers=tenant)
        assert unsaid.status_code == 422  # refused before any receiver is asked
        assert elsewhere.requests == []

        nulled = await client.patch(
            path, json={"url": elsewhere.url("/new"), "secret_headers": None}, headers=tenant
        )
        assert nulled.status_code == 200, nulled.text
        back = await client.patch(
            path,
            json={"url": receiver.url("/old"), "secret_headers": {"Authorization": "Bearer t"}},
            headers=tenant,
        )
        assert back.status_code == 200, back.text

        moved = await client.patch(path, json={"url": elsewhere.url("/new")}, headers=bearer)
        assert moved.status_code == 200, moved.text

    asked = elsewhere.on("/new")
    assert [r.method for r in asked] == ["OPTIONS", "OPTIONS"]
    for request in asked:
        assert "Authorization" not in request.headers, request.headers
