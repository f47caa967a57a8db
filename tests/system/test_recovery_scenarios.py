"""Losing Redis, restarting PostgreSQL, pausing a worker past its lease: nothing is lost."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import httpx
from redis.asyncio import Redis
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.config import Settings
from app.core.db import create_sessionmaker, single_statements
from app.engine.repository import delivery_leases
from app.main import create_app
from devstack.embedded import EmbeddedRedis
from tests.fixtures.api import fast_path_settled, new_endpoint, new_tenant
from tests.fixtures.processes import RECOVERY_ENV, running_worker, start_api, wait_healthy
from tests.fixtures.receiver import Receiver, Reply
from tests.fixtures.recovery import assert_recovered, reconcile_until_succeeded, states
from tests.fixtures.stack import ADMIN, OwnPostgres, Stack, client_for
from tests.fixtures.waiting import count_rows, delivery_row, wait_state

PATH = "/recover"


async def accept(
    client: httpx.AsyncClient, tenant: dict[str, str], endpoint_id: str, n: int
) -> httpx.Response:
    return await client.post(
        "/v1/deliveries",
        json={"endpoint_id": endpoint_id, "event_type": "recover", "payload": {"n": n}},
        headers=tenant,
    )


async def test_redis_flushed_with_workers_stopped_loses_nothing(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    responses = [await accept(client, tenant, endpoint["id"], n) for n in range(500)]
    assert {r.status_code for r in responses} == {202}
    ids = [r.json()["id"] for r in responses]
    redis = Redis.from_url(stack.redis_url)
    try:
        await redis.flushall()  # every wake-up and every trace of them, gone
    finally:
        await redis.aclose()
    await asyncio.sleep(2.5)  # older than ENQUEUED_STALE_SECONDS

    with running_worker(stack, tmp_path / "worker.log", **RECOVERY_ENV):
        await reconcile_until_succeeded(client, engine, ids, timeout=120)
    await assert_recovered(engine, receiver, PATH, ids, crashes=0)


async def test_redis_restarted_empty_mid_load_loses_nothing(
    settings: Settings,
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    redis = EmbeddedRedis(tmp_path / "redis")
    redis_url = redis.start()
    own = Stack(stack.database_url, redis_url, stack.workdir)
    app = create_app(settings.model_copy(update={"redis_url": redis_url}))
    try:
        async with app.router.lifespan_context(app), client_for(app) as client:
            tenant = await new_tenant(client, "redis-restart")
            endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
            with running_worker(own, tmp_path / "worker.log", **RECOVERY_ENV):
                ids = []
                for n in range(150):
                    if n == 50:
                        await asyncio.to_thread(redis.stop)
                        # Restart without its snapshot: everything queued is lost.
                        (tmp_path / "redis" / "dump.rdb").unlink(missing_ok=True)
                    if n == 100:
                        await asyncio.to_thread(redis.start)
                    response = await accept(client, tenant, endpoint["id"], n)
                    assert response.status_code == 202  # accepting never needs Redis
                    ids.append(response.json()["id"])
                    await asyncio.sleep(0.01)
                await reconcile_until_succeeded(client, engine, ids, timeout=90)
    finally:
        redis.stop()
    await assert_recovered(engine, receiver, PATH, ids, crashes=1)


async def test_postgres_restarted_mid_load_answers_503_then_recovers(
    receiver: Receiver, own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    postgres, own, engine = own_postgres.server, own_postgres.stack, own_postgres.engine
    database_url = own.database_url
    api = start_api(own, tmp_path)
    try:
        await wait_healthy(api)
        with running_worker(own, tmp_path / "worker.log", **RECOVERY_ENV):
            async with httpx.AsyncClient(base_url=api.base_url, timeout=30) as http:
                created = await http.post("/v1/tenants", json={"name": "pg"}, headers=ADMIN)
                tenant = {"Authorization": f"Bearer {created.json()['api_key']}"}
                endpoint = await new_endpoint(http, tenant, url=receiver.url(PATH))
                accepted: list[str] = []
                unavailable: list[httpx.Response] = []
                for n in range(90):
                    # Off the event loop: the receiver lives on it and must keep answering.
                    if n == 30:
                        await asyncio.to_thread(postgres.stop)
                    if n == 60:
                        assert await asyncio.to_thread(postgres.start) == database_url
                    response = await accept(http, tenant, endpoint["id"], n)
                    if response.status_code == 202:
                        accepted.append(response.json()["id"])
                    else:
                        unavailable.append(response)
                    await asyncio.sleep(0.02)
                # Recovered without restarting the API: new work is accepted again.
                after = await accept(http, tenant, endpoint["id"], 999)
                assert after.status_code == 202, after.text
                accepted.append(after.json()["id"])
                await reconcile_until_succeeded(http, engine, accepted, timeout=90)
        assert api.process.poll() is None, api.output()
    finally:
        api.stop()
    assert len(unavailable) >= 25  # the outage was real and seen
    for response in unavailable:
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/problem+json"
        assert int(response.headers["retry-after"]) > 0
    assert len(accepted) >= 60
    # A worker may have sent and then failed to record while PostgreSQL was down: one resend.
    seen = {r.headers["webhook-id"] for r in receiver.on(PATH)}
    assert seen == set(accepted)


async def test_worker_paused_past_its_lease_cannot_record_its_late_result(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    receiver.script(PATH, Reply(200, delay=0.5))
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    with running_worker(stack, tmp_path / "paused.log", **RECOVERY_ENV) as paused:
        [delivery_id] = [(await accept(client, tenant, endpoint["id"], 0)).json()["id"]]
        await receiver.wait_for(PATH, 1)
        os.kill(paused.process.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(4)  # past the 3 s lease
            with running_worker(stack, tmp_path / "rescuer.log", **RECOVERY_ENV):
                await reconcile_until_succeeded(client, engine, [delivery_id])
        finally:
            os.kill(paused.process.pid, signal.SIGCONT)
        await asyncio.to_thread(paused.wait_for_log, "delivery.lease_lost")

    assert (await states(engine, [delivery_id])) == {delivery_id: "succeeded"}
    async with engine.connect() as connection:
        into_terminal = (
            await connection.execute(
                text(
                    "SELECT count(*) FROM test_state_log WHERE delivery_id = :d"
                    " AND new_state IN ('succeeded', 'dead')"
                ),
                {"d": delivery_id},
            )
        ).scalar_one()
        attempts = (
            await connection.execute(
                text("SELECT count(*) FROM attempts WHERE delivery_id = :d"), {"d": delivery_id}
            )
        ).scalar_one()
    assert into_terminal == 1
    assert attempts == 1  # the rescuer's; the paused worker's late write was refused
    requests = receiver.on(PATH)
    assert len(requests) == 2
    assert {r.headers["Idempotency-Key"] for r in requests} == {delivery_id}


async def test_a_worker_stalled_past_its_lease_before_sending_never_sends(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    stall = {**RECOVERY_ENV, "HERALD_FAULT": "worker.stall_after_claim"}
    with running_worker(stack, tmp_path / "stalled.log", **stall) as stalled:
        try:
            [delivery_id] = [(await accept(client, tenant, endpoint["id"], 0)).json()["id"]]
            await asyncio.to_thread(stalled.wait_stalled)  # claimed, not sent
            assert (await states(engine, [delivery_id])) == {delivery_id: "leased"}
            with running_worker(stack, tmp_path / "rescuer.log", **RECOVERY_ENV):
                await reconcile_until_succeeded(client, engine, [delivery_id])
        finally:
            stalled.resume()
        # Its lease ran out long ago: resumed, it must not send on it.
        await asyncio.to_thread(stalled.wait_for_log, '"delivery.lease_')

    assert len(receiver.on(PATH)) == 1  # the rescuer's
    assert stalled.events("delivery.lease_too_short")


async def test_a_lease_too_short_for_a_whole_request_is_given_back_unused(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    # Requests take up to 1.5 s (FAST_WORKER_ENV) and the lease is 10 s: a worker sends only
    # while more than 1.5 s + half of the other 8.5 s of its lease is left.
    stall = {"HERALD_LEASE_SECONDS": "10", "HERALD_FAULT": "worker.stall_after_claim"}
    with running_worker(stack, tmp_path / "stalled.log", **stall) as stalled:
        try:
            [delivery_id] = [(await accept(client, tenant, endpoint["id"], 0)).json()["id"]]
            await asyncio.to_thread(stalled.wait_stalled)
            await asyncio.sleep(5)  # now at most 5 s of the lease is left, but some is
        finally:
            stalled.resume()
        await wait_state(engine, delivery_id, "succeeded", timeout=30)

    assert len(receiver.on(PATH)) == 1
    assert (await delivery_row(engine, delivery_id))["attempt_count"] == 1
    async with engine.connect() as connection:
        steps = [
            (row.old_state, row.new_state)
            for row in await connection.execute(
                text(
                    "SELECT old_state, new_state FROM test_state_log WHERE delivery_id = :d"
                    " ORDER BY at"
                ),
                {"d": delivery_id},
            )
        ]
    # Given back (uncounted) and taken again, by the same worker, without a reconcile run.
    assert steps[-3:] == [("leased", "pending"), ("pending", "leased"), ("leased", "succeeded")]


async def test_a_claim_whose_answer_was_lost_is_taken_up_when_its_lease_ends(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    receiver: Receiver,
    settings: Settings,
    stack: Stack,
    engine: AsyncEngine,
    tmp_path: Path,
) -> None:
    endpoint = await new_endpoint(client, tenant, url=receiver.url(PATH))
    delivery_id = (await accept(client, tenant, endpoint["id"], 0)).json()["id"]
    await fast_path_settled(engine)
    # The claim committed, but the worker that sent it never heard back (its connection broke
    # with the answer on the way): the delivery is leased by no one.
    async with single_statements(create_sessionmaker(engine)) as connection:
        lost = await delivery_leases.claim_batch(
            connection,
            region=settings.region,
            endpoint_id=endpoint["id"],
            limit=1,
            lease_seconds=8,
        )
    assert [row.id for row in lost.rows] == [delivery_id]
    with running_worker(stack, tmp_path / "worker.log", **RECOVERY_ENV):
        # No reconcile run: the taker that found the lease settled its destination for when the
        # lease ends, and the claim then takes it over.
        await wait_state(engine, delivery_id, "succeeded", timeout=40)

    assert len(receiver.on(PATH)) == 1
    assert (await delivery_row(engine, delivery_id))["attempt_count"] == 2
    assert await count_rows(engine, "reconcile_runs") == 0
