"""The recorder's writes (recorder.py decides when): the row each ending writes; a group of
endings as one statement -- which, when some of them end an ordered stream's head, also hands
those streams on (app/streams/) and leases the new heads the worker continues with
(continuing.py); the same one row at a time, when a bad row spoils the group; and an ending
that judges its destination, in a transaction with that judgement."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import tracing
from app.core.config import Settings
from app.core.db import single_statements
from app.core.states import DeliveryState
from app.endpoints.service import destination_health, endpoints
from app.engine.repository import delivery_records
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.repository.delivery_records import Finished, Recording
from app.engine.service.attempts import Ended
from app.streams.service.heads import NewHead, StreamKey, handing_on

log = structlog.get_logger("herald.delivery")

_ENDS_A_HEAD = (DeliveryState.SUCCEEDED, DeliveryState.DEAD, DeliveryState.CANCELLED)


@dataclass
class Written:
    recorded: set[str]  # the ids recorded; every other item had lost its lease
    new_heads: list[NewHead] = field(default_factory=list)  # their destinations to arm...
    leased: list[ClaimedDelivery] = field(default_factory=list)  # ...but these, continued


class StreamsToContinue(Protocol):
    """The streams whose new heads a commit leases for its worker (continuing.Continuing)."""

    def continued_streams(self) -> list[StreamKey]: ...


def finished_row(ended: Ended) -> Finished:
    """The row an ending's record writes. A retry is written `enqueued`: the destination's
    wake-up covers it (the recorder arms it for the retry time after the commit)."""
    t, result = ended.transition, ended.result
    retry = t.state is DeliveryState.PENDING and t.delay_seconds is not None
    state = DeliveryState.ENQUEUED if retry else t.state
    row = Finished(state, t.delay_seconds, t.dead_reason, ended.claimed.attempt_number)
    if result is None:
        return dataclasses.replace(row, error=t.note)
    return dataclasses.replace(
        row,
        outcome=result.outcome.value,
        status_code=result.status_code,
        error=result.error,
        started_at=result.started_at,
        duration_ms=result.duration_ms,
        response_body=result.response_body,
    )


def stream_of_ended(ended: Ended, finished: Finished) -> StreamKey | None:
    """The stream whose head this ending ends, if it is ordered and finishes the delivery."""
    claimed = ended.claimed
    if claimed.stream is None or finished.state not in _ENDS_A_HEAD:
        return None
    return StreamKey(claimed.endpoint_id, claimed.stream)


async def write_batch(
    sessionmaker: async_sessionmaker[AsyncSession],
    items: Sequence[tuple[Recording, StreamKey | None]],
    *,
    continuing: StreamsToContinue | None = None,
    lease_seconds: float = 0.0,
) -> Written:
    """Record the endings (each with the stream whose head it ends, if any), hand their
    streams on, and lease the new heads of the streams ``continuing`` goes on with. One
    statement, its own transaction, either way."""
    recordings = [recording for recording, _ in items]
    streams = [stream for _, stream in items if stream is not None]
    with tracing.TRACER.start_as_current_span(
        "herald.record", attributes={"herald.outcomes": len(items)}
    ):
        async with single_statements(sessionmaker) as connection:
            if not streams:
                return Written(await delivery_records.record_batch(connection, recordings))
            # A stream waits for this between every two deliveries: its four statements are one
            # function call (migration 0041), one round trip where a transaction took six.
            continued = continuing.continued_streams() if continuing else []
            record = await delivery_records.record_ordered(
                connection,
                recordings,
                [(key.endpoint_id, key.stream) for key in streams],
                continued=[(key.endpoint_id, key.stream) for key in continued],
                lease_seconds=lease_seconds,
            )
        return Written(record.recorded, [NewHead(*head) for head in record.heads], record.leased)


async def write_one_by_one(
    sessionmaker: async_sessionmaker[AsyncSession],
    items: Sequence[tuple[Recording, StreamKey | None]],
) -> Written:
    """``write_batch`` row by row: only a bad row is left to its lease."""
    written = Written(set())
    for item in items:
        try:
            one = await write_batch(sessionmaker, [item])
        except Exception as exc:
            log.error(
                "delivery.record_failed",
                delivery_id=item[0].delivery_id,
                error=type(exc).__name__,
            )
            continue
        written.recorded |= one.recorded
        written.new_heads += one.new_heads
    return written


async def write_judging_health(
    sessionmaker: async_sessionmaker[AsyncSession],
    settings: Settings,
    ended: Ended,
    finished: Finished,
) -> tuple[bool, float, list[NewHead]]:
    """Record an attempt whose ending judges its destination, in one transaction with that
    judgement (and the hand-on of its stream, if it ended one): whether it was recorded,
    how long the destination must now pause, and the new head of its stream."""
    claimed, result = ended.claimed, ended.result
    failed = ended.destination_failed
    # Counted from the answer (the gate closed then), not from this try: a record retried
    # through a database outage must not push the pause later.
    retry_after = result.retry_after_left() if failed and result is not None else None
    pause = 0.0
    stream = stream_of_ended(ended, finished)
    async with (
        sessionmaker() as session,
        session.begin(),
        handing_on(session, [stream] if stream else []) as new_heads,
    ):
        recorded = await delivery_records.record_in(
            session, claimed.id, token=claimed.token, finished=finished
        )
        if recorded and ended.transition.disable_endpoint:
            await endpoints.disable(session, claimed.endpoint_id, "receiver answered 410 Gone")
        if recorded and failed and result is not None:
            pause = await destination_health.after_failure(
                session, settings, claimed.endpoint_id, result.status_code, retry_after
            )
    return recorded, pause, new_heads
