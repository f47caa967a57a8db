"""Recording how attempts ended (attempts.py decides it): the row each ending writes, and the
group commit that writes many of them in one statement and one commit.

No timers: whenever fewer than ``MAX_FLUSHES`` flushes are running, a new one takes everything
buffered (at most ``batch_max``). At low load each outcome flushes alone, so nothing waits for
company; under load, outcomes arrive while a flush runs and the next flush takes them together.

Fencing stays per row (design.md, invariant 4): a row whose lease ended is simply not written,
and its attempt is reported lost. Endings that judge the destination's health (a failure, a
410) keep a transaction of their own, as the breaker and Retry-After need reads and decisions
beside the record.

After the commit: pauses are set, the gate frees the slots (and wakes, once, a destination
that waited for one), and retries are armed for their time in one pipelined round trip.
"""

from __future__ import annotations

import asyncio
import functools
from collections import defaultdict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import metrics
from app.core.config import Settings
from app.core.db import DATABASE_TROUBLE, is_transient
from app.core.faults import crash_point
from app.core.states import DeliveryState, Outcome
from app.engine.repository.delivery_records import Finished, Recording
from app.engine.service import record_writes
from app.engine.service.attempts import Ended
from app.engine.service.continuing import Continuer, Continuing
from app.engine.service.deadlines import STEP_SECONDS
from app.flow.service.gate import Gate
from app.flow.service.wakeups import Arm, Wakeups
from app.streams.service.heads import StreamKey

log = structlog.get_logger("herald.delivery")

MAX_FLUSHES = 2
FIRST_RETRY_SECONDS = 0.25
MAX_RETRY_SECONDS = 5.0
T = TypeVar("T")


@dataclass
class _Pending:
    ended: Ended
    finished: Finished
    slot: str | None
    done: asyncio.Future[bool]


def _recording(pending: _Pending) -> Recording:
    claimed = pending.ended.claimed
    return Recording(claimed.id, claimed.token, pending.finished)


def _stream_of(pending: _Pending) -> StreamKey | None:
    return record_writes.stream_of_ended(pending.ended, pending.finished)


@dataclass
class _Effects:
    """What a flush does in Redis once its records are committed."""

    slots: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    arms: list[Arm] = field(default_factory=list)
    pauses: dict[str, float] = field(default_factory=dict)
    carried: set[str] = field(default_factory=set)  # slots carried over to a continued stream


