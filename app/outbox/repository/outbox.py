from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, cast

import asyncpg
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import any_of
from app.models import OutboxWakeup


@dataclass(frozen=True)
class PendingPublication:
    """A committed wake-up to tell Redis: its destination, and when that is first due."""

    outbox_id: int
    tenant_id: str  # its destination's wake-up is filed under its tenant
    endpoint_id: str
    run_at: datetime


class Publishable(Protocol):
    """What publishing needs to know of a delivery (a Delivery row)."""

    @property
    def endpoint_id(self) -> str: ...
    @property
    def next_attempt_at(self) -> datetime | None: ...
    @property
    def tenant_id(self) -> str: ...


# One row per destination, for its earliest due delivery; a delivery waiting behind its
# stream's head (no schedule) needs none: whatever ends the head arms the destination. Arrays,
# not a VALUES list: one prepared statement for every count.
_INSERT_WAKEUPS = """
INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at)
SELECT $1, tenant_id, endpoint_id, min(run_at)
  FROM unnest($2::text[], $3::text[], $4::timestamptz[]) AS due(tenant_id, endpoint_id, run_at)
 WHERE run_at IS NOT NULL
 GROUP BY tenant_id, endpoint_id
RETURNING id, tenant_id, endpoint_id, run_at
"""


async def insert_wakeups(
    session: AsyncSession, deliveries: Sequence[Publishable], region: str
) -> list[PendingPublication]:
    """Record the wake-ups these deliveries need, in the caller's transaction."""
    due = [d for d in deliveries if d.next_attempt_at is not None]
    if not due:
        return []
    connection = await session.connection()
    result = await connection.exec_driver_sql(
        _INSERT_WAKEUPS,
        (
            region,
            [d.tenant_id for d in due],
            [d.endpoint_id for d in due],
            [d.next_attempt_at for d in due],
        ),
    )
    rows = cast("list[tuple[int, str, str, datetime]]", result.all())
    return [PendingPublication(*row) for row in rows]


async def claim_unpublished(
    session: AsyncSession,
    *,
    region: str,
    limit: int,
    min_age_seconds: float,
    claim_seconds: float,
) -> list[PendingPublication]:
    """Claim a page of unpublished rows for this relay (SKIP LOCKED: concurrent relays take
    different rows). Rows younger than ``min_age_seconds`` are left to the API's fast path."""
    page = (
        select(OutboxWakeup.id)
        .where(
            OutboxWakeup.region == region,
            OutboxWakeup.created_at <= func.now() - timedelta(seconds=min_age_seconds),
            (OutboxWakeup.claimed_until.is_(None)) | (OutboxWakeup.claimed_until < func.now()),
        )
        .order_by(OutboxWakeup.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    rows = await session.execute(
        update(OutboxWakeup)
        .where(OutboxWakeup.id == any_of(page))
        .values(claimed_until=func.now() + timedelta(seconds=claim_seconds))
        .returning(
            OutboxWakeup.id, OutboxWakeup.tenant_id, OutboxWakeup.endpoint_id, OutboxWakeup.run_at
        )
        .execution_options(synchronize_session=False)
    )
    return [PendingPublication(*row) for row in rows]


async def oldest_unpublished(session: AsyncSession, region: str) -> datetime | None:
    """When the region's oldest wake-up not yet told to Redis was written (None: there is
    none). One probe of ix_outbox_wakeups_age, however long the table has grown."""
    return cast(
        "datetime | None",
        await session.scalar(
            select(func.min(OutboxWakeup.created_at)).where(OutboxWakeup.region == region)
        ),
    )


# The publish mark: the rows go. Nothing else is written -- a delivery's own row says nothing
# of whether its destination was told (the status page reads that from this table).
_DELETE_PUBLISHED = "DELETE FROM outbox_wakeups WHERE id = ANY($1::bigint[])"


async def mark_published(connection: asyncpg.Connection, outbox_ids: Sequence[int]) -> None:
    """The publish mark: one statement, its own transaction (db.single_statements)."""
    if outbox_ids:
        await connection.execute(_DELETE_PUBLISHED, list(outbox_ids))
