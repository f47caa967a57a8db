"""Fan-out: which of a tenant's endpoints an event goes to -- every enabled endpoint of the
event's customer (of no customer, for an event published to none) subscribed to its type
(exactly, by family or to all) whose filter, if it has one, says yes."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Unprocessable
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
    max_fanout: int,
) -> tuple[list[str], list[FilteredOut]]:
    """The endpoints to deliver to, and those a filter passed by (with why). The event's
    filters share one budget (app/programs/budget.py). An event whose subscribers are more
    than the tenant's ``max_fanout`` is refused before any filter runs: what it would cost is
    decided by how many endpoints it reaches, so that is what is bounded."""
    event = filters.Events(event_type, payload, payload_bytes, tenant_id=tenant_id)
    subscribers = await endpoints.subscribed_to(
        session, tenant_id, customer_id, event_type, limit=max_fanout + 1
    )
    if len(subscribers) > max_fanout:
        whose = f"customer {customer_id}'s" if customer_id else "the tenant's own"
        raise Unprocessable(
            f"more than {max_fanout:,} of {whose} endpoints are subscribed to {event_type}; an "
            "event may go to at most that many (max_fanout, GET /v1/limits): narrow the "
            "endpoints' event types, or ask the operator for more"
        )
    return _filtered(event, subscribers)


async def operational_targets(
    session: AsyncSession,
    tenant_id: str,
    event_type: str,
    payload: dict[str, Any],
    payload_bytes: int,
    max_fanout: int,
) -> tuple[list[str], list[FilteredOut]]:
    """``targets_of`` for one of Herald's own events: the tenant's operational endpoints
    subscribed to it. Nobody could be told of a refusal, so past ``max_fanout`` the first
    that many (by id) receive it."""
    event = filters.Events(event_type, payload, payload_bytes, tenant_id=tenant_id)
    subscribers = await endpoints.operational_subscribers(
        session, tenant_id, event_type, limit=max_fanout
    )
    return _filtered(event, subscribers)


def _filtered(
    event: filters.Events, subscribers: list[endpoints.Subscriber]
) -> tuple[list[str], list[FilteredOut]]:
    chosen: list[str] = []
    passed_by: list[FilteredOut] = []
    for subscriber in subscribers:
        if subscriber.filter is None:
            chosen.append(subscriber.endpoint_id)
            continue
        matched, why = event.matches(subscriber.filter)
        if matched:
            chosen.append(subscriber.endpoint_id)
        else:
            passed_by.append(FilteredOut(endpoint_id=subscriber.endpoint_id, reason=why or ""))
    return chosen, passed_by
