"""Putting a delivery back in the queue when the job that holds it cannot attempt it now: the
gate deferred it, it ran before it was due, or its lease was given back unused; and queueing a
recorded retry."""

from __future__ import annotations

import uuid

import structlog
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import queue
from app.db import single_statements
from app.repositories import deliveries, delivery_leases

log = structlog.get_logger("herald.delivery")


async def requeue(
    redis: ArqRedis,
    region: str,
    delivery_id: str,
    endpoint_id: str,
    why: str,
    *,
    after: float,
) -> None:
    """A job of its own for this delivery, ``after`` seconds from now. Its id is new (``why``
    plus a random part: g gate, w wait, l lease given back), so arq never drops it as a
    duplicate of the job running now."""
    job_id = f"{delivery_id}:{why}{uuid.uuid4().hex[:12]}"
    job = queue.QueuedJob(job_id, delivery_id, endpoint_id, queue.seconds_from_now(after))
    await queue.publish(redis, region, [job])


async def redefer_if_early(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: ArqRedis,
    region: str,
    delivery_id: str,
    endpoint_id: str,
) -> None:
    """A job that ran a little too early must not just vanish: put a job back for when the
    delivery can be claimed. That covers a job firing before its due time (clock skew, an
    early duplicate) and arq rerunning a dead worker's job moments before its lease ends.
    A live lease with time left, or a finished delivery: a true duplicate, dropped."""
    async with sessionmaker() as session, session.begin():
        wait = await delivery_leases.seconds_until_claimable(session, delivery_id, region)
    if wait is None or wait <= 0:
        log.debug("delivery.skipped", delivery_id=delivery_id, why="leased, finished or gone")
        return
    await requeue(redis, region, delivery_id, endpoint_id, "w", after=wait + 0.05)


async def schedule_retry(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: ArqRedis,
    region: str,
    claimed: delivery_leases.ClaimedDelivery,
    delay_seconds: float,
) -> None:
    """A deferred job at the retry time. Best effort: the row already says when the next
    attempt is due, so a lost job only delays it until the reconciler finds the row."""
    # Relative to now, like next_attempt_at (set from the database clock a moment ago).
    job_id = queue.retry_job_id(claimed.id, claimed.attempt_number)
    run_at = queue.seconds_from_now(delay_seconds)
    job = queue.QueuedJob(job_id, claimed.id, claimed.endpoint_id, run_at)
    try:
        await queue.publish(redis, region, [job])
        # Now a job exists: `enqueued`, so the reconciler waits ENQUEUED_STALE_SECONDS for
        # it rather than republishing a retry that is merely waiting its turn.
        async with single_statements(sessionmaker) as connection:
            await deliveries.mark_enqueued(connection, [(claimed.id, claimed.attempt_number)])
    except Exception as exc:
        log.warning(
            "delivery.retry_publish_failed", delivery_id=claimed.id, error=type(exc).__name__
        )
