"""Polling endpoints beside a real worker: their deliveries wait for their receiver, which reads
them signed as a push would have sent them and acknowledges them; two pollers never hold one
delivery at once; an unacknowledged read comes back under the same id, and its old receipt
acknowledges nothing; an ordered endpoint hands out a stream's next delivery only once the one
before it is acknowledged; a key for one endpoint reads that endpoint and nothing else."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from tests.fixtures.api import new_endpoint
from tests.fixtures.deliveries import attempt_log, deliver
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import count_rows, eventually

pytestmark = pytest.mark.usefixtures("worker")


async def polling_endpoint(
    client: httpx.AsyncClient, auth: dict[str, str], **fields: Any
) -> dict[str, Any]:
    made = await client.post(
        "/v1/endpoints",
        json={"delivery": "poll", "event_types": ["order.paid"], **fields},
        headers=auth,
    )
    assert made.status_code == 201, made.text
    endpoint: dict[str, Any] = made.json()
    assert endpoint["delivery"] == "poll" and endpoint["url"] is None
    return endpoint


async def poll(
    client: httpx.AsyncClient, auth: dict[str, str], endpoint_id: str, **query: Any
) -> list[dict[str, Any]]:
    read = await client.get(f"/v1/endpoints/{endpoint_id}/poll", params=query, headers=auth)
    assert read.status_code == 200, read.text
    assert read.headers["cache-control"] == "no-store"
    data: list[dict[str, Any]] = read.json()["data"]
    return data


async def ack(
    client: httpx.AsyncClient, auth: dict[str, str], endpoint_id: str, *receipts: str
) -> dict[str, list[str]]:
    done = await client.post(
        f"/v1/endpoints/{endpoint_id}/poll/ack", json={"receipts": list(receipts)}, headers=auth
    )
    assert done.status_code == 200, done.text
    body: dict[str, list[str]] = done.json()
    return body


async def delivery(client: httpx.AsyncClient, auth: dict[str, str], delivery_id: str) -> Any:
    return (await client.get(f"/v1/deliveries/{delivery_id}", headers=auth)).json()


async def test_a_polled_delivery_is_read_signed_and_succeeds_when_acknowledged(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, receiver: Receiver
) -> None:
    endpoint = await polling_endpoint(client, tenant, payload_format="standard")
    ids = [await deliver(client, tenant, endpoint["id"], {"n": n}) for n in range(3)]
    # A pushed delivery accepted after them, and sent: the worker has had their wake-ups too.
    pushed = await new_endpoint(client, tenant, url=receiver.url("/pushed"))
    await deliver(client, tenant, pushed["id"], {"n": 9})
    await receiver.wait_for("/pushed", 1)

    # The worker left them alone: waiting for their receiver is where they should be.
    for delivery_id in ids:
        waiting = await delivery(client, tenant, delivery_id)
        assert waiting["state"] == "pending" and waiting["attempt_count"] == 0
        assert waiting["waiting_reason"] == "waiting_to_be_polled"

    read = await poll(client, tenant, endpoint["id"], limit=10)
    assert [item["id"] for item in read] == ids
    for n, item in enumerate(read):
        assert item["reads"] == 1 and item["event_type"] == "order.paid"
        assert item["headers"]["webhook-id"] == item["id"]
        # The receiver's own check, with the Standard Webhooks library: signed as sent.
        verified = Webhook(endpoint["secret"]).verify(item["body"], item["headers"])
        assert verified["type"] == "order.paid" and verified["data"] == {"n": n}
        assert item["receipt"].startswith(item["id"] + ".")
    assert (await delivery(client, tenant, ids[0]))["waiting_reason"] == "in_flight"
    assert await poll(client, tenant, endpoint["id"]) == []  # each is hidden while read

    done = await ack(client, tenant, endpoint["id"], *(item["receipt"] for item in read))
    assert done == {"acknowledged": ids, "expired": []}
    for delivery_id in ids:
        acknowledged = await delivery(client, tenant, delivery_id)
        assert acknowledged["state"] == "succeeded" and acknowledged["attempt_count"] == 1
        [attempt] = await attempt_log(client, tenant, delivery_id)
        assert attempt["outcome"] == "success" and attempt["status_code"] is None
    # Acknowledging again is harmless, and nothing is read again.
    again = await ack(client, tenant, endpoint["id"], read[0]["receipt"])
    assert again == {"acknowledged": [ids[0]], "expired": []}
    assert await poll(client, tenant, endpoint["id"]) == []
    assert await count_rows(engine, "attempts", "delivery_id = ANY(:ids)", ids=ids) == 3


async def test_two_pollers_never_hold_one_delivery_at_once(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    ids = {await deliver(client, tenant, endpoint["id"], {"n": n}) for n in range(30)}

    one, other = await asyncio.gather(
        poll(client, tenant, endpoint["id"], limit=20),
        poll(client, tenant, endpoint["id"], limit=20),
    )
    first, second = {item["id"] for item in one}, {item["id"] for item in other}
    assert not first & second
    assert first | second == ids
    assert len(one) + len(other) == 30


async def test_an_unacknowledged_delivery_comes_back_with_its_id_and_a_new_receipt(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    delivery_id = await deliver(client, tenant, endpoint["id"], {"n": 1})
    [read] = await poll(client, tenant, endpoint["id"], visibility=1)

    # Its visibility ends unacknowledged: a later poll reads it again, under the same id.
    [again] = await eventually(
        lambda: poll(client, tenant, endpoint["id"], visibility=60), bool, timeout=20
    )
    assert again["id"] == delivery_id and again["reads"] == 2
    assert again["receipt"] != read["receipt"]
    assert again["headers"]["webhook-id"] == read["headers"]["webhook-id"] == delivery_id
    assert again["body"] == read["body"]

    # The first read's receipt acknowledges nothing now; the second's does.
    assert await ack(client, tenant, endpoint["id"], read["receipt"]) == {
        "acknowledged": [],
        "expired": [delivery_id],
    }
    assert (await delivery(client, tenant, delivery_id))["state"] == "leased"
    assert await ack(client, tenant, endpoint["id"], again["receipt"]) == {
        "acknowledged": [delivery_id],
        "expired": [],
    }
    final = await delivery(client, tenant, delivery_id)
    assert final["state"] == "succeeded" and final["attempt_count"] == 2


async def test_an_ordered_polling_endpoint_hands_out_a_stream_one_delivery_at_a_time(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await polling_endpoint(client, tenant, ordering="endpoint")
    ids = [await deliver(client, tenant, endpoint["id"], {"n": n}) for n in range(3)]

    seen = []
    for position, delivery_id in enumerate(ids, 1):
        read = await poll(client, tenant, endpoint["id"], limit=10)
        assert [item["id"] for item in read] == [delivery_id]  # its head alone
        assert read[0]["headers"]["Herald-Stream-Sequence"] == str(position)
        assert await poll(client, tenant, endpoint["id"], limit=10) == []
        assert (await ack(client, tenant, endpoint["id"], read[0]["receipt"]))["acknowledged"]
        seen.append(read[0]["id"])
    assert seen == ids
    assert await poll(client, tenant, endpoint["id"], limit=10) == []


async def test_a_long_poll_answers_when_a_delivery_arrives(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    waiting = asyncio.create_task(poll(client, tenant, endpoint["id"], wait=20))
    await asyncio.sleep(0.2)
    assert not waiting.done()
    delivery_id = await deliver(client, tenant, endpoint["id"], {"n": 1})
    assert [item["id"] for item in await waiting] == [delivery_id]


async def test_a_key_for_one_endpoint_polls_that_endpoint_alone(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    other = await polling_endpoint(client, tenant)
    made = await client.post(
        "/v1/api-keys", json={"endpoint_id": endpoint["id"], "label": "laptop"}, headers=tenant
    )
    assert made.status_code == 201, made.text
    assert made.json()["endpoint_id"] == endpoint["id"]
    receiver = {"Authorization": f"Bearer {made.json()['key']}"}

    delivery_id = await deliver(client, tenant, endpoint["id"], {"n": 1})
    [read] = await poll(client, receiver, endpoint["id"])
    assert read["id"] == delivery_id
    assert (await ack(client, receiver, endpoint["id"], read["receipt"]))["acknowledged"]

    elsewhere = await client.get(f"/v1/endpoints/{other['id']}/poll", headers=receiver)
    assert elsewhere.status_code == 404
    for method, path in (
        ("GET", "/v1/endpoints"),
        ("GET", f"/v1/deliveries/{delivery_id}"),
        ("GET", f"/v1/endpoints/{endpoint['id']}"),
        ("POST", "/v1/api-keys"),
    ):
        refused = await client.request(method, path, headers=receiver, json={})
        assert refused.status_code == 403, (path, refused.text)
        assert "alone" in refused.json()["detail"]

    # A pushed endpoint's receiver has its own URL: no key is made for it.
    pushed = await client.post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/hook"}, headers=tenant
    )
    refused = await client.post(
        "/v1/api-keys", json={"endpoint_id": pushed.json()["id"]}, headers=tenant
    )
    assert refused.status_code == 422, refused.text
    assert "polling endpoint" in refused.json()["detail"]


async def test_what_a_polling_endpoint_cannot_be(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    cases: tuple[tuple[dict[str, Any], str], ...] = (
        ({"delivery": "poll", "url": "https://example.com/hook"}, "url"),
        ({"delivery": "poll", "headers": {"X-A": "b"}}, "headers"),
        ({"delivery": "poll", "transformation": '{"body": payload}'}, "transformation"),
        ({"delivery": "push"}, "url"),
        ({}, "url"),
    )
    for body, named in cases:
        refused = await client.post("/v1/endpoints", json=body, headers=tenant)
        assert refused.status_code == 422, (body, refused.text)
        assert refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["detail"].startswith(named), refused.text

    endpoint = await polling_endpoint(client, tenant)
    for change in ({"url": "https://example.com/hook"}, {"max_in_flight": 3}):
        refused = await client.patch(f"/v1/endpoints/{endpoint['id']}", json=change, headers=tenant)
        assert refused.status_code == 422, refused.text
    described = await client.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"description": "laptop"}, headers=tenant
    )
    assert described.status_code == 200 and described.json()["url"] is None

    pushed = await client.post(
        "/v1/endpoints", json={"url": "http://127.0.0.1:9/hook"}, headers=tenant
    )
    not_polled = await client.get(f"/v1/endpoints/{pushed.json()['id']}/poll", headers=tenant)
    assert not_polled.status_code == 409, not_polled.text
    tested = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=tenant)
    assert tested.status_code == 200, tested.text
    assert "polling endpoint" in json.dumps(tested.json())


async def test_a_deleted_polling_endpoints_deliveries_die_of_it_as_a_pushed_ones_do(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await polling_endpoint(client, tenant)
    ids = [await deliver(client, tenant, endpoint["id"], {"n": n}) for n in range(2)]
    [read] = await poll(client, tenant, endpoint["id"], limit=1, visibility=1)
    deleted = await client.delete(f"/v1/endpoints/{endpoint['id']}", headers=tenant)
    assert deleted.status_code == 204, deleted.text

    # The next reconcile runs arm it for the workers, which end both -- the read one once its
    # visibility is over -- as they end a deleted pushed endpoint's.
    async def ended() -> list[Any]:
        started = await client.post("/v1/reconcile", json={"trigger": "test"}, headers=ADMIN)
        assert started.status_code == 202, started.text
        return [await delivery(client, tenant, delivery_id) for delivery_id in ids]

    final = await eventually(ended, lambda found: all(d["state"] == "dead" for d in found))
    assert {d["dead_reason"] for d in final} == {"endpoint_deleted"}
    assert read["id"] in ids
