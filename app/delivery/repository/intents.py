"""The accept path's statements: intents become their events, deliveries and outbox wake-ups
together, or nothing does.

One statement is one transaction: no BEGIN/COMMIT round trips, and asyncpg's prepared-statement
cache instead of building SQL per request. It spans four tables on purpose -- this is the
hottest write Herald makes, and the atomicity is the invariant (design.md, invariant 1).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from app.streams.repository.streams import numbering

# A delivery's schedule: due at its not-before time (NULL: now) -- unless it is ordered and
# not its stream's head, when it waits unscheduled (app/streams/); its own not-before time is
# kept for then. Over a row of ``numbered`` (app/streams/repository/streams.py), NULL when the
# delivery is unordered, and the not-before time {after}.
_SCHEDULE = "CASE WHEN numbered.seq IS NULL OR numbered.is_head THEN coalesce({after}, now()) END"
_KEPT = "CASE WHEN numbered.seq IS NOT NULL THEN {after} END"
_DUE = _SCHEDULE.format(after="$8::timestamptz")
_NOT_BEFORE = _KEPT.format(after="$8::timestamptz")

# $1 endpoint, $2 tenant, $3 event id, $4 event type, $5 payload, $6 delivery id, $7 region,
# $8 deliver_after (NULL: now), $9 the producer's traceparent; $10 the Idempotency-Key (NULL:
# none), $11 the request's fingerprint, $12 how long the key lives; $13 the ordering key (NULL:
# none). An ordered endpoint's delivery is numbered in its stream in the same statement
# (app/streams/repository/streams.py).
#
# A key is claimed only for an enabled endpoint, and everything else is written only if it was:
# the row's primary key makes a concurrent request with the same key wait here until the first
# commits, then find it taken (a key whose claim expired is taken over). Whatever the statement
# cannot claim -- a key already held, an endpoint refused -- it writes nothing for; the caller
# then asks the transaction path, which reads what holds the key.
_ACCEPT = f"""
WITH target AS (
    SELECT id, enabled, disabled_reason FROM endpoints
     WHERE id = $1 AND tenant_id = $2 AND deleted_at IS NULL
), claim AS (
    INSERT INTO idempotency_keys AS held (tenant_id, key, request_hash, resource_id,
                                          response_status, expires_at)
    SELECT $2, $10, $11, $3, 202, now() + $12::interval
      FROM target WHERE enabled AND $10::text IS NOT NULL
    ON CONFLICT (tenant_id, key) DO UPDATE
       SET request_hash = excluded.request_hash, resource_id = excluded.resource_id,
           response_status = excluded.response_status, created_at = now(),
           expires_at = excluded.expires_at
     WHERE held.expires_at <= now()
    RETURNING key
), event AS (
    INSERT INTO events (id, tenant_id, event_type, payload, traceparent, payload_days)
    SELECT $3, $2, $4, $5, $9, payload_days_of($2) FROM target
     WHERE enabled AND ($10::text IS NULL OR EXISTS (SELECT FROM claim))
    RETURNING id, payload_days
), {
    numbering(
        "(SELECT 1 AS n, $6::text AS delivery_id, target.id AS endpoint_id,"
        " $13::text AS ordering_key FROM target, event)"
    )
},
delivery AS (
    INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                            next_attempt_at, ordering_key, stream, stream_seq, deliver_after,
                            payload_days)
    SELECT $6, $2, target.id, event.id, $4, $7, 'pending', {_DUE}, $13, numbered.stream,
           numbered.seq, {_NOT_BEFORE}, event.payload_days
      FROM target CROSS JOIN event LEFT JOIN numbered ON true
    RETURNING *
), wakeup AS (
    INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at)
    SELECT $7, $2, endpoint_id, next_attempt_at FROM delivery WHERE next_attempt_at IS NOT NULL
    RETURNING id
)
SELECT target.id IS NOT NULL AS found, target.enabled, target.disabled_reason,
       wakeup.id AS outbox_id, delivery.*
  FROM (SELECT 1) AS one
  LEFT JOIN target ON true LEFT JOIN delivery ON true LEFT JOIN wakeup ON true
"""  # noqa: S608


@dataclass(frozen=True)
class Inserted:
    """What the statement did: ``delivery`` (the row as inserted) is set only when the endpoint
    exists and is enabled and, for a keyed request, the key was claimed; ``outbox_id`` then
    names its wake-up, unless it waits behind its stream's head and needs none."""

    found: bool
    disabled_reason: str | None
    delivery: dict[str, Any] | None
    outbox_id: int | None


