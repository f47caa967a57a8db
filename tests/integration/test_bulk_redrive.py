"""Bulk redrive works in bounded batches and resumes where it stopped."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from app.core import queue
from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.delivery.service import redrive
from tests.fixtures.api import (
    fast_path_settled,
    new_endpoint,
    new_tenant,
    post_deliveries,
)
from tests.fixtures.database import postgres_refuses, sql
from tests.fixtures.engine import pump
from tests.fixtures.receiver import Receiver
from tests.fixtures.redrive import dead_deliveries, run_bulk_redrive
from tests.fixtures.stack import client_for
from tests.fixtures.waiting import count_rows, wait_state


async def test_bulk_redrive_in_batches(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    engine: AsyncEngine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = await new_endpoint(client, tenant)
    disabled = await new_endpoint(client, tenant)
    for target, count in ((endpoint, 13), (disabled, 2)):
        for n in range(count):
            await client.post(
                "/v1/deliveries",
                json={"endpoint_id": target["id"], "event_type": "x", "payload": {"n": n}},
                headers=tenant,
            )
    await fast_path_settled(engine)
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'dead', completed_at = now(), attempt_count = 3,"
                " dead_reason = 'max_attempts_exhausted (3)'"
            )
        )
    await client.patch(f"/v1/endpoints/{disabled['id']}", json={"enabled": False}, headers=tenant)
    started = await client.post("/v1/deliveries/redrive", json={}, headers=tenant)
    job_id = started.json()["id"]

    monkeypatch.setattr(redrive, "REDRIVE_BATCH", 4)
    await run_bulk_redrive(settings, engine, job_id)

    job: dict[str, Any] = (
        await client.get(f"/v1/deliveries/redrive/{job_id}", headers=tenant)
    ).json()
    assert job["status"] == "succeeded" and job["redriven"] == 13
    # Redriven: due now under the same ids, a fresh budget, published; the disabled endpoint's
    # deliveries were passed over.
    assert await count_rows(engine, "deliveries", "state = 'dead'") == 2
    assert await count_rows(engine, "deliveries", "attempt_floor = 3") == 13
    assert await count_rows(engine, "outbox_wakeups") == 0
    # Each one's timeline keeps the dead step the redrive cleared from its row, and the redrive.
    redriven = "event = 'redriven' AND detail = :d"
    assert await count_rows(engine, "custody_records", redriven, d=f"bulk redrive {job_id}") == 13
    assert await count_rows(engine, "custody_records", "event = 'dead'") == 13


async def test_bulk_redrive_of_another_tenant_is_404(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:

    started = await client.post("/v1/deliveries/redrive", json={}, headers=tenant)
    other = await new_tenant(client, "nosy")
    response = await client.get(f"/v1/deliveries/redrive/{started.json()['id']}", headers=other)
    assert response.status_code == 404


async def test_a_failed_job_stores_a_generic_error_and_logs_the_detail(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    await post_deliveries(client, tenant, endpoint["id"], 2)
    await fast_path_settled(engine)
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'dead', completed_at = now(),"
                " dead_reason = 'permanent_failure: HTTP 400'"
            )
        )
    job_id = (await client.post("/v1/deliveries/redrive", json={}, headers=tenant)).json()["id"]

    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)
    try:
        # PostgreSQL refuses the redrive's UPDATE: the job meets a real database error.
        async with postgres_refuses(engine, "deliveries", "UPDATE") as refusal:
            with capture_logs() as logs:
                await redrive.run_bulk_redrive(settings, create_sessionmaker(engine), redis, job_id)
    finally:
        await redis.aclose()

    job = (await client.get(f"/v1/deliveries/redrive/{job_id}", headers=tenant)).json()
    assert job["status"] == "failed" and job["redriven"] == 0
    # The tenant reads a short note, no SQL and no exception text...
    assert job["error"] == f"internal error; see the worker logs (redrive.failed, job_id {job_id})"
    # ...and the worker's log has the detail, under the job's id.
    [failure] = [entry for entry in logs if entry["event"] == "redrive.failed"]
    assert failure["job_id"] == job_id and failure["log_level"] == "error"
    assert refusal in str(failure["exc_info"])
    assert await count_rows(engine, "deliveries", "state = 'dead'") == 2


async def test_a_job_stored_under_older_rules_stays_readable_and_fails_in_words(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    job_id = (await client.post("/v1/deliveries/redrive", json={}, headers=tenant)).json()["id"]
    # Before the id rule, a filter like this one was accepted and stored.
    async with engine.begin() as connection:
        await connection.execute(
            text("""UPDATE redrive_jobs SET filter = '{"endpoint_id": "ep_nope"}'""")
        )
    stored = await client.get(f"/v1/deliveries/redrive/{job_id}", headers=tenant)
    assert stored.status_code == 200 and stored.json()["filter"]["endpoint_id"] == "ep_nope"

    await run_bulk_redrive(settings, engine, job_id)
    job = (await client.get(f"/v1/deliveries/redrive/{job_id}", headers=tenant)).json()
    assert job["status"] == "failed"
    assert job["error"] == f"internal error; see the worker logs (redrive.failed, job_id {job_id})"


async def test_a_bulk_redrive_with_redis_down_is_503_and_recorded_failed(
    settings: Settings, tenant: dict[str, str], engine: AsyncEngine, tmp_path: Any
) -> None:
    from app.main import create_app

    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/no.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        response = await client.post("/v1/deliveries/redrive", json={}, headers=tenant)
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "10"
    assert "recorded as failed" in response.json()["detail"]
    # Recorded before it was queued, then marked failed: never "queued" when it was not.
    failed = "status = 'failed' AND error LIKE 'queue unavailable:%'"
    assert await count_rows(engine, "redrive_jobs", failed) == 1
    assert await count_rows(engine, "redrive_jobs") == 1


async def test_a_replay_sends_succeeded_deliveries_again_under_their_ids(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/replay"))
    ids = await post_deliveries(client, tenant, endpoint["id"], 3)
    async with pump(settings, engine) as (running, _):
        running.start()
        for delivery_id in ids:
            await wait_state(engine, delivery_id, "succeeded")
        dead_id = ids[2]
        await sql(
            engine,
            "UPDATE deliveries SET state = 'dead', dead_reason = 'permanent_failure: HTTP 400'"
            " WHERE id = :d",
            d=dead_id,
        )

        # The default selects dead deliveries only: the succeeded ones stay as they are.
        dead_only = await client.post("/v1/deliveries/redrive", json={}, headers=tenant)
        await run_bulk_redrive(settings, engine, dead_only.json()["id"])
        await wait_state(engine, dead_id, "succeeded")
        assert await count_rows(engine, "custody_records", "event = 'succeeded'") == 0

        replay = await client.post(
            "/v1/deliveries/redrive",
            json={"states": ["succeeded"], "endpoint_id": endpoint["id"]},
            headers=tenant,
        )
        assert replay.status_code == 202, replay.text
        assert replay.json()["filter"]["states"] == ["succeeded"]
        await run_bulk_redrive(settings, engine, replay.json()["id"])
        await receiver.wait_for("/replay", 7)  # 3 first sends, 1 redrive, 3 replays
        for delivery_id in ids:
            await wait_state(engine, delivery_id, "succeeded")

    sent = [r.headers["webhook-id"] for r in receiver.on("/replay")]
    assert sorted(sent) == sorted([*ids, dead_id, *ids])  # the same ids, each sent again
    timeline = (await client.get(f"/v1/deliveries/{ids[0]}", headers=tenant)).json()["timeline"]
    told = [e["event"] for e in timeline if e["event"] != "published"]
    assert told == ["accepted", "attempt", "succeeded", "redriven", "attempt", "succeeded"]


async def test_a_replay_names_only_finished_states_it_can_revive(
    client: httpx.AsyncClient, tenant: dict[str, str]
) -> None:
    for states in (["cancelled"], ["pending"], [], ["dead", "succeeded", "dead"]):
        response = await client.post(
            "/v1/deliveries/redrive", json={"states": states}, headers=tenant
        )
        assert response.status_code == 422, (states, response.text)
        assert response.headers["content-type"] == "application/problem+json"


async def test_a_delivery_dead_again_after_a_bulk_redrive_was_asked_is_not_revived_by_it(
    client: httpx.AsyncClient, tenant: dict[str, str], engine: AsyncEngine, settings: Settings
) -> None:
    await dead_deliveries(client, tenant, engine, 1)
    async with engine.connect() as connection:
        delivery_id = (await connection.execute(text("SELECT id FROM deliveries"))).scalar_one()
    job = (await client.post("/v1/deliveries/redrive", json={}, headers=tenant)).json()
    # Meanwhile: revived by another call, and dead again -- after this job was asked for.
    revived = await client.post(f"/v1/deliveries/{delivery_id}/redrive", headers=tenant)
    assert revived.status_code == 202, revived.text
    async with engine.begin() as connection:
        await connection.execute(
            text(
                "UPDATE deliveries SET state = 'dead', completed_at = clock_timestamp(),"
                " dead_reason = 'max_attempts_exhausted (1)'"
            )
        )
    await run_bulk_redrive(settings, engine, job["id"])
    done = (await client.get(f"/v1/deliveries/redrive/{job['id']}", headers=tenant)).json()
    assert done["status"] == "succeeded" and done["redriven"] == 0
    assert await count_rows(engine, "deliveries", "state = 'dead'") == 1
