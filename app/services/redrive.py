"""Redrive: a dead delivery gets another go, under the same id, with its history kept."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.errors import Conflict, NotFound
from app.models import Delivery
from app.repositories import deliveries, endpoints, outbox
from app.repositories.outbox import PendingPublication


async def redrive_one(
    session: AsyncSession, tenant_id: str, delivery_id: str
) -> tuple[Delivery, list[PendingPublication]]:
    """Returns the revived delivery and its outbox publications (in the delivery's own region,
    whose relays and reconcilers alone may publish it)."""
    current = await deliveries.get_for_tenant(session, tenant_id, delivery_id)
    if current is None:
        raise NotFound(f"delivery {delivery_id} not found")
    endpoint = await endpoints.get_live(session, tenant_id, current.endpoint_id)
    if endpoint is None:
        raise Conflict("the delivery's endpoint was deleted")
    if not endpoint.enabled:
        raise Conflict(f"endpoint {endpoint.id} is disabled; enable it first")
    revived = await deliveries.redrive(session, tenant_id, delivery_id)
    if revived is None:
        raise Conflict(f"only dead deliveries can be redriven; this one is {current.state}")
    # The outbox row commits with the state change, so the redrive survives a crash.
    publications = await outbox.insert_entries(session, [revived], revived.region)
    return revived, publications