@dataclass(frozen=True)
class KeyToClaim:
    """An ``Idempotency-Key`` for the accept to claim, with what makes a repeat the same
    request and how long the claim lasts."""

    key: str
    fingerprint: bytes
    ttl: timedelta


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
    traceparent: str | None,
    ordering_key: str | None = None,
    key: KeyToClaim | None = None,
) -> Inserted:
    """One intent for one endpoint -- the key's claim, the event, the delivery and its outbox
    wake-up -- as one statement: its own transaction (db.single_statements)."""
    row = await connection.fetchrow(
        _ACCEPT,
        endpoint_id,
        tenant_id,
        event_id,
        event_type,
        payload,
        delivery_id,
        region,
        deliver_after,
        traceparent,
        key.key if key else None,
        key.fingerprint if key else None,
        key.ttl if key else None,
        ordering_key,
    )
    if row["id"] is None:
        return Inserted(row["found"], row["disabled_reason"], None, None)
    delivery = {k: v for k, v in row.items() if k not in _NOT_DELIVERY}
    return Inserted(True, None, delivery, row["outbox_id"])


_NOT_DELIVERY = frozenset({"found", "enabled", "disabled_reason", "outbox_id"})


# Many intents, as arrays: one statement whatever the count, and the same prepared statement for
# every batch (a multi-row VALUES list would be new SQL for every batch size). The endpoints
# were checked by the caller in the same transaction.
# $1 tenant, $2 region, then one array per column: $3 event ids, $4 event types, $5 payloads,
# $6 delivery ids, $7 endpoint ids, $8 deliver_after (NULL: now); $9 the request's traceparent;
# $10 ordering keys (NULL: none). A batch's items of one stream are numbered in item order.
ACCEPT_MANY = f"""
WITH item AS (
    SELECT * FROM unnest($3::text[], $4::text[], $5::bytea[], $6::text[], $7::text[],
                         $8::timestamptz[], $10::text[]) WITH ORDINALITY
        AS i(event_id, event_type, payload, delivery_id, endpoint_id, deliver_after,
             ordering_key, n)
), kept AS (
    SELECT payload_days_of($1) AS payload_days
), event AS (
    INSERT INTO events (id, tenant_id, event_type, payload, traceparent, payload_days)
    SELECT event_id, $1, event_type, payload, $9, kept.payload_days FROM item, kept
), {numbering("item")},
delivery AS (
    INSERT INTO deliveries (id, tenant_id, endpoint_id, event_id, event_type, region, state,
                            next_attempt_at, ordering_key, stream, stream_seq, deliver_after,
                            payload_days)
    SELECT item.delivery_id, $1, item.endpoint_id, item.event_id, item.event_type, $2,
           'pending', {_SCHEDULE.format(after="item.deliver_after")}, item.ordering_key,
           numbered.stream, numbered.seq, {_KEPT.format(after="item.deliver_after")},
           kept.payload_days
      FROM item CROSS JOIN kept LEFT JOIN numbered USING (n)
    RETURNING *
), wakeup AS (
    INSERT INTO outbox_wakeups (region, tenant_id, endpoint_id, run_at)
    SELECT $2, $1, endpoint_id, min(next_attempt_at) FROM delivery
     WHERE next_attempt_at IS NOT NULL
     GROUP BY endpoint_id
    RETURNING id, endpoint_id, run_at
)
SELECT wakeup.id AS outbox_id, wakeup.run_at AS wake_at, delivery.*
  FROM delivery LEFT JOIN wakeup ON wakeup.endpoint_id = delivery.endpoint_id
"""  # noqa: S608


@dataclass(frozen=True)
class NewIntent:
    event_id: str
    event_type: str
    payload: bytes
    delivery_id: str
    endpoint_id: str
    deliver_after: datetime | None
    ordering_key: str | None = None


@dataclass(frozen=True)
class InsertedMany:
    """The deliveries as inserted, by id, and the wake-ups written for them: (outbox id,
    endpoint, when it is first due), one per destination with a delivery due."""

    deliveries: dict[str, dict[str, Any]]
    wakeups: list[tuple[int, str, datetime]]


async def insert_many(
    session: AsyncSession,
    *,
    tenant_id: str,
    region: str,
    intents: Sequence[NewIntent],
    traceparent: str | None,
    chunk: int = 100,
) -> InsertedMany:
    """Insert every intent inside the session's transaction, read back ``chunk`` rows at a
    time (what else waits on the event loop runs between)."""
    if not intents:
        return InsertedMany({}, [])
    columns = (
        [i.event_id for i in intents],
        [i.event_type for i in intents],
        [i.payload for i in intents],
        [i.delivery_id for i in intents],
        [i.endpoint_id for i in intents],
        [i.deliver_after for i in intents],
    )
    ordering_keys = [i.ordering_key for i in intents]
    connection = await session.connection()
    result = await connection.exec_driver_sql(
        ACCEPT_MANY, (tenant_id, region, *columns, traceparent, ordering_keys)
    )
    names = list(result.keys())
    inserted: dict[str, dict[str, Any]] = {}
    wakeups: dict[int, tuple[int, str, datetime]] = {}
    for rows in result.partitions(chunk):
        for values in rows:
            delivery = dict(zip(names, values, strict=True))
            outbox_id, wake_at = delivery.pop("outbox_id"), delivery.pop("wake_at")
            if outbox_id is not None:
                wakeups[outbox_id] = (outbox_id, delivery["endpoint_id"], wake_at)
            inserted[delivery["id"]] = delivery
        await asyncio.sleep(0)
    return InsertedMany(inserted, list(wakeups.values()))
