"""How much bulk redrive a tenant may ask for: the same request twice is one job, two jobs at a
time, a customer's portal replays a share of their own beside them; and a job revives a bounded
number and says there is more -- except a replay, which that bound would repeat forever."""

from __future__ import annotations

import httpx
import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.delivery.service import redrive
from tests.fixtures.api import new_endpoint, new_tenant, portal_bearer
from tests.fixtures.redrive import dead_deliveries, run_bulk_redrive
from tests.fixtures.waiting import count_rows


async def test_asked_again_a_bulk_redrive_is_the_same_job_and_a_tenant_runs_two_at_most(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    await dead_deliveries(client, tenant, engine, 2)
    first = await client.post("/v1/deliveries/redrive", json={}, headers=tenant)
    again = await client.post("/v1/deliveries/redrive", json={}, headers=tenant)
    assert first.status_code == again.status_code == 202
    assert again.json()["id"] == first.json()["id"]
    second = await client.post("/v1/deliveries/redrive", json={"event_type": "x"}, headers=tenant)
    assert second.status_code == 202 and second.json()["id"] != first.json()["id"]
    refused = await client.post("/v1/deliveries/redrive", json={"event_type": "y"}, headers=tenant)
    assert refused.status_code == 429 and refused.headers["Retry-After"]
    assert "2 bulk redrives of this tenant are queued or running" in refused.json()["detail"]
    assert await count_rows(engine, "redrive_jobs") == 2
    other = await new_tenant(client, "other")
    assert (await client.post("/v1/deliveries/redrive", json={}, headers=other)).status_code == 202


async def test_one_bulk_redrive_revives_a_bounded_number_and_says_there_is_more(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await dead_deliveries(client, tenant, engine, 10)
    monkeypatch.setattr(redrive, "REDRIVE_BATCH", 4)
    monkeypatch.setattr(redrive, "MAX_PER_JOB", 4)
    first = (await client.post("/v1/deliveries/redrive", json={}, headers=tenant)).json()
    await run_bulk_redrive(settings, engine, first["id"])
    done = (await client.get(f"/v1/deliveries/redrive/{first['id']}", headers=tenant)).json()
    assert done["redriven"] == 4 and done["more"] is True
    assert await count_rows(engine, "deliveries", "state = 'dead'") == 6


async def test_a_replay_is_not_cut_at_the_per_job_bound_it_would_repeat_forever(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    engine: AsyncEngine,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    await dead_deliveries(client, tenant, engine, 10)
    monkeypatch.setattr(redrive, "REDRIVE_BATCH", 4)
    monkeypatch.setattr(redrive, "MAX_PER_JOB", 4)
    body = {"states": ["dead", "succeeded"]}
    job = (await client.post("/v1/deliveries/redrive", json=body, headers=tenant)).json()
    await run_bulk_redrive(settings, engine, job["id"])
    done = (await client.get(f"/v1/deliveries/redrive/{job['id']}", headers=tenant)).json()
    assert done["redriven"] == 10 and done["more"] is False


async def test_portal_replays_have_a_share_of_their_own_beside_the_tenants_redrives(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine
) -> None:
    """A customer's replays never take the tenant's two bulk redrives, nor the tenant its
    customers': one each, two for all of them together."""
    for event_type in ("x", "y"):
        taken = await client.post(
            "/v1/deliveries/redrive", json={"event_type": event_type}, headers=tenant
        )
        assert taken.status_code == 202, taken.text

    async def replay(customer: str, since: str) -> httpx.Response:
        replayer = await portal_bearer(client, tenant, customer, "replay")
        endpoint = await new_endpoint(client, tenant, customer_id=customer)
        path = f"/portal/api/endpoints/{endpoint['id']}/replay"
        return await client.post(path, data={"since": since}, headers=replayer)

    first = await replay("cus-a", "2026-01-01T00:00")
    assert first.status_code == 200, first.text
    again = await replay("cus-a", "2026-02-01T00:00")
    assert again.status_code == 429
    assert "1 bulk redrives of this customer are queued or running" in again.json()["detail"]
    assert (await replay("cus-b", "2026-01-01T00:00")).status_code == 200
    third = await replay("cus-c", "2026-01-01T00:00")
    assert third.status_code == 429
    assert "of this tenant's customers together" in third.json()["detail"]
    still = await client.post("/v1/deliveries/redrive", json={"event_type": "z"}, headers=tenant)
    assert still.status_code == 429 and "of this tenant are" in still.json()["detail"]
    assert await count_rows(engine, "redrive_jobs") == 4
