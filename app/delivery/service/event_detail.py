"""What a tenant reads back of what it sent: an event, its payload as accepted and the
deliveries it became."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound
from app.core.payload_retention import expired, payload_expiry
from app.delivery.repository import deliveries, events
from app.delivery.schemas import EventDelivery, EventOut, FilteredOut


async def event_detail(session: AsyncSession, tenant_id: str, event_id: str) -> EventOut:
    """The event with its deliveries the tenant still sees. Its payload is null once expired;
    once retention dropped its payload's class, the event's row went with it, and what its
    deliveries recorded of it is told (without the filters' verdicts, which went too)."""
    fanned_out = await deliveries.list_for_event(session, tenant_id, event_id)
    found = await events.get_for_tenant(session, tenant_id, event_id)
    # Without a delivery it still sees, an event is shown within the tenant's retention.
    if (found is None or not found.recent) and not fanned_out:
        raise NotFound(f"event {event_id} not found")
    # Accepted in one transaction, the event and its deliveries share the moment and the days.
    told = found.event if found is not None else fanned_out[0]
    expires_at = payload_expiry(told.created_at, told.payload_days)
    payload = found.event.payload if found is not None else None
    gone = payload is None or expired(expires_at)
    filtered = (found.event.filtered_out if found is not None else None) or []
    return EventOut(
        id=event_id,
        event_type=told.event_type,
        payload=None if gone or payload is None else json.loads(payload),
        payload_expires_at=expires_at,
        payload_expired=gone,
        created_at=told.created_at,
        deliveries=[EventDelivery.model_validate(d) for d in fanned_out],
        filtered_out=[FilteredOut(**passed) for passed in filtered],
    )


@dataclass(frozen=True)
class PayloadHead:
    """The start of an event's payload as accepted (the bytes every attempt sends), and its
    size: all of it when ``len(head) == size``; nothing, once it expired (``expired_at``)."""

    head: bytes
    size: int
    expired_at: datetime | None = None

    @property
    def whole(self) -> bytes | None:
        """All of the payload, when the head holds it (and it has not expired)."""
        shown = self.expired_at is None and len(self.head) == self.size
        return self.head if shown else None


async def payload_head(
    session: AsyncSession,
    tenant_id: str,
    event_id: str,
    *,
    most: int | None,
    expires_at: datetime | None,
) -> PayloadHead:
    """At most ``most`` bytes of the tenant's event's payload (None: the whole payload), unless
    it expired (``expires_at``, as its delivery says): then nothing is read."""
    if expired(expires_at):
        return PayloadHead(b"", 0, expired_at=expires_at)
    found = await events.payload_head(session, tenant_id, event_id, most)
    if found is None and expires_at is not None:
        # Its class dropped a moment before its days were out: gone all the same.
        return PayloadHead(b"", 0, expired_at=expires_at)
    if found is None:
        raise NotFound(f"event {event_id} not found")
    return PayloadHead(*found)
