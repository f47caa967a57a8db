"""Streams as the API, the console, the CLI and the status page read them."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Delivery
from app.streams.repository import views
from app.streams.repository.streams import StreamKey
from app.streams.repository.views import HaltedStream, StreamRow, StreamView

__all__ = ["HaltedStream", "StreamKey", "StreamRow", "StreamView", "halted", "of_delivery", "page"]


async def of_delivery(session: AsyncSession, delivery: Delivery) -> StreamView | None:
    """The stream an ordered delivery is numbered in, as it stands; None when unordered."""
    if delivery.stream is None:
        return None
    return await views.view(session, StreamKey(delivery.endpoint_id, delivery.stream))


async def halted(
    session: AsyncSession, *, endpoint_id: str | None = None, limit: int = 100
) -> list[HaltedStream]:
    return await views.halted(session, endpoint_id=endpoint_id, limit=limit)


async def page(
    session: AsyncSession,
    endpoint_id: str,
    *,
    after: str | None = None,
    halted_only: bool = False,
    limit: int = 50,
) -> list[StreamRow]:
    """An endpoint's streams with a head (live work, or halted), in key order after ``after``
    (the endpoint is the caller's to check)."""
    return await views.page(session, endpoint_id, after=after, halted_only=halted_only, limit=limit)
