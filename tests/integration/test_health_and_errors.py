"""Liveness, readiness, and honest answers when a dependency is down or something breaks."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app import __version__
from app.core.config import Settings
from app.core.db import is_transaction_conflict
from app.main import create_app
from tests.fixtures.api import new_endpoint, new_tenant
from tests.fixtures.stack import client_for
from tests.fixtures.waiting import count_rows

PROBLEM = "application/problem+json"


async def test_healthz_and_readyz_when_everything_is_up(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok", "version": __version__}
    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {
        "status": "ready",
        "database": "ok",
        "redis": "ok",
        "reconcile": "never succeeded: is the cron (herald reconcile) running?",
    }


async def test_unreachable_database_is_503_with_retry_after(
    settings: Settings, tmp_path: Any
) -> None:
    nowhere = f"postgresql://postgres@/herald?host={tmp_path}"
    app = create_app(settings.model_copy(update={"database_url": nowhere}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        accepted = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": "ep_x", "event_type": "a", "payload": {}},
            headers={"Authorization": "Bearer hrk_whatever"},
        )
        ready = await client.get("/readyz")
    assert accepted.status_code == 503
    assert accepted.headers["content-type"] == PROBLEM
    assert int(accepted.headers["retry-after"]) > 0
    assert "Traceback" not in accepted.text and str(tmp_path) not in accepted.text
    assert ready.status_code == 503 and ready.headers["content-type"] == PROBLEM
    assert "database" in ready.json()["detail"]


async def test_unreachable_redis_leaves_the_api_ready_and_accepting(
    settings: Settings, tmp_path: Any, engine: AsyncEngine
) -> None:
    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/none.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        # PostgreSQL is the truth: losing Redis must not stop Herald from accepting work, so
        # no load balancer may take the API out for it. Redis's state is said beside.
        ready = await client.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["redis"].startswith("unavailable: ")

        tenant = await new_tenant(client, "no-redis")
        endpoint = await new_endpoint(client, tenant)
        accepted = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
            headers=tenant,
        )
        # A test event is sent at once on the tenant's word, counted in Redis: uncounted, it
        # is not sent, and the tenant is told to come back.
        tested = await client.post(f"/v1/endpoints/{endpoint['id']}/test", headers=tenant)
    assert accepted.status_code == 202
    assert await count_rows(engine, "outbox_wakeups") == 1  # the record, not yet published
    assert tested.status_code == 503 and tested.headers["content-type"] == PROBLEM
    assert "Redis" in tested.json()["detail"] and int(tested.headers["retry-after"]) > 0


async def test_unexpected_failure_is_500_problem_without_internals(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    # A real fault, not a mock: the table the accept path writes to is missing.
    async with engine.begin() as connection:
        await connection.execute(text("ALTER TABLE outbox_wakeups RENAME TO outbox_hidden"))
    try:
        response = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
            headers=tenant,
        )
    finally:
        async with engine.begin() as connection:
            await connection.execute(text("ALTER TABLE outbox_hidden RENAME TO outbox_wakeups"))
    assert response.status_code == 500
    assert response.headers["content-type"] == PROBLEM
    assert response.json()["title"] == "Internal error"
    assert "outbox" not in response.text and "Traceback" not in response.text
    # ...and nothing was half-written: the event and delivery rolled back with it.
    assert await count_rows(engine, "deliveries") == 0
    assert await count_rows(engine, "events") == 0


async def test_unknown_route_and_wrong_method_are_problem_json(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/nothing-here")
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM
    wrong = await client.put("/healthz")
    assert wrong.status_code == 405 and wrong.headers["content-type"] == PROBLEM


@pytest.mark.parametrize(
    ("error", "conflict"),
    [
        (asyncpg.exceptions.DeadlockDetectedError("deadlock detected"), True),
        (asyncpg.exceptions.SerializationError("could not serialize access"), True),
        (asyncpg.exceptions.UniqueViolationError("duplicate key"), False),
        (ConnectionRefusedError(), False),
    ],
    ids=["40P01", "40001", "23505", "refused"],
)
def test_deadlocks_and_serialization_failures_count_as_transaction_conflicts(
    error: Exception, conflict: bool
) -> None:
    # As the single-statement paths meet them (the driver's own error) and as SQLAlchemy
    # wraps them everywhere else.
    assert is_transaction_conflict(error) is conflict
    assert is_transaction_conflict(DBAPIError("SELECT 1", None, error)) is conflict


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    for _ in range(1500):
        if await check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never happened: {what}")


async def test_a_deadlock_is_503_with_retry_after_and_changes_nothing(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    """A real deadlock between a keyed batch and another transaction: the batch is the one
    PostgreSQL aborts (40P01), and its client hears "retry", not "internal error"."""

    async def pid(connection: AsyncConnection) -> int:
        return int((await connection.execute(text("SELECT pg_backend_pid()"))).scalar_one())

    async with engine.connect() as holder, engine.connect() as blocker, engine.connect() as probe:
        holder_pid, blocker_pid = await pid(holder), await pid(blocker)

        async def waiting(*, holder_side: bool) -> bool:
            rows = await probe.execute(
                text("SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock'")
            )
            pids = set(rows.scalars())
            return holder_pid in pids if holder_side else bool(pids - {holder_pid, blocker_pid})

        tenant_id = (
            await probe.execute(
                text("SELECT tenant_id FROM endpoints WHERE id = :e"), {"e": endpoint["id"]}
            )
        ).scalar_one()
        claim = text(
            "INSERT INTO idempotency_keys (tenant_id, key, request_hash, resource_id,"
            " response_status, expires_at) VALUES (:t, :k, '', 'x', 202, now() + interval '1h')"
        )
        try:  # (each connection is in a transaction since its first statement)
            # Only the batch may detect the deadlock, so only the batch is aborted.
            await holder.execute(text("SET LOCAL deadlock_timeout = '10min'"))
        except DBAPIError:
            pytest.skip("needs a superuser to set deadlock_timeout")
        # Reads go on; writes to deliveries wait for the holder.
        await holder.execute(text("LOCK TABLE deliveries IN SHARE MODE"))
        await blocker.execute(claim, {"t": tenant_id, "k": "b"})
        body = {
            "items": [
                {
                    "endpoint_id": endpoint["id"],
                    "event_type": "a",
                    "payload": {},
                    "idempotency_key": k,
                }
                for k in ("a", "b")
            ]
        }
        batch = asyncio.create_task(client.post("/v1/deliveries/batch", json=body, headers=tenant))
        # The batch holds key "a" and waits for "b"; the holder then waits for "a".
        await _until(lambda: waiting(holder_side=False), "the batch waits for key b")
        taking = asyncio.create_task(holder.execute(claim, {"t": tenant_id, "k": "a"}))
        await _until(lambda: waiting(holder_side=True), "the holder waits for key a")
        # Key "b" comes free; the batch goes on to insert its deliveries, which the holder's
        # lock holds back: a cycle, closed by the batch, which is the one to find it.
        await blocker.rollback()
        response = await batch
        await taking
        await holder.rollback()

    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == PROBLEM
    assert int(response.headers["retry-after"]) > 0
    assert "Traceback" not in response.text and "deadlock detected" not in response.text
    assert await count_rows(engine, "deliveries") == 0
    assert await count_rows(engine, "idempotency_keys") == 0


async def test_the_startup_heap_is_left_out_of_every_collection(settings: Settings) -> None:
    """What the lifespan built lives as long as the process: frozen, so that a full collection
    (which stops the loop for every tenant) walks only what requests made since."""
    gc.unfreeze()
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        frozen = gc.get_freeze_count()
    assert frozen > 10_000
