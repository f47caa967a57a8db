"""The accept path's one statement: an intent for one endpoint becomes its event, its delivery
and its outbox row together, or nothing does.

One statement is one transaction: no BEGIN/COMMIT round trips, and asyncpg's prepared-statement
cache instead of building SQL per request. It spans four tables on purpose -- this is the
hottest write Herald makes, and the atomicity is the invariant (design.md, invariant 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

# $1 endpoint, $2 tenant, $3 event id, $4 event type, $5 payload, $6 delivery id, $7 region,
# $8 deliver_after (NULL: now). Foreign keys are checked at the end of the statement, so the
# event and the delivery that references it may be inserted together.
_ACCEPT = """
WITH target AS (
    SELECT id, enabled, disabled_reason FROM endpoints
     WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
), event AS (
    INSERT INTO events (id, tenant_id, event_type, payload)
    SELECT $3, $2, $4, $5 FROM target WHERE enabled
    RETURNING id
), delivery AS (
    INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                            next_attempt_at)
    SELECT $6, $2, target.id, event.id, $4, $7, 'pending', coalesce($8::timestamptz, now())
      FROM target, event
    RETURNING *
), entry AS (
    INSERT INTO outbox (delivery_id, region) SELECT id, $7 FROM delivery
    RETURNING id
)
SELECT target.id IS NOT NULL AS found, target.enabled, target.disabled_reason,
       entry.id AS outbox_id, delivery.*
  FROM (SELECT 1) AS one
  LEFT JOIN target ON true LEFT JOIN delivery ON true LEFT JOIN entry ON true
"""


@dataclass(frozen=True)
class Inserted:
    """What the statement did: ``delivery`` (the row as inserted) and ``outbox_id`` are set
    only when the endpoint exists and is enabled."""

    found: bool
    disabled_reason: str | None
    delivery: dict[str, Any] | None
    outbox_id: int | None


async def insert_for_endpoint(
    connection: asyncpg.Connection,
    *,
    tenant_id: str,
    endpoint_id: str,
    event_id: str,
    event_type: str,
    payload: bytes,
    delivery_id: str,
    region: str,
    deliver_after: datetime | None,
) -> Inserted:
    row = await connection.fetchrow(
        _ACCEPT, endpoint_id, tenant_id, event_id, event_type, payload, delivery_id, region,
        deliver_after,
    )  # fmt: skip
    if row["outbox_id"] is None:
        return Inserted(row["found"], row["disabled_reason"], None, None)
    delivery = {k: v for k, v in row.items() if k not in _NOT_DELIVERY}
    return Inserted(True, None, delivery, row["outbox_id"])


_NOT_DELIVERY = frozenset({"found", "enabled", "disabled_reason", "outbox_id"})
