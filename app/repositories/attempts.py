from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert, select
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


async def insert_attempt(
    session: AsyncSession,
    *,
    delivery_id: str,
    attempt_number: int,
    started_at: datetime,
    duration_ms: int,
    status_code: int | None,
    outcome: str,
    error: str | None,
    response_body: str | None,
) -> None:
    await session.execute(
        insert(Attempt).values(
            delivery_id=delivery_id,
            attempt_number=attempt_number,
            started_at=started_at,
            duration_ms=duration_ms,
            status_code=status_code,
            outcome=outcome,
            error=error,
            response_body=response_body,
        )
    )
