from __future__ import annotations

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Event


async def insert_event(
    session: AsyncSession, *, event_id: str, tenant_id: str, event_type: str, payload: bytes
) -> None:
    await session.execute(
        insert(Event).values(
            id=event_id, tenant_id=tenant_id, event_type=event_type, payload=payload
        )
    )
