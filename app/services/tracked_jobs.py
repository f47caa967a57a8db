"""Jobs that a request starts and a worker runs -- reconcile runs, bulk redrives -- tracked.

The record is committed first, then the job queued: a job never runs untracked. A queue that
cannot take it marks the record failed and the request answers 503, so a record never claims
to be queued when it is not. Two transactions, owned here: the request has nothing to commit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import queue
from app.config import Settings
from app.errors import ServiceUnavailable
from app.models import ReconcileRun, RedriveJob
from app.repositories import reconcile_runs, redrive_jobs

QUEUE_RETRY_AFTER_SECONDS = 10
Tracked = TypeVar("Tracked", ReconcileRun, RedriveJob)


async def _start(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    what: str,
    insert: Callable[[AsyncSession], Awaitable[Tracked]],
    enqueue: Callable[[Tracked], Awaitable[None]],
    fail: Callable[[AsyncSession, Tracked, str], Awaitable[None]],
) -> Tracked:
    async with sessionmaker() as session, session.begin():
        record = await insert(session)
    try:
        await enqueue(record)
    except Exception as exc:
        async with sessionmaker() as session, session.begin():
            await fail(session, record, f"queue unavailable: {type(exc).__name__}")
        raise ServiceUnavailable(
            f"the queue (Redis) is unreachable; the {what} was recorded as failed: retry shortly",
            headers={"Retry-After": str(QUEUE_RETRY_AFTER_SECONDS)},
        ) from None
    return record


async def start_reconcile(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: ArqRedis,
    settings: Settings,
    *,
    trigger: str,
) -> ReconcileRun:
    """A reconcile run of this process's region."""

    async def fail(session: AsyncSession, run: ReconcileRun, error: str) -> None:
        await reconcile_runs.mark_finished(session, run.id, status="failed", counts={}, error=error)

    return await _start(
        sessionmaker,
        what="run",
        insert=lambda session: reconcile_runs.insert_run(
            session, region=settings.region, trigger=trigger
        ),
        enqueue=lambda run: queue.enqueue_reconcile(redis, settings.region, run.id),
        fail=fail,
    )


async def start_bulk_redrive(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: ArqRedis,
    settings: Settings,
    *,
    tenant_id: str,
    wanted: dict[str, Any],
) -> RedriveJob:
    """A bulk redrive of the tenant's dead deliveries matching ``wanted``, run in this
    process's region."""

    async def fail(session: AsyncSession, job: RedriveJob, error: str) -> None:
        await redrive_jobs.finish(session, job.id, status="failed", error=error)

    return await _start(
        sessionmaker,
        what="redrive job",
        insert=lambda session: redrive_jobs.insert_job(
            session, tenant_id=tenant_id, region=settings.region, filter=wanted
        ),
        enqueue=lambda job: queue.enqueue_bulk_redrive(redis, settings.region, job.id),
        fail=fail,
    )
