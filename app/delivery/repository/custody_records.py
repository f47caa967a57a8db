"""Custody records: the dead steps and redrives a delivery's row no longer shows."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import CustodyRecord


async def list_for(session: AsyncSession, delivery_id: str, *, limit: int) -> list[CustodyRecord]:
    """Oldest first, as they happened."""
    rows = await session.execute(
        select(CustodyRecord)
        .where(CustodyRecord.delivery_id == delivery_id)
        .order_by(CustodyRecord.id)
        .limit(limit)
    )
    return list(rows.scalars())
