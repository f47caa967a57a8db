"""The reconciler's three scans over deliveries, each a bounded SKIP LOCKED page.

Each page changes what it took in the same statement, so the next page (or a concurrent run)
does not take it again, and returns what publishing the rows needs.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import and_, func, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Delivery
from app.repositories.outbox import DeliveryRef
from app.states import DeliveryState

_RETURNING = (Delivery.id, Delivery.endpoint_id, Delivery.next_attempt_at, Delivery.attempt_count)


async def expire_leases(session: AsyncSession, *, region: str, limit: int) -> list[DeliveryRef]:
    """Leased deliveries whose lease ran out -- their worker died or stalled -- go back to
    pending, due now. The token is cleared, so the old holder can no longer record anything."""
    page = (
        select(Delivery.id)
        .where(
            Delivery.region == region,
            Delivery.state == DeliveryState.LEASED.value,
            Delivery.lease_until < func.now(),
        )
        .order_by(Delivery.lease_until)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    rows = await session.execute(
        update(Delivery)
        .where(Delivery.id.in_(page))
        .values(
            state=DeliveryState.PENDING.value,
            lease_token=None,
            lease_until=None,
            next_attempt_at=func.now(),
            updated_at=func.now(),
        )
        .returning(*_RETURNING)
        .execution_options(synchronize_session=False)
    )
    return [DeliveryRef(*row) for row in rows]


async def restamp_stale_enqueued(
    session: AsyncSession, *, region: str, limit: int, stale_seconds: float
) -> list[DeliveryRef]:
    """Enqueued deliveries whose job should have run ``stale_seconds`` ago (the job may be gone
    with Redis). Their ``enqueued_at`` is restamped: they get a fresh job and a fresh wait."""
    cutoff = func.now() - timedelta(seconds=stale_seconds)
    page = (
        select(Delivery.id)
        .where(
            Delivery.region == region,
            Delivery.state == DeliveryState.ENQUEUED.value,
            Delivery.enqueued_at < cutoff,
            # A job deferred to a future attempt time is not late until after that time.
            Delivery.next_attempt_at < cutoff,
        )
        .order_by(Delivery.enqueued_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    rows = await session.execute(
        update(Delivery)
        .where(Delivery.id.in_(page))
        .values(enqueued_at=func.now(), updated_at=func.now())
        .returning(*_RETURNING)
        .execution_options(synchronize_session=False)
    )
    return [DeliveryRef(*row) for row in rows]


async def due_pending(
    session: AsyncSession,
    *,
    region: str,
    limit: int,
    grace_seconds: float,
    after: tuple[datetime, str] | None,
) -> list[DeliveryRef]:
    """Pending deliveries overdue by more than ``grace_seconds`` (a lost retry job, a publish
    that never happened), in (next_attempt_at, id) order after the ``after`` cursor."""
    query = select(*_RETURNING).where(
        Delivery.region == region,
        Delivery.state == DeliveryState.PENDING.value,
        Delivery.next_attempt_at <= func.now() - timedelta(seconds=grace_seconds),
    )
    if after is not None:
        query = query.where(and_(tuple_(Delivery.next_attempt_at, Delivery.id) > tuple_(*after)))
    rows = await session.execute(
        query.order_by(Delivery.next_attempt_at, Delivery.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    return [DeliveryRef(*row) for row in rows]
