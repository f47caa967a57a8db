"""A producer's W3C trace reaches the receiver: the ``traceparent`` a producer sends with an
accept -- on every accept route -- is kept with the event and carried on the webhook request,
so the receiver's work joins the producer's trace."""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.waiting import wait_state

ROUTES = ["POST /v1/deliveries", "POST /v1/deliveries (keyed)", "POST /v1/events", "batch"]


async def accept(
    client: httpx.AsyncClient, route: str, headers: dict[str, str], endpoint_id: str
) -> str:
    """The delivery id the accept made."""
    intent: dict[str, Any] = {"endpoint_id": endpoint_id, "event_type": "a.b", "payload": {}}
    if route == "POST /v1/events":
        body = {"event_type": "a.b", "payload": {}}
        response = await client.post("/v1/events", json=body, headers=headers)
        delivery_id: str = response.json()["deliveries"][0]["id"]
        return delivery_id
    if route == "batch":
        response = await client.post(
            "/v1/deliveries/batch", json={"items": [intent]}, headers=headers
        )
        delivery_id = response.json()["items"][0]["delivery"]["id"]
        return delivery_id
    if "keyed" in route:
        headers = {**headers, "Idempotency-Key": secrets.token_hex(8)}
    response = await client.post("/v1/deliveries", json=intent, headers=headers)
    assert response.status_code == 202, response.text
    delivery_id = response.json()["id"]
    return delivery_id


@pytest.mark.parametrize("route", ROUTES)
async def test_the_producers_trace_id_reaches_the_receiver(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
    route: str,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/traced"))
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    traced = {**tenant, "traceparent": f"00-{trace_id}-{span_id}-01"}
    with_trace = await accept(client, route, traced, endpoint["id"])
    without = await accept(client, route, tenant, endpoint["id"])
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, with_trace, "succeeded")
        await wait_state(engine, without, "succeeded")

    by_delivery = {r.headers["webhook-id"]: r.headers for r in receiver.on("/traced")}
    version, sent_trace_id, parent_id, flags = by_delivery[with_trace]["traceparent"].split("-")
    assert (version, sent_trace_id, flags) == ("00", trace_id, "01")
    assert len(parent_id) == 16
    assert "traceparent" not in by_delivery[without]  # no trace in, none made up


async def test_a_malformed_traceparent_is_ignored_not_refused(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    headers = {**tenant, "traceparent": "00-not-a-trace-01"}
    intent = {"endpoint_id": endpoint["id"], "event_type": "a", "payload": {}}
    response = await client.post("/v1/deliveries", json=intent, headers=headers)
    assert response.status_code == 202, response.text
