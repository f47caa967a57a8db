"""Partitions made ahead of need, so that no accept ever meets a day without one; and days
past retention dropped whole, once nothing in them is needed.

Three things make them, each enough alone: every reconcile run, ``herald migrate``, and each
API process, which knows how far ahead the partitions reach and makes more before an accept
would pass the end (``PartitionKeeper.ready``: one comparison per accept while a day or more
is left).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, date, datetime, timedelta

import structlog
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from app.core.ids import id_floor, moment_of
from app.operations.repository import partitions, retirements
from app.operations.repository.partitions import Partition

log = structlog.get_logger("herald.partitions")

# A partition is made while reads and writes go on, but its attach waits for any other DDL on
# the parent; it gives up rather than keep accepts waiting behind it, and the next try (the
# next accept, or reconcile) makes it.
ATTACH_LOCK_TIMEOUT_MS = 2_000


def days_from(today: date, ahead_days: int) -> list[date]:
    return [today + timedelta(days=n) for n in range(ahead_days + 1)]


async def make_ahead(
    engine: AsyncEngine, ahead_days: int, retention_days: float, *, now: datetime | None = None
) -> int:
    """Make the partitions of today and the next ``ahead_days`` days that do not exist yet,
    a day of events with the payload classes the tenants' settings call for now; returns how
    many were made. One short transaction of its own."""
    today = partitions.day_of(now or datetime.now(UTC))
    async with engine.begin() as connection:
        kept = await partitions.payloads_kept(connection)
        made = await partitions.make_days(
            connection,
            days_from(today, ahead_days),
            classes=partitions.payload_classes(retention_days, kept),
            lock_timeout_ms=ATTACH_LOCK_TIMEOUT_MS,
        )
    if made:
        log.info("partitions.made", count=made, through=str(today + timedelta(days=ahead_days)))
    return made


# The first day a day of events made ahead may be made again, empty, with other payload
# classes: no id minted now reaches it (today's and tomorrow's may already hold rows).
REMADE_FROM_DAYS = 2
# A payload's days run from its accept's transaction time, which may fall a moment after the
# day its id was minted in ends: a class is dropped this long after its last payload's days.
EXPIRY_GRACE = timedelta(hours=1)


async def remake_for_classes(
    engine: AsyncEngine, ahead_days: int, retention_days: float, *, now: datetime | None = None
) -> int:
    """Days of events made ahead without a payload class the tenants' settings call for now
    (a tenant set a payload retention since) are made again with it, while still empty, from
    the day after tomorrow on; returns how many. Each is detached concurrently (beside reads
    and writes), found empty again, dropped and made at once; a failure stops there, logged,
    and the next run's ``make_ahead`` makes whatever is missing before anything else."""
    first = partitions.day_of(now or datetime.now(UTC)) + timedelta(days=REMADE_FROM_DAYS)
    remade = 0
    try:
        async with _retiring(engine) as connection:
            if connection is None:
                return 0
            kept = await partitions.payloads_kept(connection)
            wanted = partitions.payload_classes(retention_days, kept)
            found = await partitions.existing(connection)
            for day in found:
                if day.parent != "events" or not day.lower or moment_of(day.lower).date() < first:
                    continue
                # Classes are only ever added to a day: a tenant turning its setting on and off
                # costs each day ahead one re-make a step at most, never one every run.
                made = partitions.classes_of(day, found)
                if not set(wanted) <= set(made):
                    remade += await _remake(engine, connection, day, sorted({*made, *wanted}))
    except Exception as exc:  # a lock not had: the next run asks again
        log.warning("partitions.remake_failed", error=type(exc).__name__)
    return remade


async def _remake(
    engine: AsyncEngine, connection: AsyncConnection, day: Partition, classes: list[int]
) -> int:
    """Make this empty day of events again with ``classes``; 0 if it holds a row."""
    if not await retirements.empty(connection, day):
        return 0
    await retirements.detach(connection, day)
    if not await retirements.empty(connection, day):  # written to before the detach ended
        await retirements.attach_again(connection, day)
        return 0
    await retirements.drop(connection, day)
    async with engine.begin() as making:
        await partitions.make_days(
            making,
            [moment_of(day.lower or "").date()],
            classes=classes,
            lock_timeout_ms=ATTACH_LOCK_TIMEOUT_MS,
        )
    log.info("partitions.remade", partition=day.name, classes=classes)
    return 1


async def listing(engine: AsyncEngine) -> list[Partition]:
    async with engine.connect() as connection:
        return await partitions.existing(connection)


class PartitionKeeper:
    """One process's knowledge of how far ahead the partitions reach. ``ready`` is what an
    accept awaits before it mints ids: nothing while more than a day is left, else it makes
    the next ``ahead_days`` (once, however many accepts wait). A failed try is not repeated
    for a minute while today is covered: accepts would otherwise queue behind each retry."""

    RETRY_AFTER = timedelta(minutes=1)

    def __init__(self, engine: AsyncEngine, ahead_days: int, retention_days: float) -> None:
        self._engine = engine
        self._ahead_days = ahead_days
        self._retention_days = retention_days
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
                await make_ahead(self._engine, self._ahead_days, self._retention_days, now=now)
            except Exception as exc:
                if now < self._ready_until:
                    # Today is covered still: the accept goes on, and a later one tries again.
                    self._next_try = now + self.RETRY_AFTER
                    log.warning("partitions.make_failed", error=type(exc).__name__)
                    return
                raise
            last = partitions.day_of(now) + timedelta(days=self._ahead_days)
            self._ready_until = datetime.combine(last + timedelta(days=1), datetime.min.time(), UTC)


