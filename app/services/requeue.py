"""Putting a delivery back in the queue when the job that holds it cannot attempt it now: the
gate deferred it, it ran before it was due, it found the delivery leased, or its lease was given
back unused; and queueing a recorded retry."""

from __future__ import annotations

import asyncio
import random
import uuid

import structlog
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import metrics, queue
from app.db import single_statements
from app.repositories import deliveries, delivery_leases
from app.services.deadlines import STEP_SECONDS

log = structlog.get_logger("herald.delivery")

# A lease given back comes back after this long (jittered): not straight into the congestion
# that made its claim late (a saturated pool, a starved event loop), and not all together.
GIVE_BACK_MIN_SECONDS = 1.0
GIVE_BACK_MAX_SECONDS = 3.0
# A job coming back for a lease's end comes just after it (the claim needs `lease_until < now()`).
PAST_THE_END_SECONDS = 0.05
# A lease this close to its end is most likely its own job come back for it, early by the skew
# between this worker's clock and the database's (see redefer_if_early).
_NEARLY_OVER_SECONDS = 2.0


async def requeue(
    redis: ArqRedis,
    region: str,
    delivery_id: str,
    endpoint_id: str,
    why: str,
    *,
    after: float,
    once_per: str | None = None,
) -> None:
    """A job of its own for this delivery, ``after`` seconds from now. Its id is new (``why``
    plus a random part: g gate, w wait, l lease given back), so arq never drops it as a
    duplicate of the job running now. With ``once_per``, the id is ``why`` plus that instead:
    however many jobs ask, arq keeps one."""
    job_id = f"{delivery_id}:{why}{once_per or uuid.uuid4().hex[:12]}"
    job = queue.QueuedJob(job_id, delivery_id, endpoint_id, queue.seconds_from_now(after))
    await queue.publish(redis, region, [job])


async def give_back(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: ArqRedis,
    region: str,
    claimed: delivery_leases.ClaimedDelivery,
    token: uuid.UUID,
    *,
    left: float,
) -> None:
    """Too little lease left for a whole request and its record (the worker stalled since
    the claim): a request sent now could still be under way when the lease ends and another
    worker sends it too. Give the lease back, uncounted, and queue the delivery again."""
    metrics.LEASES_GIVEN_BACK.inc()
    log.warning(
        "delivery.lease_too_short", delivery_id=claimed.id, attempt=claimed.attempt_number,
        lease_left_seconds=round(left, 3),
    )  # fmt: skip
    async with asyncio.timeout(STEP_SECONDS), single_statements(sessionmaker) as connection:
        await delivery_leases.release(connection, claimed.id, token=token)
    # Queued again even when the release was refused: then the lease has run out, perhaps with
    # nobody holding the delivery, and a job that finds it leased after all does no harm (the
    # claim is fenced).
    after = random.uniform(GIVE_BACK_MIN_SECONDS, GIVE_BACK_MAX_SECONDS)  # noqa: S311
    async with asyncio.timeout(STEP_SECONDS):
        await requeue(redis, region, claimed.id, claimed.endpoint_id, "l", after=after)


async def redefer_if_early(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: ArqRedis,
    region: str,
    delivery_id: str,
    endpoint_id: str,
) -> None:
    """A job that could not claim its delivery must not just vanish while the delivery is not
    finished: put a job back for when it can be claimed. That covers a job firing before its
    due time (clock skew, an early duplicate), arq rerunning a dead worker's job, and a claim
    that committed but whose answer was lost (the job runs again and finds the lease its own
    claim took, which nobody holds) -- none of it waits for the reconciler.

    A live worker may hold the lease just as well, with any number of duplicate jobs running
    into it: one job comes back per lease (its id names the lease), for when the lease ends."""
    async with sessionmaker() as session, session.begin():
        claimable = await delivery_leases.when_claimable(session, delivery_id, region)
    if claimable is None:
        log.debug("delivery.skipped", delivery_id=delivery_id, why="finished or gone")
        return
    after = max(claimable.seconds, 0.0) + PAST_THE_END_SECONDS
    token = claimable.lease_token
    if token is not None and claimable.seconds > _NEARLY_OVER_SECONDS:
        await requeue(redis, region, delivery_id, endpoint_id, "L", after=after, once_per=token.hex)
    else:
        # Nearly over, this may be that very job, come back a moment early: arq would refuse
        # its own id while it runs, so it comes back under a new one.
        await requeue(redis, region, delivery_id, endpoint_id, "w", after=after)


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
