"""Putting a delivery back in the queue when the job that holds it cannot attempt it now: the
gate deferred it, it ran before it was due, or its lease was given back unused."""

from __future__ import annotations

import uuid

import structlog
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import queue
from app.repositories import delivery_leases

log = structlog.get_logger("herald.delivery")


async def requeue(
    redis: ArqRedis, region: str, delivery_id: str, endpoint_id: str, why: str, *, after: float
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