@asynccontextmanager
async def _retiring(engine: AsyncEngine) -> AsyncIterator[AsyncConnection | None]:
    """An autocommit connection holding the retirement lock, after what a retirement cut
    short left is mended; None when another process holds the lock."""
    async with engine.connect() as pooled:
        connection = await pooled.execution_options(isolation_level="AUTOCOMMIT")
        if not await retirements.hold_retirement(connection):
            yield None  # another process is at it
            return
        try:
            if mended := await retirements.mend(connection):
                log.warning("partitions.mended", partitions=mended)
            yield connection
        finally:
            await retirements.release_retirement(connection)


async def retire_days(engine: AsyncEngine, before: datetime) -> int:
    """Drop each day of deliveries made before ``before`` that nothing still needs, with the
    same day's events, attempts and custody records; returns how many days went. A day that is
    needed stays whole (retention's batches purge what in it may go), and is asked again on
    the next run. Reads and writes of the tables go on throughout."""
    cutoff = id_floor("dlv", before)
    retired = 0
    async with _retiring(engine) as connection:
        if connection is None:
            return 0
        found = await partitions.existing(connection)
        named = {p.name: p for p in found}
        for day in found:
            if day.parent == "deliveries" and day.upper and day.upper <= cutoff:
                retired += await _retire(connection, day, named, before)
    return retired


async def expire_payloads(engine: AsyncEngine, *, now: datetime | None = None) -> int:
    """Drop each day's payload class whose payloads are all past their days, unless a live
    delivery of it still has one to send; returns how many classes went. The day's records
    (deliveries, attempts, custody records) stay: they go with their day."""
    now = now or datetime.now(UTC)
    expired = 0
    async with _retiring(engine) as connection:
        if connection is None:
            return 0
        found = await partitions.existing(connection)
        named = {p.name: p for p in found}
        for payload_class in found:
            day = named.get(payload_class.parent)
            if day is None or day.parent != "events" or payload_class.upper is None:
                continue  # not a class, or the day's last: it goes with its day
            assert day.upper is not None  # a day of events ends where the next begins
            # Its longest-kept payload was made by the day's end and kept (upper - 1) days.
            longest = timedelta(days=int(payload_class.upper) - 1)
            if now < moment_of(day.upper) + longest + EXPIRY_GRACE:
                continue
            deliveries = named.get("deliveries" + day.name.removeprefix("events"))
            if deliveries is not None:
                expired += await _expire(connection, payload_class, deliveries)
    return expired


async def _expire(connection: AsyncConnection, payload_class: Partition, day: Partition) -> int:
    """Drop this class of payloads unless a live delivery of ``day`` needs one; 1 if it went.
    Asked again once detached: a redrive may have revived one between the two."""
    if (why := await retirements.class_still_needed(connection, payload_class, day)) is not None:
        log.info("partitions.held", partition=payload_class.name, why=why)
        return 0
    await retirements.detach(connection, payload_class)
    if (why := await retirements.class_still_needed(connection, payload_class, day)) is not None:
        await retirements.attach_again(connection, payload_class)
        log.info("partitions.held", partition=payload_class.name, why=why)
        return 0
    await retirements.drop(connection, payload_class)
    log.info("partitions.dropped", partitions=[payload_class.name])
    return 1


async def _retire(
    connection: AsyncConnection, day: Partition, named: dict[str, Partition], before: datetime
) -> int:
    """Drop this day with its siblings, unless something in it is needed; 1 if it went.
    Cut short anywhere, the next run's ``mend`` attaches what was detached again."""
    if (why := await retirements.still_needed(connection, day, before)) is not None:
        log.info("partitions.held", partition=day.name, why=why)
        return 0
    await retirements.detach(connection, day)
    # Detached, nothing can change it any more; asked again, as a redrive may have revived a
    # row of it between the question and the detach.
    if (why := await retirements.still_needed(connection, day, before)) is not None:
        await retirements.attach_again(connection, day)
        log.info("partitions.held", partition=day.name, why=why)
        return 0
    siblings = [day]
    for spec in partitions.TABLES:
        sibling = named.get(spec.table + day.name.removeprefix("deliveries"))
        if sibling is not None and sibling is not day and _within(sibling, day):
            await retirements.detach(connection, sibling)
            siblings.append(sibling)
    for partition in siblings:
        await retirements.drop(connection, partition)
    log.info("partitions.dropped", partitions=[p.name for p in siblings])
    return 1


def _within(sibling: Partition, day: Partition) -> bool:
    """Whether every id ``sibling`` may hold was minted within ``day``'s time: the same day,
    or a table from before partitioning that ends no later (an events table that ends later
    holds events of deliveries that are not going)."""
    assert day.upper is not None
    return sibling.upper is not None and moment_of(sibling.upper) <= moment_of(day.upper)
