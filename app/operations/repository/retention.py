"""Purging what no longer needs keeping, in small batches (short locks, bounded work).

Time-ordered ids make "created before" a primary-key range, so none of these scans needs an
index of its own. A delivery's attempts and custody records go with it, in the same batch.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import delete, exists, func, literal, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import id_floor, sibling_range
from app.core.states import TERMINAL_STATES
from app.models import (
    Attempt,
    AuditRecord,
    CustodyRecord,
    Delivery,
    Event,
    IdempotencyKey,
    PortalSession,
    ReconcileRun,
    Stream,
)


async def purge_deliveries(
    session: AsyncSession, *, region: str, before: datetime, limit: int
) -> tuple[int, int]:
    """Terminal deliveries finished before ``before`` (never one that is not terminal, nor a
    dead head that halts its stream: an operator still has to redrive or skip it), and the
    events left without deliveries. Returns (deliveries, events) purged."""
    doomed = (
        select(Delivery.id)
        .where(
            Delivery.id < id_floor("dlv", before),
            Delivery.region == region,
            Delivery.state.in_(TERMINAL_STATES),
            Delivery.completed_at < before,
            ~exists().where(Stream.head_id == Delivery.id, Stream.halted_at.is_not(None)),
        )
        .order_by(Delivery.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    purged = (
        await session.execute(
            delete(Delivery)
            .where(Delivery.id.in_(doomed))
            .returning(Delivery.id, Delivery.event_id)
        )
    ).all()
    if not purged:
        return 0, 0
    # No foreign key cascades (a partitioned table has none to spare): what is written about
    # the deliveries goes in the same transaction, by the same ids.
    delivery_ids = [row.id for row in purged]
    await session.execute(delete(Attempt).where(Attempt.delivery_id.in_(delivery_ids)))
    await session.execute(delete(CustodyRecord).where(CustodyRecord.delivery_id.in_(delivery_ids)))
    event_ids = sorted({row.event_id for row in purged})
    kept = await _events_with_deliveries(session, event_ids)
    orphaned = [event_id for event_id in event_ids if event_id not in kept]
    if orphaned:
        await session.execute(delete(Event).where(Event.id.in_(orphaned)))
    return len(purged), len(orphaned)


async def _events_with_deliveries(session: AsyncSession, event_ids: list[str]) -> set[str]:
    """Which of these events still have a delivery. Only deliveries from before partitioning
    have an index on ``event_id``; the others are their event's siblings (``sibling_id``), so
    a batch's events are looked up by one primary-key range: from the first one's millisecond
    to the last one's."""
    lowest, _ = sibling_range("dlv", event_ids[0])
    _, highest = sibling_range("dlv", event_ids[-1])
    siblings = select(Delivery.event_id).where(
        Delivery.event_id.in_(event_ids), Delivery.id.between(lowest, highest)
    )
    older = select(Delivery.event_id).where(
        Delivery.event_id.in_(event_ids), Delivery.id < func.deliveries_siblings_from()
    )
    return set((await session.execute(siblings.union(older))).scalars())


async def purge_orphan_events(session: AsyncSession, *, before: datetime, limit: int) -> int:
    """Events from before partitioning that never had a delivery (published to no
    subscriber). Those since go with their day's partition: a day held back keeps its few
    until it goes, rather than every run reading each delivery of every held day."""
    # `||`, not concat(): immutable, so the planner folds it and reads the old partition alone.
    legacy = literal("evt_").op("||")(func.substr(func.deliveries_siblings_from(), 5))
    doomed = (
        select(Event.id)
        .where(
            Event.id < id_floor("evt", before),
            Event.id < legacy,
            ~exists().where(
                Delivery.event_id == Event.id, Delivery.id < func.deliveries_siblings_from()
            ),
        )
        .order_by(Event.id)
        .limit(limit)
        .scalar_subquery()
    )
    result = await session.execute(delete(Event).where(Event.id.in_(doomed)).returning(Event.id))
    return len(result.all())


async def purge_expired_keys(session: AsyncSession, *, limit: int) -> int:
    """Idempotency keys past their window (kept exactly that long, never less)."""
    doomed = (
        select(IdempotencyKey.tenant_id, IdempotencyKey.key)
        .where(IdempotencyKey.expires_at < func.now())
        .limit(limit)
    )
    result = await session.execute(
        delete(IdempotencyKey)
        .where(tuple_(IdempotencyKey.tenant_id, IdempotencyKey.key).in_(doomed))
        .returning(IdempotencyKey.key)
    )
    return len(result.all())


async def purge_portal_sessions(session: AsyncSession, *, limit: int) -> int:
    """Portal sessions a day past their end (a tenant mints one every time its page shows the
    portal): kept that long so a refused link can still say why."""
    doomed = (
        select(PortalSession.id)
        .where(PortalSession.expires_at < func.now() - timedelta(days=1))
        .limit(limit)
        .scalar_subquery()
    )
    result = await session.execute(
        delete(PortalSession).where(PortalSession.id.in_(doomed)).returning(PortalSession.id)
    )
    return len(result.all())


async def purge_runs(session: AsyncSession, *, before: datetime, limit: int) -> int:
    doomed = (
        select(ReconcileRun.id)
        .where(ReconcileRun.id < id_floor("run", before))
        .order_by(ReconcileRun.id)
        .limit(limit)
        .scalar_subquery()
    )
    result = await session.execute(
        delete(ReconcileRun).where(ReconcileRun.id.in_(doomed)).returning(ReconcileRun.id)
    )
    return len(result.all())


async def purge_audit_records(session: AsyncSession, *, before: datetime, limit: int) -> int:
    """Audit records made before ``before``: a range of their time-ordered ids."""
    doomed = (
        select(AuditRecord.id)
        .where(AuditRecord.id < id_floor("aud", before))
        .order_by(AuditRecord.id)
        .limit(limit)
        .scalar_subquery()
    )
    result = await session.execute(
        delete(AuditRecord).where(AuditRecord.id.in_(doomed)).returning(AuditRecord.id)
    )
    return len(result.all())


# A version of an endpoint's transformation that no delivery can be sent as: none of the
# endpoint's deliveries was accepted between it and the next version (every later one is sent
# as that, or a newer). The next must be an hour old, so that no accept of an id minted before
# it is still under way. The endpoint's last version always stays.
_UNUSED_TRANSFORMATIONS = text(
    """
    DELETE FROM transformations WHERE id IN (
        SELECT t.id FROM transformations AS t
         CROSS JOIN LATERAL (
             SELECT w.since, w.created_at FROM transformations AS w
              WHERE w.endpoint_id = t.endpoint_id AND (w.since, w.id) > (t.since, t.id)
              ORDER BY w.since, w.id LIMIT 1) AS next
         WHERE next.created_at < now() - interval '1 hour'
           AND NOT EXISTS (SELECT FROM deliveries AS d
                            WHERE d.endpoint_id = t.endpoint_id
                              AND d.id >= t.since AND d.id < next.since)
         LIMIT :limit)
    """
)


async def purge_unused_transformations(session: AsyncSession, *, limit: int) -> int:
    result = await session.execute(_UNUSED_TRANSFORMATIONS, {"limit": limit})
    return int(result.rowcount)  # type: ignore[attr-defined]
