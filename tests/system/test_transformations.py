"""Transformations through a real worker and a real receiver: the request reshaped (body, a
header, the path and query), signed as sent; every attempt of a delivery sends the same bytes
even when the endpoint's transformation changes between them; a skip recorded as such, without
a request; a transformation that fails on an event ends its delivery dead, nothing sent; an
ordered endpoint's stream goes on past a skipped delivery, in order."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from standardwebhooks.webhooks import Webhook

from tests.fixtures.api import new_endpoint
from tests.fixtures.deliveries import deliver, settled
from tests.fixtures.receiver import Receiver, Reply

pytestmark = pytest.mark.usefixtures("worker")

SLACK = (
    '{"body": {"text": "Order " + payload.id + " paid: " + string(payload.amount) + " EUR",'
    ' "channel": "#sales"}, "headers": {"X-Order": payload.id},'
    ' "path": "/orders/" + payload.id, "query": {"source": "herald"}}'
)


async def test_a_transformation_reshapes_the_request_and_the_signature_covers_it(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/hooks/"), transformation=SLACK)
    assert endpoint["transformation"] == SLACK
    delivery_id = await deliver(client, tenant, endpoint["id"], {"id": "o-17", "amount": 12})

    [request] = await receiver.wait_for("/hooks/orders/o-17", 1)
    final = await settled(client, tenant, delivery_id)

    assert final["state"] == "succeeded"
    sent = {"channel": "#sales", "text": "Order o-17 paid: 12 EUR"}
    assert json.loads(request.body) == sent
    assert request.body == json.dumps(sent, separators=(",", ":")).encode()  # keys in order
    assert request.query == "source=herald"
    assert request.headers["X-Order"] == "o-17"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["Idempotency-Key"] == delivery_id
    # The receiver's own check: the signature covers the body as transformed.
    assert Webhook(endpoint["secret"]).verify(request.body, request.headers) == sent


async def test_every_attempt_sends_what_the_first_did_though_the_transformation_changed(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    first_answered = asyncio.Event()
    receiver.script("/retried", Reply(500, hold=first_answered), Reply(200))
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/retried"),
        transformation='{"body": {"v": 1, "n": payload.n}}',
    )
    before = await deliver(client, tenant, endpoint["id"], {"n": 7})
    [first] = await receiver.wait_for("/retried", 1)
    # Changed while the first attempt is in flight: the retry keeps the delivery's version.
    changed = await client.patch(
        f"/v1/endpoints/{endpoint['id']}",
        json={"transformation": '{"body": {"v": 2, "n": payload.n}}'},
        headers=tenant,
    )
    assert changed.status_code == 200, changed.text
    first_answered.set()

    _, retry = await receiver.wait_for("/retried", 2)
    assert (await settled(client, tenant, before))["attempt_count"] == 2
    assert first.body == retry.body == b'{"n":7,"v":1}'
    assert first.headers["Idempotency-Key"] == retry.headers["Idempotency-Key"] == before

    # A delivery accepted after the change is sent as the new version.
    after = await deliver(client, tenant, endpoint["id"], {"n": 8})
    *_, newest = await receiver.wait_for("/retried", 3)
    assert (await settled(client, tenant, after))["state"] == "succeeded"
    assert newest.body == b'{"n":8,"v":2}'


async def test_a_skip_is_recorded_and_nothing_is_sent(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/large"),
        transformation='payload.amount < 100 ? {"skip": true} : {}',
    )
    small = await deliver(client, tenant, endpoint["id"], {"amount": 5})
    large = await deliver(client, tenant, endpoint["id"], {"amount": 500})

    [request] = await receiver.wait_for("/large", 1)
    skipped = await settled(client, tenant, small)
    assert (await settled(client, tenant, large))["state"] == "succeeded"

    # No body key: the endpoint's own body, the payload as accepted.
    assert json.loads(request.body) == {"amount": 500}
    assert request.headers["Idempotency-Key"] == large
    assert skipped["state"] == "cancelled"
    assert skipped["dead_reason"] is None  # not dead: nothing failed
    assert skipped["waiting_detail"] == "skipped: its endpoint's transformation said not to send it"
    assert skipped["last_outcome"] is None and skipped["completed_at"] is not None
    # One claim, no request: the timeline tells the skip, and no lost attempt.
    steps = [(step["event"], step["detail"]) for step in skipped["timeline"]]
    assert steps == [("accepted", None), ("cancelled", "by its endpoint's transformation")]
    attempts = await client.get(f"/v1/deliveries/{small}/attempts", headers=tenant)
    assert attempts.json()["items"] == []
    await asyncio.sleep(0)  # nothing else may arrive: the receiver saw the one request above
    assert len(receiver.on("/large")) == 1


async def test_a_transformation_that_fails_on_an_event_sends_nothing_and_says_why(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/strict"),
        transformation='{"body": {"customer": payload.customer.name}}',
    )
    failing = await deliver(client, tenant, endpoint["id"], {"amount": 5})
    passing = await deliver(client, tenant, endpoint["id"], {"customer": {"name": "Ada"}})

    [request] = await receiver.wait_for("/strict", 1)
    dead = await settled(client, tenant, failing)
    assert (await settled(client, tenant, passing))["state"] == "succeeded"

    assert request.body == b'{"customer":"Ada"}'
    assert dead["state"] == "dead"
    assert dead["dead_reason"] == (
        "transformation_failed: the transformation failed on this event: no field customer"
    )


async def test_an_ordered_stream_goes_on_past_a_skipped_delivery_in_order(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/ordered"),
        ordering="endpoint",
        transformation='{"skip": payload.n % 2 == 0, "body": {"n": payload.n}}',
    )
    ids = [await deliver(client, tenant, endpoint["id"], {"n": n}) for n in range(1, 7)]

    received = await receiver.wait_for("/ordered", 3)
    states = [(await settled(client, tenant, i))["state"] for i in ids]

    assert [json.loads(r.body)["n"] for r in received] == [1, 3, 5]
    assert states == ["succeeded", "cancelled"] * 3


async def test_a_redrive_sends_a_delivery_as_its_endpoints_transformation_is_then(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    endpoint = await new_endpoint(
        client,
        tenant,
        url=receiver.url("/fixed"),
        headers={"Authorization": "Bearer static"},
        transformation='{"body": {"name": payload.customer.name}}',
    )
    dead = await deliver(client, tenant, endpoint["id"], {"customer": {"id": 7}})
    assert (await settled(client, tenant, dead))["state"] == "dead"
    corrected = await client.patch(
        f"/v1/endpoints/{endpoint['id']}",
        json={
            "transformation": '{"body": {"id": payload.customer.id},'
            ' "headers": {"authorization": "Bearer mine", "X-Fixed": "yes"}}'
        },
        headers=tenant,
    )
    assert corrected.status_code == 200
    redriven = await client.post(f"/v1/deliveries/{dead}/redrive", headers=tenant)
    assert redriven.status_code == 202, redriven.text

    [request] = await receiver.wait_for("/fixed", 1)
    assert (await settled(client, tenant, dead))["state"] == "succeeded"
    assert request.body == b'{"id":7}'
    assert request.headers["Idempotency-Key"] == dead
    # The static credential is sent once, the endpoint's own: a made header in another case
    # neither replaces nor doubles it.
    assert request.headers["Authorization"] == "Bearer static"
    assert "authorization" not in request.headers and request.headers["X-Fixed"] == "yes"
