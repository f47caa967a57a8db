"""Reconcile's repair of streams (app/reconcile/): every write that ends a head hands its stream
on in the same transaction, so a stream left without a live, scheduled head -- no head, a head
that ended unhanded, a head row gone, a head waiting unscheduled -- is a fault's leftover, and
this finds and mends it from PostgreSQL alone."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from app.streams.repository.streams import NewHead, StreamKey, fetch

# A loose index scan over ix_deliveries_stream: one probe per stream with live deliveries (in
# (endpoint, stream) order after the cursor $2, $3), not one row per delivery; each is then
# checked against its stream row. A halted stream is whole: its dead head is its head.
_LIVE_STREAMS = """
WITH RECURSIVE live(endpoint_id, stream) AS (
    (SELECT endpoint_id, stream FROM deliveries
      WHERE completed_at IS NULL AND stream IS NOT NULL AND region = $1
        AND (endpoint_id, stream) > ($2, $3)
      ORDER BY endpoint_id, stream LIMIT 1)
  UNION ALL
    SELECT n.endpoint_id, n.stream FROM live CROSS JOIN LATERAL (
        SELECT d.endpoint_id, d.stream FROM deliveries AS d
         WHERE d.completed_at IS NULL AND d.stream IS NOT NULL AND d.region = $1
           AND (d.endpoint_id, d.stream) > (live.endpoint_id, live.stream)
         ORDER BY d.endpoint_id, d.stream LIMIT 1) AS n
)
SELECT l.endpoint_id, l.stream,
       s.head_id IS NULL OR h.id IS NULL
           OR (h.completed_at IS NOT NULL AND s.halted_at IS NULL)
           OR (h.completed_at IS NULL AND h.next_attempt_at IS NULL) AS stranded
  FROM (SELECT endpoint_id, stream FROM live LIMIT $4) AS l
  LEFT JOIN streams AS s USING (endpoint_id, stream)
  LEFT JOIN deliveries AS h ON h.id = s.head_id
 ORDER BY l.endpoint_id, l.stream
"""


@dataclass(frozen=True)
class StreamsPage:
    examined: list[StreamKey]  # in cursor order: the last one is where the next page starts
    stranded: list[StreamKey]


async def live_streams(
    connection: asyncpg.Connection, *, region: str, after: StreamKey, limit: int
) -> StreamsPage:
    """Up to ``limit`` streams with live deliveries after ``after``, and those of them left
    without a live, scheduled head. Reads only."""
    rows = await connection.fetch(_LIVE_STREAMS, region, after.endpoint_id, after.stream, limit)
    examined = [StreamKey(row["endpoint_id"], row["stream"]) for row in rows]
    stranded = [key for key, row in zip(examined, rows, strict=True) if row["stranded"]]
    return StreamsPage(examined, stranded)


# A stream row that is missing altogether gets one, numbering on after its highest number.
_RESTORE_ROWS = """
INSERT INTO streams (endpoint_id, stream, next_seq)
SELECT d.endpoint_id, d.stream, max(d.stream_seq) + 1 FROM deliveries AS d
  JOIN unnest($1::text[], $2::text[]) AS k(endpoint_id, stream) USING (endpoint_id, stream)
 GROUP BY d.endpoint_id, d.stream
ON CONFLICT DO NOTHING
RETURNING endpoint_id
"""

# A live head with no schedule (after ``hand_on``, under ``lock``) is due now, or at its own
# not-before time.
_SCHEDULE_HEADS = """
UPDATE deliveries AS d
   SET next_attempt_at = coalesce(d.deliver_after, now()), updated_at = now()
  FROM streams AS s
  JOIN unnest($1::text[], $2::text[]) AS k(endpoint_id, stream) USING (endpoint_id, stream)
 WHERE d.id = s.head_id AND d.completed_at IS NULL AND d.next_attempt_at IS NULL
RETURNING d.id, d.tenant_id, d.endpoint_id, d.next_attempt_at, d.attempt_count, d.stream
"""


async def restore_rows(session: AsyncSession, keys: Sequence[StreamKey]) -> None:
    await _fetch_keys(session, _RESTORE_ROWS, keys)


async def schedule_heads(session: AsyncSession, keys: Sequence[StreamKey]) -> list[NewHead]:
    return [NewHead(*row) for row in await _fetch_keys(session, _SCHEDULE_HEADS, keys)]


async def _fetch_keys(session: AsyncSession, sql: str, keys: Sequence[StreamKey]) -> list[Any]:
    ordered = sorted(set(keys))
    return await fetch(session, sql, [k.endpoint_id for k in ordered], [k.stream for k in ordered])
