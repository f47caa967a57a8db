"""Leases on deliveries: the batch claim of a destination's due deliveries, the fenced record
and the give-back. A worker holds a delivery only through these, and only while its lease token
is current and unexpired. Each is one statement and its own transaction (``record_in``
excepted), so no transaction spans a send (design.md, invariant 6)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from app.states import DeliveryState

# How many live rows the wake-up probe reads at most (design.md, invariant 7: bounded).
WAKE_PROBE_ROWS = 256


@dataclass(frozen=True)
class ClaimedDelivery:
    """Everything one attempt needs, fetched by the claim itself (one round trip)."""

    id: str
    endpoint_id: str
    attempt_number: int
    attempts_used: int  # since the last redrive
    url: str
    secrets: list[str]
    endpoint_enabled: bool
    endpoint_deleted: bool
    payload: bytes
    lease_left: float  # seconds, by the database's clock, as the claim returned
    token: uuid.UUID  # this row's lease token: only its holder may record or release
    tenant_id: str


@dataclass(frozen=True)
class ClaimBatch:
    """One claim of a destination's due deliveries, and when to look at it again."""

    rows: list[ClaimedDelivery]  # at most the limit, in (next_attempt_at, id) order
    # Seconds from now (database clock) until the destination's next live row becomes
    # claimable, the rows just claimed included (at their lease end): 0 or less is due now;
    # None, nothing live is left. Never late, at times early.
    next_wake: float | None


# The claim's parts (formatted into the statements: constants only, hence the S608 waivers).
# Claimable: waiting and due, or leased by a worker whose lease ran out (it died or stalled,
# and its delivery is taken over).
_CLAIMABLE = """((d.state IN ('pending', 'enqueued') AND d.next_attempt_at <= now())
        OR (d.state = 'leased' AND d.lease_until < now()))"""

# A claim's write, besides the token ($4: the lease in seconds). Of the columns an index names
# it changes only `state` (no index names it since migration 0010): the columns that order the
# live rows stay, so a claim is a HOT update.
_LEASE = """state = 'leased', lease_until = now() + make_interval(secs => $4),
       attempt_count = d.attempt_count + 1, updated_at = now()"""

_LEASED = """d.id, d.tenant_id, d.endpoint_id, d.attempt_count, d.attempt_floor, d.lease_token,
       extract(epoch FROM d.lease_until - now())::float8 AS lease_left"""

# What signing and sending need of the endpoint. A rotated-out secret signs until it expires.
_ENDPOINT = """e.url, e.secret,
       CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END
           AS previous_secret,
       e.enabled, e.deleted_at IS NOT NULL AS endpoint_deleted"""

# When a destination ($1 region, $2 endpoint) next has a claimable row: the earliest of its
# live rows' due times, a leased row's being its lease end. Reads the first {rows} rows in
# claim order and locks nothing. Rows past them are due no earlier than the last one read (a
# leased row's lease ends after it was due), so a full read answers at most that: early, never
# late. {besides} leaves out rows the same statement has just claimed (it sees them as before).
_WAKE = """(
    SELECT CASE WHEN count(*) = {rows} THEN least(min(at), max(due)) ELSE min(at) END
      FROM (SELECT d.next_attempt_at AS due,
                   CASE WHEN d.state = 'leased' THEN d.lease_until ELSE d.next_attempt_at END AS at
              FROM deliveries AS d
             WHERE d.region = $1 AND d.endpoint_id = $2 AND d.completed_at IS NULL {besides}
             ORDER BY d.next_attempt_at, d.id LIMIT {rows}) AS live)"""

_WAKE_OF_THE_REST = _WAKE.format(
    rows="(SELECT n FROM probe_rows)", besides="AND d.id <> ALL (ARRAY(SELECT id FROM picked))"
)

# The batch claim ($3 limit, $4 lease seconds, $5 probe rows), one statement and its own
# transaction: up to $3 claimable rows of one destination in claim order, each with its own
# token; rows another claim holds are skipped, not waited for. `next_attempt_at <= now()` is
# redundant for leased rows (claimed once due) and bounds the scan of the live rows' index.
# The wake-up counts the rows just claimed as leased until now() + $4; the rest is probed, one
# row when the claim was full (whatever lies beyond that row is due no earlier than it).
_CLAIM_BATCH = f"""
WITH picked AS MATERIALIZED (
    SELECT d.id FROM deliveries AS d
     WHERE d.region = $1 AND d.endpoint_id = $2 AND d.completed_at IS NULL
       AND d.next_attempt_at <= now() AND {_CLAIMABLE}
     ORDER BY d.next_attempt_at, d.id LIMIT $3
       FOR UPDATE SKIP LOCKED
), probe_rows AS (
    SELECT CASE WHEN count(*) < $3 THEN $5 ELSE 1 END AS n FROM picked
), claimed AS (
    UPDATE deliveries AS d
       SET lease_token = gen_random_uuid(), {_LEASE}
      FROM picked WHERE d.id = picked.id
    RETURNING {_LEASED}, d.event_id, d.next_attempt_at
), wake AS (
    SELECT least({_WAKE_OF_THE_REST},
                 (SELECT now() + make_interval(secs => $4) FROM picked LIMIT 1)) AS at
)
SELECT d.*, {_ENDPOINT}, v.payload, extract(epoch FROM wake.at - now())::float8 AS next_wake
  FROM wake LEFT JOIN (claimed AS d JOIN endpoints AS e ON e.id = d.endpoint_id
                                    JOIN events AS v ON v.id = d.event_id) ON TRUE
 ORDER BY d.next_attempt_at, d.id
"""  # noqa: S608

