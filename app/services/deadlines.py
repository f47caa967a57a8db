"""How long each step of a delivery job may take, and the helpers that hold a step to it.

arq fails a job that outlives its timeout (design.md, invariant 8: never), and a stopping worker
waits for its jobs: both need a job whose every step ends by itself, whatever the database or
Redis does. workers/runner.py adds these bounds up into arq's job timeout. The lease bounds the
attempt itself: the send, and every try to record it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, TypeVar

import structlog

log = structlog.get_logger("herald.delivery")

T = TypeVar("T")

# Before the lease: the destination's gate (its flow policy, read from PostgreSQL at most once a
# second, and one Redis script) and the claim, together. A pool that is saturated for longer
# answers with its own timeout first (5 s, app/db.py).
BEFORE_LEASE_SECONDS = 10.0
# Any other step outside the attempt: re-queueing a delivery, giving a lease back, scheduling a
# retry's job, pausing the destination after a record, releasing the gate's slot.
STEP_SECONDS = 5.0


async def unstoppable(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to its end even if the caller is cancelled meanwhile (a shutdown past its
    grace), then pass the cancellation on. Only for work that must not be cut short and that is
    bounded by itself: giving back a lease, recording an attempt that was sent."""
    task = asyncio.ensure_future(work)
    cancelled = False
    while not task.done():
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            cancelled = True
    result = task.result()
    if cancelled:
        raise asyncio.CancelledError
    return result


async def best_effort(work: Awaitable[None], event: str, **fields: Any) -> None:
    """One step that may be skipped, held to STEP_SECONDS: what it does is already true in the
    delivery row, or comes back by itself (a lost retry job only delays the retry until the
    reconciler finds the row; a pause or a gate slot in Redis expires)."""
    try:
        async with asyncio.timeout(STEP_SECONDS):
            await work
    except TimeoutError:
        log.warning(event, error="TimeoutError", seconds=STEP_SECONDS, **fields)


CANCEL_RETRY_SECONDS = 1.0


async def cancel_until_done(task: asyncio.Task[Any]) -> None:
    """Cancel, and cancel again until it ends: a cancellation can be swallowed on its way
    through a library (seen: arq's poll loop went on polling, cancelled, and the worker never
    exited on SIGTERM; and the pump's takers in a blocked BLPOP). Only for loops that have
    nothing to clean up."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_RETRY_SECONDS)
