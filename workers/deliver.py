"""The arq job: a thin shell around the dispatcher."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import structlog
from arq.worker import Retry
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.db import is_transient
from app.services.dispatch import Dispatcher
from app.services.pump import Pump

log = structlog.get_logger("herald.worker")

# A job that meets a passing database or Redis error runs again, sooner each time apart
# (0.5 s, 1 s, 2 s, ... at most 30 s: about three minutes in all) rather than leaving its
# delivery to wait for the reconciler (ENQUEUED_STALE_SECONDS and the next cron run). After
# that the reconciler is the one to bring it back.
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
    """Never ends in arq's failure states (design.md, invariant 8): the delivery row owns the
    retry clock, and anything left half-done is visible there to the reconciler. Only a job
    that could not reach PostgreSQL or Redis runs again, a bounded number of times; that is
    about the job getting through, not a retry of the delivery (nothing counts an attempt)."""
    dispatcher: Dispatcher = ctx["dispatcher"]
    pump: Pump | None = ctx.get("pump")
    try:
        if pump is not None:
            # A job from a process still on the job engine (a rolling upgrade): served by
            # waking its destination, whose pump then claims whatever is due there.
            await pump.wake(endpoint_id)
            return
        await dispatcher.deliver(delivery_id, endpoint_id)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        job_try = int(ctx.get("job_try", 1))
        passing = _passing(exc)
        if passing and job_try < TRANSIENT_TRIES:
            delay = _retry_delay(job_try)
            log.warning(
                "delivery.job_retry", delivery_id=delivery_id, error=type(exc).__name__,
                job_try=job_try, retry_in_seconds=round(delay, 3),
            )  # fmt: skip
            raise Retry(defer=delay) from exc
        log.exception("delivery.job_failed", delivery_id=delivery_id, transient=passing)
