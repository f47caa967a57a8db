"""How a lease on a delivery ends: the fenced record of an attempt (one, or a group commit of
many) and the give-back of an unsent one. Only the holder of a current, unexpired lease token
writes (design.md, invariant 4). One statement each, its own transaction -- ``record_in``
excepted, which runs in its caller's (a failure's judgement of its destination goes with it).
The record that ends ordered heads also hands their streams on and leases the next heads, in
the same one statement (``record_ordered``).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeAlias

import asyncpg
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.states import DeliveryState
from app.engine.repository import delivery_leases
from app.engine.repository.delivery_leases import ClaimedDelivery


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


# What a record writes of one delivery, as (name, type): the order of the parameters of
# ``record_attempts`` and ``record_ordered`` (PostgreSQL functions, migration 0041: the record
# and its fencing are written there), one array each. The first two (id, token) are also what
# a give-back takes.
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


def _arrays(columns: tuple[tuple[str, str], ...], first: int = 1) -> str:
    """Typed array parameters, one per column, numbered from ``first``."""
    return ", ".join(f"${i}::{kind}[]" for i, (_, kind) in enumerate(columns, first))


def _many_rows(columns: tuple[tuple[str, str], ...]) -> str:
    """The relation ``r`` of many rows, from one array parameter per column."""
    names = ", ".join(name for name, _ in columns)
    return f"unnest({_arrays(columns)}) AS r({names})"


# Fencing (design.md, invariant 4), per row of ``r``: only the current holder (r.id, r.token)
# of a live lease may write (the give-back's; the record's is ``record_attempts``'). The two
# parameters after the columns, the rows' least and greatest id, known before a row is read,
# confine the statement to the days those ids were minted in -- its plan, made once, leaves
# out the other days' partitions as it starts (the ids themselves arrive in arrays, and each
# would be looked for in every day).
def _held(columns: tuple[tuple[str, str], ...]) -> str:
    return (
        "d.id = r.id AND d.lease_token = r.token AND d.state IN ('leased', 'cancelled')"
        f" AND d.lease_until > now() AND d.id BETWEEN ${len(columns) + 1} AND ${len(columns) + 2}"
    )


_BOUNDS = f"${len(_RECORDED) + 1}::text, ${len(_RECORDED) + 2}::text"
_RECORD = f"SELECT record_attempts({_arrays(_RECORDED)}, {_BOUNDS}) AS id"

# A leased head's transformed_since: record_ordered's columns (migration 0041) predate it, so
# it is read from the head's row, by its key.
_REDRIVEN_SINCE = """(SELECT h.transformed_since FROM deliveries AS h
                       WHERE h.id = r.id AND r.kind = 'leased')"""

# The ordered group commit (``record_ordered``: lock, record, hand on, lease), and what the
# leased heads' attempts need of their endpoints and events, as the claim fetches it.
_N = len(_RECORDED) + 2
_RECORD_ORDERED = f"""
SELECT r.*, {delivery_leases.ENDPOINT_COLUMNS}, v.payload, v.event_type,
       v.created_at AS event_at, v.traceparent,
       {delivery_leases.TRANSFORMATION_OF.format(d="r", since=_REDRIVEN_SINCE)}
  FROM record_ordered({_arrays(_RECORDED)}, {_BOUNDS}, ${_N + 1}::text[], ${_N + 2}::text[],
                      ${_N + 3}::text[], ${_N + 4}::text[], ${_N + 5}::float8) AS r
  LEFT JOIN endpoints AS e ON r.kind = 'leased' AND e.id = r.endpoint_id
  LEFT JOIN events AS v ON r.kind = 'leased' AND v.id = r.event_id
"""  # noqa: S608 -- constants only


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


def _record_columns(items: Sequence[Recording]) -> list[Any]:
    """The record's parameters: one array per column of ``_RECORDED``, then the rows' least
    and greatest id."""
    rows = (_record_args(i.delivery_id, i.token, i.finished) for i in items)
    columns: list[Any] = [list(column) for column in zip(*rows, strict=True)]
    ids = columns[0]
    return [*columns, min(ids), max(ids)]


async def record_in(
    session: AsyncSession, delivery_id: str, *, token: uuid.UUID, finished: Finished
) -> bool:
    """Finish one leased attempt inside the session's transaction, for callers that write
    more with it (a failure's judgement of its destination). False when the lease was lost, in
    which case nothing is written."""
    connection = await session.connection()
    args = _record_columns([Recording(delivery_id, token, finished)])
    result = await connection.exec_driver_sql(_RECORD, tuple(args))
    return result.scalar_one_or_none() is not None


async def record_batch(connection: asyncpg.Connection, items: Sequence[Recording]) -> set[str]:
    """Finish many leased attempts as one statement (one commit), fenced row by row. Returns
    the ids recorded; every other item had lost its lease, and nothing of it was written."""
    if not items:
        return set()
    return {row["id"] for row in await connection.fetch(_RECORD, *_record_columns(items))}


# A new head of a stream, as ``hand_on_streams`` returns it: (id, tenant_id, endpoint_id,
# next_attempt_at, attempt_count, stream).
HeadRow: TypeAlias = tuple[str, str, str, datetime, int, str]


@dataclass(frozen=True)
class OrderedRecord:
    recorded: set[str]  # the ids recorded; every other item had lost its lease
    heads: list[HeadRow]  # the streams' new heads
    leased: list[ClaimedDelivery]  # those of them leased for the recording worker


async def record_ordered(
    connection: asyncpg.Connection,
    items: Sequence[Recording],
    streams: Sequence[tuple[str, str]],
    *,
    continued: Sequence[tuple[str, str]],
    lease_seconds: float,
) -> OrderedRecord:
    """Finish leased attempts that end ordered heads, as one statement (one round trip, its
    own transaction): the ``streams`` (endpoint, stream) of those heads locked first, the
    endings recorded, the streams handed on, and the new heads of the ``continued`` streams
    that are due now leased, as a claim would lease them, for the recording worker to send."""
    ordered = sorted(set(streams))
    rows = await connection.fetch(
        _RECORD_ORDERED,
        *_record_columns(items),
        [endpoint_id for endpoint_id, _ in ordered],
        [stream for _, stream in ordered],
        [endpoint_id for endpoint_id, _ in continued],
        [stream for _, stream in continued],
        lease_seconds,
    )
    record = OrderedRecord(set(), [], [])
    for row in rows:
        if row["kind"] == "recorded":
            record.recorded.add(row["id"])
        elif row["kind"] == "head":
            record.heads.append(
                (
                    row["id"],
                    row["tenant_id"],
                    row["endpoint_id"],
                    row["next_attempt_at"],
                    row["attempt_count"],
                    row["stream"],
                )
            )
        else:
            record.leased.append(delivery_leases.claimed_from(row))
    return record


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
