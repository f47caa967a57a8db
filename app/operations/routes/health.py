from __future__ import annotations

import asyncio

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text

from app import __version__
from app.api.problems import problem_response, problem_response_doc
from app.core import redis_clients
from app.reconcile.service import reconcile
from app.runtime.resources import ResourcesDep

router = APIRouter(tags=["health"])
_CHECK_TIMEOUT_SECONDS = 2.0


@router.get("/healthz", summary="The process is alive")
async def healthz() -> dict[str, str]:
    # The version too: which release answers, for whoever rolls one out behind a balancer.
    return {"status": "ok", "version": __version__}


@router.get(
    "/readyz",
    summary="Ready to accept: PostgreSQL answers (Redis and reconcile reported beside it)",
    responses={503: problem_response_doc("PostgreSQL is unreachable")},
)
async def readyz(request: Request, resources: ResourcesDep) -> JSONResponse:
    """Ready means able to accept, which needs PostgreSQL alone: with Redis (or one master of a
    cluster) down, every API taken out of its load balancer would stop the accepts Herald
    promises to take. Redis is reported, and alerted on (herald_redis_up)."""

    async def database() -> None:
        async with resources.sessionmaker() as session:
            await session.execute(text("SELECT 1"))

    async def redis() -> None:
        await redis_clients.ping(resources.redis)

    async def queue() -> None:
        await resources.queue.ping()

    checks = {"database": database, "redis": redis}
    if resources.queue is not resources.redis:  # arq's own Redis beside a cluster
        checks["queue"] = queue
    results: dict[str, str] = {}
    for name, check in checks.items():
        try:
            await asyncio.wait_for(check(), _CHECK_TIMEOUT_SECONDS)
            results[name] = "ok"
        except Exception as exc:  # the kind is what operators need
            results[name] = f"unavailable: {type(exc).__name__}"
    if results["database"] == "ok":
        # Reported, not required: the API serves without reconcile; a stale one is an alert
        # (deploy/prometheus/alerts.yaml), not a reason to take every API out of service.
        _, reconcile_said = await reconcile.freshness(resources.sessionmaker, resources.settings)
        return JSONResponse({"status": "ready", **results, "reconcile": reconcile_said})
    return problem_response(
        request,
        status=503,
        title="Not ready",
        slug="not-ready",
        detail="; ".join(f"{name}: {state}" for name, state in results.items()),
        headers={"Retry-After": "5"},
    )
