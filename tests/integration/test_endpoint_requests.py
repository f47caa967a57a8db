"""What a receiver gets from an endpoint's options: the Standard Webhooks envelope, signed over
exactly the bytes sent, and static headers on every attempt -- and the headers that would break
the protocol or the signature, refused by name at save."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import count_rows, wait_state

PAYLOAD = {"order": 7, "lines": [{"sku": "a", "qty": 2}], "note": 'naïve ✓ "quoted"'}


async def accepted_at(engine: AsyncEngine, delivery_id: str) -> datetime:
    async with engine.connect() as connection:
        query = text(
            "SELECT e.created_at FROM events AS e JOIN deliveries AS d ON d.event_id = e.id"
            " WHERE d.id = :d"
        )
        at: datetime = (await connection.execute(query, {"d": delivery_id})).scalar_one()
    return at


async def test_a_standard_endpoint_receives_the_envelope_signed_over_its_bytes(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    standard = await new_endpoint(
        client, tenant, url=receiver.url("/standard"), payload_format="standard"
    )
    raw = await new_endpoint(client, tenant, url=receiver.url("/raw"))
    assert (standard["payload_format"], raw["payload_format"]) == ("standard", "raw")
    ids = {}
    for endpoint in (standard, raw):
        response = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "order.paid", "payload": PAYLOAD},
            headers=tenant,
        )
        ids[endpoint["id"]] = response.json()["id"]
    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in ids.values():
            await wait_state(engine, delivery_id, "succeeded")

    [sent] = receiver.on("/standard")
    verified = Webhook(standard["secret"]).verify(sent.body, sent.headers)
    at = await accepted_at(engine, ids[standard["id"]])
    assert verified == {"type": "order.paid", "timestamp": _iso(at), "data": PAYLOAD}
    assert list(json.loads(sent.body)) == ["type", "timestamp", "data"]
    # The data is the payload's stored bytes, not a re-encoding of them.
    [plain] = receiver.on("/raw")
    assert sent.body.endswith(b',"data":' + plain.body + b"}")
    assert json.loads(plain.body) == PAYLOAD
    Webhook(raw["secret"]).verify(plain.body, plain.headers)
    with pytest.raises(WebhookVerificationError):  # the signature covers these bytes only
        Webhook(standard["secret"]).verify(
            sent.body.replace(b"order.paid", b"order.pay!"), sent.headers
        )


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="microseconds").replace("+00:00", "Z")


async def test_static_headers_arrive_on_every_attempt_until_cleared(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    static = {"Authorization": "Bearer receiver-secret", "X-Team": "billing"}
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/headers"), headers=static)
    assert endpoint["headers"] == static
    receiver.script("/headers", Reply(503))
    [first] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, retry_schedule=(0.2,)) as (running, _):
        running.start()
        await wait_state(engine, first, "succeeded")
        cleared = await client.patch(
            f"/v1/endpoints/{endpoint['id']}", json={"headers": None}, headers=tenant
        )
        assert cleared.json()["headers"] == {}
        [second] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await wait_state(engine, second, "succeeded")

    tried, retried, after = receiver.on("/headers")
    for request in (tried, retried):  # the attempt and its retry
        assert request.headers["Authorization"] == "Bearer receiver-secret"
        assert request.headers["X-Team"] == "billing"
        assert request.headers["webhook-id"] == first
    assert "X-Team" not in after.headers and "Authorization" not in after.headers


@pytest.mark.parametrize(
    "name",
    [
        "Host",
        "content-length",
        "Transfer-Encoding",
        "Connection",
        "Upgrade",
        "webhook-id",
        "Webhook-Signature",
        "webhook-timestamp",
        "Idempotency-Key",
        "Content-Type",
        "User-Agent",
    ],
)
async def test_a_header_herald_or_the_connection_owns_is_refused_by_name(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, name: str
) -> None:
    response = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "headers": {name: "value-never-echoed"}},
        headers=tenant,
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    detail = response.json()["detail"]
    assert detail.startswith("body.headers: ") and f"the header {name} " in detail
    assert "value-never-echoed" not in response.text
    assert await count_rows(engine, "endpoints") == 0


@pytest.mark.parametrize(
    ("headers", "says"),
    [
        ({"X-A": "line\r\nInjected: yes"}, "must be printable ASCII"),
        ({"X-A": "x" * 1001}, "must be printable ASCII"),
        ({"Bad Name": "x"}, "a header name must be"),
        ({"": "x"}, "a header name must be"),
        ({"X-A": "1", "x-a": "2"}, "the header x-a is given twice"),
        ({f"X-{n}": "v" for n in range(21)}, "at most 20 headers"),
        ({f"X-{n}": "v" * 900 for n in range(10)}, "at most 8192 bytes"),
        ({"X-A": 5}, "Input should be a valid string"),
    ],
)
async def test_headers_that_are_no_headers_are_refused_on_create_and_update(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    headers: dict[str, Any],
    says: str,
) -> None:
    created = await client.post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/x", "headers": headers}, headers=tenant
    )
    updated = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"headers": headers}, headers=tenant
    )
    for response in (created, updated):
        assert response.status_code == 422, response.text
        assert says in response.json()["detail"]
        assert "Injected" not in response.text
    kept = await client.get(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert kept.json()["headers"] == {}


async def test_an_unknown_payload_format_is_refused(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    response = await client.post(
        "/v1/endpoints",
        json={"url": "http://127.0.0.1:9/x", "payload_format": "cloudevents-json"},
        headers=tenant,
    )
    assert response.status_code == 422
    assert "body.payload_format" in response.json()["detail"]
    assert "'cloudevents-binary'" in response.json()["detail"]  # says what is known