_NEXT_WAKE = f"""
SELECT extract(epoch FROM {_WAKE.format(rows="$3", besides="")} - now())::float8
"""  # noqa: S608


def _claimed(row: asyncpg.Record) -> ClaimedDelivery:
    secrets = [row["secret"]]
    if row["previous_secret"]:
        secrets.append(row["previous_secret"])
    return ClaimedDelivery(
        id=row["id"],
        endpoint_id=row["endpoint_id"],
        attempt_number=row["attempt_count"],
        attempts_used=row["attempt_count"] - row["attempt_floor"],
        url=row["url"],
        secrets=secrets,
        endpoint_enabled=row["enabled"],
        endpoint_deleted=row["endpoint_deleted"],
        payload=row["payload"],
        lease_left=row["lease_left"],
        token=row["lease_token"],
        tenant_id=row["tenant_id"],
    )


async def claim_batch(
    connection: asyncpg.Connection,
    *,
    region: str,
    endpoint_id: str,
    limit: int,
    lease_seconds: float,
) -> ClaimBatch:
    """Lease up to ``limit`` claimable deliveries of one destination, oldest due first, and
    say when the destination next has one (one statement, one round trip)."""
    rows = await connection.fetch(
        _CLAIM_BATCH, region, endpoint_id, limit, lease_seconds, WAKE_PROBE_ROWS
    )
    # The statement always returns a row (the wake-up); without a claim its columns are NULL.
    claimed = [_claimed(row) for row in rows if row["id"] is not None]
    return ClaimBatch(claimed, rows[0]["next_wake"])


async def next_wake(
    connection: asyncpg.Connection, *, region: str, endpoint_id: str
) -> float | None:
    """The batch claim's wake-up alone: seconds until the destination's next live delivery
    becomes claimable (0 or less: now), None when it has none. Claims and locks nothing."""
    seconds: float | None = await connection.fetchval(
        _NEXT_WAKE, region, endpoint_id, WAKE_PROBE_ROWS
    )
    return seconds


@dataclass(frozen=True)
class Finished:
    """How a leased attempt ends: the delivery's next state, and what the attempt saw.
    ``outcome`` is None when nothing was sent (refused before sending): no attempt row."""

    state: DeliveryState
    delay_seconds: float | None
    dead_reason: str | None
    attempt_number: int
    outcome: str | None = None
    status_code: int | None = None
    error: str | None = None
    started_at: datetime | None = None
    duration_ms: int | None = None
    response_body: str | None = None


@dataclass(frozen=True)
class Recording:
    """One leased attempt's ending, for a batch record."""

    delivery_id: str
    token: uuid.UUID
    finished: Finished  # a retry: state ENQUEUED with delay_seconds set


# What a record writes of one delivery, as (name, type): the order of the statement's
# parameters. The record in a session takes them as parameters, the batch record as one array
# each. The first
# two (id, token) are also what a give-back takes.
_RECORDED = (
    ("id", "text"), ("token", "uuid"), ("state", "text"), ("outcome", "text"),
    ("status_code", "int"), ("error", "text"), ("dead_reason", "text"), ("delay", "float8"),
    ("attempt_number", "int"), ("started_at", "timestamptz"), ("duration_ms", "int"),
    ("response_body", "text"),
)  # fmt: skip
_LEASE_KEY = _RECORDED[:2]


def _one_row(columns: tuple[tuple[str, str], ...]) -> str:
    """A one-row relation ``r`` from the parameters $1, $2, ..., one per column."""
    values = ", ".join(f"${i}::{kind} AS {name}" for i, (name, kind) in enumerate(columns, 1))
    return f"(SELECT {values}) AS r"


def _many_rows(columns: tuple[tuple[str, str], ...]) -> str:
    """The relation ``r`` of many rows, from one array parameter per column."""
    arrays = ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(columns, 1))
    return f"unnest({arrays}) AS r({', '.join(name for name, _ in columns)})"


# Fencing (design.md, invariant 4), per row of ``r``: only the current holder (r.id, r.token)
# of a live lease may write; an expired lease writes nothing, whether or not another worker
# took over.
_HELD = "d.id = r.id AND d.lease_token = r.token AND d.state = 'leased' AND d.lease_until > now()"

