"""How long each step around a delivery attempt may take, and the helpers that hold a step to it.

A stopping worker waits for its attempts, and a taker must be free again whatever the database
or Redis does: every step ends by itself. The lease bounds the attempt itself: the send, and
every try to record it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

# Before the lease: the destination's gate (its flow policy, read from PostgreSQL at most once a
# second, and one Redis script) and the claim, together. A pool that is saturated for longer
# answers with its own timeout first (5 s, app/core/db.py).
BEFORE_LEASE_SECONDS = 10.0
# Any other step outside the attempt: giving a lease back, the first try to record an attempt.
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


CANCEL_RETRY_SECONDS = 1.0


async def cancel_until_done(task: asyncio.Task[Any]) -> None:
    """Cancel, and cancel again until it ends: a cancellation can be swallowed on its way
    through a library (seen: arq's poll loop went on polling, cancelled, and the worker never
    exited on SIGTERM; and the pump's takers in a blocked BLPOP). Only for loops that have
    nothing to clean up."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=CANCEL_RETRY_SECONDS)
