"""Streams as they stand, for reading: one stream (the status page), an endpoint's streams with
a head (the API's and console's streams page) and the halted ones (the CLI, the alert's
runbook). Reads only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.streams.repository.streams import StreamKey, fetch


@dataclass(frozen=True)
class StreamView:
    """A stream as it stands: its head (the delivery it waits on) and whether it is halted."""

    endpoint_id: str
    stream: str
    next_seq: int
    head_id: str | None
    head_seq: int | None
    head_state: str | None
    head_since: datetime | None
    halted_at: datetime | None


_VIEW = """
SELECT s.endpoint_id, s.stream, s.next_seq, s.head_id, h.stream_seq, h.state, s.head_since,
       s.halted_at
  FROM streams AS s LEFT JOIN deliveries AS h ON h.id = s.head_id
 WHERE s.endpoint_id = $1 AND s.stream = $2
"""


async def view(session: AsyncSession, key: StreamKey) -> StreamView | None:
    rows = await fetch(session, _VIEW, key.endpoint_id, key.stream)
    return StreamView(*rows[0]) if rows else None


_HALTED = """
SELECT s.endpoint_id, s.stream, s.head_id, h.stream_seq, s.halted_at,
       (SELECT count(*) FROM deliveries AS w
         WHERE w.endpoint_id = s.endpoint_id AND w.stream = s.stream
           AND w.completed_at IS NULL) AS waiting
  FROM streams AS s JOIN deliveries AS h ON h.id = s.head_id
 WHERE s.halted_at IS NOT NULL AND ($1::text IS NULL OR s.endpoint_id = $1)
 ORDER BY s.halted_at LIMIT $2
"""


@dataclass(frozen=True)
class HaltedStream:
    endpoint_id: str
    stream: str
    head_id: str
    head_seq: int
    halted_at: datetime
    waiting: int  # live deliveries behind the head


async def halted(
    session: AsyncSession, *, endpoint_id: str | None, limit: int
) -> list[HaltedStream]:
    """Halted streams, longest halted first (of one endpoint, or of all)."""
    rows = await fetch(session, _HALTED, endpoint_id, limit)
    return [HaltedStream(*row) for row in rows]


@dataclass(frozen=True)
class StreamRow:
    """One stream with a head, on an endpoint's streams page."""

    ordering_key: str | None  # None: the endpoint's one stream, or its keyless one
    last_seq: int  # the highest number handed out
    head_id: str
    head_seq: int | None  # None only when the head row is gone (reconcile mends that)
    head_state: str | None
    head_since: datetime | None
    halted_at: datetime | None
    live: int  # live deliveries of the stream, the head among them while it lives


# In key order after $2 (keyset) from ix_streams_active, so idle streams cost nothing; each
# stream's live rows counted from ix_deliveries_stream.
_PAGE = """
SELECT nullif(s.stream, ''), s.next_seq - 1, s.head_id, h.stream_seq, h.state, s.head_since,
       s.halted_at,
       (SELECT count(*) FROM deliveries AS w
         WHERE w.endpoint_id = s.endpoint_id AND w.stream = s.stream
           AND w.completed_at IS NULL) AS live
  FROM streams AS s LEFT JOIN deliveries AS h ON h.id = s.head_id
 WHERE s.endpoint_id = $1 AND s.head_id IS NOT NULL AND ($2::text IS NULL OR s.stream > $2)
   AND (NOT $3::bool OR s.halted_at IS NOT NULL)
 ORDER BY s.stream LIMIT $4
"""


async def page(
    session: AsyncSession,
    endpoint_id: str,
    *,
    after: str | None,
    halted_only: bool,
    limit: int,
) -> list[StreamRow]:
    """The endpoint's streams with a head, in key order after ``after``."""
    rows = await fetch(session, _PAGE, endpoint_id, after, halted_only, limit)
    return [StreamRow(*row) for row in rows]
