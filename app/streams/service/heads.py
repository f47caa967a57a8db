"""Handing a stream on: whatever ends a stream's head -- a record, a cancel, an operator's
skip -- runs inside ``handing_on``, which locks the streams first and, after the caller's
writes, makes the next delivery of each ended stream its head (app/streams/repository)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.streams.repository import streams
from app.streams.repository.streams import NewHead, StreamKey

__all__ = ["NewHead", "StreamKey", "handing_on", "seconds_until"]


@asynccontextmanager
async def handing_on(
    session: AsyncSession, keys: Sequence[StreamKey], *, skip_halted: bool = False
) -> AsyncIterator[list[NewHead]]:
    """Around writes that may end the heads of ``keys``' streams, in the caller's transaction:
    the streams are locked before them, and handed on after them. Yields the list the new
    heads are put in once the block's writes are done; the caller arms their destinations
    after its commit. A stream whose head is still live is left as it is, so passing a stream
    whose head did not end (a lost lease, a retry) costs a lookup, nothing more."""
    await streams.lock(session, keys)
    new_heads: list[NewHead] = []
    yield new_heads
    new_heads.extend(await streams.hand_on(session, keys, skip_halted=skip_halted))


def seconds_until(head: NewHead, now: datetime | None = None) -> float:
    """When the new head is due, from now (its time is the database's clock: a skew only makes
    the wake-up early or late by that much)."""
    return (head.next_attempt_at - (now or datetime.now(UTC))).total_seconds()


async def streams_of(session: AsyncSession, delivery_ids: Sequence[str]) -> list[StreamKey]:
    """The streams of these deliveries, to lock before writing them."""
    return await streams.streams_of(session, delivery_ids) if delivery_ids else []


@asynccontextmanager
async def requeuing(session: AsyncSession, delivery_ids: Sequence[str]) -> AsyncIterator[None]:
    """Around a redrive of ``delivery_ids``, in the caller's transaction: their streams locked
    before, and the revived ones put back in their streams after (app/streams/repository)."""
    await streams.lock(session, await streams_of(session, delivery_ids))
    yield
    await streams.requeue(session, delivery_ids)


async def lock_streams(session: AsyncSession, keys: Sequence[StreamKey]) -> None:
    await streams.lock(session, keys)


async def requeue(session: AsyncSession, delivery_ids: Sequence[str]) -> None:
    """Put just-revived ordered deliveries back in their streams, which the caller locked."""
    await streams.requeue(session, delivery_ids)
