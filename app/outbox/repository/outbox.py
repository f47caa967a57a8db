from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol, cast

import asyncpg
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.db import any_of
from app.models import Delivery, OutboxEntry


@dataclass(frozen=True)
class PendingPublication:
    """An outbox row to publish, with what arming its destination needs."""

    outbox_id: int
    delivery_id: str
    endpoint_id: str
    run_at: datetime | None  # None: ordered, waiting behind its stream's head (nothing to arm)
    attempt_count: int
    tenant_id: str  # its destination's wake-up is filed under its tenant


class Publishable(Protocol):
    """What publishing needs to know of a delivery (a Delivery row)."""

    @property
    def id(self) -> str: ...
    @property
    def endpoint_id(self) -> str: ...
    @property
    def next_attempt_at(self) -> datetime | None: ...
    @property
    def attempt_count(self) -> int: ...
    @property
    def tenant_id(self) -> str: ...


# An array, not a multi-row VALUES list: one prepared statement for every page size (compiling
# a 500-row VALUES list was most of a reconcile page's time).
_INSERT_ENTRIES = """
INSERT INTO outbox (delivery_id, region)
SELECT unnest($1::text[]), $2
ON CONFLICT (delivery_id) WHERE published_at IS NULL DO NOTHING
RETURNING id, delivery_id
"""


async def insert_entries(
    session: AsyncSession, deliveries: Sequence[Publishable], region: str
) -> list[PendingPublication]:
    """Record the intent to publish, in the caller's transaction. A delivery that already has an
    unpublished entry keeps that one (the partial unique index makes this idempotent)."""
    if not deliveries:
        return []
    connection = await session.connection()
    result = await connection.exec_driver_sql(_INSERT_ENTRIES, ([d.id for d in deliveries], region))
    rows = cast("list[tuple[int, str]]", result.all())
    by_id = {d.id: d for d in deliveries}
    return [
        PendingPublication(
            outbox_id=outbox_id,
            delivery_id=delivery_id,
            endpoint_id=by_id[delivery_id].endpoint_id,
            run_at=by_id[delivery_id].next_attempt_at,
            attempt_count=by_id[delivery_id].attempt_count,
            tenant_id=by_id[delivery_id].tenant_id,
        )
        for outbox_id, delivery_id in rows
    ]


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
        select(OutboxEntry.id)
        .where(
            OutboxEntry.region == region,
            OutboxEntry.published_at.is_(None),
            OutboxEntry.created_at <= func.now() - timedelta(seconds=min_age_seconds),
            (OutboxEntry.claimed_until.is_(None)) | (OutboxEntry.claimed_until < func.now()),
        )
        .order_by(OutboxEntry.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .scalar_subquery()
    )
    rows = await session.execute(
        update(OutboxEntry)
        .where(OutboxEntry.id == any_of(page), Delivery.id == OutboxEntry.delivery_id)
        .values(claimed_until=func.now() + timedelta(seconds=claim_seconds))
        .returning(
            OutboxEntry.id,
            OutboxEntry.delivery_id,
            Delivery.endpoint_id,
            Delivery.next_attempt_at,
            Delivery.attempt_count,
            Delivery.tenant_id,
        )
        .execution_options(synchronize_session=False)
    )
    return [PendingPublication(*row) for row in rows]


@dataclass(frozen=True)
class Publication:
    """A publication in a delivery's history: when its outbox row was written, and when it was
    marked published (after its destination's wake-up was armed)."""

    created_at: datetime
    published_at: datetime


async def publications(session: AsyncSession, delivery_id: str) -> list[Publication]:
    rows = await session.execute(
        select(OutboxEntry.created_at, OutboxEntry.published_at)
        .where(OutboxEntry.delivery_id == delivery_id, OutboxEntry.published_at.is_not(None))
        .order_by(OutboxEntry.published_at)
        .limit(100)
    )
    return [Publication(created, published) for created, published in rows if published]


# pending -> enqueued for deliveries whose destination Redis has armed, unless a worker moved
# them on meanwhile (the attempt count seen at publish time must still hold); and, in the
# same statement, their outbox rows published.
MARK_PUBLISHED = """
WITH published AS (
    UPDATE outbox SET published_at = now(), claimed_until = NULL
     WHERE id = ANY($3::bigint[]) AND published_at IS NULL
)
UPDATE deliveries AS d
   SET state = 'enqueued', enqueued_at = now(), updated_at = now()
 WHERE d.id = ANY($1::text[])  -- an index condition: without it the plan may scan the table
   AND d.state = 'pending'
   -- Each row's attempt count checked against its own, with no join: joined to the unnested
   -- arrays, the planner (expecting few rows still pending) chose a nested loop that read the
   -- whole array once per row -- 160 of 180 ms for a batch of 1000 (docs/benchmarks.md).
   AND d.id || '/' || d.attempt_count
       = ANY(array(SELECT id || '/' || n FROM unnest($1::text[], $2::int[]) AS seen(id, n)))
"""


async def mark_published(
    connection: asyncpg.Connection,
    published: Sequence[tuple[str, int]],
    outbox_ids: Sequence[int],
) -> None:
    """The publish mark: one statement, its own transaction (db.single_statements)."""
    if not published:
        return
    ids = [delivery_id for delivery_id, _ in published]
    counts = [count for _, count in published]
    await connection.execute(MARK_PUBLISHED, ids, counts, list(outbox_ids))
