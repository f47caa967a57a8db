"""The reconciler finds every category of fallen-through work, in pages, and overlaps safely."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine
from structlog.testing import capture_logs

from app import queue
from app.config import Settings
from tests.support import (
    ADMIN,
    count_rows,
    fast_path_settled,
    post_deliveries,
    postgres_refuses,
    reconcile_now,
)

PROBLEM = "application/problem+json"


async def sql(engine: AsyncEngine, statement: str, **params: Any) -> None:
    async with engine.begin() as connection:
        await connection.execute(text(statement), params)


async def queued_deliveries(settings: Settings) -> list[str]:
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        jobs = await redis.zrange(queue.queue_name(settings.region), 0, -1)
    finally:
        await redis.aclose()
    # Delivery jobs only (the run's own reconcile job waits in the same queue).
    return sorted(j.decode().split(":")[0] for j in jobs if j.startswith(b"dlv_"))


async def flush_queue(settings: Settings) -> None:
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        await redis.flushall()
    finally:
        await redis.aclose()


async def lose_every_job(settings: Settings, engine: AsyncEngine) -> None:
    """Every accepted delivery was published, then Redis lost the jobs, ten minutes ago."""
    await fast_path_settled(engine)
    await flush_queue(settings)
    await sql(
        engine,
        "UPDATE deliveries SET enqueued_at = now() - interval '10 minutes',"
        " next_attempt_at = now() - interval '10 minutes'",
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


async def test_each_category_is_found_and_published(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    leased, stale, due, unpublished, healthy = await post_deliveries(
        client, tenant, endpoint["id"], 5
    )
    await fast_path_settled(engine)
    await flush_queue(settings)  # Redis lost every job
    await sql(
        engine,
        "UPDATE deliveries SET state = 'leased', lease_token = gen_random_uuid(),"
        " lease_until = now() - interval '1 second', attempt_count = 1 WHERE id = :d",
        d=leased,
    )
    await sql(
        engine,
        "UPDATE deliveries SET enqueued_at = now() - interval '10 minutes',"
        " next_attempt_at = now() - interval '10 minutes' WHERE id = :d",
        d=stale,
    )
    await sql(
        engine,
        "UPDATE deliveries SET state = 'pending', next_attempt_at = now() - interval '1 minute'"
        " WHERE id = :d",
        d=due,
    )
    await sql(engine, "UPDATE deliveries SET state = 'pending' WHERE id = :d", d=unpublished)
    await sql(
        engine,
        "UPDATE outbox SET published_at = NULL, created_at = now() - interval '1 minute'"
        " WHERE delivery_id = :d",
        d=unpublished,
    )

    run = await reconcile_now(client, settings, engine)

    assert run["status"] == "succeeded" and run["finished_at"] is not None
    assert run["counts"] == {
        "lease_expirations": 1,
        "stale_enqueued": 1,
        "due_pending": 1,
        "unpublished_outbox": 1,
        "purged_deliveries": 0,
        "purged_events": 0,
        "purged_keys": 0,
        "purged_runs": 0,
    }
    # Everything but the healthy, recently enqueued delivery has a job again.
    assert await queued_deliveries(settings) == sorted([leased, stale, due, unpublished])
    assert healthy not in await queued_deliveries(settings)
    async with engine.connect() as connection:
        row = (
            await connection.execute(
                text("SELECT state, lease_token FROM deliveries WHERE id = :d"), {"d": leased}
            )
        ).one()
    assert row.state == "enqueued" and row.lease_token is None


async def test_pages_cover_the_backlog_and_the_run_cap_stops_it(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    ids = await post_deliveries(client, tenant, endpoint["id"], 23)
    await lose_every_job(settings, engine)

    capped = await reconcile_now(
        client, settings, engine, reconcile_page_size=4, reconcile_max_rows=10
    )
    assert capped["counts"]["stale_enqueued"] == 10
    assert len(await queued_deliveries(settings)) == 10

    rest = await reconcile_now(client, settings, engine, reconcile_page_size=4)
    assert rest["counts"]["stale_enqueued"] == 13
    assert await queued_deliveries(settings) == sorted(ids)


async def test_overlapping_runs_never_republish_a_row_twice(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
) -> None:
    ids = await post_deliveries(client, tenant, endpoint["id"], 60)
    await lose_every_job(settings, engine)
    before = await count_rows(engine, "outbox")

    runs = await asyncio.gather(
        *(reconcile_now(client, settings, engine, reconcile_page_size=5) for _ in range(4))
    )

    assert sum(r["counts"]["stale_enqueued"] for r in runs) == len(ids)
    assert await count_rows(engine, "outbox") - before == len(ids)
    assert await queued_deliveries(settings) == sorted(ids)


async def test_a_deferred_delivery_is_not_stale_before_its_time(
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
    await sql(engine, "UPDATE deliveries SET enqueued_at = now() - interval '1 day'")
    run = await reconcile_now(client, settings, engine)
    assert run["counts"]["stale_enqueued"] == 0


async def test_reconcile_with_redis_down_is_503_and_recorded(
    settings: Settings, tmp_path: Any
) -> None:
    from app.main import create_app
    from tests.support import client_for

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
    await lose_every_job(settings, engine)
    # PostgreSQL refuses the scans' UPDATEs: the run meets a real database error.
    async with postgres_refuses(engine, "deliveries", "UPDATE") as refusal:
        with capture_logs() as logs:
            run = await reconcile_now(client, settings, engine)

    assert run["status"] == "failed"
    assert run["error"] == (
        f"internal error; see the worker logs (reconcile.failed, run_id {run['run_id']})"
    )
    [failure] = [entry for entry in logs if entry["event"] == "reconcile.failed"]
    assert failure["run_id"] == run["run_id"] and failure["log_level"] == "error"
    assert refusal in str(failure["exc_info"])
