"""Reconcile's repair of streams left without a live, scheduled head (app/streams/repository/
repair.py says how one could be): found from PostgreSQL alone, mended under the streams' locks
the way a hand-on would have mended them."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from app.streams.repository import repair
from app.streams.repository.repair import StreamsPage
from app.streams.service.heads import NewHead, StreamKey, handing_on

__all__ = ["START", "StreamsPage", "live_streams", "mend"]

START = StreamKey("", "")  # the cursor before every stream


async def live_streams(
    connection: asyncpg.Connection, *, region: str, after: StreamKey, limit: int
) -> StreamsPage:
    return await repair.live_streams(connection, region=region, after=after, limit=limit)


async def mend(session: AsyncSession, keys: Sequence[StreamKey]) -> list[NewHead]:
    """In the caller's transaction: give each stream a row, hand on the ones whose head ended
    (or is missing), and schedule a live head that has no schedule. Streams a hand-on reached
    first meanwhile are left as they are. Returns the heads whose destinations need arming."""
    await repair.restore_rows(session, keys)
    async with handing_on(session, keys) as new_heads:
        pass
    return new_heads + await repair.schedule_heads(session, keys)
