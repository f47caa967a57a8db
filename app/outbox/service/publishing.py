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
    """The API's fast path: publish right after commit, in the background. Two loops, each
    taking whatever accumulated while its last round trip ran: one arms the destinations
    (latency: the wake-up is what a delivery waits for), the other deletes the rows armed so
    far (one statement for many accepts; nothing waits for it). Best effort by design --
    anything it fails to publish (Redis down, process killed) is still an unpublished outbox
    row, which the relay picks up; a row armed but not yet deleted is armed again, harmlessly."""

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
        self._wakeups = Wakeups(redis, region)
        self._max_batch = max_batch
        self._max_backlog = max_backlog
        self._backlog: asyncio.Queue[PendingPublication] = asyncio.Queue(max_backlog)
        self._armed: list[int] = []  # outbox ids armed, to delete
        self._armed_some = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def submit(self, publications: Sequence[PendingPublication]) -> None:
        for publication in publications:
            try:
                self._backlog.put_nowait(publication)
            except asyncio.QueueFull:
                return  # the relay will publish it; memory stays bounded

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._arm(), name="herald-fast-publisher"),
            asyncio.create_task(self._mark(), name="herald-fast-publisher-marks"),
        ]

    async def stop(self, drain_seconds: float = 5.0) -> None:
        if not self._tasks:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._backlog.join(), drain_seconds)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        with contextlib.suppress(Exception):  # left to the relay, as any failed mark is
            async with asyncio.timeout(drain_seconds):
                while self._armed:
                    await self._mark_once()

    async def _arm(self) -> None:
        while True:
            batch = [await self._backlog.get()]
            while len(batch) < self._max_batch and not self._backlog.empty():
                batch.append(self._backlog.get_nowait())
            try:
                with tracing.TRACER.start_as_current_span(
                    "herald.publish", attributes={"herald.publications": len(batch)}
                ):
                    await self._wakeups.arm(destinations(batch))
                if len(self._armed) < self._max_backlog:
                    self._armed += [p.outbox_id for p in batch]
                    self._armed_some.set()
            except Exception as exc:
                log.warning("publish.fast_path_failed", count=len(batch), error=type(exc).__name__)
            finally:
                for _ in batch:
                    self._backlog.task_done()

    async def _mark(self) -> None:
        while True:
            await self._armed_some.wait()
            self._armed_some.clear()
            try:
                await self._mark_once()
            except Exception as exc:  # the relay deletes them, after arming them again
                log.warning("publish.mark_failed", error=type(exc).__name__)
            if self._armed:
                self._armed_some.set()

    async def _mark_once(self) -> None:
        ids, self._armed = self._armed[: self._max_batch], self._armed[self._max_batch :]
        try:
            async with single_statements(self._sessionmaker) as connection:
                await outbox.mark_published(connection, ids)
        except asyncio.CancelledError:
            self._armed[:0] = ids  # for the stop's last round
            raise
