"""Streams as the API, the console and the status page read them."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Delivery
from app.streams.repository import streams
from app.streams.repository.streams import StreamKey, StreamView

__all__ = ["StreamKey", "StreamView", "of_delivery"]


async def of_delivery(session: AsyncSession, delivery: Delivery) -> StreamView | None:
    """The stream an ordered delivery is numbered in, as it stands; None when unordered."""
    if delivery.stream is None:
        return None
    return await streams.view(session, StreamKey(delivery.endpoint_id, delivery.stream))


async def halted(
    session: AsyncSession, *, endpoint_id: str | None = None, limit: int = 100
) -> list[streams.HaltedStream]:
    return await streams.halted(session, endpoint_id=endpoint_id, limit=limit)
