"""Fan-out: which of a tenant's endpoints an event goes to -- every enabled endpoint of the
event's customer (of no customer, for an event published to none) subscribed to its type
(exactly, by family or to all) whose filter, if it has one, says yes."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.schemas import FilteredOut
from app.endpoints.service import endpoints
from app.programs import filters


async def targets_of(
    session: AsyncSession,
    tenant_id: str,
    customer_id: str | None,
    event_type: str,
    payload: dict[str, Any],
    payload_bytes: int,
) -> tuple[list[str], list[FilteredOut]]:
    """The endpoints to deliver to, and those a filter passed by (with why). The event's
    filters share one budget (app/programs/budget.py)."""
    chosen: list[str] = []
    passed_by: list[FilteredOut] = []
    event = filters.Events(event_type, payload, payload_bytes)
    for subscriber in await endpoints.subscribed_to(session, tenant_id, customer_id, event_type):
        if subscriber.filter is None:
            chosen.append(subscriber.endpoint_id)
            continue
        matched, why = event.matches(subscriber.filter)
        if matched:
            chosen.append(subscriber.endpoint_id)
        else:
            passed_by.append(FilteredOut(endpoint_id=subscriber.endpoint_id, reason=why or ""))
    return chosen, passed_by
