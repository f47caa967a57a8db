"""Work held back by policy costs nothing while it waits: a destination paused by a
receiver's Retry-After or by the circuit breaker keeps its deliveries in PostgreSQL, untouched,
and one wake-up in Redis -- however often reconcile runs meanwhile. Counted, never timed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.queue import create_queue_redis, queue_name
from app.flow.service.wakeups import Wakeups
from tests.fixtures.api import new_endpoint, post_deliveries, reconcile_now, wakeups_written
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN, Stack
from tests.fixtures.waiting import count_rows, eventually, until

RUNS = 10


async def footprint(settings: Settings, engine: AsyncEngine, ids: list[str]) -> dict[str, Any]:
    """Everything a waiting delivery could cost: Redis keys and wake-up entries, queued jobs,
    outbox wake-ups written, and each delivery row's version (xmin changes with any write)."""
    assert settings.redis_url is not None
    redis = Redis.from_url(settings.redis_url)
    arq_redis = create_queue_redis(settings.redis_url, region=settings.region)
    try:
        queue = queue_name(settings.region)
        # Less the few fixed keys that come and go with activity, whatever the backlog: the
        # takers' bell and holds, arq's health check.
        transient = (":bell", ":hold", ":health-check")
        everything = {k.decode() async for k in redis.scan_iter("herald:*")}
        keys = {k for k in everything if not k.endswith(transient)} - {queue}
        jobs = await redis.zrange(queue, 0, -1)
        entries = await Wakeups(arq_redis, settings.region).count_entries()
    finally:
        await redis.aclose()
        await arq_redis.aclose()
    async with engine.connect() as connection:
        rows = await connection.execute(
            text("SELECT id, xmin::text FROM deliveries WHERE id = ANY(:ids)"), {"ids": ids}
        )
        versions = {row.id: row.xmin for row in rows}
    return {
        "keys": keys,
        "delivery_jobs": [j for j in jobs if j.startswith(b"dlv_")],
        "wake_entries": entries,
        "outbox_wakeups": await wakeups_written(engine),
        "versions": versions,
    }


async def paused_in_postgres(engine: AsyncEngine, endpoint_id: str) -> None:
    async def paused() -> bool:
        where = "id = :e AND paused_until > now()"
        return bool(await count_rows(engine, "endpoints", where, e=endpoint_id))

    await until(paused, timeout=30, every=0.05)


async def finished(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The reconcile run once no execution of it is queued or running."""

    async def run() -> dict[str, Any]:
        body: dict[str, Any] = (
            await client.get(f"/v1/reconcile/runs/{run_id}", headers=ADMIN)
        ).json()
        return body

    done = ("succeeded", "failed")
    return await eventually(run, lambda body: body["status"] in done, timeout=30)


@pytest.mark.parametrize(
    ("answer", "worker_env"),
    [
        pytest.param(Reply(429, headers={"Retry-After": "3600"}), {}, id="retry-after-3600"),
        pytest.param(
            Reply(500),
            {"HERALD_BREAKER_FAILURES": "1", "HERALD_BREAKER_COOLDOWN_SECONDS": "3600"},
            id="breaker-open",
        ),
    ],
)
async def test_a_paused_destination_costs_nothing_while_reconcile_runs(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    settings: Settings,
    tmp_path: Path,
    answer: Reply,
    worker_env: dict[str, str],
) -> None:
    receiver.script("/parked", answer)
    # One at a time: exactly one request meets the answer that pauses the destination.
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/parked"), max_in_flight=1)
    with running_worker(stack, tmp_path / "worker.log", **worker_env):
        ids = await post_deliveries(client, tenant, endpoint["id"], 30)
        await paused_in_postgres(engine, endpoint["id"])
        await receiver.wait_for("/parked", 1)
        first_sent = receiver.on("/parked")[0].headers["webhook-id"]

        # Its failure recorded: from here on, nothing may change.
        async def recorded() -> bool:
            return bool(await count_rows(engine, "attempts", "delivery_id = :d", d=first_sent))

        await until(recorded, timeout=30, every=0.05)
        before = await footprint(settings, engine, ids)
        # The clocks that made the job engine republish waiting work, at their shortest.
        eager = {"enqueued_stale_seconds": 0.01, "reconcile_grace_seconds": 0}
        runs = [await reconcile_now(client, settings, engine, **eager) for _ in range(RUNS)]
        # The worker runs each run's queued job too: counted once both are done.
        runs = [await finished(client, run["run_id"]) for run in runs]
        after = await footprint(settings, engine, ids)
        explained = [
            (await client.get(f"/v1/deliveries/{d}", headers=tenant)).json()
            for d in ids
            if d != first_sent
        ]

    assert [r["status"] for r in runs] == ["succeeded"] * RUNS
    assert before == after, "waiting work changed or grew"
    assert before["wake_entries"] == 1 and before["delivery_jobs"] == []
    assert sum(r["counts"].get("unpublished_outbox", 0) for r in runs) == 0
    assert len(receiver.on("/parked")) == 1  # nothing was sent past the pause
    assert {d["waiting_reason"] for d in explained} == {"throttled"}
    assert all("paused until" in d["waiting_detail"] for d in explained)


async def test_re_enabling_a_parked_destination_wakes_it_at_once(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    receiver.script("/resumed", Reply(429, headers={"Retry-After": "3600"}))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/resumed"), max_in_flight=1)
    with running_worker(stack, tmp_path / "worker.log"):
        ids = await post_deliveries(client, tenant, endpoint["id"], 5)
        await paused_in_postgres(engine, endpoint["id"])
        [first] = await receiver.wait_for("/resumed", 1)
        # Parked until the pause ends, an hour from now: the operator clears it.
        response = await client.patch(
            f"/v1/endpoints/{endpoint['id']}", json={"enabled": True}, headers=tenant
        )
        assert response.status_code == 200, response.text
        parked = [d for d in ids if d != first.headers["webhook-id"]]
        # No reconcile run, no new delivery: the re-enable itself woke the destination.
        await receiver.wait_for("/resumed", 1 + len(parked), timeout=30)
    assert await count_rows(engine, "reconcile_runs") == 0
    assert {r.headers["webhook-id"] for r in receiver.on("/resumed")[1:]} == set(parked)
