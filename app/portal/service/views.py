"""What the portal's fragments show and do, always within the visitor's scope: one customer's
endpoints, what was sent to them, the tenant's catalogue. Every read and change goes through
the same service functions the tenant's API uses, narrowed by the session's ``Scope`` -- so
another customer's endpoint or delivery is not found, exactly as another tenant's is not."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.catalogue.service import event_types
from app.delivery.service import event_detail, listings, transformed_views
from app.delivery.service.payload_views import PREVIEW_BYTES, PayloadView, payload_view
from app.delivery.service.transformed_views import TransformedView
from app.endpoints.service import endpoints
from app.models import Attempt, Delivery, Endpoint, EventTypeDef
from app.portal.service.health import Health, TimeWriter, health_of, next_attempt_said
from app.portal.service.sessions import Visitor

PAGE = 50
CATALOGUE_MOST = 200


def require(visitor: Visitor, capability: str) -> None:
    visitor.require(capability)


@dataclass(frozen=True)
class ListedEndpoint:
    endpoint: Endpoint
    health: Health


async def endpoint_list(
    session: AsyncSession, visitor: Visitor, when: TimeWriter
) -> list[ListedEndpoint]:
    """The customer's endpoints, each with its health (one count of its last hour each: a
    customer's endpoints are few, and a page holds at most ``PAGE``)."""
    rows = await endpoints.list_endpoints(session, visitor.scope, limit=PAGE)
    return [ListedEndpoint(row, await health_of(session, row, when)) for row in rows]


@dataclass(frozen=True)
class EndpointView:
    endpoint: Endpoint
    health: Health
    deliveries: list[Delivery]
    more: str | None  # the id to list on from, when there are more


async def endpoint_view(
    session: AsyncSession,
    visitor: Visitor,
    endpoint_id: str,
    when: TimeWriter,
    *,
    before_id: str | None = None,
) -> EndpointView:
    endpoint = await endpoints.get_endpoint(session, visitor.scope, endpoint_id)
    rows = await listings.list_deliveries(
        session,
        visitor.scope,
        limit=PAGE + 1,
        before_id=before_id,
        endpoint_id=endpoint.id,
    )
    more = rows[PAGE - 1].id if len(rows) > PAGE else None
    return EndpointView(endpoint, await health_of(session, endpoint, when), rows[:PAGE], more)


@dataclass(frozen=True)
class DeliveryView:
    delivery: Delivery
    attempts: list[Attempt]
    payload: PayloadView  # what was sent: the console's view of it, within its cap
    next_attempt: str | None  # when it is tried next, in words; None: it is not waiting
    sent_as: TransformedView | None  # what its endpoint's transformation made of it


async def delivery_view(
    session: AsyncSession,
    visitor: Visitor,
    delivery_id: str,
    when: TimeWriter,
    *,
    max_body_bytes: int,
) -> DeliveryView:
    delivery = await listings.find_delivery(session, visitor.scope, delivery_id)
    endpoint = await endpoints.get_any(session, delivery.endpoint_id)
    assert endpoint is not None  # endpoints are never deleted, only marked so
    tried = await listings.attempts_of(session, delivery.id, limit=PAGE)
    sent = await event_detail.payload_head(
        session,
        visitor.scope.tenant_id,
        delivery.event_id,
        most=PREVIEW_BYTES,
        expires_at=delivery.payload_expires_at,
    )
    next_attempt = next_attempt_said(delivery, endpoint, when)
    sent_as = await transformed_views.transformed_view(
        session,
        visitor.scope.tenant_id,
        delivery.id,
        delivery.endpoint_id,
        delivery.event_type,
        sent.whole,
        max_body_bytes=max_body_bytes,
    )
    return DeliveryView(delivery, tried, payload_view(sent), next_attempt, sent_as)


@dataclass(frozen=True)
class EventTypeView:
    name: str
    description: str | None
    example: str | None  # the entry's example (example_of), pretty-printed
    schema: str | None


async def catalogue(session: AsyncSession, visitor: Visitor) -> list[EventTypeView]:
    rows = await event_types.list_types(
        session, visitor.scope.tenant_id, limit=CATALOGUE_MOST, after=None
    )
    return [_shown(row) for row in rows]


def _shown(row: EventTypeDef) -> EventTypeView:
    schema: dict[str, Any] | None = row.schema
    example = event_types.example_of(row)
    return EventTypeView(
        row.name,
        row.description,
        None if example is None else json.dumps(example, indent=2, sort_keys=True),
        None if schema is None else json.dumps(schema, indent=2, sort_keys=True),
    )
