"""Leases on deliveries: the claim, the fenced record, the release. A worker holds a delivery
only through these, and only while its lease token is current and unexpired."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy import case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Delivery
from app.states import DeliveryState

_WAITING = (DeliveryState.PENDING.value, DeliveryState.ENQUEUED.value)


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


# The claim: one conditional UPDATE, its own transaction, returning everything one attempt
# needs. Claimable: waiting and due, or leased by a worker whose lease ran out (it died or
# stalled, and its delivery is taken over).
_CLAIM = """
UPDATE deliveries AS d
   SET state = 'leased', lease_token = $3, lease_until = now() + make_interval(secs => $4),
       attempt_count = d.attempt_count + 1, updated_at = now()
  FROM endpoints AS e, events AS v
 WHERE d.id = $1 AND d.region = $2 AND e.id = d.endpoint_id AND v.id = d.event_id
   AND ((d.state IN ('pending', 'enqueued') AND d.next_attempt_at <= now())
        OR (d.state = 'leased' AND d.lease_until < now()))
RETURNING d.id, d.endpoint_id, d.attempt_count, d.attempt_floor, e.url, e.secret,
          CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret END
              AS previous_secret,
          e.enabled, e.deleted_at IS NOT NULL AS endpoint_deleted, v.payload,
          extract(epoch FROM d.lease_until - now())::float8 AS lease_left
"""


async def claim(
    connection: asyncpg.Connection,
    delivery_id: str,
    *,
    region: str,
    token: uuid.UUID,
    lease_seconds: float,
) -> ClaimedDelivery | None:
    """Lease a due delivery. None when it is not due, terminal, owned by another region, or
    leased by a live worker -- so a duplicate job does nothing."""
    row = await connection.fetchrow(_CLAIM, delivery_id, region, token, lease_seconds)
    if row is None:
        return None
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
    )


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


# Fencing (design.md, invariant 4): only the current holder ($1 delivery, $2 token) of a live
# lease may write; an expired lease writes nothing, whether or not another worker took over.
# (Formatted into the statements below: constants only, hence the S608 waivers.)
_HELD = "id = $1 AND lease_token = $2 AND state = 'leased' AND lease_until > now()"

# The record, fenced by the lease. In the same statement: the attempt row, and a success's
# mark on its endpoint (which closes the breaker; written only when something changes or a
# second has passed, so a busy endpoint's row is not a hot spot). Failures' verdicts on the
# endpoint need reads and decisions, so they run after this statement in the same transaction
# (services/destination_health.py).
_RECORD = f"""
WITH done AS (
    UPDATE deliveries
       SET state = $3, lease_token = NULL, lease_until = NULL, last_outcome = $4,
           last_status_code = $5, last_error = $6, dead_reason = $7, updated_at = now(),
           completed_at = CASE WHEN $3 IN ('succeeded', 'dead') THEN now() END,
           next_attempt_at = CASE WHEN $8::float8 IS NULL THEN next_attempt_at
                                  ELSE now() + make_interval(secs => $8::float8) END
     WHERE {_HELD}
    RETURNING id, endpoint_id
), attempt AS (
    INSERT INTO attempts (delivery_id, endpoint_id, attempt_number, started_at, duration_ms,
                          status_code, outcome, error, response_body)
    SELECT id, endpoint_id, $9::int, $10::timestamptz, $11::int, $5::int, $4::text, $6::text,
           $12::text
      FROM done WHERE $4::text IS NOT NULL
), healthy AS (
    UPDATE endpoints AS e
       SET consecutive_failures = 0, failing_since = NULL, last_success_at = now(),
           paused_until = CASE WHEN e.breaker_trips > 0 THEN NULL ELSE e.paused_until END,
           pause_reason = CASE WHEN e.breaker_trips > 0 THEN NULL ELSE e.pause_reason END,
           breaker_trips = 0
      FROM done
     WHERE e.id = done.endpoint_id AND $4::text = 'success'
       AND (e.consecutive_failures > 0 OR e.breaker_trips > 0 OR e.last_success_at IS NULL
            OR e.last_success_at < now() - interval '1 second')
)
SELECT count(*) FROM done
"""  # noqa: S608


def _record_args(delivery_id: str, token: uuid.UUID, finished: Finished) -> tuple[Any, ...]:
    f = finished
    return (
        delivery_id, token, f.state.value, f.outcome, f.status_code, f.error, f.dead_reason,
        f.delay_seconds, f.attempt_number, f.started_at, f.duration_ms, f.response_body,
    )  # fmt: skip


async def record(
    connection: asyncpg.Connection, delivery_id: str, *, token: uuid.UUID, finished: Finished
) -> bool:
    """Finish a leased attempt as one statement (its own transaction). False when the lease
    was lost, in which case nothing is written."""
    recorded: int = await connection.fetchval(_RECORD, *_record_args(delivery_id, token, finished))
    return recorded == 1


async def record_in(
    session: AsyncSession, delivery_id: str, *, token: uuid.UUID, finished: Finished
) -> bool:
    """The same record, inside the session's transaction, for callers that write more with it."""
    connection = await session.connection()
    result = await connection.exec_driver_sql(_RECORD, _record_args(delivery_id, token, finished))
    return bool(result.scalar_one() == 1)


@dataclass(frozen=True)
class Claimable:
    """When a claim of a delivery could succeed, by the database clock."""

    seconds: float  # from now; 0 or less: already
    lease_token: uuid.UUID | None  # the lease it waits for, if it is leased


async def when_claimable(session: AsyncSession, delivery_id: str, region: str) -> Claimable | None:
    """When a waiting (pending, enqueued) delivery is due, or when its lease runs out. None for
    a finished delivery, or none at all."""
    remaining = case(
        (Delivery.state.in_(_WAITING), Delivery.next_attempt_at - func.now()),
        (Delivery.state == DeliveryState.LEASED.value, Delivery.lease_until - func.now()),
    )
    row = (
        await session.execute(
            select(func.extract("epoch", remaining), Delivery.lease_token).where(
                Delivery.id == delivery_id, Delivery.region == region
            )
        )
    ).one_or_none()
    if row is None or row[0] is None:
        return None
    return Claimable(float(row[0]), row[1])


_RELEASE = f"""
UPDATE deliveries
   SET state = 'pending', lease_token = NULL, lease_until = NULL,
       attempt_count = attempt_count - 1, next_attempt_at = now(), updated_at = now()
 WHERE {_HELD}
"""  # noqa: S608


async def release(connection: asyncpg.Connection, delivery_id: str, *, token: uuid.UUID) -> bool:
    """Give back a lease whose attempt never sent anything (worker shutting down, or too
    little of the lease left to send): due now, and the claim does not count as an attempt."""
    status: str = await connection.execute(_RELEASE, delivery_id, token)
    return status == "UPDATE 1"
