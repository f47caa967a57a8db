"""Cancel: a producer stops a delivery that has not finished. It is never sent again and stays
cancelled -- final, like succeeded and dead; redrive does not revive it (the producer accepts
the intent again if it changes its mind). An attempt in flight at that moment finishes and is
recorded in the attempt log; nothing follows it.

An ordered delivery's stream goes on without it: a waiting one leaves a gap in the numbers; a
head hands the stream on in the same transaction -- the next delivery due at once, or, behind
an attempt still in flight, once that attempt's lease ends, so that it never overtakes the
request on the wire. The new head's outbox row (``publications``) wakes its destination."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.core import metrics
from app.core.errors import Conflict, NotFound
from app.core.states import DeliveryState
from app.delivery.repository import deliveries
from app.models import Delivery
from app.outbox.service import outbox
from app.outbox.service.outbox import PendingPublication
from app.streams.service.heads import StreamKey, handing_on


@dataclass(frozen=True)
class Cancelled:
    delivery: Delivery
    # The outbox rows of deliveries that became their stream's head: publish after commit.
    publications: list[PendingPublication] = field(default_factory=list)


async def cancel_delivery(
    session: AsyncSession, tenant_id: str, delivery_id: str, *, region: str
) -> Cancelled:
    """The cancelled delivery. Cancelling one already cancelled answers it again (a retried
    request is harmless); one that succeeded or died is a conflict."""
    current = await deliveries.get_for_tenant(session, tenant_id, delivery_id)
    if current is None:
        raise NotFound(f"delivery {delivery_id} not found")
    # A stream is locked before its delivery rows (app/streams/repository/streams.py).
    stream = [StreamKey(current.endpoint_id, current.stream)] if current.stream is not None else []
    async with handing_on(session, stream) as new_heads:
        cancelled = await deliveries.cancel(session, tenant_id, delivery_id)
    if cancelled is not None:
        in_flight = cancelled.lease_until is not None and cancelled.lease_until > datetime.now(UTC)
        metrics.CANCELLATIONS.labels(in_flight=str(in_flight).lower()).inc()
        # The new head's wake-up is filed in its own region, whose relays alone publish it.
        publications = await outbox.insert_wakeups(session, new_heads, cancelled.region)
        return Cancelled(cancelled, publications if cancelled.region == region else [])
    await session.refresh(current)
    if current.state == DeliveryState.CANCELLED.value:
        return Cancelled(current)
    ended = "succeeded" if current.state == DeliveryState.SUCCEEDED.value else "died"
    raise Conflict(
        f"delivery {delivery_id} already {ended}; only a delivery that has not succeeded or "
        "died can be cancelled"
    )
