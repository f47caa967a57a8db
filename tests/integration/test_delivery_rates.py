"""A tenant's delivery rate, set by the operator and counted across workers in Redis: past it,
its deliveries wait by policy and say so, while another tenant's go out as before; a pump that
asks for more starts than are due costs the tenant nothing."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from tests.fixtures.api import new_endpoint, new_tenant, post_deliveries
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.stack import ADMIN
from tests.fixtures.waiting import eventually, wait_state

# One start every 100 s: within the gate's one-second horizon, one start and no more.
SLOW = 0.01


async def _rate(client: httpx.AsyncClient, tenant: dict[str, str], rate: float) -> None:
    tenant_id = (await client.get("/v1/limits", headers=tenant)).json()["tenant_id"]
    answer = await client.patch(
        f"/v1/tenants/{tenant_id}/limits", json={"delivery_rate": rate}, headers=ADMIN
    )
    assert answer.status_code == 200 and answer.json()["delivery_rate"] == rate, answer.text


async def _status(client: httpx.AsyncClient, tenant: dict[str, str], delivery_id: str) -> Any:
    return (await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)).json()


async def test_past_its_delivery_rate_a_tenant_waits_by_policy_and_another_does_not(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    noisy = await new_endpoint(client, tenant, url=receiver.url("/noisy"))
    await _rate(client, tenant, SLOW)
    quiet_tenant = await new_tenant(client, "quiet")
    quiet = await new_endpoint(client, quiet_tenant, url=receiver.url("/quiet"))
    held = await post_deliveries(client, tenant, noisy["id"], 5)
    served = await post_deliveries(client, quiet_tenant, quiet["id"], 5)

    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in served:
            await wait_state(engine, delivery_id, "succeeded")
        await receiver.wait_for("/noisy", 1)
        # The quiet tenant's five are out; the noisy tenant's rate let one of its five start.
        assert len(receiver.on("/quiet")) == 5
        assert len(receiver.on("/noisy")) == 1
        waiting = [d for d in held if (await _status(client, tenant, d))["state"] != "succeeded"]
        assert len(waiting) == 4
        said = await eventually(
            lambda: _status(client, tenant, waiting[0]),
            lambda body: "its tenant at its delivery rate" in str(body),
        )
        assert said["waiting_reason"] == "throttled", said
    assert len(receiver.on("/noisy")) == 1
