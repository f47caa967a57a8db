"""One claimed delivery's run, from its start to its record: wait for its slot in the rate,
send it, and hand the ending to the recorder's group commit -- or give its lease back unsent
when it can no longer start in time. Whatever happens, nothing stays leased by this worker.

The pump (pump.py) decides what to claim; attempts.py what an answer means.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.core import metrics
from app.core.config import Settings
from app.core.db import DATABASE_TROUBLE, single_statements
from app.core.faults import crash_point
from app.core.logs import log_failure
from app.engine.repository import delivery_leases, delivery_records
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service import sender, transforming
from app.engine.service.answered import EarlyRelease
from app.engine.service.attempts import Attempts, Ended
from app.engine.service.capacity import Unit
from app.engine.service.deadlines import STEP_SECONDS, unstoppable
from app.engine.service.outcomes import Transition
from app.engine.service.recorder import Recorder
from app.flow.service.gate import Gate, Grant
from app.flow.service.wakeups import Arm, Wakeups

log = structlog.get_logger("herald.delivery")


@dataclass(frozen=True)
class StartWindow:
    """When the gate decided a grant, on this process's clock: after the request went out and
    before its answer came back. Start i was scheduled ``grant.start_offset(i)`` after that."""

    asked_at: float
    answered_at: float
    grant: Grant

    def start(self, i: int) -> tuple[float, float]:
        """When start i may begin (rate ceiling): not before the latest moment its slot can
        be, not after the grant's allowance past the earliest. Both bounds hold whenever in
        between the gate decided, so a slow answer from Redis narrows the window, never
        moves it past the slot."""
        offset = self.grant.start_offset(i)
        return self.answered_at + offset, self.asked_at + offset + self.grant.late_start


class AttemptRuns:
    """Runs the attempts of one worker's pump (one task per claimed delivery)."""

    def __init__(
        self,
        settings: Settings,
        sessionmaker: async_sessionmaker[AsyncSession],
        gate: Gate,
        attempts: Attempts,
        recorder: Recorder,
        wakeups: Wakeups,
    ) -> None:
        self._settings = settings
        self._sessionmaker = sessionmaker
        self._gate = gate
        self._attempts = attempts
        self._recorder = recorder
        self._wakeups = wakeups
        self._early = EarlyRelease(gate, settings.worker_concurrency)

    async def run(
        self,
        claimed: ClaimedDelivery,
        grant: Grant,
        i: int,
        *,
        window: StartWindow,
        lease_ends: float,
        unit: Unit,
    ) -> None:
        """Start ``claimed`` (the grant's start ``i``) in its slot of the rate, send it and hand
        its ending to the recorder -- or give its lease back unsent. Never leaves it leased.
        A success frees its slot and ``unit`` as soon as it is answered (answered.py)."""
        slot = grant.slot(i)
        progress = sender.SendProgress()
        try:
            ended = await self._try(claimed, grant, i, progress, window, lease_ends=lease_ends)
        except BaseException as exc:
            # Shutting down, or a bug (the send itself ends every error as a result). Nothing
            # may stay leased by us, and a request that went out must not be forgotten: it is
            # recorded as `unknown` and retried with its key.
            shutting_down = isinstance(exc, asyncio.CancelledError)
            error = None
            if not shutting_down:
                error = log_failure(log, "delivery.attempt_failed", exc, delivery_id=claimed.id)
            if progress.sent:
                ended = self._attempts.cut_short(
                    claimed, progress, lease_ends=lease_ends, error=error
                )
                await unstoppable(self._recorder.record(ended, slot=slot))
            else:
                event = "delivery.given_back_at_shutdown"
                if not shutting_down:
                    event = "delivery.given_back_after_error"
                await self._give_back(claimed, slot, lease_ends, event)
            if shutting_down:
                raise
            return
        if isinstance(ended, str):
            await self._give_back(claimed, slot, lease_ends, ended)
            return
        if ended.result is not None:
            crash_point("worker.after_send_before_record", self._settings.fault)
            if self._early.free(ended, slot, unit, recording=self._recorder.pending):
                await unstoppable(self._recorder.record(ended, slot=None))  # released already
                return
        await unstoppable(self._recorder.record(ended, slot=slot))

    async def _try(
        self,
        claimed: ClaimedDelivery,
        grant: Grant,
        i: int,
        progress: sender.SendProgress,
        window: StartWindow,
        *,
        lease_ends: float,
    ) -> Ended | str:
        """The attempt's ending, or why its lease must be given back unsent (a log event)."""
        clock = asyncio.get_running_loop()
        refusal = self._attempts.refusal(claimed)
        if refusal is not None:
            return Ended(claimed, refusal, None, lease_ends)
        made = transforming.transformed(claimed, self._settings.max_payload_bytes)
        if isinstance(made, Transition):  # skipped, or no request could be made
            return Ended(claimed, made, None, lease_ends)
        claimed = made
        if grant.interval > 0:
            # Each start keeps to its own window in the rate: never before its slot, and given
            # back rather than sent on top of the next start when it could not begin in time.
            not_before, not_after = window.start(i)
            if not_before > clock.time():
                await asyncio.sleep(not_before - clock.time())
                # Waited for its slot: its producer may have cancelled it meanwhile, and a
                # cancel answered before the request left must keep it from leaving.
                async with single_statements(self._sessionmaker) as connection:
                    if not await delivery_leases.still_held(connection, claimed.id, claimed.token):
                        return "delivery.not_held_at_start"
            if clock.time() > not_after:
                return "delivery.start_slot_missed"
        if lease_ends - clock.time() < self._settings.lease_left_to_send:
            return "delivery.lease_too_short"
        progress.write_by = lease_ends - self._settings.lease_left_to_send
        progress.begin()
        result = await self._attempts.send(claimed, progress)
        return Ended(claimed, self._attempts.decide(claimed, result), result, lease_ends)

    async def close(self) -> None:
        await self._early.close()

    async def _give_back(
        self, claimed: ClaimedDelivery, slot: str, lease_ends: float, event: str
    ) -> None:
        """Hand an unsent lease back, uncounted, and wake its destination for another taker.
        Not cut short by a shutdown: nothing may stay leased by a stopped worker."""
        metrics.LEASES_GIVEN_BACK.inc()
        left = lease_ends - asyncio.get_running_loop().time()
        log.warning(
            event,
            delivery_id=claimed.id,
            attempt=claimed.attempt_number,
            lease_left_seconds=round(left, 3),
        )
        await unstoppable(self._hand_back(claimed, slot))

    async def _hand_back(self, claimed: ClaimedDelivery, slot: str) -> None:
        async with asyncio.timeout(STEP_SECONDS):
            with contextlib.suppress(*DATABASE_TROUBLE):
                async with single_statements(self._sessionmaker) as connection:
                    await delivery_records.release_batch(connection, [(claimed.id, claimed.token)])
            await self._gate.release({claimed.endpoint_id: [slot]})
            await self._wakeups.arm([Arm(claimed.tenant_id, claimed.endpoint_id, 0.0)])
