"""Cancel against the real stack: a delivery pump in this process, a receiver on 127.0.0.1.

A cancelled delivery is never sent again -- not after a retry wait, not when reconcile arms
its destination -- and an attempt in flight at that moment is recorded without bringing it
back. Each test runs a delivery that was not cancelled beside it, so the receiver shows the
send that cancelling prevented."""

from __future__ import annotations

import asyncio
import functools
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import fast_path_settled, new_endpoint, post_deliveries, reconcile_now
from tests.fixtures.database import sql
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import transitions
from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import count_rows, delivery_row, eventually, wait_state

LONG_WAIT = 3600.0  # a retry wait no test sits out: the test makes the rows due itself


async def cancel(
    client: httpx.AsyncClient, tenant: dict[str, str], delivery_id: str
) -> httpx.Response:
    return await client.post(f"/v1/deliveries/{delivery_id}/cancel", headers=tenant)


def later() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)


def sent(receiver: Receiver, path: str, delivery_id: str) -> int:
    return sum(1 for r in receiver.on(path) if r.headers["webhook-id"] == delivery_id)


async def test_a_delivery_cancelled_in_its_retry_wait_is_never_sent_again(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    receiver.script("/wait", Reply(500), Reply(500))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/wait"))
    cancelled_id, kept_id = await post_deliveries(client, tenant, endpoint["id"], 2)
    async with pump(settings, engine, retry_schedule=(LONG_WAIT,)) as (running, _):
        running.start()
        for delivery_id in (cancelled_id, kept_id):
            await eventually(
                functools.partial(delivery_row, engine, delivery_id),
                lambda row: row["state"] == "enqueued" and row["attempt_count"] == 1,
            )
        response = await cancel(client, tenant, cancelled_id)
        assert response.status_code == 200, response.text
        assert response.json()["state"] == "cancelled"

        # Both due now, and reconcile arms their destination: only the one kept is sent.
        due_now = "UPDATE deliveries SET next_attempt_at = now() WHERE endpoint_id = :e"
        await sql(engine, due_now, e=endpoint["id"])
        await reconcile_now(client, settings, engine)
        await wait_state(engine, kept_id, "succeeded")

    assert sent(receiver, "/wait", kept_id) == 2
    assert sent(receiver, "/wait", cancelled_id) == 1
    row = await delivery_row(engine, cancelled_id)
    assert (row["state"], row["attempt_count"]) == ("cancelled", 1)
    # Leased once, back to wait for its retry, cancelled there -- and nothing after.
    steps = await transitions(engine, cancelled_id)
    assert [new for _, new in steps].count("leased") == 1
    assert steps[-2:] == [("leased", "enqueued"), ("enqueued", "cancelled")]


@pytest.mark.parametrize("answer", [500, 200], ids=["failing", "succeeding"])
async def test_an_attempt_in_flight_is_recorded_and_nothing_follows_it(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
    answer: int,
) -> None:
    held = asyncio.Event()
    receiver.script("/flight", Reply(answer, hold=held))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/flight"))
    [cancelled_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine, retry_schedule=(LONG_WAIT,)) as (running, _):
        running.start()
        await receiver.wait_for("/flight", 1)  # the attempt is out, its answer held
        response = await cancel(client, tenant, cancelled_id)
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["state"] == "cancelled"
        assert body["lease_until"] is not None  # the attempt in flight keeps its lease
        held.set()
        await eventually(
            lambda: count_rows(engine, "attempts", "delivery_id = :d", d=cancelled_id),
            lambda n: n == 1,
        )

        # A delivery accepted after it, to the same destination, is served; the cancelled
        # one is not tried again, even due and armed.
        await sql(
            engine, "UPDATE deliveries SET next_attempt_at = now() WHERE id = :d", d=cancelled_id
        )
        [kept_id] = await post_deliveries(client, tenant, endpoint["id"], 1)
        await wait_state(engine, kept_id, "succeeded")

    assert sent(receiver, "/flight", cancelled_id) == 1
    row = await delivery_row(engine, cancelled_id)
    assert row["state"] == "cancelled"
    assert row["last_status_code"] == answer  # the attempt's answer is on record
    assert row["lease_token"] is None
    steps = await transitions(engine, cancelled_id)
    assert [new for _, new in steps].count("leased") == 1
    assert steps[-1] == ("leased", "cancelled")  # the record of its attempt changed no state
    [attempt] = (
        await client.get(f"/v1/deliveries/{cancelled_id}/attempts", headers=tenant)
    ).json()["items"]
    assert attempt["status_code"] == answer


async def test_what_cancel_answers(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/answers"))
    done_id, waiting_id = await post_deliveries(client, tenant, endpoint["id"], 2)
    await fast_path_settled(engine)
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, done_id, "succeeded")
        await wait_state(engine, waiting_id, "succeeded")
    [later_id] = await post_deliveries(client, tenant, endpoint["id"], 1, deliver_after=later())
    await fast_path_settled(engine)  # published before it is cancelled: the timeline's order

    first = await cancel(client, tenant, later_id)
    again = await cancel(client, tenant, later_id)
    assert (first.status_code, again.status_code) == (200, 200)  # a retried cancel is harmless
    assert first.json() == again.json()

    conflict = await cancel(client, tenant, done_id)
    assert conflict.status_code == 409
    assert conflict.headers["content-type"] == "application/problem+json"
    assert "already succeeded" in conflict.json()["detail"]

    other = await client.post("/v1/tenants", json={"name": "other"}, headers=ADMIN)
    other_key = {"Authorization": f"Bearer {other.json()['api_key']}"}
    assert (await cancel(client, other_key, later_id)).status_code == 404
    assert (await cancel(client, tenant, "dlv_01JDQ8Z6V4Q0K9X7M3T5R2N8C1")).status_code == 404

    redrive = await client.post(f"/v1/deliveries/{later_id}/redrive", headers=tenant)
    assert redrive.status_code == 409
    assert "cancelled delivery is final" in redrive.json()["detail"]

    detail = (await client.get(f"/v1/deliveries/{later_id}", headers=tenant)).json()
    assert detail["waiting_reason"] == "cancelled"
    assert [e["event"] for e in detail["timeline"]][-1] == "cancelled"
    listed = await client.get("/v1/deliveries?state=cancelled", headers=tenant)
    assert [d["id"] for d in listed.json()["items"]] == [later_id]
