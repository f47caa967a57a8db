from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Attempt


async def list_page(
    session: AsyncSession, delivery_id: str, *, limit: int, after_number: int | None
) -> list[Attempt]:
    """Oldest first: an attempt log reads in the order things happened."""
    query = select(Attempt).where(Attempt.delivery_id == delivery_id)
    if after_number is not None:
        query = query.where(Attempt.attempt_number > after_number)
    return list(
        (await session.execute(query.order_by(Attempt.attempt_number).limit(limit))).scalars()
    )
