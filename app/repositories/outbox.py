from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import OutboxEntry


async def insert_entries(session: AsyncSession, delivery_ids: Sequence[str], region: str) -> None:
    """Record the intent to publish, in the caller's transaction. A delivery that already has an
    unpublished entry keeps that one (the partial unique index makes this idempotent)."""
    if not delivery_ids:
        return
    await session.execute(
        pg_insert(OutboxEntry)
        .values([{"delivery_id": d, "region": region} for d in delivery_ids])
        .on_conflict_do_nothing(
            index_elements=[OutboxEntry.delivery_id],
            index_where=OutboxEntry.published_at.is_(None),
        )
    )
