"""How an endpoint's recent attempts went, over the windows its stats report (the endpoints
domain asks; the attempts table is this domain's)."""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.repository import attempts
from app.delivery.repository.attempts import WindowCounts

WINDOWS = {"last_hour": timedelta(hours=1), "last_day": timedelta(days=1)}


async def recent_windows(session: AsyncSession, endpoint_id: str) -> dict[str, WindowCounts]:
    """Attempts and successes to the endpoint in each of ``WINDOWS``, in one query."""
    return await attempts.counts_since(session, endpoint_id, WINDOWS)
