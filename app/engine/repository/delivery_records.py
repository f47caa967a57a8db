"""How a lease on a delivery ends: the fenced record of an attempt (one, or a group commit of
many) and the give-back of an unsent one. Only the holder of a current, unexpired lease token
writes (design.md, invariant 4). One statement each, its own transaction -- ``record_in``
excepted, which runs in its caller's (a failure's judgement of its destination goes with it).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import DeliveryState


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
# each. The first two (id, token) are also what a give-back takes.
_RECORDED = (
    ("id", "text"),
    ("token", "uuid"),
    ("state", "text"),
    ("outcome", "text"),
    ("status_code", "int"),
    ("error", "text"),
    ("dead_reason", "text"),
    ("delay", "float8"),
    ("attempt_number", "int"),
    ("started_at", "timestamptz"),
    ("duration_ms", "int"),
    ("response_body", "text"),
)
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
# took over. A delivery cancelled while its attempt was in flight keeps that lease, so that
# the attempt is still recorded -- and stays cancelled (``_KEEP_CANCELLED``).
_HELD_ROW = (
    "d.id = r.id AND d.lease_token = r.token AND d.state IN ('leased', 'cancelled')"
    " AND d.lease_until > now()"
)


def _held(columns: tuple[tuple[str, str], ...]) -> str:
    """``_HELD_ROW``, with the rows' least and greatest id as the two parameters after
    ``columns``': known before a row is read, they confine the statement to the days those
    ids were minted in -- its plan, made once, leaves out the other days' partitions as it
    starts (the ids themselves arrive in arrays, and each would be looked for in every day)."""
    return f"{_HELD_ROW} AND d.id BETWEEN ${len(columns) + 1} AND ${len(columns) + 2}"


# The record, fenced by the lease, over the rows of ``r`` ({rows}). In the same statement: the
# attempt rows, and a success's mark on its endpoint, once per endpoint (which closes the
# breaker; written only when something changes or a second has passed, so a busy endpoint's
# row is not a hot spot). Failures' verdicts on the endpoint need reads and decisions, so they
# run after this statement in the same transaction (app/endpoints/service/destination_health.py).
_RECORD_FROM = """
WITH done AS (
    UPDATE deliveries AS d
       SET state = CASE WHEN d.state = 'cancelled' THEN d.state ELSE r.state END,
           lease_token = NULL, lease_until = NULL, last_outcome = r.outcome,
           last_status_code = r.status_code, last_error = r.error,
           dead_reason = CASE WHEN d.state = 'cancelled' THEN NULL ELSE r.dead_reason END,
           updated_at = now(),
           completed_at = CASE WHEN d.state = 'cancelled' THEN d.completed_at
                               WHEN r.state IN ('succeeded', 'dead') THEN now() END,
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
_RECORD = _RECORD_FROM.format(rows=_one_row(_RECORDED), held=_held(_RECORDED))
_RECORD_BATCH = _RECORD_FROM.format(rows=_many_rows(_RECORDED), held=_held(_RECORDED))


def _record_args(delivery_id: str, token: uuid.UUID, finished: Finished) -> tuple[Any, ...]:
    """The statement's parameters, named here and put in ``_RECORDED``'s order: no value is
    placed by counting positions."""
    f = finished
    named = {
        "id": delivery_id,
        "token": token,
        "state": f.state.value,
        "outcome": f.outcome,
        "status_code": f.status_code,
        "error": f.error,
        "dead_reason": f.dead_reason,
        "delay": f.delay_seconds,
        "attempt_number": f.attempt_number,
        "started_at": f.started_at,
        "duration_ms": f.duration_ms,
        "response_body": f.response_body,
    }
    return tuple(named[name] for name, _ in _RECORDED)


async def record_in(
    session: AsyncSession, delivery_id: str, *, token: uuid.UUID, finished: Finished
) -> bool:
    """Finish one leased attempt inside the session's transaction, for callers that write
    more with it (a failure's judgement of its destination). False when the lease was lost, in
    which case nothing is written."""
    connection = await session.connection()
    args = (*_record_args(delivery_id, token, finished), delivery_id, delivery_id)
    result = await connection.exec_driver_sql(_RECORD, args)
    return result.scalar_one_or_none() is not None


async def record_batch(connection: asyncpg.Connection, items: Sequence[Recording]) -> set[str]:
    """Finish many leased attempts as one statement (one commit), fenced row by row. Returns
    the ids recorded; every other item had lost its lease, and nothing of it was written."""
    if not items:
        return set()
    rows = (_record_args(i.delivery_id, i.token, i.finished) for i in items)
    columns = [list(column) for column in zip(*rows, strict=True)]
    ids = columns[0]
    return {
        row["id"] for row in await connection.fetch(_RECORD_BATCH, *columns, min(ids), max(ids))
    }


# A give-back: the claim did not count as an attempt. It leaves next_attempt_at alone: the row
# was due when claimed, so it still is, and it keeps its place at the front of its
# destination's (next_attempt_at, id) order. next_attempt_at orders the live rows' index, so
# not writing it lets the give-back be a HOT update.
_RELEASE_BATCH = f"""
UPDATE deliveries AS d
   SET state = CASE WHEN d.state = 'cancelled' THEN d.state ELSE 'pending' END,
       lease_token = NULL, lease_until = NULL,
       attempt_count = d.attempt_count - 1, updated_at = now()
  FROM {_many_rows(_LEASE_KEY)} WHERE {_held(_LEASE_KEY)}
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
    given_back = await connection.fetch(_RELEASE_BATCH, ids, tokens, min(ids), max(ids))
    return {row["id"] for row in given_back}
