"""The `deliver` arq function, kept for one release as a shim: a job published by an API
process of the previous release (one arq job per attempt) during a rolling upgrade wakes its
destination, whose pump then claims whatever is due there. Nothing of this release publishes
such jobs."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import structlog
from arq.worker import Retry
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.db import is_transient
from app.engine.service.deadlines import STEP_SECONDS
from workers.context import WorkerContext

log = structlog.get_logger("herald.worker")

# A job that meets a passing database or Redis error runs again, sooner each time apart
# (0.5 s, 1 s, 2 s, ... at most 30 s: about three minutes in all) rather than leaving its
# destination to the next reconcile run. After that the reconciler is the one to arm it.
TRANSIENT_TRIES = 12
FIRST_RETRY_SECONDS = 0.5
MAX_RETRY_SECONDS = 30.0
# arq fails a job that has run more than its max_tries without running it again, and each
# cancellation at shutdown spends a try as well: far above TRANSIENT_TRIES, so that the count
# above always decides and a job never ends in arq's failure states.
DELIVER_MAX_TRIES = 100


def _passing(exc: BaseException) -> bool:
    return is_transient(exc) or isinstance(exc, RedisConnectionError | RedisTimeoutError)


def _retry_delay(job_try: int) -> float:
    """Exponential, with jitter: the jobs that met one outage together come back spread out."""
    ceiling = min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** (job_try - 1))
    return random.uniform(ceiling / 2, ceiling)  # noqa: S311  (spreading load, not a secret)


async def deliver(ctx: dict[str, Any], delivery_id: str, endpoint_id: str, *_: Any) -> None:
    """Wake the job's destination now. Never ends in arq's failure states (design.md,
    invariant 8): the delivery row owns the retry clock, and a destination left unwoken is
    armed by the next reconcile run. Only a job that could not reach PostgreSQL or Redis runs
    again, a bounded number of times."""
    pump = WorkerContext.of(ctx).pump
    try:
        async with asyncio.timeout(STEP_SECONDS):
            await pump.wake(endpoint_id)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        job_try = int(ctx.get("job_try", 1))
        passing = _passing(exc)
        if passing and job_try < TRANSIENT_TRIES:
            delay = _retry_delay(job_try)
            log.warning(
                "delivery.job_retry",
                delivery_id=delivery_id,
                error=type(exc).__name__,
                job_try=job_try,
                retry_in_seconds=round(delay, 3),
            )
            raise Retry(defer=delay) from exc
        log.exception("delivery.job_failed", delivery_id=delivery_id, transient=passing)
