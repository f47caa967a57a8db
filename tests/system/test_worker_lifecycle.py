"""The worker process under stress (Redis restarting under it, SIGTERM mid-attempt), and what
arq still runs in it (and what it drops)."""

from __future__ import annotations

import asyncio
import functools
import signal
from pathlib import Path

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core import queue
from app.core.config import Settings
from app.main import create_app
from devstack.embedded import EmbeddedRedis
from tests.fixtures.api import accept, fast_path_settled, new_endpoint, new_tenant
from tests.fixtures.engine import armed_destinations, lose_wakeups
from tests.fixtures.processes import running_worker
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.stack import ADMIN, Stack, client_for, make_settings
from tests.fixtures.waiting import delivery_row, eventually, wait_state
from workers.runner import build_worker


async def test_worker_survives_a_redis_restart_and_delivery_resumes(
    stack: Stack, settings: Settings, engine: AsyncEngine, receiver: Receiver, tmp_path: Path
) -> None:
    redis = EmbeddedRedis(tmp_path / "redis")
    redis_url = redis.start()
    try:
        own_stack = Stack(stack.database_url, redis_url, stack.workdir)
        app = create_app(settings.model_copy(update={"redis_url": redis_url}))
        async with (
            app.router.lifespan_context(app),
            client_for(app) as client,
        ):
            with running_worker(own_stack, tmp_path / "worker.log") as worker:
                tenant = await new_tenant(client, "restart")
                endpoint = await new_endpoint(client, tenant, url=receiver.url("/r"))
                before = await accept(client, tenant, endpoint["id"])
                await wait_state(engine, before, "succeeded")

                redis.stop()
                await asyncio.to_thread(worker.wait_for_log, "worker.redis_lost")
                # Accepting goes on without Redis: the outbox row is the record.
                during = await accept(client, tenant, endpoint["id"])
                await asyncio.sleep(2)
                assert worker.process.poll() is None, worker.output()

                assert redis.start() == redis_url
                await asyncio.to_thread(worker.wait_for_log, "worker.redis_reconnected")
                after = await accept(client, tenant, endpoint["id"])
                await wait_state(engine, during, "succeeded")
                await wait_state(engine, after, "succeeded")
                log = worker.output()
            assert worker.process.returncode == 0, log
    finally:
        redis.stop()
    assert {r.headers["webhook-id"] for r in receiver.on("/r")} == {before, during, after}
    # One line per outage, not a crash loop of reconnect attempts.
    assert log.count("worker.redis_lost") == 1
    assert "Traceback" not in log


async def test_sigterm_lets_the_in_flight_attempt_finish(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    stack: Stack,
    engine: AsyncEngine,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    receiver.script("/slow", Reply(200, delay=1.0))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/slow"))
    with running_worker(stack, tmp_path / "worker.log") as worker:
        delivery_id = await accept(client, tenant, endpoint["id"])
        await receiver.wait_for("/slow", 1)
        code = await asyncio.to_thread(worker.stop, signal.SIGTERM)
    assert code == 0, worker.output()
    [draining] = worker.events("worker.draining")
    assert draining["in_flight"] == 1
    row = await wait_state(engine, delivery_id, "succeeded", timeout=1)
    assert row["lease_token"] is None


async def test_sigterm_past_the_grace_period_records_the_attempt_it_cut_short(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    stack: Stack,
    engine: AsyncEngine,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    receiver.script("/stuck", Reply(200, delay=8.0))
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/stuck"))
    slow_attempts = {
        "HERALD_REQUEST_TIMEOUT_SECONDS": "10",
        "HERALD_LEASE_SECONDS": "30",
        "HERALD_WORKER_SHUTDOWN_GRACE_SECONDS": "0.5",
    }
    with running_worker(stack, tmp_path / "worker.log", **slow_attempts) as worker:
        delivery_id = await accept(client, tenant, endpoint["id"])
        await receiver.wait_for("/stuck", 1)
        await wait_state(engine, delivery_id, "leased")
        code = await asyncio.to_thread(worker.stop, signal.SIGTERM)
    assert code == 0, worker.output()
    row = await delivery_row(engine, delivery_id)
    async with engine.connect() as connection:
        attempt = (
            await connection.execute(
                text("SELECT outcome, error FROM attempts WHERE delivery_id = :d"),
                {"d": delivery_id},
            )
        ).one()
    # Nothing stays leased by a worker that is gone, and the request it had already sent is on
    # record as `unknown` (to be retried with the same key), not silently forgotten.
    assert row["state"] in ("pending", "enqueued")
    assert row["lease_token"] is None and row["lease_until"] is None
    assert row["attempt_count"] == 1
    assert attempt.outcome == "unknown" and "shut down" in attempt.error


async def test_arq_runs_only_the_control_jobs_and_never_times_one_out(stack: Stack) -> None:
    settings = make_settings(stack)
    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)
    try:
        worker = build_worker(settings, redis, {})
    finally:
        await redis.aclose()
    # Deliveries travel by wake-ups: no arq function delivers (the `deliver` shim is gone).
    assert set(worker.functions) == {queue.RECONCILE_FUNCTION, queue.REDRIVE_FUNCTION}
    timeouts = [f.timeout_s or worker.job_timeout_s for f in worker.functions.values()]
    # Reconcile runs and bulk redrives hand their work to the background at once, well within
    # arq's timeout; and arq re-runs a job whose worker vanished only after this: never while
    # it still runs.
    assert worker.in_progress_timeout_s > max(timeouts)


async def test_a_deliver_job_of_an_older_release_is_dropped_and_reconcile_sends_it(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url("/older"))
    delivery_id = await accept(client, tenant, endpoint["id"])
    await fast_path_settled(engine)
    # As an API of a release that delivered by arq jobs leaves it during a rolling upgrade:
    # one `deliver` job for the delivery, and no wake-up for its destination.
    await lose_wakeups(settings)
    assert settings.redis_url is not None
    redis = queue.create_queue_redis(settings.redis_url, region=settings.region)
    jobs_queued = functools.partial(redis.zcard, queue.queue_name(settings.region))
    try:
        job = await redis.enqueue_job(
            "deliver", delivery_id, endpoint["id"], _queue_name=queue.queue_name(settings.region)
        )
        assert job is not None
        with running_worker(stack, tmp_path / "worker.log") as worker:
            # arq knows no such function: it drops the job with a warning and keeps nothing.
            await asyncio.to_thread(worker.wait_for_log, "function 'deliver' not found")
            await eventually(jobs_queued, lambda count: count == 0)
            # Nothing woke the destination, so nothing was sent; the delivery is still live in
            # PostgreSQL, and the next reconcile run arms its destination.
            assert await armed_destinations(settings) == {}
            assert (await delivery_row(engine, delivery_id))["state"] == "pending"
            assert receiver.on("/older") == []
            started = await client.post("/v1/reconcile", json={"trigger": "test"}, headers=ADMIN)
            assert started.status_code == 202, started.text
            await wait_state(engine, delivery_id, "succeeded", timeout=30)
    finally:
        await redis.aclose()
    assert [r.headers["webhook-id"] for r in receiver.on("/older")] == [delivery_id]
