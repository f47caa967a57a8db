"""The statements of ordered delivery (its design: docs/decisions.md): numbering accepted
deliveries in their streams, and handing a stream on when its head ends.

Lock order, for every writer: stream rows first, in (endpoint, stream) order, then the delivery
rows of those streams, then endpoints. An accept takes its stream's lock inside its own
statement (``numbering``); everything that ends a head takes it with ``lock`` in a statement of
its own first, so that the statement that finds the next head sees every accept that held the
lock before it (a statement reads the snapshot it started with)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession


@dataclass(frozen=True, order=True)
class StreamKey:
    endpoint_id: str
    stream: str


@dataclass(frozen=True)
class NewHead:
    """A delivery that has just become its stream's head: its destination must be armed (by
    the recorder after its commit, or by an outbox wake-up written with the hand-on)."""

    id: str
    tenant_id: str
    endpoint_id: str
    next_attempt_at: datetime
    attempt_count: int
    stream: str

    @property
    def key(self) -> StreamKey:
        return StreamKey(self.endpoint_id, self.stream)


def numbering(items: str) -> str:
    """CTEs, to follow ``WITH ...,``, that number the accepted items of ``items`` -- a relation
    of (n: the item's place in its request, delivery_id, endpoint_id, ordering_key) -- in their
    streams, as ``numbered`` (n, stream, seq, is_head). Items of unordered endpoints are left
    out. The stream rows are taken in (endpoint, stream) order; a stream's items get
    consecutive numbers in item order, and its first item is the head if nothing of the stream
    was live. ``ON CONFLICT DO UPDATE`` works on the newest row, committed after this
    statement's snapshot or not: whoever held the lock before is seen."""
    return f"""
streamed AS (
    SELECT i.n, i.delivery_id, i.endpoint_id,
           CASE WHEN e.ordering = 'key' THEN coalesce(i.ordering_key, '') ELSE '' END AS stream
      FROM {items} AS i JOIN endpoints AS e ON e.id = i.endpoint_id
     WHERE e.ordering <> 'none'
), counted AS (
    SELECT endpoint_id, stream, count(*) AS items,
           (array_agg(delivery_id ORDER BY n))[1] AS first_id
      FROM streamed GROUP BY endpoint_id, stream
), taken AS (
    INSERT INTO streams AS s (endpoint_id, stream, next_seq, head_id, head_since)
    SELECT endpoint_id, stream, items + 1, first_id, now() FROM counted
     ORDER BY endpoint_id, stream
    ON CONFLICT (endpoint_id, stream) DO UPDATE
       SET next_seq = s.next_seq + excluded.next_seq - 1,
           head_id = coalesce(s.head_id, excluded.head_id),
           head_since = CASE WHEN s.head_id IS NULL THEN now() ELSE s.head_since END
    RETURNING endpoint_id, stream, next_seq, head_id
), numbered AS (
    SELECT t.n, t.stream, t.delivery_id = k.head_id AS is_head,
           k.next_seq - c.items - 1
               + row_number() OVER (PARTITION BY t.endpoint_id, t.stream ORDER BY t.n) AS seq
      FROM streamed AS t JOIN counted AS c USING (endpoint_id, stream)
                         JOIN taken AS k USING (endpoint_id, stream)
)"""  # noqa: S608 -- only the caller's relation, a constant, is formatted in


async def fetch(session: AsyncSession, sql: str, *args: Any) -> list[Any]:
    connection = await session.connection()
    return list((await connection.exec_driver_sql(sql, args)).all())


# The statements of the lock and the hand-on are PostgreSQL functions (migration 0041), so that
# the ordered record can run them with its own in one round trip (a function's statements each
# take a fresh snapshot: the hand-on sees every accept that held the lock before it).
_LOCK = "SELECT lock_streams($1::text[], $2::text[])"
_HAND_ON = """
SELECT id, tenant_id, endpoint_id, next_attempt_at, attempt_count, stream
  FROM hand_on_streams($1::text[], $2::text[], $3::boolean)
"""


async def lock(session: AsyncSession, keys: Sequence[StreamKey]) -> None:
    """Lock the streams' rows in the caller's transaction, in the one order every writer
    uses; before any delivery row of theirs is written."""
    if keys:
        ordered = sorted(set(keys))
        await fetch(session, _LOCK, [k.endpoint_id for k in ordered], [k.stream for k in ordered])


async def hand_on(
    session: AsyncSession, keys: Sequence[StreamKey], *, skip_halted: bool = False
) -> list[NewHead]:
    """Hand each stream whose head has ended on to its next delivery (or halt it, when its
    head died and its endpoint halts on a dead head), in the caller's transaction, after
    ``lock``. ``skip_halted``: an operator's skip -- a halted stream moves on past its dead
    head. Returns the new heads, whose destinations the caller arms after its commit. (What
    ends a head, what a dead one does, and where its successor is due: ``hand_on_streams``,
    migration 0041.)"""
    if not keys:
        return []
    ordered = sorted(set(keys))
    rows = await fetch(
        session,
        _HAND_ON,
        [k.endpoint_id for k in ordered],
        [k.stream for k in ordered],
        skip_halted,
    )
    return [NewHead(*row) for row in rows]


# Redriven ($1: ids just revived, due now, in the caller's transaction, their streams locked
# by ``lock`` first). A stream's halted head revived is retried in place: it keeps its number
# and the stream is no longer halted. Any other revived delivery goes to its stream's tail
# with a new number (it cannot jump ahead of what already succeeded), waiting unscheduled
# unless the stream had nothing live, when the first of them becomes the head. A delivery of
# an endpoint that no longer orders is revived unordered.
_REQUEUE = """
WITH revived AS (
    SELECT d.id, d.endpoint_id, d.stream, d.stream_seq, e.ordering <> 'none' AS ordered,
           s.head_id IS NOT DISTINCT FROM d.id AS in_place
      FROM unnest($1::text[]) AS k(id) JOIN deliveries AS d ON d.id = k.id
      JOIN endpoints AS e ON e.id = d.endpoint_id
      LEFT JOIN streams AS s ON s.endpoint_id = d.endpoint_id AND s.stream = d.stream
     WHERE d.stream IS NOT NULL AND d.completed_at IS NULL
), moving AS (
    SELECT r.*, row_number() OVER (PARTITION BY endpoint_id, stream ORDER BY stream_seq, id) AS k
      FROM revived AS r WHERE r.ordered AND NOT r.in_place
), per_stream AS (
    SELECT endpoint_id, stream, count(*) FILTER (WHERE NOT in_place) AS items,
           bool_or(in_place) AS head_revived,
           (array_agg(id ORDER BY stream_seq, id) FILTER (WHERE NOT in_place))[1] AS first_id
      FROM revived WHERE ordered GROUP BY endpoint_id, stream
), grown AS (
    UPDATE streams AS s
       SET next_seq = s.next_seq + p.items,
           halted_at = CASE WHEN p.head_revived THEN NULL ELSE s.halted_at END,
           head_id = coalesce(s.head_id, p.first_id),
           head_since = CASE WHEN s.head_id IS NULL THEN now() ELSE s.head_since END
      FROM per_stream AS p
     WHERE s.endpoint_id = p.endpoint_id AND s.stream = p.stream
    RETURNING s.endpoint_id, s.stream, s.next_seq - p.items AS first_seq, s.head_id
), renumbered AS (
    UPDATE deliveries AS d
       SET stream_seq = g.first_seq + m.k - 1, deliver_after = NULL,
           next_attempt_at = CASE WHEN g.head_id = m.id THEN d.next_attempt_at END
      FROM moving AS m JOIN grown AS g USING (endpoint_id, stream)
     WHERE d.id = m.id
)
UPDATE deliveries AS d SET stream = NULL, stream_seq = NULL, deliver_after = NULL
  FROM revived AS r WHERE d.id = r.id AND NOT r.ordered
"""


async def requeue(session: AsyncSession, delivery_ids: Sequence[str]) -> None:
    """Put redriven ordered deliveries back in their streams (see ``_REQUEUE``)."""
    if delivery_ids:
        await _fetch_none(session, _REQUEUE, list(delivery_ids))


_STREAMS_OF = """
SELECT DISTINCT d.endpoint_id, d.stream
  FROM unnest($1::text[]) AS k(id) JOIN deliveries AS d ON d.id = k.id
 WHERE d.stream IS NOT NULL
"""


async def streams_of(session: AsyncSession, delivery_ids: Sequence[str]) -> list[StreamKey]:
    """The streams these deliveries are numbered in (read, not locked: a delivery's stream
    changes only when its endpoint stops ordering)."""
    rows = await fetch(session, _STREAMS_OF, list(delivery_ids))
    return [StreamKey(*row) for row in rows]


async def _fetch_none(session: AsyncSession, sql: str, *args: Any) -> None:
    connection = await session.connection()
    await connection.exec_driver_sql(sql, args)


_OF_ENDPOINT = "SELECT endpoint_id, stream FROM streams WHERE endpoint_id = $1 {only}"


async def of_endpoint(
    session: AsyncSession, endpoint_id: str, *, halted_only: bool = False
) -> list[StreamKey]:
    only = "AND halted_at IS NOT NULL" if halted_only else ""
    rows = await fetch(session, _OF_ENDPOINT.format(only=only), endpoint_id)
    return [StreamKey(*row) for row in rows]


_BUSY = """
SELECT EXISTS (SELECT FROM deliveries
                WHERE endpoint_id = $1 AND stream IS NOT NULL AND completed_at IS NULL)
    OR EXISTS (SELECT FROM streams WHERE endpoint_id = $1 AND halted_at IS NOT NULL)
"""


async def busy(session: AsyncSession, endpoint_id: str) -> bool:
    """Whether the endpoint has ordered work left: a live ordered delivery, or a halted
    stream."""
    [(answer,)] = await fetch(session, _BUSY, endpoint_id)
    return bool(answer)


# An endpoint that stops ordering ($1; its streams locked by ``lock`` first): every stream
# loses its head and its halt, and what waited becomes due now (or at its own not-before
# time), unordered. Finished deliveries keep their numbers; the streams keep counting, so a
# number is never handed out twice.
_RELEASE = """
WITH cleared AS (
    UPDATE streams SET head_id = NULL, head_since = NULL, halted_at = NULL
     WHERE endpoint_id = $1
)
UPDATE deliveries
   SET next_attempt_at = coalesce(next_attempt_at, deliver_after, now()), stream = NULL,
       stream_seq = NULL, deliver_after = NULL, updated_at = now()
 WHERE endpoint_id = $1 AND stream IS NOT NULL AND completed_at IS NULL
"""


async def release(session: AsyncSession, endpoint_id: str) -> None:
    await _fetch_none(session, _RELEASE, endpoint_id)
