"""The reconciler arms every destination with fallen-through work, in pages, and overlaps
safely: nothing is republished and nothing grows."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from app.core import queue
from app.core.config import Settings
from tests.fixtures.api import (
    fast_path_settled,
    new_endpoint,
    post_deliveries,
    reconcile_now,
    wakeups_written,
)
from tests.fixtures.database import postgres_refuses, sql
from tests.fixtures.engine import armed_destinations, pump
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import states
from tests.fixtures.stack import ADMIN, client_for
from tests.fixtures.waiting import count_rows, wait_state

PROBLEM = "application/problem+json"


async def queued_deliveries(settings: Settings) -> list[str]:
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        jobs = await redis.zrange(queue.queue_name(settings.region), 0, -1)
    finally:
        await redis.aclose()
    # Delivery jobs only (the run's own reconcile job waits in the same queue): none may exist.
    return sorted(j.decode().split(":")[0] for j in jobs if j.startswith(b"dlv_"))


async def flush_queue(settings: Settings) -> None:
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        await redis.flushall()
    finally:
        await redis.aclose()


async def lose_every_wakeup(settings: Settings, engine: AsyncEngine) -> None:
    """Every accepted delivery was published, then Redis lost the wake-ups, ten minutes ago."""
    await fast_path_settled(engine)
    await flush_queue(settings)
    await sql(
        engine,
        "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes'",
    )


async def test_reconcile_is_admin_only_and_answers_at_once(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings
) -> None:
    assert (await client.post("/v1/reconcile")).status_code == 401
    assert (await client.post("/v1/reconcile", headers=tenant)).status_code == 403
    assert (await client.get("/v1/reconcile/runs", headers=tenant)).status_code == 403

    started = await client.post("/v1/reconcile", headers=ADMIN)
    assert started.status_code == 202
    body = started.json()
    assert body["status"] == "queued" and body["run_id"].startswith("run_")
    assert started.headers["location"] == f"/v1/reconcile/runs/{body['run_id']}"
    run = (await client.get(started.headers["location"], headers=ADMIN)).json()
    assert run["trigger"] == "api" and run["status"] == "queued" and run["finished_at"] is None
    assert f"reconcile:{body['run_id']}".encode() in await _job_ids(settings)

    missing = await client.get("/v1/reconcile/runs/run_nope", headers=ADMIN)
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM


async def _job_ids(settings: Settings) -> list[bytes]:
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        jobs: list[bytes] = await redis.zrange(queue.queue_name(settings.region), 0, -1)
        return jobs
    finally:
        await redis.aclose()


async def test_runs_are_listed_newest_first(client: httpx.AsyncClient) -> None:
    ids = [
        (await client.post("/v1/reconcile", json={"trigger": f"t{n}"}, headers=ADMIN)).json()[
            "run_id"
        ]
        for n in range(3)
    ]
    page = (await client.get("/v1/reconcile/runs", params={"limit": 2}, headers=ADMIN)).json()
    assert [r["run_id"] for r in page["items"]] == [ids[2], ids[1]]
    rest = await client.get(
        "/v1/reconcile/runs", params={"cursor": page["next_cursor"]}, headers=ADMIN
    )
    assert [r["run_id"] for r in rest.json()["items"]] == [ids[0]]


async def test_every_destination_with_live_work_is_armed_and_nothing_republished(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    # One destination each, so that what the run did shows per destination too.
    endpoints = [(await new_endpoint(client, tenant))["id"] for _ in range(5)]
    leased, stale, due, unpublished, healthy = [
        (await post_deliveries(client, tenant, endpoint_id, 1))[0] for endpoint_id in endpoints
    ]
    await fast_path_settled(engine)
    await flush_queue(settings)  # Redis lost every wake-up
    await sql(
        engine,
        "UPDATE deliveries SET state = 'leased', lease_token = gen_random_uuid(),"
        " lease_until = now() - interval '1 second', attempt_count = 1 WHERE id = :d",
        d=leased,
    )
    await sql(
        engine,
        "UPDATE deliveries SET next_attempt_at = now() - interval '10 minutes' WHERE id = :d",
        d=stale,
    )
    await sql(
        engine,
        "UPDATE deliveries SET state = 'pending', next_attempt_at = now() - interval '1 minute'"
        " WHERE id = :d",
        d=due,
    )
    # The API died after its commit, before its fast path: the wake-up is still in the outbox.
    await sql(
        engine,
        "INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at, created_at)"
        " SELECT region, tenant_id, endpoint_id, next_attempt_at, now() - interval '1 minute'"
        " FROM deliveries WHERE id = :d",
        d=unpublished,
    )
    ids = [leased, stale, due, unpublished, healthy]
    versions = await row_versions(engine, ids)
    wakeups = await wakeups_written(engine)

    run = await reconcile_now(client, settings, engine)

    assert run["status"] == "succeeded" and run["finished_at"] is not None
    purged = {
        "dropped_days": 0,
        "dropped_payload_classes": 0,
        "purged_deliveries": 0,
        "purged_events": 0,
        "purged_keys": 0,
        "purged_runs": 0,
        "purged_portal_sessions": 0,
        "purged_audit_records": 0,
        "purged_transformations": 0,
    }
    assert await count_rows(engine, "outbox_wakeups") == 0
    # Nothing is republished: every destination with live work -- the healthy one's too, whose
    # wake-up Redis lost as well -- is armed again for when its first delivery can be claimed
    # (an expired lease: now; the next claim takes it over).
    assert run["counts"] == {
        "streams_checked": 0,
        "streams_mended": 0,
        "destinations_checked": 5,
        "destinations_armed": 5,
        "unpublished_outbox": 1,
        "partitions_made": 0,  # the API made the days ahead at its first accept
        "partitions_remade": 0,
        **purged,
    }
    armed = await armed_destinations(settings)
    assert set(armed) == set(endpoints) and max(armed.values()) <= 0, armed
    assert await queued_deliveries(settings) == []
    # No outbox wake-up and no delivery row written: the publish mark deletes the wake-up.
    assert await wakeups_written(engine) == wakeups
    assert await row_versions(engine, ids) == versions
    assert (await states(engine, [leased]))[leased] == "leased"


async def row_versions(engine: AsyncEngine, ids: list[str]) -> dict[str, str]:
    """Each delivery row's version (xmin): it changes with any write to the row."""
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT id, xmin::text AS version FROM deliveries WHERE id = ANY(:ids)"),
            {"ids": ids},
        )
        return {row.id: row.version for row in rows}