# The record, fenced by the lease, over the rows of ``r`` ({rows}). In the same statement: the
# attempt rows, and a success's mark on its endpoint, once per endpoint (which closes the
# breaker; written only when something changes or a second has passed, so a busy endpoint's
# row is not a hot spot). Failures' verdicts on the endpoint need reads and decisions, so they
# run after this statement in the same transaction (services/destination_health.py).
_RECORD_FROM = """
WITH done AS (
    UPDATE deliveries AS d
       SET state = r.state, lease_token = NULL, lease_until = NULL, last_outcome = r.outcome,
           last_status_code = r.status_code, last_error = r.error, dead_reason = r.dead_reason,
           updated_at = now(),
           completed_at = CASE WHEN r.state IN ('succeeded', 'dead') THEN now() END,
           next_attempt_at = CASE WHEN r.delay IS NULL THEN d.next_attempt_at
                                  ELSE now() + make_interval(secs => r.delay) END
      FROM {rows}
     WHERE {held}
    RETURNING d.id, d.endpoint_id, r.attempt_number, r.started_at, r.duration_ms,
              r.status_code, r.outcome, r.error, r.response_body
), attempt AS (
    INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at, duration_ms,
                          status_code, outcome, error, response_body)
    SELECT id, endpoint_id, attempt_number, started_at, duration_ms, status_code, outcome,
           error, response_body
      FROM done WHERE outcome IS NOT NULL
), healthy AS (
    UPDATE endpoints AS e
       SET consecutive_failures = 0, failing_since = NULL, last_success_at = now(),
           paused_until = CASE WHEN e.breaker_trips > 0 THEN NULL ELSE e.paused_until END,
           pause_reason = CASE WHEN e.breaker_trips > 0 THEN NULL ELSE e.pause_reason END,
           breaker_trips = 0
      FROM (SELECT DISTINCT endpoint_id FROM done WHERE outcome = 'success') AS s
     WHERE e.id = s.endpoint_id
       AND (e.consecutive_failures > 0 OR e.breaker_trips > 0 OR e.last_success_at IS NULL
            OR e.last_success_at < now() - interval '1 second')
)
SELECT id FROM done
"""
_RECORD = _RECORD_FROM.format(rows=_one_row(_RECORDED), held=_HELD)
_RECORD_BATCH = _RECORD_FROM.format(rows=_many_rows(_RECORDED), held=_HELD)


def _record_args(delivery_id: str, token: uuid.UUID, finished: Finished) -> tuple[Any, ...]:
    """The statement's parameters, named here and put in ``_RECORDED``'s order: no value is
    placed by counting positions."""
    f = finished
    named = {
        "id": delivery_id, "token": token, "state": f.state.value, "outcome": f.outcome,
        "status_code": f.status_code, "error": f.error, "dead_reason": f.dead_reason,
        "delay": f.delay_seconds, "attempt_number": f.attempt_number,
        "started_at": f.started_at, "duration_ms": f.duration_ms,
        "response_body": f.response_body,
    }  # fmt: skip
    return tuple(named[name] for name, _ in _RECORDED)


async def record_in(
    session: AsyncSession, delivery_id: str, *, token: uuid.UUID, finished: Finished
) -> bool:
    """Finish one leased attempt inside the session's transaction, for callers that write
    more with it (a failure's judgement of its destination). False when the lease was lost, in
    which case nothing is written."""
    connection = await session.connection()
    result = await connection.exec_driver_sql(_RECORD, _record_args(delivery_id, token, finished))
    return result.scalar_one_or_none() is not None


async def record_batch(connection: asyncpg.Connection, items: Sequence[Recording]) -> set[str]:
    """Finish many leased attempts as one statement (one commit), fenced row by row. Returns
    the ids recorded; every other item had lost its lease, and nothing of it was written."""
    if not items:
        return set()
    rows = (_record_args(i.delivery_id, i.token, i.finished) for i in items)
    columns = [list(column) for column in zip(*rows, strict=True)]
    return {row["id"] for row in await connection.fetch(_RECORD_BATCH, *columns)}


# A give-back: the claim did not count as an attempt. It leaves next_attempt_at alone: the row
# was due when claimed, so it still is, and it keeps its place at the front of its
# destination's (next_attempt_at, id) order. next_attempt_at orders the live rows' index, so
# not writing it lets the give-back be a HOT update.
_RELEASE_BATCH = f"""
UPDATE deliveries AS d
   SET state = 'pending', lease_token = NULL, lease_until = NULL,
       attempt_count = d.attempt_count - 1, updated_at = now()
  FROM {_many_rows(_LEASE_KEY)} WHERE {_HELD}
RETURNING d.id
"""  # noqa: S608


async def release_batch(
    connection: asyncpg.Connection, leases: Sequence[tuple[str, uuid.UUID]]
) -> set[str]:
    """Give back many unsent leases (delivery id, token) as one statement: each goes back to
    pending, still due, uncounted. Returns the ids given back; the others' leases were lost."""
    if not leases:
        return set()
    ids, tokens = [list(column) for column in zip(*leases, strict=True)]
    return {row["id"] for row in await connection.fetch(_RELEASE_BATCH, ids, tokens)}
