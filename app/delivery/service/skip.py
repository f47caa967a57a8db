"""Skip: an operator moves a halted stream past its dead head. The delivery stays
dead -- shown as skipped -- and the stream's next delivery becomes its head; its outbox row
(``publications``) wakes the destination. The other way on is a redrive of the head, which
retries it in place."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict, NotFound
from app.delivery.repository import deliveries
from app.models import Delivery
from app.outbox.service import outbox
from app.outbox.service.outbox import PendingPublication
from app.streams.service import streams
from app.streams.service.heads import StreamKey, handing_on


@dataclass(frozen=True)
class Skipped:
    delivery: Delivery
    publications: list[PendingPublication]


async def skip_halted_head(
    session: AsyncSession, tenant_id: str, delivery_id: str, *, region: str
) -> Skipped:
    """Skip the dead delivery that halts its stream. Only that delivery can be skipped: any
    other is a conflict that names the stream's head."""
    delivery = await deliveries.get_for_tenant(session, tenant_id, delivery_id)
    if delivery is None:
        raise NotFound(f"delivery {delivery_id} not found")
    if delivery.stream is None:
        raise Conflict(
            f"delivery {delivery_id} is not ordered: only the dead head of a halted stream "
            "can be skipped"
        )
    key = StreamKey(delivery.endpoint_id, delivery.stream)
    async with handing_on(session, [key], skip_halted=True) as new_heads:
        stream = await streams.of_delivery(session, delivery)
        if stream is None or stream.head_id != delivery_id or stream.halted_at is None:
            head = stream.head_id if stream is not None else None
            raise Conflict(
                f"delivery {delivery_id} does not halt its stream"
                + (f" (the stream's head is {head})" if head else " (the stream is not halted)")
                + ": only a halted stream's dead head can be skipped"
            )
    # The new head's wake-up is filed in its own region, whose relays alone publish it.
    publications = await outbox.insert_wakeups(session, new_heads, delivery.region)
    return Skipped(delivery, publications if delivery.region == region else [])
