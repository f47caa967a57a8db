"""What a tenant reads back of what it sent: an event, its payload as accepted and the
deliveries it became."""

from __future__ import annotations

import json
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound
from app.delivery.repository import deliveries, events
from app.delivery.schemas import EventDelivery, EventOut, FilteredOut


async def event_detail(session: AsyncSession, tenant_id: str, event_id: str) -> EventOut:
    event = await events.get_for_tenant(session, tenant_id, event_id)
    if event is None:
        raise NotFound(f"event {event_id} not found")
    fanned_out = await deliveries.list_for_event(session, tenant_id, event_id)
    return EventOut(
        id=event.id,
        event_type=event.event_type,
        payload=json.loads(event.payload),
        created_at=event.created_at,
        deliveries=[EventDelivery.model_validate(d) for d in fanned_out],
        filtered_out=[FilteredOut(**passed) for passed in event.filtered_out or []],
    )


@dataclass(frozen=True)
class PayloadHead:
    """The start of an event's payload as accepted (the bytes every attempt sends), and its
    size: all of it when ``len(head) == size``."""

    head: bytes
    size: int


async def payload_head(
    session: AsyncSession, tenant_id: str, event_id: str, *, most: int | None
) -> PayloadHead:
    """At most ``most`` bytes of the tenant's event's payload (None: the whole payload)."""
    found = await events.payload_head(session, tenant_id, event_id, most)
    if found is None:
        raise NotFound(f"event {event_id} not found")
    return PayloadHead(*found)
