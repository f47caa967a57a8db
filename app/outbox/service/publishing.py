"""Outbox -> Redis: arm the destinations of committed wake-ups, then delete the rows.

The order is the invariant: Redis holds the wake-ups first, the rows go after, in a short
transaction of its own (never one held across Redis). A crash in between arms them again
later; arming only ever moves a destination's wake-up earlier, so that costs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from datetime import UTC, datetime

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import tracing
from app.core.db import single_statements
from app.core.faults import crash_point
from app.core.redis_clients import FlowRedis
from app.flow.service.wakeups import Arm, Wakeups
from app.outbox.repository import outbox
from app.outbox.repository.outbox import PendingPublication

log = structlog.get_logger("herald.publish")


async def publish_and_mark(
    sessionmaker: async_sessionmaker[AsyncSession],
    redis: FlowRedis,
    region: str,
    publications: Sequence[PendingPublication],
    *,
    fault: str | None = None,
) -> None:
    with tracing.TRACER.start_as_current_span(
        "herald.publish", attributes={"herald.publications": len(publications)}
    ):
        await Wakeups(redis, region).arm(destinations(publications))
        crash_point("relay.after_enqueue_before_mark", fault)
        async with single_statements(sessionmaker) as connection:
            await outbox.mark_published(connection, [p.outbox_id for p in publications])


def destinations(publications: Sequence[PendingPublication]) -> list[Arm]:
    """One wake-up per destination, for its earliest publication: however many rows a page
    holds for one endpoint, Redis gets one entry."""
    now = datetime.now(UTC)
    earliest: dict[tuple[str, str], float] = {}
    for p in publications:
        key = (p.tenant_id, p.endpoint_id)
        # run_at is the database's clock; the skew to ours only makes the wake-up early or
        # late by that much (an early one finds nothing due and settles for the right time).
        in_seconds = (p.run_at - now).total_seconds()
        earliest[key] = min(in_seconds, earliest.get(key, in_seconds))
    return [Arm(tenant, endpoint, at) for (tenant, endpoint), at in earliest.items()]


class FastPublisher:
    """The API's fast path: publish right after commit, in the background, batching whatever
    accumulated meanwhile. Best effort by design -- anything it fails to publish (Redis down,
    process killed) is still an unpublished outbox row, which the relay picks up."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        redis: FlowRedis,
        region: str,
        *,
        max_batch: int = 500,
        max_backlog: int = 50_000,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._redis = redis
        self._region = region
        self._max_batch = max_batch
        self._backlog: asyncio.Queue[PendingPublication] = asyncio.Queue(max_backlog)
        self._task: asyncio.Task[None] | None = None

    def submit(self, publications: Sequence[PendingPublication]) -> None:
        for publication in publications:
            try:
                self._backlog.put_nowait(publication)
            except asyncio.QueueFull:
                return  # the relay will publish it; memory stays bounded

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="herald-fast-publisher")

    async def stop(self, drain_seconds: float = 5.0) -> None:
        if self._task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._backlog.join(), drain_seconds)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _run(self) -> None:
        while True:
            batch = [await self._backlog.get()]
            while len(batch) < self._max_batch and not self._backlog.empty():
                batch.append(self._backlog.get_nowait())
            try:
                await publish_and_mark(self._sessionmaker, self._redis, self._region, batch)
            except Exception as exc:
                log.warning("publish.fast_path_failed", count=len(batch), error=type(exc).__name__)
            finally:
                for _ in batch:
                    self._backlog.task_done()
