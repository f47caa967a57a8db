"""What a receiver verifies and parses, checked by implementations other than Herald's:
Standard Webhooks ``v1a`` (ed25519) verified with pyca ``cryptography`` from the specification's
text, beside or instead of ``v1``; CloudEvents in structured and binary mode parsed by the
official ``cloudevents`` SDK."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest
from cloudevents.core.bindings.http import HTTPMessage, from_http_event
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.core.config import Settings
from tests.fixtures.api import new_endpoint
from tests.fixtures.engine import pump
from tests.fixtures.leases import endpoint_tenant
from tests.fixtures.receiver import Receiver
from tests.fixtures.waiting import wait_state

PAYLOAD = {"order": 7, "note": 'naïve ✓ "quoted"'}


def verify_v1a(public_key: str, headers: Any, body: bytes) -> int:
    """The spec's asymmetric check, written from its text: the public key is base64 after
    `whpk_`; each `v1a,<base64>` in webhook-signature is an ed25519 signature over
    `{webhook-id}.{webhook-timestamp}.{body}`. How many of them verify."""
    assert public_key.startswith("whpk_")
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_key[5:]))
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    verified = 0
    for signature in headers["webhook-signature"].split(" "):
        scheme, _, value = signature.partition(",")
        if scheme != "v1a":
            continue
        try:
            key.verify(base64.b64decode(value), content)
        except InvalidSignature:
            continue
        verified += 1
    return verified


def schemes(headers: Any) -> list[str]:
    return [s.partition(",")[0] for s in headers["webhook-signature"].split(" ")]


async def deliver_one(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    endpoint: dict[str, Any],
    event_type: str = "order.paid",
) -> dict[str, Any]:
    accepted = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": event_type, "payload": PAYLOAD},
        headers=tenant,
    )
    assert accepted.status_code == 202, accepted.text
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, accepted.json()["id"], "succeeded")
    delivery: dict[str, Any] = accepted.json()
    return delivery


async def test_v1a_signs_beside_v1_and_verifies_with_the_public_key_alone(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/both"), signature_schemes=["v1", "v1a"]
    )
    assert endpoint["signature_schemes"] == ["v1", "v1a"]
    public_key = endpoint["public_key"]
    shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert shown["public_key"] == public_key and "whsk_" not in json.dumps(shown)
    await deliver_one(client, tenant, settings, engine, endpoint)

    [sent] = receiver.on("/both")
    assert schemes(sent.headers) == ["v1", "v1a"]
    assert verify_v1a(public_key, sent.headers, sent.body) == 1
    assert Webhook(endpoint["secret"]).verify(sent.body, sent.headers) == PAYLOAD
    # The signature covers the bytes sent, the id and the timestamp: change one, it fails.
    assert verify_v1a(public_key, sent.headers, sent.body + b" ") == 0
    moved = {**sent.headers, "webhook-timestamp": str(int(sent.headers["webhook-timestamp"]) + 1)}
    assert verify_v1a(public_key, moved, sent.body) == 0


async def test_v1a_alone_sends_no_symmetric_signature(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/v1a"), signature_schemes=["v1a"]
    )
    await deliver_one(client, tenant, settings, engine, endpoint)
    [sent] = receiver.on("/v1a")
    assert schemes(sent.headers) == ["v1a"]
    assert verify_v1a(endpoint["public_key"], sent.headers, sent.body) == 1
    with pytest.raises(WebhookVerificationError):
        Webhook(endpoint["secret"]).verify(sent.body, sent.headers)


async def test_a_rotated_signing_key_signs_beside_the_old_one_during_the_overlap(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/rotated"), signature_schemes=["v1a"]
    )
    rotated = await client.post(
        f"/v1/endpoints/{endpoint['id']}/signing-key/rotate", headers=tenant
    )
    assert rotated.status_code == 200, rotated.text
    new = rotated.json()["public_key"]
    assert new != endpoint["public_key"] and rotated.json()["previous_public_key_expires_at"]
    shown = (await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)).json()
    assert (shown["public_key"], shown["previous_public_key"]) == (new, endpoint["public_key"])
    await deliver_one(client, tenant, settings, engine, endpoint)

    [sent] = receiver.on("/rotated")
    assert schemes(sent.headers) == ["v1a", "v1a"]
    assert verify_v1a(new, sent.headers, sent.body) == 1
    assert verify_v1a(endpoint["public_key"], sent.headers, sent.body) == 1


async def test_turning_v1a_on_for_an_endpoint_gives_it_a_key_pair_once(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant)
    assert endpoint["signature_schemes"] == ["v1"]
    key = endpoint["public_key"]
    assert key.startswith("whpk_") and len(base64.b64decode(key[5:])) == 32
    on = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"signature_schemes": ["v1a"]}, headers=tenant
    )
    assert on.status_code == 200 and on.json()["public_key"] == key


@pytest.mark.parametrize(
    ("schemes_given", "says"),
    [([], "at least 1"), (["v2"], "'v1' or 'v1a'"), (["v1", "v1"], "each scheme once")],
)
async def test_signature_schemes_are_refused_by_name(
    client: httpx.AsyncClient, tenant: dict[str, str], schemes_given: list[str], says: str
) -> None:
    response = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "signature_schemes": schemes_given},
        headers=tenant,
    )
    assert response.status_code == 422, response.text
    assert "signature_schemes" in response.json()["detail"] and says in response.text


async def test_cloudevents_structured_mode_parses_with_the_official_sdk(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/ce"), payload_format="cloudevents"
    )
    delivery = await deliver_one(client, tenant, settings, engine, endpoint)
    [sent] = receiver.on("/ce")
    assert sent.headers["Content-Type"] == "application/cloudevents+json; charset=utf-8"

    event = from_http_event(HTTPMessage(headers=dict(sent.headers), body=sent.body))
    assert event.get_specversion() == "1.0"
    assert event.get_type() == "order.paid"
    assert event.get_id() == delivery["event_id"]
    tenant_id = await endpoint_tenant(engine, endpoint["id"])
    assert event.get_source() == f"urn:herald:tenant:{tenant_id}"
    assert event.get_datacontenttype() == "application/json"
    assert event.get_data() == PAYLOAD
    assert event.get_time() is not None
    # Signed over exactly those bytes, as every format is.
    assert Webhook(endpoint["secret"]).verify(sent.body, sent.headers)["data"] == PAYLOAD


async def test_cloudevents_binary_mode_parses_with_the_official_sdk(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/ce-binary"), payload_format="cloudevents-binary"
    )
    delivery = await deliver_one(client, tenant, settings, engine, endpoint, "order.item.shipped")
    [sent] = receiver.on("/ce-binary")
    assert sent.headers["Content-Type"] == "application/json"
    assert sent.headers["ce-specversion"] == "1.0"

    event = from_http_event(HTTPMessage(headers=dict(sent.headers), body=sent.body))
    assert (event.get_type(), event.get_id()) == ("order.item.shipped", delivery["event_id"])
    assert event.get_data() == PAYLOAD and json.loads(sent.body) == PAYLOAD
    assert Webhook(endpoint["secret"]).verify(sent.body, sent.headers) == PAYLOAD


async def test_a_static_header_cannot_take_a_cloudevents_attribute(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "headers": {"ce-type": "forged"}},
        headers=tenant,
    )
    assert response.status_code == 422
    assert "the header ce-type is set by Herald" in response.json()["detail"]


@pytest.mark.parametrize("payload_format", ["raw", "standard", "cloudevents", "cloudevents-binary"])
async def test_every_format_names_the_event_in_headers(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
    payload_format: str,
) -> None:
    path = f"/named-{payload_format}"
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url(path), payload_format=payload_format
    )
    delivery = await deliver_one(client, tenant, settings, engine, endpoint, "invoice.sent")
    [sent] = receiver.on(path)
    assert sent.headers["Herald-Event-Type"] == "invoice.sent"
    assert sent.headers["Herald-Event-Id"] == delivery["event_id"]
    assert sent.headers["webhook-id"] == delivery["id"]


async def test_an_event_fanned_out_arrives_under_one_event_id(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    for _ in range(2):
        await new_endpoint(client, tenant, url=receiver.url("/fanned"), event_types=["a.fan"])
    accepted = await client.post(
        "/v1/events", json={"event_type": "a.fan", "payload": PAYLOAD}, headers=tenant
    )
    assert accepted.status_code == 202, accepted.text
    async with pump(settings, engine) as (running, _):
        running.start()
        await receiver.wait_for("/fanned", 2)
    sent = receiver.on("/fanned")
    assert len({r.headers["webhook-id"] for r in sent}) == 2
    assert {r.headers["Herald-Event-Id"] for r in sent} == {accepted.json()["id"]}


async def test_the_operator_names_what_every_request_says_it_is(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    assert settings.user_agent.startswith("Herald/")  # the default
    named = settings.model_copy(update={"user_agent": "AcmeHooks/2.1 (+https://acme.test)"})
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/agent"))
    await deliver_one(client, tenant, named, engine, endpoint)
    [sent] = receiver.on("/agent")
    assert sent.headers["User-Agent"] == "AcmeHooks/2.1 (+https://acme.test)"
