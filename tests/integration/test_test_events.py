"""`POST /v1/endpoints/{id}/test-events`: a test event of a catalogue type, with its example
payload, kept in the log like any delivery -- attempted, retried, replayable -- and refused in
words when the type or its example will not do."""

from __future__ import annotations

import json
from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine
from standardwebhooks.webhooks import Webhook

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, portal_bearer
from tests.fixtures.deliveries import attempt_log, settled
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply

EXAMPLE = {"invoice_id": "in_1042", "amount": 4200}
SCHEMA = {
    "type": "object",
    "required": ["invoice_id", "amount"],
    "properties": {"invoice_id": {"type": "string"}, "amount": {"type": "integer"}},
}


async def _catalogue(client: httpx.AsyncClient, tenant: dict[str, str], **entry: Any) -> None:
    answer = await client.post("/v1/event-types", json=entry, headers=tenant)
    assert answer.status_code == 201, answer.text


async def test_a_test_event_is_a_delivery_in_the_log_with_its_attempts_and_a_replay(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    await _catalogue(client, tenant, name="invoice.paid", schema=SCHEMA, example=EXAMPLE)
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    endpoint = await new_endpoint(
        client, tenant, url=receiver.url("/hook"), event_types=["x.y"], customer_id="acme"
    )
    receiver.script("/hook", Reply(500))
    sent = await client.post(
        f"/v1/endpoints/{endpoint['id']}/test-events",
        json={"event_type": "invoice.paid"},
        headers=tenant,
    )
    assert sent.status_code == 202, sent.text
    delivery = sent.json()
    assert sent.headers["Location"] == f"/v1/deliveries/{delivery['id']}"
    # Sent although the endpoint subscribes to other types: it was asked for by name.
    assert delivery["endpoint_id"] == endpoint["id"] and delivery["event_type"] == "invoice.paid"

    async with pump(settings, engine, retry_schedule=(0.05,)) as (running, _):
        running.start()
        done = await settled(client, tenant, delivery["id"])
        assert done["state"] == "succeeded"
        attempts = await attempt_log(client, tenant, delivery["id"])
        assert [a["status_code"] for a in attempts] == [500, 200]  # retried like any delivery

        # The customer replays it from its portal, as any delivery of its own.
        bearer = await portal_bearer(client, tenant, "acme", "replay")
        replayed = await client.post(
            f"/portal/api/deliveries/{delivery['id']}/replay", headers=bearer
        )
        assert replayed.status_code == 200, replayed.text
        await settled(client, tenant, delivery["id"])
        assert len(await attempt_log(client, tenant, delivery["id"])) == 3

    received = receiver.on("/hook")
    assert len(received) == 3
    assert {r.headers["webhook-id"] for r in received} == {delivery["id"]}
    for request in received:
        assert json.loads(request.body) == EXAMPLE
        assert request.headers["Herald-Event-Type"] == "invoice.paid"
        Webhook(endpoint["secret"]).verify(request.body, request.headers)


async def test_without_a_type_it_is_herald_test_and_says_it_is_a_test(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant)
    sent = await client.post(f"/v1/endpoints/{endpoint['id']}/test-events", headers=tenant)
    assert sent.status_code == 202, sent.text
    delivery_id = sent.json()["id"]
    event = await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
    assert event.json()["event_type"] == "herald.test"
    payload = await client.get(f"/v1/events/{event.json()['event_id']}", headers=tenant)
    assert payload.json()["payload"]["test"] is True


async def test_a_type_outside_the_catalogue_or_without_an_example_is_refused_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await _catalogue(client, tenant, name="order.shipped", schema=SCHEMA)
    endpoint = await new_endpoint(client, tenant)
    path = f"/v1/endpoints/{endpoint['id']}/test-events"

    unknown = await client.post(path, json={"event_type": "order.lost"}, headers=tenant)
    assert unknown.status_code == 422
    assert "order.lost is not in the catalogue" in unknown.json()["detail"]
    bare = await client.post(path, json={"event_type": "order.shipped"}, headers=tenant)
    assert bare.status_code == 422
    assert "no example payload" in bare.json()["detail"]
    wrong = await client.post(
        path, json={"event_type": "order.shipped", "payload": {"amount": 1}}, headers=tenant
    )
    assert wrong.status_code == 422
    assert "does not match the schema of event type order.shipped" in wrong.json()["detail"]
    given = await client.post(
        path, json={"event_type": "order.shipped", "payload": EXAMPLE}, headers=tenant
    )
    assert given.status_code == 202, given.text
    listed = await client.get(f"/v1/deliveries?endpoint_id={endpoint['id']}", headers=tenant)
    assert [d["id"] for d in listed.json()["items"]] == [given.json()["id"]]  # nothing half-made


async def test_an_example_must_match_its_types_schema_when_saved_and_when_changed(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    refused = await client.post(
        "/v1/event-types",
        json={"name": "a.b", "schema": SCHEMA, "example": {"invoice_id": 7}},
        headers=tenant,
    )
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("the example payload does not match")
    assert (await client.get("/v1/event-types/a.b", headers=tenant)).status_code == 404

    await _catalogue(client, tenant, name="a.b", schema=SCHEMA, example=EXAMPLE)
    stricter = {**SCHEMA, "required": [*SCHEMA["required"], "currency"]}
    changed = await client.patch("/v1/event-types/a.b", json={"schema": stricter}, headers=tenant)
    assert changed.status_code == 422, changed.text
    kept = (await client.get("/v1/event-types/a.b", headers=tenant)).json()
    assert kept["schema"] == SCHEMA and kept["example"] == EXAMPLE and kept["version"] == 1


async def test_a_customer_sends_test_events_to_its_own_endpoints_only(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    await client.put("/v1/customers/other", json={}, headers=tenant)
    theirs = await new_endpoint(client, tenant, customer_id="other")
    bearer = await portal_bearer(client, tenant, "acme", "manage_endpoints")
    answer = await client.post(
        f"/portal/api/endpoints/{theirs['id']}/test-events",
        data={"event_type": "herald.test"},
        headers=bearer,
    )
    assert answer.status_code == 404
    listed = await client.get(f"/v1/deliveries?endpoint_id={theirs['id']}", headers=tenant)
    assert listed.json()["items"] == []
