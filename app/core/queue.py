"""The arq queue as Herald uses it: its name per region, serialisation, and the control jobs
(reconcile runs, bulk redrives), which a request starts tracked. Deliveries travel by wake-ups
(app/flow/service/wakeups.py), never as arq jobs.

A tracked job's record is committed first, then the job queued: a job never runs untracked. A
queue that cannot take it marks the record failed and the request answers 503, so a record never
claims to be queued when it is not. Two transactions, owned by ``start_tracked``: the request
has nothing to commit.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import msgpack
from arq.connections import ArqRedis
from redis.asyncio import ConnectionPool
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core.errors import ServiceUnavailable

RECONCILE_FUNCTION = "reconcile"
REDRIVE_FUNCTION = "bulk_redrive"
QUEUE_RETRY_AFTER_SECONDS = 10
Tracked = TypeVar("Tracked")

# Never pickle: anyone who can write to Redis could otherwise run code in a worker.
job_serializer = partial(msgpack.packb, use_bin_type=True)
job_deserializer = partial(msgpack.unpackb, raw=False)


def queue_name(region: str) -> str:
    return f"herald:queue:{region}"


async def enqueue_bulk_redrive(redis: ArqRedis, region: str, job_id: str) -> None:
    await redis.enqueue_job(
        REDRIVE_FUNCTION, job_id, _job_id=f"redrive:{job_id}", _queue_name=queue_name(region)
    )


async def enqueue_reconcile(redis: ArqRedis, region: str, run_id: str) -> None:
    await redis.enqueue_job(
        RECONCILE_FUNCTION, run_id, _job_id=f"reconcile:{run_id}", _queue_name=queue_name(region)
    )


async def start_tracked(
    sessionmaker: async_sessionmaker[AsyncSession],
    *,
    what: str,
    insert: Callable[[AsyncSession], Awaitable[Tracked]],
    enqueue: Callable[[Tracked], Awaitable[None]],
    fail: Callable[[AsyncSession, Tracked, str], Awaitable[None]],
) -> Tracked:
    """Record, then queue; a queue that is down marks the record failed and answers 503."""
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


def create_queue_redis(url: str, *, region: str) -> ArqRedis:
    """An ArqRedis that connects lazily: the API must start (and accept) with Redis down."""
    pool = ConnectionPool.from_url(
        url, socket_timeout=5, socket_connect_timeout=2, health_check_interval=30
    )
    return ArqRedis(
        pool,
        job_serializer=job_serializer,
        job_deserializer=job_deserializer,
        default_queue_name=queue_name(region),
    )
