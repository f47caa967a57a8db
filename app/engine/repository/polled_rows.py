"""What an acknowledgement reads of the deliveries a poll read (app/engine/service/polls.py):
which receipts still hold, and which deliveries had succeeded already -- each one statement
that locks nothing (the record that follows is fenced by the lease tokens all the same); and
the give-back of reads never answered. The ids' least and greatest confine each statement to
the days those ids were minted in (deliveries are partitioned by day)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import asyncpg


@dataclass(frozen=True)
class HeldRead:
    id: str
    attempt_count: int  # its reads so far: the number its attempt is recorded under
    stream: str | None  # an ordered delivery's stream
    read_at: datetime  # when the poll that holds it read it
    token: uuid.UUID  # the lease token of that read


_HELD = """
SELECT d.id, d.attempt_count, d.stream, d.updated_at AS read_at, d.lease_token
  FROM unnest($2::text[], $3::uuid[]) AS r(id, token)
  JOIN deliveries AS d ON d.id = r.id AND d.lease_token = r.token
 WHERE d.endpoint_id = $1 AND d.state = 'leased' AND d.lease_until > now()
   AND d.id BETWEEN $4 AND $5
"""

_SUCCEEDED = """
SELECT d.id FROM deliveries AS d
 WHERE d.id = ANY($2::text[]) AND d.endpoint_id = $1 AND d.state = 'succeeded'
   AND d.id BETWEEN $3 AND $4
"""


async def held_reads(
    connection: asyncpg.Connection, endpoint_id: str, receipts: Sequence[tuple[str, uuid.UUID]]
) -> list[HeldRead]:
    """The reads whose receipts (delivery id, lease token) still hold their delivery: one a
    delivery at most, whatever receipts of its earlier reads came with it."""
    if not receipts:
        return []
    ids = [delivery_id for delivery_id, _ in receipts]
    tokens = [token for _, token in receipts]
    rows = await connection.fetch(_HELD, endpoint_id, ids, tokens, min(ids), max(ids))
    return [
        HeldRead(r["id"], r["attempt_count"], r["stream"], r["read_at"], r["lease_token"])
        for r in rows
    ]


async def succeeded(
    connection: asyncpg.Connection, endpoint_id: str, ids: Sequence[str]
) -> set[str]:
    """Those of ``ids`` that are the endpoint's and have succeeded."""
    if not ids:
        return set()
    rows = await connection.fetch(_SUCCEEDED, endpoint_id, list(ids), min(ids), max(ids))
    return {row["id"] for row in rows}


# A read given back unread: due again at once (a poll's read moved it to its lease's end),
# uncounted; fenced by its token, as any give-back.
_GIVE_BACK = """
UPDATE deliveries AS d
   SET state = CASE WHEN d.state = 'cancelled' THEN d.state ELSE 'pending' END,
       lease_token = NULL, lease_until = NULL, next_attempt_at = now(),
       attempt_count = d.attempt_count - 1, updated_at = now()
  FROM unnest($1::text[], $2::uuid[]) AS r(id, token)
 WHERE d.id = r.id AND d.lease_token = r.token AND d.state IN ('leased', 'cancelled')
   AND d.lease_until > now() AND d.id BETWEEN $3 AND $4
"""


async def give_back(connection: asyncpg.Connection, reads: Sequence[tuple[str, uuid.UUID]]) -> None:
    """Hand back reads (delivery id, lease token) that were never answered."""
    if not reads:
        return
    ids = [delivery_id for delivery_id, _ in reads]
    tokens = [token for _, token in reads]
    await connection.execute(_GIVE_BACK, ids, tokens, min(ids), max(ids))
