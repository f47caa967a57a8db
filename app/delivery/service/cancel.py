"""Cancel: a producer stops a delivery that has not finished. It is never sent again and stays
cancelled -- final, like succeeded and dead; redrive does not revive it (the producer accepts
the intent again if it changes its mind). An attempt in flight at that moment finishes and is
recorded in the attempt log; nothing follows it."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app import metrics
from app.delivery.repository import deliveries
from app.errors import Conflict, NotFound
from app.models import Delivery
from app.states import DeliveryState


async def cancel_delivery(session: AsyncSession, tenant_id: str, delivery_id: str) -> Delivery:
    """The cancelled delivery. Cancelling one already cancelled answers it again (a retried
    request is harmless); one that succeeded or died is a conflict."""
    cancelled = await deliveries.cancel(session, tenant_id, delivery_id)
    if cancelled is not None:
        in_flight = cancelled.lease_until is not None and cancelled.lease_until > datetime.now(UTC)
        metrics.CANCELLATIONS.labels(in_flight=str(in_flight).lower()).inc()
        return cancelled
    current = await deliveries.get_for_tenant(session, tenant_id, delivery_id)
    if current is None:
        raise NotFound(f"delivery {delivery_id} not found")
    if current.state == DeliveryState.CANCELLED.value:
        return current
    ended = "succeeded" if current.state == DeliveryState.SUCCEEDED.value else "died"
    raise Conflict(
        f"delivery {delivery_id} already {ended}; only a delivery that has not succeeded or "
        "died can be cancelled"
    )
