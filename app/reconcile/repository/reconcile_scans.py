"""The reconciler's scan over deliveries: the destinations with live work, and when each can
next be claimed. It reads only: no row is locked or changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import asyncpg


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
