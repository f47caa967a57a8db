"""Redrive through a real `herald worker` process: a dead delivery sent again under its id,
a live one refused, a bulk redrive sending again only what its filter matches, and the
timeline telling the whole story."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.fixtures.api import new_endpoint
from tests.fixtures.deliveries import attempt_log, deliver, settled
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import eventually


@pytest.mark.usefixtures("worker")
async def test_redrive_of_a_dead_delivery_succeeds_under_the_same_id(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/later", Reply(400))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/later"))
    delivery_id = await deliver(client, tenant, endpoint["id"])
    assert (await settled(client, tenant, delivery_id))["state"] == "dead"

    redriven = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert redriven.status_code == 202 and redriven.json()["state"] == "pending"
    again = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert again.status_code in (202, 409)  # 409 once it is no longer dead

    final = await settled(client, tenant, delivery_id)
    requests = await receiver.wait_for("/later", 2)
    assert final["state"] == "succeeded" and final["id"] == delivery_id
    assert {r.headers["Idempotency-Key"] for r in requests} == {delivery_id}
    log = await attempt_log(client, tenant, delivery_id)
    assert [a["outcome"] for a in log] == ["permanent", "success"]


async def test_redrive_of_a_live_delivery_is_409(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any]
) -> None:
    delivery_id = await deliver(client, tenant, endpoint["id"])
    response = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert response.status_code == 409
    assert response.headers["content-type"] == "application/problem+json"


@pytest.mark.usefixtures("worker")
async def test_bulk_redrive_sends_again_only_what_the_filter_matches(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver, engine: AsyncEngine
) -> None:
    receiver.script("/bulk-a", *[Reply(400)] * 6)
    receiver.script("/bulk-b", *[Reply(400)] * 2)
    first = await new_endpoint(client, tenant, url=receiver.url("/bulk-a"))
    second = await new_endpoint(client, tenant, url=receiver.url("/bulk-b"))
    mine = [await deliver(client, tenant, first["id"], {"n": n}) for n in range(6)]
    others = [await deliver(client, tenant, second["id"], {"n": n}) for n in range(2)]
    for delivery_id in mine + others:
        assert (await settled(client, tenant, delivery_id))["state"] == "dead"

    started = await client.post(
        "/v1/deliveries/redrive", json={"endpoint_id": first["id"]}, headers=tenant
    )
    assert started.status_code == 202 and started.json()["status"] == "queued"
    location = started.headers["location"]

    async def progress() -> dict[str, Any]:
        body: dict[str, Any] = (await client.get(location, headers=tenant)).json()
        assert body["status"] in ("queued", "running", "succeeded"), body
        return body

    job = await eventually(progress, lambda body: body["status"] == "succeeded", timeout=20)
    assert job["redriven"] == 6
    for delivery_id in mine:
        assert (await settled(client, tenant, delivery_id))["state"] == "succeeded"
    for delivery_id in others:
        got = (await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)).json()
        assert got["state"] == "dead"
    assert len(receiver.on("/bulk-b")) == 2


@pytest.mark.usefixtures("worker")
async def test_timeline_after_a_redrive_tells_the_whole_story(
    client: httpx.AsyncClient, tenant: dict[str, str], receiver: Receiver
) -> None:
    receiver.script("/story", *[Reply(500)] * 5)  # MAX_ATTEMPTS: 4 + 1, all refused
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/story"))
    delivery_id = await deliver(client, tenant, endpoint["id"])
    assert (await settled(client, tenant, delivery_id))["state"] == "dead"
    redriven = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert redriven.status_code == 202

    timeline = (await settled(client, tenant, delivery_id))["timeline"]
    # Durations are the clock's business; everything else is the story.
    steps = [(s["event"], re.sub(r", \d+ ms\)$", ")", s["detail"] or "")) for s in timeline]
    assert steps == [
        ("accepted", ""),
        *[("attempt", f"#{n}: retryable (500)") for n in range(1, 6)],
        ("dead", "max_attempts_exhausted (5)"),
        ("redriven", "on request"),
        ("attempt", "#6: success (200)"),
        ("succeeded", ""),
    ]
    times = [step["at"] for step in timeline]
    assert times == sorted(times)
