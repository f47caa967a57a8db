"""GET /v1/deliveries/{id} explains itself: every waiting_reason, and the custody timeline."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.delivery.service import status
from app.main import create_app
from tests.fixtures.api import accept, fast_path_settled, new_endpoint
from tests.fixtures.database import sql
from tests.fixtures.engine import lose_wakeups
from tests.fixtures.stack import client_for


async def explained(
    client: httpx.AsyncClient, tenant: dict[str, str], delivery_id: str
) -> dict[str, Any]:
    response = await client.get(f"/v1/deliveries/{delivery_id}", headers=tenant)
    assert response.status_code == 200
    body: dict[str, Any] = response.json()
    return body


SETUPS = {
    "in_flight": "UPDATE deliveries SET state = 'leased', lease_token = gen_random_uuid(),"
    " lease_until = now() + interval '1 minute', attempt_count = 1",
    "stuck_lease": "UPDATE deliveries SET state = 'leased', lease_token = gen_random_uuid(),"
    " lease_until = now() - interval '1 minute', attempt_count = 1",
    "stuck_enqueued": "UPDATE deliveries SET state = 'enqueued', attempt_count = 1,"
    " next_attempt_at = now() - interval '1 hour'",
    "stuck_pending": "UPDATE deliveries SET state = 'pending',"
    " next_attempt_at = now() - interval '1 hour'",
    "succeeded": "UPDATE deliveries SET state = 'succeeded', completed_at = now()",
    "dead": "UPDATE deliveries SET state = 'dead', completed_at = now(),"
    " dead_reason = 'permanent_failure: HTTP 400'",
    "paused": "UPDATE endpoints SET paused_until = now() + interval '1 minute',"
    " pause_reason = 'receiver answered 429 with Retry-After'",
}


@pytest.mark.parametrize(
    ("setup", "reason", "detail"),
    [
        ("in_flight", "in_flight", "under way"),
        ("stuck_lease", "stuck", "lease expired"),
        ("succeeded", "succeeded", None),
        ("dead", "dead", "HTTP 400"),
        ("paused", "throttled", "paused until"),
    ],
)
async def test_waiting_reason(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
    setup: str,
    reason: str,
    detail: str | None,
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    await sql(engine, SETUPS[setup])
    body = await explained(client, tenant, delivery_id)
    assert body["waiting_reason"] == reason
    if detail is None:
        assert body["waiting_detail"] is None
    else:
        assert detail in body["waiting_detail"]


@pytest.mark.parametrize("setup", ["stuck_enqueued", "stuck_pending"])
async def test_due_work_long_waiting_is_stuck_only_when_its_wakeup_is_gone(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
    setup: str,
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    await sql(engine, SETUPS[setup])
    # Due for an hour, but its destination's wake-up is there: it waits for a worker.
    assert (await explained(client, tenant, delivery_id))["waiting_reason"] == "queued"
    await lose_wakeups(settings)
    body = await explained(client, tenant, delivery_id)
    assert body["waiting_reason"] == "stuck" and "has no wake-up" in body["waiting_detail"]


# The API died between its commit and its publish an hour ago: the wake-up written with the
# delivery (in its transaction: the same now()) is still in the outbox.
UNPUBLISHED = (
    "INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at, created_at)"
    " SELECT region, tenant_id, endpoint_id, next_attempt_at, updated_at"
    " FROM deliveries WHERE id = :d"
)


@pytest.mark.parametrize(
    ("setup", "unpublished", "detail"),
    [
        ("stuck_enqueued", False, "Redis cannot say whether"),
        ("stuck_pending", False, "Redis cannot say whether"),
        ("stuck_pending", True, "not handed to Redis"),
    ],
)
async def test_with_redis_unreachable_due_work_is_judged_by_how_long_it_has_waited(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    settings: Settings,
    engine: AsyncEngine,
    tmp_path: Path,
    setup: str,
    unpublished: bool,
    detail: str,
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    fresh = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    await sql(engine, SETUPS[setup] + " WHERE id = :d", d=delivery_id)
    if unpublished:
        await sql(engine, "UPDATE deliveries SET updated_at = now() - interval '1 hour'")
        await sql(engine, UNPUBLISHED, d=delivery_id)
    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/no.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as blind:
        body = await explained(blind, tenant, delivery_id)
        waiting = await explained(blind, tenant, fresh)
    # Whether its destination has a wake-up cannot be asked: an hour of waiting is too long.
    assert body["waiting_reason"] == "stuck" and detail in body["waiting_detail"]
    # Due and published a moment ago: not stuck before ENQUEUED_STALE_SECONDS.
    assert waiting["waiting_reason"] == "queued"
    assert "Redis cannot say more" in waiting["waiting_detail"]


async def test_scheduled_queued_and_disabled(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    later = datetime.now(UTC) + timedelta(hours=2)
    scheduled = await accept(client, tenant, endpoint["id"], deliver_after=later.isoformat())
    queued = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    body = await explained(client, tenant, scheduled)
    assert body["waiting_reason"] == "scheduled" and "next attempt at" in body["waiting_detail"]
    assert (await explained(client, tenant, queued))["waiting_reason"] == "queued"

    await client.patch(f"/v1/endpoints/{endpoint['id']}", json={"enabled": False}, headers=tenant)
    disabled = await explained(client, tenant, queued)
    assert disabled["waiting_reason"] == "endpoint_disabled"
    assert disabled["waiting_detail"] == "disabled by user"


async def test_throttled_by_the_in_flight_ceiling(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant, max_in_flight=1)
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        # Another attempt holds the destination's only slot (a live lease in the gate's set).
        far = int((datetime.now(UTC) + timedelta(minutes=1)).timestamp() * 1000)
        await redis.zadd(f"herald:flow:{{{endpoint['id']}}}:slots", {"someone": far})
        body = await explained(client, tenant, delivery_id)
    finally:
        await redis.aclose()
    assert (
        body["waiting_reason"] == "throttled" and "in-flight ceiling (1)" in body["waiting_detail"]
    )


async def test_timeline_tells_the_custody_story(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    await sql(
        engine,
        "INSERT INTO attempts (delivery_id, attempt_number, started_at, duration_ms, status_code,"
        " outcome) VALUES (:d, 1, now(), 120, 503, 'retryable'), (:d, 2, now() + interval"
        " '1 second', 80, 200, 'success')",
        d=delivery_id,
    )
    await sql(
        engine,
        "UPDATE deliveries SET state = 'succeeded', attempt_count = 2,"
        " completed_at = now() + interval '2 seconds'",
    )
    body = await explained(client, tenant, delivery_id)
    assert [e["event"] for e in body["timeline"]] == [
        "accepted",
        "attempt",
        "attempt",
        "succeeded",
    ]
    assert "#1: retryable (503, 120 ms)" in body["timeline"][1]["detail"]
    times = [e["at"] for e in body["timeline"]]
    assert times == sorted(times)


async def test_timeline_tells_a_claim_that_left_no_record(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    # Claim #2's worker died (or lost its lease) before recording; claim #3 took over.
    await sql(
        engine,
        "INSERT INTO attempts (delivery_id, attempt_number, started_at, duration_ms, status_code,"
        " outcome) VALUES (:d, 1, now(), 120, 503, 'retryable'), (:d, 3, now() + interval"
        " '1 minute', 80, 200, 'success')",
        d=delivery_id,
    )
    await sql(
        engine,
        "UPDATE deliveries SET state = 'succeeded', attempt_count = 3,"
        " completed_at = now() + interval '61 seconds'",
    )
    body = await explained(client, tenant, delivery_id)
    attempts = [e["detail"] for e in body["timeline"] if e["event"] == "attempt"]
    assert [detail.split(":")[0] for detail in attempts] == ["#1", "#2", "#3"]
    assert attempts[1].startswith("#2: no result recorded")
    assert body["timeline"][-1]["event"] == "succeeded"


async def test_a_timeline_stays_bounded_however_many_claims_and_redrives(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint: dict[str, Any], engine: AsyncEngine
) -> None:
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)

    async def redriven(cycles: int) -> None:
        await sql(
            engine,
            "INSERT INTO custody_records (delivery_id, at, event, attempt_number, detail)"
            " SELECT :d, now() + g * interval '1 second', e, g, 'test'"
            " FROM generate_series(1, :n) g, unnest(ARRAY['dead', 'redriven']) e",
            d=delivery_id,
            n=cycles,
        )

    # 5,000 claims that left no attempt row (each dead step accounts for one of them).
    await sql(engine, "UPDATE deliveries SET attempt_count = 5000")
    await redriven(40)
    told = (await explained(client, tenant, delivery_id))["timeline"]
    unrecorded = [e for e in told if e["event"] == "attempt"]
    assert len(unrecorded) == status.MOST_UNRECORDED_CLAIMS - 40  # 40 are told by dead steps
    assert len([e for e in told if e["event"] == "dead"]) == 40
    # More dead steps and redrives than one timeline tells: the archive is cut, and claim
    # numbers past what is shown are not guessed at.
    await redriven(200)
    told = (await explained(client, tenant, delivery_id))["timeline"]
    assert len([e for e in told if e["event"] in ("dead", "redriven")]) == status.TIMELINE_ATTEMPTS
    assert [e for e in told if e["event"] == "attempt"] == []
