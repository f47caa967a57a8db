"""Retry now: a delivery waiting for its next attempt after a failure is made due at once,
rather than at the time its backoff set. Its endpoint's ceilings, pause and breaker still
decide when it is sent: this moves the delivery, not the endpoint's gate."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import Conflict
from app.core.scope import Scope
from app.core.states import DeliveryState
from app.delivery.repository import deliveries
from app.delivery.service import listings
from app.models import Delivery
from app.outbox.service import outbox
from app.outbox.service.outbox import PendingPublication


async def retry_now(
    session: AsyncSession, scope: Scope, delivery_id: str, *, region: str
) -> tuple[Delivery, list[PendingPublication]]:
    """The delivery, due now, and the wake-up of its endpoint this process (of ``region``) may
    publish after the commit; written with the change, so that a crash loses neither."""
    current = await listings.find_delivery(session, scope, delivery_id)  # 404 outside scope
    due = await deliveries.due_now(session, scope.tenant_id, delivery_id)
    if due is None:
        raise Conflict(_why_not(current))
    publications = await outbox.insert_wakeups(session, [due], due.region)
    return due, publications if due.region == region else []


def _why_not(delivery: Delivery) -> str:
    state = delivery.state
    if state == DeliveryState.LEASED.value:
        return "it is being attempted right now"
    if state in (DeliveryState.SUCCEEDED.value, DeliveryState.CANCELLED.value):
        return f"it is {state}: only a delivery waiting for a retry can be tried now"
    if state == DeliveryState.DEAD.value:
        return "it is dead: redrive it (POST /v1/deliveries/{id}/redrive) to try it again"
    if delivery.attempt_count == 0:
        return (
            "it has not been attempted yet: it is sent as soon as it is due and its endpoint allows"
        )
    if delivery.next_attempt_at is None:
        return "it waits behind the delivery ahead of it in its stream"
    if delivery.next_attempt_at <= datetime.now(UTC):
        return "it is due already: it is sent as soon as its endpoint allows"
    return "it cannot be tried now"
