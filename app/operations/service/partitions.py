"""Partitions made ahead of need, so that no accept ever meets a day without one; and days
past retention dropped whole, once nothing in them is needed.

Three things make them, each enough alone: every reconcile run, ``herald migrate``, and each
API process, which knows how far ahead the partitions reach and makes more before an accept
would pass the end (``PartitionKeeper.ready``: one comparison per accept while a day or more
is left).
"""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.ids import id_floor, moment_of
from app.operations.repository import partitions
from app.operations.repository.partitions import Partition

log = structlog.get_logger("herald.partitions")

# A partition is made while reads and writes go on, but its attach waits for any other DDL on
# the parent; it gives up rather than keep accepts waiting behind it, and the next try (the
# next accept, or reconcile) makes it.
ATTACH_LOCK_TIMEOUT_MS = 2_000


def days_from(today: date, ahead_days: int) -> list[date]:
    return [today + timedelta(days=n) for n in range(ahead_days + 1)]


async def make_ahead(engine: AsyncEngine, ahead_days: int, *, now: datetime | None = None) -> int:
    """Make the partitions of today and the next ``ahead_days`` days that do not exist yet;
    returns how many were made. One short transaction of its own."""
    today = partitions.day_of(now or datetime.now(UTC))
    async with engine.begin() as connection:
        made = await partitions.make_days(
            connection, days_from(today, ahead_days), lock_timeout_ms=ATTACH_LOCK_TIMEOUT_MS
        )
    if made:
        log.info("partitions.made", count=made, through=str(today + timedelta(days=ahead_days)))
    return made


async def listing(engine: AsyncEngine) -> list[Partition]:
    async with engine.connect() as connection:
        return await partitions.existing(connection)


class PartitionKeeper:
    """One process's knowledge of how far ahead the partitions reach. ``ready`` is what an
    accept awaits before it mints ids: nothing while more than a day is left, else it makes
    the next ``ahead_days`` (once, however many accepts wait). A failed try is not repeated
    for a minute while today is covered: accepts would otherwise queue behind each retry."""

    RETRY_AFTER = timedelta(minutes=1)

    def __init__(self, engine: AsyncEngine, ahead_days: int) -> None:
        self._engine = engine
        self._ahead_days = ahead_days
        self._ready_until = datetime.min.replace(tzinfo=UTC)
        self._next_try = datetime.min.replace(tzinfo=UTC)
        self._making = asyncio.Lock()

    def _settled(self, now: datetime) -> bool:
        return now + timedelta(days=1) < self._ready_until or (
            now < self._ready_until and now < self._next_try
        )

    async def ready(self) -> None:
        if self._settled(datetime.now(UTC)):
            return
        async with self._making:
            now = datetime.now(UTC)
            if self._settled(now):
                return  # another accept made them (or tried) while this one waited
            try:
                await make_ahead(self._engine, self._ahead_days, now=now)
            except Exception as exc:
                if now < self._ready_until:
                    # Today is covered still: the accept goes on, and a later one tries again.
                    self._next_try = now + self.RETRY_AFTER
                    log.warning("partitions.make_failed", error=type(exc).__name__)
                    return
                raise
            last = partitions.day_of(now) + timedelta(days=self._ahead_days)
            self._ready_until = datetime.combine(last + timedelta(days=1), datetime.min.time(), UTC)


async def retire_days(engine: AsyncEngine, before: datetime) -> int:
    """Drop each day of deliveries made before ``before`` that nothing still needs, with the
    same day's events, attempts and custody records; returns how many days went. A day that is
    needed stays whole (retention's batches purge what in it may go), and is asked again on
    the next run. Reads and writes of the tables go on throughout."""
    cutoff = id_floor("dlv", before)
    retired = 0
    async with engine.connect() as pooled:
        connection = await pooled.execution_options(isolation_level="AUTOCOMMIT")
        if not await partitions.hold_retirement(connection):
            return 0  # another process is at it
        try:
            if mended := await partitions.mend(connection):
                log.warning("partitions.mended", partitions=mended)
            found = await partitions.existing(connection)
            named = {p.name: p for p in found}
            for day in found:
                if day.parent == "deliveries" and day.upper and day.upper <= cutoff:
                    retired += await _retire(connection, day, named, before)
        finally:
            await partitions.release_retirement(connection)
    return retired


async def _retire(
    connection: AsyncConnection, day: Partition, named: dict[str, Partition], before: datetime
) -> int:
    """Drop this day with its siblings, unless something in it is needed; 1 if it went.
    Cut short anywhere, the next run's ``mend`` attaches what was detached again."""
    if (why := await partitions.still_needed(connection, day, before)) is not None:
        log.info("partitions.held", partition=day.name, why=why)
        return 0
    await partitions.detach(connection, day)
    # Detached, nothing can change it any more; asked again, as a redrive may have revived a
    # row of it between the question and the detach.
    if (why := await partitions.still_needed(connection, day, before)) is not None:
        await partitions.attach_again(connection, day)
        log.info("partitions.held", partition=day.name, why=why)
        return 0
    siblings = [day]
    for spec in partitions.TABLES:
        sibling = named.get(spec.table + day.name.removeprefix("deliveries"))
        if sibling is not None and sibling is not day and _within(sibling, day):
            await partitions.detach(connection, sibling)
            siblings.append(sibling)
    for partition in siblings:
        await partitions.drop(connection, partition)
    log.info("partitions.dropped", partitions=[p.name for p in siblings])
    return 1


def _within(sibling: Partition, day: Partition) -> bool:
    """Whether every id ``sibling`` may hold was minted within ``day``'s time: the same day,
    or a table from before partitioning that ends no later (an events table that ends later
    holds events of deliveries that are not going)."""
    assert day.upper is not None
    return sibling.upper is not None and moment_of(sibling.upper) <= moment_of(day.upper)
