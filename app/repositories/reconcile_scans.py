"""The reconciler's three scans over deliveries, each a bounded SKIP LOCKED page.

Each page changes what it took in the same statement, so the next page (or a concurrent run)
does not take it again, and returns what publishing the rows needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from sqlalchemy import func, select, tuple_, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute
from sqlalchemy.sql.elements import ColumnElement

from app.models import Delivery
from app.repositories.outbox import DeliveryRef
from app.states import DeliveryState

_RETURNING = (
    Delivery.id, Delivery.endpoint_id, Delivery.next_attempt_at, Delivery.attempt_count,
    Delivery.tenant_id,
)  # fmt: skip

# Where a scan got to: the (sort key, id) of the last row it took. Each page starts after the
# previous one in the index, rather than at its beginning: the rows a page changed leave dead
# index entries there until vacuum, and walking them again on every page made a run of 100,000
# rows quadratic.
Cursor = tuple[datetime, str]


@dataclass(frozen=True)
class Page:
    taken: list[DeliveryRef]
    cursor: Cursor | None  # None: nothing was taken


async def _lock_page(
    session: AsyncSession,
    key: InstrumentedAttribute[Any],
    conditions: list[ColumnElement[bool]],
    *,
    limit: int,
    after: Cursor | None,
) -> tuple[list[str], Cursor | None]:
    """Lock up to ``limit`` matching rows in ``key`` order from ``after`` on, skipping rows
    another transaction holds. In key order alone, which the partial index gives without a
    sort; rows sharing the cursor's key are looked at again, which is harmless because the
    callers' updates take their rows out of ``conditions``."""
    query = select(Delivery.id, key).where(*conditions)
    if after is not None:
        query = query.where(key >= after[0])
    rows = (
        await session.execute(query.order_by(key).limit(limit).with_for_update(skip_locked=True))
    ).all()
    if not rows:
        return [], None
    return [row[0] for row in rows], (rows[-1][1], rows[-1][0])


async def expire_leases(
    session: AsyncSession, *, region: str, limit: int, after: Cursor | None
) -> Page:
    """Leased deliveries whose lease ran out -- their worker died or stalled -- go back to
    pending, due now. The token is cleared, so the old holder can no longer record anything."""
    ids, cursor = await _lock_page(
        session, Delivery.lease_until,
        [Delivery.region == region, Delivery.state == DeliveryState.LEASED.value,
         Delivery.lease_until < func.now()],
        limit=limit, after=after,
    )  # fmt: skip
    if not ids:
        return Page([], None)
    rows = await session.execute(
        update(Delivery)
        .where(Delivery.id.in_(ids))
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
    return Page([DeliveryRef(*row) for row in rows], cursor)


async def restamp_stale_enqueued(
    session: AsyncSession, *, region: str, limit: int, stale_seconds: float, after: Cursor | None
) -> Page:
    """Enqueued deliveries whose job should have run ``stale_seconds`` ago (the job may be gone
    with Redis). Their ``enqueued_at`` is restamped: they get a fresh job and a fresh wait."""
    cutoff = func.now() - timedelta(seconds=stale_seconds)
    ids, cursor = await _lock_page(
        session, Delivery.enqueued_at,
        [Delivery.region == region, Delivery.state == DeliveryState.ENQUEUED.value,
         Delivery.enqueued_at < cutoff,
         # A job deferred to a future attempt time is not late until after that time.
         Delivery.next_attempt_at < cutoff],
        limit=limit, after=after,
    )  # fmt: skip
    if not ids:
        return Page([], None)
    rows = await session.execute(
        update(Delivery)
        .where(Delivery.id.in_(ids))
        .values(enqueued_at=func.now(), updated_at=func.now())
        .returning(*_RETURNING)
        .execution_options(synchronize_session=False)
    )
    return Page([DeliveryRef(*row) for row in rows], cursor)


async def due_pending(
    session: AsyncSession, *, region: str, limit: int, grace_seconds: float, after: Cursor | None
) -> Page:
    """Pending deliveries overdue by more than ``grace_seconds`` (a lost retry job, a publish
    that never happened), in (next_attempt_at, id) order after the ``after`` cursor. They stay
    pending (their outbox rows are the caller's to write), so only the cursor moves on."""
    query = select(*_RETURNING).where(
        Delivery.region == region,
        Delivery.state == DeliveryState.PENDING.value,
        Delivery.next_attempt_at <= func.now() - timedelta(seconds=grace_seconds),
    )
    if after is not None:
        query = query.where(
            Delivery.next_attempt_at >= after[0],
            tuple_(Delivery.next_attempt_at, Delivery.id) > tuple_(*after),
        )
    rows = await session.execute(
        query.order_by(Delivery.next_attempt_at, Delivery.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
    )
    taken = [DeliveryRef(*row) for row in rows]
    return Page(taken, (taken[-1].next_attempt_at, taken[-1].id) if taken else None)


@dataclass(frozen=True)
class Destination:
    """A destination with live deliveries, and when its wake-up is due."""

    endpoint_id: str
    tenant_id: str
    wake_in: float  # seconds from now (database clock); <= 0: due now


# A loose index scan over ix_deliveries_live: one probe per destination, not one row per
# delivery, so its cost follows the number of destinations with live work. A destination's
# wake time is when its first live row can be claimed (due, or its lease ends), looked for
# among its first PROBE_ROWS live rows in claim order (early, never late, when more of them
# than that are leased), and not before a pause in force ends.
_LIVE_DESTINATIONS = """
WITH RECURSIVE dest(endpoint_id) AS (
    (SELECT endpoint_id FROM deliveries
      WHERE region = $1 AND completed_at IS NULL AND endpoint_id > $2
      ORDER BY endpoint_id LIMIT 1)
  UNION ALL
    SELECT (SELECT d.endpoint_id FROM deliveries AS d
             WHERE d.region = $1 AND d.completed_at IS NULL AND d.endpoint_id > dest.endpoint_id
             ORDER BY d.endpoint_id LIMIT 1)
      FROM dest WHERE dest.endpoint_id IS NOT NULL
)
SELECT e.id, e.tenant_id,
       extract(epoch FROM greatest(w.at, CASE WHEN e.paused_until > now() THEN e.paused_until END)
                          - now())::float8 AS wake_in
  FROM (SELECT endpoint_id FROM dest WHERE endpoint_id IS NOT NULL LIMIT $3) AS s
  JOIN endpoints AS e ON e.id = s.endpoint_id
  CROSS JOIN LATERAL (
      SELECT CASE WHEN count(*) = $4 THEN least(min(p.w), max(p.next_attempt_at))
                  ELSE min(p.w) END AS at
        FROM (SELECT d.next_attempt_at,
                     CASE WHEN d.state = 'leased' THEN d.lease_until ELSE d.next_attempt_at END AS w
                FROM deliveries AS d
               WHERE d.region = $1 AND d.endpoint_id = s.endpoint_id AND d.completed_at IS NULL
               ORDER BY d.next_attempt_at, d.id LIMIT $4) AS p
  ) AS w
 ORDER BY e.id
"""
PROBE_ROWS = 256


async def live_destinations(
    connection: asyncpg.Connection, *, region: str, after: str, limit: int
) -> list[Destination]:
    """Up to ``limit`` destinations with live deliveries, in endpoint order after ``after``
    (a keyset cursor: '' to start). Reads only: no row is locked or changed."""
    rows = await connection.fetch(_LIVE_DESTINATIONS, region, after, limit, PROBE_ROWS)
    return [Destination(row["id"], row["tenant_id"], row["wake_in"]) for row in rows]
