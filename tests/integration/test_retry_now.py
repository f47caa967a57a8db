"""Retry now against the real stack: a delivery pump in this process, a receiver on 127.0.0.1.
A delivery that failed and waits an hour for its retry is sent again at once when asked --
through the API or the console -- and what cannot be retried now is refused in words."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, new_tenant, portal_bearer, post_deliveries
from tests.fixtures.console_forms import sign_in
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import delivery_row, eventually, wait_state

LONG_WAIT = 3600.0  # the retry no test sits out: retry now is what ends the wait


def sent(receiver: Receiver, path: str, delivery_id: str) -> int:
    return sum(1 for r in receiver.on(path) if r.headers["webhook-id"] == delivery_id)


async def _waiting(engine: AsyncEngine, delivery_id: str) -> None:
    await eventually(
        functools.partial(delivery_row, engine, delivery_id),
        lambda row: row["state"] == "enqueued" and row["attempt_count"] == 1,
    )


async def test_a_delivery_waiting_for_its_retry_is_sent_at_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    receiver.script("/wait", Reply(500), Reply(500))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/wait"))
    retried_id, left_id = await post_deliveries(client, tenant, endpoint["id"], 2)
    async with pump(settings, engine, retry_schedule=(LONG_WAIT,)) as (running, _):
        running.start()
        for delivery_id in (retried_id, left_id):
            await _waiting(engine, delivery_id)
        answer = await client.post(f"/v1/deliveries/{retried_id}/retry", headers=tenant)
        assert answer.status_code == 200, answer.text
        assert answer.json()["state"] == "enqueued"
        await wait_state(engine, retried_id, "succeeded")
        # Asked again once it has succeeded: nothing to retry, said in words.
        again = await client.post(f"/v1/deliveries/{retried_id}/retry", headers=tenant)
        assert again.status_code == 409
        assert "only a delivery waiting for a retry" in again.json()["detail"]

    assert sent(receiver, "/wait", retried_id) == 2
    # The one not asked for still waits out its hour: it was tried once.
    assert sent(receiver, "/wait", left_id) == 1
    left = await delivery_row(engine, left_id)
    assert left["state"] == "enqueued"
    assert left["next_attempt_at"] > datetime.now(UTC) + timedelta(minutes=30)


async def test_the_console_retries_now(
    client: httpx.AsyncClient,
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    tenant = await new_tenant(client, "console-retry")
    receiver.script("/console", Reply(503))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/console"))
    [delivery_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, retry_schedule=(LONG_WAIT,)) as (running, _):
        running.start()
        await _waiting(engine, delivery_id)
        csrf = await sign_in(client, tenant["Authorization"].removeprefix("Bearer "))
        page = await client.get(f"/console/deliveries/{delivery_id}")
        assert 'id="retry-now"' in page.text
        answer = await client.post(
            f"/console/deliveries/{delivery_id}/retry", data={"csrf_token": csrf}
        )
        assert answer.status_code == 303
        await wait_state(engine, delivery_id, "succeeded")
    assert sent(receiver, "/console", delivery_id) == 2
    finished = await client.get(f"/console/deliveries/{delivery_id}")
    assert 'id="retry-now"' not in finished.text


async def test_what_cannot_be_retried_now_is_refused_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    endpoint = await new_endpoint(client, tenant)
    later = (datetime.now(UTC) + timedelta(hours=2)).isoformat()
    held = await client.post(
        "/v1/deliveries",
        json={
            "endpoint_id": endpoint["id"],
            "event_type": "order.paid",
            "payload": {},
            "deliver_after": later,
        },
        headers=tenant,
    )
    held_id = held.json()["id"]
    refused = await client.post(f"/v1/deliveries/{held_id}/retry", headers=tenant)
    assert refused.status_code == 409
    assert "has not been attempted yet" in refused.json()["detail"]

    other = await new_tenant(client, "someone-else")
    assert (await client.post(f"/v1/deliveries/{held_id}/retry", headers=other)).status_code == 404

    # A customer's portal session needs the replay capability.
    await client.put("/v1/customers/acme", json={}, headers=tenant)
    theirs = await new_endpoint(client, tenant, customer_id="acme")
    [their_id] = await post_deliveries(client, tenant, theirs["id"], 1)
    reader = await portal_bearer(client, tenant, "acme")
    assert (
        await client.post(f"/v1/deliveries/{their_id}/retry", headers=reader)
    ).status_code == 403