class Recorder:
    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        gate: Gate,
        wakeups: Wakeups,
        *,
        batch_max: int,
    ) -> None:
        self._settings = settings
        self._sessionmaker = sessionmaker
        self._gate = gate
        self._wakeups = wakeups
        self._batch_max = batch_max
        self._buffer: list[_Pending] = []
        self._flushes: set[asyncio.Task[None]] = set()
        self._continuer: Continuer | None = None
        self.pending = 0  # endings handed to ``record`` and not yet recorded

    def continue_streams_with(self, continuer: Continuer) -> None:
        """Let group commits continue the streams whose heads they end (the pump lends
        itself: continuing.py)."""
        self._continuer = continuer

    async def record(self, ended: Ended, *, slot: str | None) -> bool:
        """Record one attempt's ending; whether it was recorded (False: the lease was lost).
        Callers hold this under ``unstoppable``: the flush itself runs in a task of its own,
        which no caller's cancellation reaches."""
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._buffer.append(_Pending(ended, record_writes.finished_row(ended), slot, done))
        self.pending += 1
        done.add_done_callback(self._recorded)
        self._maybe_flush()
        return await asyncio.shield(done)

    def _recorded(self, done: asyncio.Future[bool]) -> None:
        self.pending -= 1

    async def close(self) -> None:
        """Wait for every buffered outcome to be recorded (at shutdown)."""
        while self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)

    def _maybe_flush(self) -> None:
        if self._buffer and len(self._flushes) < MAX_FLUSHES:
            batch, self._buffer = self._buffer[: self._batch_max], self._buffer[self._batch_max :]
            task = asyncio.create_task(self._flush(batch), name="herald-record-flush")
            self._flushes.add(task)
            task.add_done_callback(self._flushed)

    def _flushed(self, task: asyncio.Task[None]) -> None:
        self._flushes.discard(task)
        self._maybe_flush()

    async def _flush(self, batch: list[_Pending]) -> None:
        effects = _Effects()
        metrics.RECORD_FLUSHES.inc()
        grouped = [p for p in batch if not p.ended.touches_health]
        if grouped:
            await self._flush_group(grouped, effects)
        for pending in batch:
            if pending.ended.touches_health:
                await self._flush_judging_health(pending, effects)
        crash_point("worker.after_record_before_ack", self._settings.fault)
        try:
            # Slots expire by themselves and retries are covered by their destination's
            # lease-end wake-up: what follows only makes things happen sooner.
            await self._apply(effects)
        except Exception as exc:
            log.warning("delivery.after_record_failed", error=type(exc).__name__)

    async def _flush_group(self, group: list[_Pending], effects: _Effects) -> None:
        """The group commit: every ending in one statement, and the streams whose heads it
        ended continued by this worker where it may."""
        continuing = self._continuing(group)
        recorded: set[str] | None = None
        try:
            written = await self._record_group(group, continuing)
            recorded = written.recorded
            continued = {claimed.id for claimed in written.leased}
            effects.arms.extend(
                Arm.for_heads([h for h in written.new_heads if h.id not in continued])
            )
            if continuing is not None:
                await continuing.proceed(
                    written.leased, self._sessionmaker, effects.arms, effects.carried
                )
        except Exception as exc:
            # Before the commit nothing was written; after it, a successor that did not
            # start stays leased until its lease runs out and a claim takes it over.
            event = "delivery.record_failed" if recorded is None else "delivery.continue_failed"
            log.error(event, count=len(group), error=type(exc).__name__)
        finally:
            if continuing is not None:
                await continuing.release()
        for pending in group:
            if recorded is None:
                self._unrecorded(pending, effects)
            else:
                self._account(pending, pending.ended.claimed.id in recorded, effects)

    async def _flush_judging_health(self, pending: _Pending, effects: _Effects) -> None:
        """An ending that judges the destination's health, in a transaction of its own."""
        try:
            ok = await self._record_alone(pending, effects)
        except Exception as exc:
            log.error(
                "delivery.record_failed",
                delivery_id=pending.ended.claimed.id,
                error=type(exc).__name__,
            )
            self._unrecorded(pending, effects)
            return
        self._account(pending, ok, effects)

    def _unrecorded(self, pending: _Pending, effects: _Effects) -> None:
        """Not written (a database that stayed away, a bad row): left to its lease, after which
        a claim takes it over. Its request is over, so its slot is free."""
        pending.done.set_result(False)
        if pending.slot is not None:
            effects.slots[pending.ended.claimed.endpoint_id].append(pending.slot)

    async def _through_outage(
        self, write: Callable[[], Awaitable[T]], lease_ends: float, **ids: str | int
    ) -> T:
        """``write``, tried again after a passing database error for as long as the lease lasts
        (past it, the fence refuses the write anyway); the first try has at least a step."""
        clock = asyncio.get_running_loop()
        deadline = max(lease_ends, clock.time() + STEP_SECONDS)
        delay = FIRST_RETRY_SECONDS
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    return await write()
            except DATABASE_TROUBLE as exc:
                if not is_transient(exc) or clock.time() + delay > lease_ends:
                    raise
                log.warning("delivery.record_retry", error=type(exc).__name__, **ids)
                await asyncio.sleep(delay)
                delay, deadline = min(delay * 2, MAX_RETRY_SECONDS), lease_ends

    def _continuing(self, group: Sequence[_Pending]) -> Continuing | None:
        """The streams of ``group`` this worker may continue (continuing.py), if any."""
        heads = [
            (stream, p.ended.claimed.tenant_id, p.slot)
            for p in group
            if (stream := _stream_of(p)) is not None
        ]
        if self._continuer is None or not heads:
            return None
        return Continuing.reserve(self._continuer, self._gate, heads)

    async def _record_group(
        self, group: Sequence[_Pending], continuing: Continuing | None
    ) -> record_writes.Written:
        """One statement for the whole group, through an outage for as long as the latest
        lease among them lasts; and the streams whose heads it ended, handed on."""
        items = [(_recording(p), _stream_of(p)) for p in group]
        lease_ends = max(p.ended.lease_ends for p in group)
        write = functools.partial(
            record_writes.write_batch,
            self._sessionmaker,
            items,
            continuing=continuing,
            lease_seconds=self._settings.lease_duration,
        )
        try:
            return await self._through_outage(write, lease_ends, count=len(items))
        except Exception as exc:
            if len(items) == 1 or (isinstance(exc, DATABASE_TROUBLE) and is_transient(exc)):
                raise
            # One bad row must not hold back the rest: each on its own, and only the bad one
            # is left to its lease.
            return await record_writes.write_one_by_one(self._sessionmaker, items)

    async def _record_alone(self, pending: _Pending, effects: _Effects) -> bool:
        ended = pending.ended
        write = functools.partial(
            record_writes.write_judging_health,
            self._sessionmaker,
            self._settings,
            ended,
            pending.finished,
        )
        recorded, pause, new_heads = await self._through_outage(
            write, ended.lease_ends, delivery_id=ended.claimed.id
        )
        effects.arms.extend(Arm.for_heads(new_heads))
        if recorded and pause > 0:
            endpoint = ended.claimed.endpoint_id
            effects.pauses[endpoint] = max(pause, effects.pauses.get(endpoint, 0.0))
        return recorded

    def _account(self, pending: _Pending, recorded: bool, effects: _Effects) -> None:
        ended, claimed, result = pending.ended, pending.ended.claimed, pending.ended.result
        pending.done.set_result(recorded)
        if pending.slot is not None and pending.slot not in effects.carried:
            effects.slots[claimed.endpoint_id].append(pending.slot)
        if not recorded:
            # Our lease expired (and perhaps another worker took over): the result that counts
            # is the one a live lease holder records.
            metrics.LEASES_LOST.inc()
            log.warning(
                "delivery.lease_lost", delivery_id=claimed.id, attempt=claimed.attempt_number
            )
            return
        if result is not None:
            metrics.ATTEMPTS.labels(result.outcome.value).inc()
            metrics.ATTEMPT_SECONDS.observe(result.duration_ms / 1000)
            metrics.DISPATCHES.inc()
            if result.outcome is Outcome.SUCCESS:
                self._gate.succeeded(claimed.endpoint_id)
        log.info(
            "delivery.attempt",
            delivery_id=claimed.id,
            endpoint_id=claimed.endpoint_id,
            attempt=claimed.attempt_number,
            outcome=result.outcome.value if result else None,
            status_code=result.status_code if result else None,
            duration_ms=result.duration_ms if result else None,
            state=pending.finished.state.value,
            reason=ended.transition.dead_reason,
        )
        retry_in = pending.finished.delay_seconds
        if pending.finished.state is DeliveryState.ENQUEUED and retry_in is not None:
            effects.arms.append(Arm(claimed.tenant_id, claimed.endpoint_id, retry_in))

    async def _apply(self, effects: _Effects) -> None:
        # Pauses first (again after the commit: a breaker trip is only known now, and a policy
        # read while the transaction was open must not stay cached), then the slots: a
        # destination woken by a freed slot must find itself paused.
        for endpoint_id, seconds in effects.pauses.items():
            await self._gate.pause(endpoint_id, seconds)
        try:
            await self._gate.release(effects.slots)
        finally:
            # Retries are armed even if waking a destination that waited for a slot failed.
            if effects.arms:
                await self._wakeups.arm(effects.arms)
