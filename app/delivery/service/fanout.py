"""Fan-out: which of a tenant's endpoints an event goes to -- every enabled endpoint subscribed
to its type (exactly, by family or to all) whose filter, if it has one, says yes."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app import filters
from app.delivery.schemas import FilteredOut
from app.endpoints.service import endpoints


async def targets_of(
    session: AsyncSession, tenant_id: str, event_type: str, payload: dict[str, Any]
) -> tuple[list[str], list[FilteredOut]]:
    """The endpoints to deliver to, and those a filter passed by (with why)."""
    chosen: list[str] = []
    passed_by: list[FilteredOut] = []
    for subscriber in await endpoints.subscribed_to(session, tenant_id, event_type):
        if subscriber.filter is None:
            chosen.append(subscriber.endpoint_id)
            continue
        matched, why = filters.matches(subscriber.filter, event_type, payload)
        if matched:
            chosen.append(subscriber.endpoint_id)
        else:
            passed_by.append(FilteredOut(endpoint_id=subscriber.endpoint_id, reason=why or ""))
    return chosen, passed_by
