"""One delivery attempt, end to end: claim with a lease, send, record, schedule the retry.

Each step is its own short transaction; none is held across the HTTP request or a publish.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp
from arq.connections import ArqRedis
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import queue
from app.config import Settings
from app.faults import crash_point
from app.repositories import attempts, deliveries, endpoints
from app.repositories.deliveries import ClaimedDelivery
from app.services import outcomes, sender
from app.services.signing import signed_headers
from app.states import DeliveryState

log = logging.getLogger("herald.delivery")


@dataclass
class Dispatcher:
    settings: Settings
    sessionmaker: async_sessionmaker[AsyncSession]
    http: aiohttp.ClientSession
    redis: ArqRedis

    async def deliver(self, delivery_id: str) -> None:
        token = uuid.uuid4()
        async with self.sessionmaker() as session, session.begin():
            claimed = await deliveries.claim(
                session, delivery_id, region=self.settings.region, token=token,
                lease_seconds=self.settings.lease_duration,
            )  # fmt: skip
        if claimed is None:
            await self._redefer_if_early(delivery_id)
            return
        crash_point("worker.after_claim_before_send", self.settings.fault)
        refusal = self._refuse_without_sending(claimed)
        if refusal is not None:
            await self._finish(claimed, token, refusal, result=None)
            return
        try:
            result = await self._send(claimed)
        except asyncio.CancelledError:
            # Shutting down mid-attempt: give the lease back so nothing stays leased by us.
            await asyncio.shield(self._release(claimed.id, token))
            raise
        crash_point("worker.after_send_before_record", self.settings.fault)
        retry_after = None
        if result.status_code in outcomes.RETRY_AFTER_STATUSES:
            retry_after = outcomes.parse_retry_after(
                result.retry_after_header, datetime.now(UTC), self.settings.retry_after_max_seconds
            )
        transition = outcomes.decide(
            outcome=result.outcome, status_code=result.status_code,
            attempts_used=claimed.attempts_used, max_attempts=self.settings.attempts_limit,
            schedule=self.settings.retry_schedule, retry_after=retry_after, error=result.error,
        )  # fmt: skip
        await self._finish(claimed, token, transition, result)

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

    async def _send(self, claimed: ClaimedDelivery) -> sender.AttemptResult:
        headers = signed_headers(claimed.id, claimed.payload, claimed.secrets)
        return await sender.send(
            self.http, url=claimed.url, body=claimed.payload, headers=headers,
            timeout=self.settings.request_timeout_seconds,
            allowlist=self.settings.destination_allowlist,
        )  # fmt: skip

    async def _finish(
        self,
        claimed: ClaimedDelivery,
        token: uuid.UUID,
        transition: outcomes.Transition,
        result: sender.AttemptResult | None,
    ) -> None:
        async with self.sessionmaker() as session, session.begin():
            recorded = await deliveries.record_transition(
                session, claimed.id, token=token, state=transition.state,
                delay_seconds=transition.delay_seconds,
                outcome=result.outcome.value if result else None,
                status_code=result.status_code if result else None,
                error=result.error if result else None, dead_reason=transition.dead_reason,
            )  # fmt: skip
            if recorded and result is not None:
                await attempts.insert_attempt(
                    session, delivery_id=claimed.id, attempt_number=claimed.attempt_number,
                    started_at=result.started_at, duration_ms=result.duration_ms,
                    status_code=result.status_code, outcome=result.outcome.value,
                    error=result.error, response_body=result.response_body,
                )  # fmt: skip
            if recorded and transition.disable_endpoint:
                await endpoints.disable(session, claimed.endpoint_id, "receiver answered 410 Gone")
        if not recorded:
            # Our lease expired and another worker took over: its result is the one that counts.
            log.warning(
                "delivery.lease_lost delivery_id=%s attempt=%d", claimed.id, claimed.attempt_number
            )
            return
        log.info(
            "delivery.attempt delivery_id=%s attempt=%d outcome=%s status=%s state=%s",
            claimed.id, claimed.attempt_number, result.outcome.value if result else "-",
            result.status_code if result else "-", transition.state.value,
        )  # fmt: skip
        if transition.state is DeliveryState.PENDING and transition.delay_seconds is not None:
            await self._schedule_retry(claimed, transition.delay_seconds)
        crash_point("worker.after_record_before_ack", self.settings.fault)

    async def _schedule_retry(self, claimed: ClaimedDelivery, delay_seconds: float) -> None:
        """A deferred job at the retry time. Best effort: the row already says when the next
        attempt is due, so a lost job only delays it until the reconciler finds the row."""
        # Relative to now, like next_attempt_at (set from the database clock a moment ago):
        # the job cannot fire before the row is due, whatever the two clocks say.
        run_at = datetime.fromtimestamp(datetime.now(UTC).timestamp() + delay_seconds, UTC)
        job = queue.QueuedJob(
            queue.retry_job_id(claimed.id, claimed.attempt_number), claimed.id, run_at
        )
        try:
            await queue.publish(self.redis, self.settings.region, [job])
        except Exception as exc:
            log.warning(
                "delivery.retry_publish_failed delivery_id=%s error=%s",
                claimed.id, type(exc).__name__,
            )  # fmt: skip

    async def _redefer_if_early(self, delivery_id: str) -> None:
        """A job that ran before its delivery is due (clock skew, an early duplicate) must not
        just vanish: put a job back for the due time. Leased or finished: nothing to do."""
        async with self.sessionmaker() as session, session.begin():
            wait = await deliveries.seconds_until_due(session, delivery_id, self.settings.region)
        if wait is None or wait <= 0:
            log.debug("delivery.skipped delivery_id=%s (leased, finished or gone)", delivery_id)
            return
        job_id = f"{delivery_id}:w{uuid.uuid4().hex[:12]}"
        run_at = datetime.fromtimestamp(datetime.now(UTC).timestamp() + wait, UTC)
        await queue.publish(
            self.redis, self.settings.region, [queue.QueuedJob(job_id, delivery_id, run_at)]
        )

    async def _release(self, delivery_id: str, token: uuid.UUID) -> None:
        async with self.sessionmaker() as session, session.begin():
            await deliveries.release(session, delivery_id, token=token)