async def deliveries_to_many_destinations(
    client: httpx.AsyncClient, tenant: dict[str, str], destinations: int, each: int
) -> tuple[list[str], list[str]]:
    """``each`` deliveries to each of ``destinations`` new endpoints: (delivery ids, endpoint
    ids)."""
    endpoints = [(await new_endpoint(client, tenant))["id"] for _ in range(destinations)]
    ids = [
        d
        for endpoint_id in endpoints
        for d in await post_deliveries(client, tenant, endpoint_id, each)
    ]
    return ids, endpoints


async def test_pages_cover_the_backlog_and_the_run_cap_stops_it(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    _, endpoints = await deliveries_to_many_destinations(client, tenant, 23, 1)
    await lose_every_wakeup(settings, engine)

    capped = await reconcile_now(
        client, settings, engine, reconcile_page_size=4, reconcile_max_rows=10
    )
    rest = await reconcile_now(client, settings, engine, reconcile_page_size=4)
    # The cap counts destinations: arming one is part of checking it, not more work.
    assert capped["counts"]["destinations_checked"] == 10
    assert capped["counts"]["destinations_armed"] == 10
    assert rest["counts"]["destinations_checked"] == 23
    assert rest["counts"]["destinations_armed"] == 13
    assert sorted(await armed_destinations(settings)) == sorted(endpoints)


async def test_overlapping_runs_never_republish_a_row_twice(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    ids, endpoints = await deliveries_to_many_destinations(client, tenant, 12, 5)
    await lose_every_wakeup(settings, engine)
    before = await wakeups_written(engine)
    versions = await row_versions(engine, ids)

    runs = await asyncio.gather(
        *(reconcile_now(client, settings, engine, reconcile_page_size=5) for _ in range(4))
    )

    # Each destination armed once in all (the other runs found it armed), and nothing written:
    # no outbox wake-up, no delivery row.
    assert sum(r["counts"]["destinations_armed"] for r in runs) == len(endpoints)
    assert [r["counts"]["destinations_checked"] for r in runs] == [len(endpoints)] * 4
    assert await wakeups_written(engine) == before
    assert await row_versions(engine, ids) == versions
    assert sorted(await armed_destinations(settings)) == sorted(endpoints)
    assert await queued_deliveries(settings) == []


async def test_a_deferred_delivery_is_armed_for_its_own_time(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    response = await client.post(
        "/v1/deliveries",
        json={
            "endpoint_id": endpoint["id"],
            "event_type": "a.b",
            "payload": {},
            "deliver_after": (datetime.now(UTC) + timedelta(days=300)).isoformat(),
        },
        headers=tenant,
    )
    assert response.status_code == 202
    await fast_path_settled(engine)
    await flush_queue(settings)  # its wake-up lost: armed again, for its own time
    run = await reconcile_now(client, settings, engine)
    assert run["counts"]["destinations_armed"] == 1
    armed = await armed_destinations(settings)
    assert armed[endpoint["id"]] > timedelta(days=299).total_seconds()


async def test_reconcile_with_redis_down_is_503_and_recorded(
    settings: Settings, tmp_path: Any
) -> None:
    from app.main import create_app

    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/no.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        response = await client.post("/v1/reconcile", headers=ADMIN)
        runs = (await client.get("/v1/reconcile/runs", headers=ADMIN)).json()["items"]
    assert response.status_code == 503
    assert response.headers["content-type"] == PROBLEM and "retry-after" in response.headers
    assert runs[0]["status"] == "failed" and "queue unavailable" in runs[0]["error"]


async def test_a_failed_run_stores_a_generic_error_and_logs_the_detail(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    await post_deliveries(client, tenant, endpoint["id"], 2)
    await lose_every_wakeup(settings, engine)
    # PostgreSQL refuses every UPDATE of the outbox, which any run makes (it claims the
    # unpublished wake-ups): the run meets a real database error.
    async with postgres_refuses(engine, "outbox_wakeups", "UPDATE") as refusal:
        with capture_logs() as logs:
            run = await reconcile_now(client, settings, engine)

    assert run["status"] == "failed"
    assert run["error"] == (
        f"internal error; see the worker logs (reconcile.failed, run_id {run['run_id']})"
    )
    [failure] = [entry for entry in logs if entry["event"] == "reconcile.failed"]
    assert failure["run_id"] == run["run_id"] and failure["log_level"] == "error"
    assert refusal in str(failure["exc_info"])


async def test_a_healthy_system_reports_no_destination_armed(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """Wake-ups the accept set, due now and in the future, are what reconcile would set: a
    run moves none of them and reports no repair -- the clocks of PostgreSQL and Redis, a few
    milliseconds apart in what each call sees, are not a fault to report."""
    later = endpoint
    now = await new_endpoint(client, tenant)
    for target, after in ((now, None), (later, datetime.now(UTC) + timedelta(minutes=30))):
        body = {"endpoint_id": target["id"], "event_type": "a.b", "payload": {}}
        if after is not None:
            body["deliver_after"] = after.isoformat()
        assert (await client.post("/v1/deliveries", json=body, headers=tenant)).status_code == 202
    await fast_path_settled(engine)
    for _ in range(3):
        run = await reconcile_now(client, settings, engine)
        assert run["counts"]["destinations_checked"] == 2, run
        assert run["counts"]["destinations_armed"] == 0, run


async def test_a_retry_the_recorder_armed_is_no_repair(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    """The recorder arms a retry after its commit, for the delay the record wrote: on Redis's
    clock a moment after PostgreSQL's, so its wake-up lies a few milliseconds after the row's
    due time. That is the wake-up working, and a run must not report it as one it repaired."""
    receiver.script("/failing", Reply(500))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/failing"))
    [delivery] = await post_deliveries(client, tenant, endpoint["id"], 1)
    async with pump(settings, engine) as (running, _):
        running.start()
        await wait_state(engine, delivery, "enqueued")
        await receiver.wait_for("/failing", 1)
    for _ in range(3):
        run = await reconcile_now(client, settings, engine)
        assert run["counts"]["destinations_checked"] == 1, run
        assert run["counts"]["destinations_armed"] == 0, run
