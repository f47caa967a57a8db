"""Liveness, readiness, and honest answers when a dependency is down or something breaks."""

from __future__ import annotations

from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.config import Settings
from app.main import create_app
from tests.support import client_for, count_rows

PROBLEM = "application/problem+json"


async def test_healthz_and_readyz_when_everything_is_up(client: httpx.AsyncClient) -> None:
    assert (await client.get("/healthz")).json() == {"status": "ok"}
    ready = await client.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "database": "ok", "redis": "ok"}


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


async def test_unreachable_redis_makes_readyz_503_but_accepting_still_works(
    settings: Settings, tmp_path: Any, engine: AsyncEngine
) -> None:
    app = create_app(settings.model_copy(update={"redis_url": f"unix://{tmp_path}/none.sock"}))
    async with app.router.lifespan_context(app), client_for(app) as client:
        ready = await client.get("/readyz")
        assert ready.status_code == 503
        assert "redis: unavailable" in ready.json()["detail"]
        # PostgreSQL is the truth: losing Redis must not stop Herald from accepting work.
        from tests.support import new_endpoint, new_tenant

        tenant = await new_tenant(client, "no-redis")
        endpoint = await new_endpoint(client, tenant)
        accepted = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
            headers=tenant,
        )
    assert accepted.status_code == 202
    assert await count_rows(engine, "outbox") == 1


async def test_unexpected_failure_is_500_problem_without_internals(
    client: httpx.AsyncClient,
    tenant: dict[str, str],
    endpoint: dict[str, Any],
    engine: AsyncEngine,
) -> None:
    # A real fault, not a mock: the table the accept path writes to is missing.
    async with engine.begin() as connection:
        await connection.execute(text("ALTER TABLE outbox RENAME TO outbox_hidden"))
    try:
        response = await client.post(
            "/v1/deliveries",
            json={"endpoint_id": endpoint["id"], "event_type": "a.b", "payload": {}},
            headers=tenant,
        )
    finally:
        async with engine.begin() as connection:
            await connection.execute(text("ALTER TABLE outbox_hidden RENAME TO outbox"))
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
