"""One delivery attempt, end to end: claim with a lease, send, record, schedule the retry.

Each step is its own short transaction; none is held across the HTTP request or a publish. And
each step ends by itself: the lease bounds the send and its record, and every step around it
holds itself to a bound of its own (deadlines.py), so that arq never times a job out.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import time
import uuid
from dataclasses import dataclass

import aiohttp
import structlog
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import metrics
from app.config import Settings
from app.db import DATABASE_TROUBLE, single_statements
from app.faults import crash_point, stall_point
from app.repositories import delivery_leases, endpoints
from app.repositories.delivery_leases import ClaimedDelivery
from app.services import deadlines, destination_health, outcomes, sender
from app.services.deadlines import STEP_SECONDS, best_effort, unstoppable
from app.services.flow import Gate
from app.services.requeue import give_back, redefer_if_early, requeue, schedule_retry
from app.services.signing import signed_headers
from app.states import DeliveryState, Outcome

log = structlog.get_logger("herald.delivery")


@dataclass
class Dispatcher:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    http: aiohttp.ClientSession
    redis: ArqRedis
    gate: Gate

    async def deliver(self, delivery_id: str, endpoint_id: str) -> None:
        """Pass the destination's flow-control gate, then make one attempt. A delivery that
        may not start yet waits as a deferred job: no attempt counted, no worker slot held.
        The gate and the claim share one deadline; past it the job raises TimeoutError, a
        passing error (workers/deliver.py runs the job again)."""
        lease_by = asyncio.get_running_loop().time() + deadlines.BEFORE_LEASE_SECONDS
        async with asyncio.timeout_at(lease_by):
            admission = await self.gate.admit(endpoint_id)
        if not admission.admitted:
            metrics.DEFERRALS.labels(admission.reason).inc()
            log.debug(
                "delivery.throttled", delivery_id=delivery_id, endpoint_id=endpoint_id,
                reason=admission.reason, wait_seconds=round(admission.wait_seconds, 3),
            )  # fmt: skip
            async with asyncio.timeout(STEP_SECONDS):
                await requeue(
                    self.redis, self.settings.region, delivery_id, endpoint_id, "g",
                    after=admission.wait_seconds,
                )  # fmt: skip
            return
        try:
            await self._attempt(delivery_id, endpoint_id, lease_by=lease_by)
        finally:
            releasing = self.gate.release(admission)
            await best_effort(releasing, "flow.release_failed", endpoint_id=endpoint_id)

    async def _attempt(self, delivery_id: str, endpoint_id: str, *, lease_by: float) -> None:
        token = uuid.uuid4()
        clock = asyncio.get_running_loop()
        async with (
            asyncio.timeout_at(lease_by),
            single_statements(self.sessionmaker) as connection,
        ):
            # Only now, with a connection in hand: waiting for one (a busy pool) is no part of
            # the lease, and must not eat into its margin for a stall.
            claiming_at = clock.time()
            claimed = await delivery_leases.claim(
                connection, delivery_id, region=self.settings.region, token=token,
                lease_seconds=self.settings.lease_duration,
            )  # fmt: skip
        if claimed is None:
            async with asyncio.timeout(STEP_SECONDS):
                await redefer_if_early(
                    self.sessionmaker, self.redis, self.settings.region, delivery_id, endpoint_id
                )
            return
        # When the lease ends on this process's clock: what the database says is left, counted
        # from just before the claim was sent, so never later than the database's own end.
        lease_ends = claiming_at + claimed.lease_left
        crash_point("worker.after_claim_before_send", self.settings.fault)
        stall_point("worker.stall_after_claim", self.settings.fault)
        refusal = self._refuse_without_sending(claimed)
        if refusal is not None:
            await self._finish(claimed, token, refusal, result=None, lease_ends=lease_ends)
            return
        if lease_ends - clock.time() < self.settings.lease_left_to_send:
            await give_back(
                self.sessionmaker, self.redis, self.settings.region, claimed, token,
                left=lease_ends - clock.time(),
            )  # fmt: skip
            return
        progress = sender.SendProgress()
        try:
            result = await self._send(claimed, progress)
        except asyncio.CancelledError:
            # Shutting down mid-attempt. Nothing may stay leased by us, and a request that went
            # out must not be forgotten: it is recorded as `unknown` and retried with its key.
            await unstoppable(self._abandon(claimed, token, progress, lease_ends=lease_ends))
            raise
        crash_point("worker.after_send_before_record", self.settings.fault)
        # A request went out: nothing may cut its record short -- not arq's job timeout, not a
        # shutdown. Recording is bounded by the lease, past which the write is refused anyway.
        transition = self._decide(claimed, result)
        await unstoppable(self._finish(claimed, token, transition, result, lease_ends=lease_ends))

    def _decide(
        self, claimed: ClaimedDelivery, result: sender.AttemptResult
    ) -> outcomes.Transition:
        return outcomes.decide(
            outcome=result.outcome, status_code=result.status_code,
            attempts_used=claimed.attempts_used, max_attempts=self.settings.attempts_limit,
            schedule=self.settings.retry_schedule, retry_after=result.retry_after_left(),
            error=result.error,
        )  # fmt: skip

    async def _abandon(
        self,
        claimed: ClaimedDelivery,
        token: uuid.UUID,
        progress: sender.SendProgress,
        *,
        lease_ends: float,
    ) -> None:
        if not progress.sent:
            async with asyncio.timeout(STEP_SECONDS), single_statements(self.sessionmaker) as db:
                await delivery_leases.release(db, claimed.id, token=token)
            return
        result = progress.result(Outcome.UNKNOWN, error="worker shut down mid-attempt")
        transition = self._decide(claimed, result)
        await self._finish(claimed, token, transition, result, lease_ends=lease_ends)

    def _refuse_without_sending(self, claimed: ClaimedDelivery) -> outcomes.Transition | None:
        if claimed.endpoint_deleted:
            return outcomes.Transition(DeliveryState.DEAD, None, "endpoint_deleted", False)
        if not claimed.endpoint_enabled:
            return outcomes.Transition(DeliveryState.DEAD, None, "endpoint_disabled", False)
        if claimed.attempts_used > self.settings.attempts_limit:
            # Earlier claims died before recording (crashed workers): the budget is spent.
            reason = f"max_attempts_exhausted ({self.settings.attempts_limit})"
            return outcomes.Transition(DeliveryState.DEAD, None, reason, False)
        return None

    async def _send(
        self, claimed: ClaimedDelivery, progress: sender.SendProgress
    ) -> sender.AttemptResult:
        headers = signed_headers(claimed.id, claimed.payload, claimed.secrets)
        return await sender.send(
            self.http, url=claimed.url, body=claimed.payload, headers=headers,
            timeout=self.settings.request_timeout_seconds,
            allowlist=self.settings.destination_allowlist, progress=progress,
            retry_after_max=self.settings.retry_after_max_seconds,
            on_answer=functools.partial(self._answered, claimed.endpoint_id),
        )  # fmt: skip

    async def _answered(self, endpoint_id: str, progress: sender.SendProgress) -> None:
        if progress.retry_after_until is not None:
            # Close every worker's gate the moment the receiver's Retry-After is heard, before
            # the body and the record: a request that starts after it would defy it. (Requests
            # already in flight when it came are unaffected, as they must be.)
            await self.gate.pause(endpoint_id, progress.retry_after_until - time.monotonic())

    async def _finish(
        self,
        claimed: ClaimedDelivery,
        token: uuid.UUID,
        transition: outcomes.Transition,
        result: sender.AttemptResult | None,
        *,
        lease_ends: float,
    ) -> None:
        recorded, pause = await self._record_persistently(
            claimed, token, transition, result, lease_ends=lease_ends
        )
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
            metrics.DISPATCHES.labels(claimed.endpoint_id).inc()
        log.info(
            "delivery.attempt", delivery_id=claimed.id, endpoint_id=claimed.endpoint_id,
            attempt=claimed.attempt_number, outcome=result.outcome.value if result else None,
            status_code=result.status_code if result else None,
            duration_ms=result.duration_ms if result else None, state=transition.state.value,
            reason=transition.dead_reason,
        )  # fmt: skip
        if pause > 0:
            # Again after the commit: a breaker trip is only known now, and a policy read while
            # the transaction was open (not yet paused) must not stay cached.
            pausing = self.gate.pause(claimed.endpoint_id, pause)
            await best_effort(pausing, "flow.pause_failed", endpoint_id=claimed.endpoint_id)
        if transition.state is DeliveryState.PENDING and transition.delay_seconds is not None:
            retry = schedule_retry(
                self.sessionmaker, self.redis, self.settings.region, claimed,
                transition.delay_seconds,
            )  # fmt: skip
            await best_effort(retry, "delivery.retry_publish_failed", delivery_id=claimed.id)
        crash_point("worker.after_record_before_ack", self.settings.fault)

    async def _record_persistently(
        self,
        claimed: ClaimedDelivery,
        token: uuid.UUID,
        transition: outcomes.Transition,
        result: sender.AttemptResult | None,
        *,
        lease_ends: float,
    ) -> tuple[bool, float]:
        """Record, retrying a failing database for as long as our lease lasts: a real send's
        result is worth keeping. Past the lease the write would be refused anyway, so every
        try ends with it too, even a statement the database holds on to -- except that the
        first gets a step's time in any case: after a stall past the lease by this worker's
        clock, the database's fence has the last word."""
        clock = asyncio.get_running_loop()
        deadline = max(lease_ends, clock.time() + STEP_SECONDS)
        delay = 0.25
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    return await self._record(claimed, token, transition, result)
            except DATABASE_TROUBLE as exc:  # TimeoutError included (an OSError)
                if clock.time() + delay > lease_ends:
                    raise
                log.warning(
                    "delivery.record_retry", delivery_id=claimed.id, error=type(exc).__name__
                )
                await asyncio.sleep(delay)
                delay, deadline = min(delay * 2, 5.0), lease_ends

    async def _record(
        self,
        claimed: ClaimedDelivery,
        token: uuid.UUID,
        transition: outcomes.Transition,
        result: sender.AttemptResult | None,
    ) -> tuple[bool, float]:
        """Whether it was recorded, and how long the destination must now pause."""
        finished = delivery_leases.Finished(
            state=transition.state, delay_seconds=transition.delay_seconds,
            dead_reason=transition.dead_reason, attempt_number=claimed.attempt_number,
        )  # fmt: skip
        if result is not None:
            finished = dataclasses.replace(
                finished, outcome=result.outcome.value, status_code=result.status_code,
                error=result.error, started_at=result.started_at,
                duration_ms=result.duration_ms, response_body=result.response_body,
            )  # fmt: skip
        failed = result is not None and result.outcome in destination_health.FAILURES
        if not failed and not transition.disable_endpoint:
            # The common case -- a success, or an ending that says nothing about the
            # destination's health -- is a single statement.
            async with single_statements(self.sessionmaker) as connection:
                recorded = await delivery_leases.record(
                    connection, claimed.id, token=token, finished=finished
                )
            if recorded and result is not None and result.outcome is Outcome.SUCCESS:
                self.gate.succeeded(claimed.endpoint_id)
            return recorded, 0.0
        pause = 0.0
        # Counted from the answer (the gate closed then), not from this try: a record retried
        # through a database outage must not push the pause later.
        retry_after = result.retry_after_left() if failed and result is not None else None
        async with self.sessionmaker() as session, session.begin():
            recorded = await delivery_leases.record_in(
                session, claimed.id, token=token, finished=finished
            )
            if recorded and transition.disable_endpoint:
                await endpoints.disable(session, claimed.endpoint_id, "receiver answered 410 Gone")
            if recorded and failed and result is not None:
                pause = await destination_health.after_failure(
                    session, self.settings, claimed.endpoint_id, result.status_code, retry_after
                )
        return recorded, pause
