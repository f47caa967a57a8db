from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import LargeBinary, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import is_id
from app.models import Event


async def insert_event(
    session: AsyncSession,
    *,
    event_id: str,
    tenant_id: str,
    event_type: str,
    payload: bytes,
    customer_id: str | None = None,
    filtered_out: list[dict[str, str]] | None = None,
    traceparent: str | None = None,
) -> int:
    """Insert the event; returns the days its payload is kept (its tenant's setting, as every
    accept decides it), for its deliveries to carry."""
    inserted = await session.execute(
        insert(Event)
        .values(
            id=event_id,
            tenant_id=tenant_id,
            customer_id=customer_id,
            event_type=event_type,
            payload=payload,
            filtered_out=filtered_out,
            traceparent=traceparent,
            payload_days=func.payload_days_of(tenant_id),
        )
        .returning(Event.payload_days)
    )
    return int(inserted.scalar_one())


@dataclass(frozen=True)
class TenantEvent:
    event: Event
    recent: bool  # made within its tenant's retention (the SQL function kept_since)


async def get_for_tenant(
    session: AsyncSession, tenant_id: str, event_id: str
) -> TenantEvent | None:
    if not is_id(event_id):
        return None
    recent = Event.created_at >= func.kept_since(tenant_id)
    query = select(Event, recent).where(Event.id == event_id, Event.tenant_id == tenant_id)
    row = (await session.execute(query)).one_or_none()
    return None if row is None else TenantEvent(row[0], bool(row[1]))


async def owner_of(session: AsyncSession, event_id: str) -> str | None:
    """The tenant an event belongs to, whoever's it is (an admin's search); None if none."""
    if not is_id(event_id):
        return None
    query = select(Event.tenant_id).where(Event.id == event_id)
    return (await session.execute(query)).scalar_one_or_none()


async def payload_head(
    session: AsyncSession, tenant_id: str, event_id: str, most: int | None
) -> tuple[bytes, int] | None:
    """The first ``most`` bytes of the event's payload (all of it when None) and its size in
    bytes, cut in the database so that a large payload is never read whole for a glimpse."""
    if not is_id(event_id):
        return None
    head = (
        Event.payload if most is None else func.substring(Event.payload, 1, most, type_=LargeBinary)
    )
    query = select(head, func.octet_length(Event.payload)).where(
        Event.id == event_id, Event.tenant_id == tenant_id
    )
    row = (await session.execute(query)).one_or_none()
    return None if row is None else (bytes(row[0]), int(row[1]))
