"""Which answers end a delivery: by default a receiver's 401, 403 and 404 are retried (what it
answers while deployed or while its credentials change) and the other 4xx end it; an endpoint
may name more statuses that end it at once."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.waiting import attempts_of, delivery_row, eventually


async def answered(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
    status: int,
    **fields: Any,
) -> dict[str, Any]:
    """One delivery to an endpoint whose receiver answers ``status``, after its first attempt."""
    path = f"/answers-{status}-{len(fields)}"
    receiver.script(path, Reply(status))
    endpoint = await new_endpoint(client, tenant, url=receiver.url(path), **fields)
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        # Recorded: dead, or waiting for its retry.
        row = await eventually(
            lambda: delivery_row(engine, delivery), lambda r: r["state"] in ("dead", "enqueued")
        )
    [attempt] = await attempts_of(engine, delivery)
    return {"state": row["state"], "outcome": attempt["outcome"], "reason": row["dead_reason"]}


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_a_deploy_s_answers_are_retried_by_default_and_final_when_listed(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
    status: int,
) -> None:
    assert await answered(client, tenant, receiver, settings, engine, status) == {
        "state": "enqueued",
        "outcome": "retryable",
        "reason": None,
    }
    final = await answered(
        client, tenant, receiver, settings, engine, status, final_statuses=[status]
    )
    assert final == {
        "state": "dead",
        "outcome": "permanent",
        "reason": f"permanent_failure: HTTP {status}",
    }


async def test_a_listed_5xx_is_final_too(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    final = await answered(client, tenant, receiver, settings, engine, 501, final_statuses=[501])
    assert final["state"] == "dead" and final["outcome"] == "permanent"


async def test_the_list_is_checked_kept_in_order_and_cleared_by_null(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for refused in ([429], [503], [408], [410], [200], [600], ["x"]):
        answer = await client.post(
            "/v1/endpoints",
            json={"url": "http://127.0.0.1:9/hook", "final_statuses": refused},
            headers=tenant,
        )
        assert answer.status_code == 422, (refused, answer.text)
    endpoint = await new_endpoint(client, tenant, final_statuses=[422, 400, 422])
    assert endpoint["final_statuses"] == [400, 422]
    path = f"/v1/endpoints/{endpoint['id']}"
    changed = await client.patch(path, json={"final_statuses": [404]}, headers=tenant)
    assert changed.json()["final_statuses"] == [404]
    kept = await client.patch(path, json={"description": "x"}, headers=tenant)
    assert kept.json()["final_statuses"] == [404]
    cleared = await client.patch(path, json={"final_statuses": None}, headers=tenant)
    assert cleared.json()["final_statuses"] == []
