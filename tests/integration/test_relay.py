"""The outbox relay: publishes what the fast path missed, pages concurrently without overlap."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import queue
from app.core.config import Settings
from app.core.db import create_sessionmaker
from app.main import create_app
from app.outbox.service.relay import FAST_PATH_HEADSTART_SECONDS, relay_once
from tests.fixtures.api import fast_path_settled, new_endpoint, new_tenant
from tests.fixtures.engine import armed_destinations
from tests.fixtures.stack import client_for
from tests.fixtures.waiting import count_rows


async def _accept_without_fast_path(
    settings: Settings, tmp_path: Path, count: int
) -> tuple[list[str], str]:
    """Accept through an API whose Redis is unreachable: its fast path fails, as it would with
    Redis down or the process killed right after commit. Returns (delivery ids, endpoint id)."""
    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/no.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        tenant = await new_tenant(client, "relay")
        endpoint = await new_endpoint(client, tenant)
        ids = []
        for n in range(count):
            response = await client.post(
                "/v1/deliveries",
                json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {"n": n}},
                headers=tenant,
            )
            assert response.status_code == 202
            ids.append(response.json()["id"])
    return ids, endpoint["id"]


async def row_version(engine: AsyncEngine, delivery_id: str) -> str:
    """The delivery row's version: xmin changes with any write."""
    async with engine.connect() as connection:
        result = await connection.execute(
            text("SELECT xmin::text FROM deliveries WHERE id = :d"), {"d": delivery_id}
        )
        return str(result.scalar_one())


async def queued_jobs(settings: Settings) -> list[str]:
    """The delivery id of every arq job in the queue, sorted."""
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    try:
        queued = await redis.zrange(queue.queue_name(settings.region), 0, -1)
    finally:
        await redis.aclose()
    return sorted(job.decode().split(":")[0] for job in queued)


async def assert_handed_on(settings: Settings, endpoint_id: str) -> None:
    """The deliveries are in Redis for a worker to find: their destination's one wake-up, due
    now, and no arq job."""
    armed = await armed_destinations(settings)
    assert list(armed) == [endpoint_id] and armed[endpoint_id] <= 0, armed
    assert await queued_jobs(settings) == []


async def test_relay_publishes_what_the_fast_path_missed(
    settings: Settings, engine: AsyncEngine, tmp_path: Path
) -> None:
    [delivery_id], endpoint_id = await _accept_without_fast_path(settings, tmp_path, 1)
    assert await count_rows(engine, "outbox_wakeups") == 1
    version = await row_version(engine, delivery_id)
    await asyncio.sleep(FAST_PATH_HEADSTART_SECONDS)

    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)
    try:
        published = await relay_once(create_sessionmaker(engine), redis, settings)
    finally:
        await redis.aclose()

    assert published == 1
    await assert_handed_on(settings, endpoint_id)
    assert await count_rows(engine, "outbox_wakeups") == 0
    # The publish wrote the outbox alone: the delivery's row is as the accept wrote it.
    assert await row_version(engine, delivery_id) == version


async def test_concurrent_relays_publish_each_row_once(
    settings: Settings, engine: AsyncEngine, tmp_path: Path
) -> None:
    ids, endpoint_id = await _accept_without_fast_path(settings, tmp_path, 60)
    await asyncio.sleep(FAST_PATH_HEADSTART_SECONDS)
    small_pages = settings.model_copy(update={"relay_page_size": 7})
    sessionmaker = create_sessionmaker(engine)
    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)

    async def drain() -> int:
        total = 0
        while published := await relay_once(sessionmaker, redis, small_pages):
            total += published
        return total

    try:
        totals = await asyncio.gather(*(drain() for _ in range(4)))
    finally:
        await redis.aclose()

    assert sum(totals) == len(ids)  # no row published by two relays
    await assert_handed_on(settings, endpoint_id)
    assert await count_rows(engine, "outbox_wakeups") == 0


async def test_fast_path_publishes_right_after_commit(
    client: httpx.AsyncClient, tenant: dict[str, str], settings: Settings, engine: AsyncEngine
) -> None:
    endpoint = await new_endpoint(client, tenant)
    response = await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
        headers=tenant,
    )
    assert response.status_code == 202
    await fast_path_settled(engine)
    await assert_handed_on(settings, endpoint["id"])
    assert await count_rows(engine, "deliveries", "state = 'pending'") == 1
