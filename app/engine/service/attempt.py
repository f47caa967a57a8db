"""One attempt on a leased delivery, whoever claimed it: refuse it without sending, or send it
and decide what its answer means; and the record of an attempt that says something about the
destination's health (a failure, a 410), which needs a transaction of its own.

No scheduling here and no lease bookkeeping: the pump (pump.py) decides when an
attempt starts, the recorder (recorder.py) writes how it ended.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass

import aiohttp
import structlog
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app import tracing
from app.config import Settings
from app.endpoints.service import destination_health, endpoints
from app.engine.repository import delivery_records
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.repository.delivery_records import Finished
from app.engine.service import envelope, outcomes, sender
from app.flow.service.gate import Gate
from app.logs import log_failure
from app.states import DeliveryState, Outcome

log = structlog.get_logger("herald.delivery")


@dataclass(frozen=True)
class Ended:
    """How an attempt on a leased delivery ended, waiting to be recorded."""

    claimed: ClaimedDelivery
    transition: outcomes.Transition
    result: sender.AttemptResult | None  # None: refused without sending
    lease_ends: float  # on this process's event-loop clock

    @functools.cached_property
    def finished(self) -> Finished:
        """The row to write. A retry is written `enqueued`: the destination's wake-up covers it
        (the recorder arms it for the retry time after the commit)."""
        t, result = self.transition, self.result
        state = t.state
        if state is DeliveryState.PENDING and t.delay_seconds is not None:
            state = DeliveryState.ENQUEUED
        finished = Finished(
            state=state,
            delay_seconds=t.delay_seconds,
            dead_reason=t.dead_reason,
            attempt_number=self.claimed.attempt_number,
        )
        if result is None:
            return finished
        return dataclasses.replace(
            finished,
            outcome=result.outcome.value,
            status_code=result.status_code,
            error=result.error,
            started_at=result.started_at,
            duration_ms=result.duration_ms,
            response_body=result.response_body,
        )

    @property
    def destination_failed(self) -> bool:
        """Whether this ending counts against the destination (the breaker's streak): a
        retryable or unknown outcome -- unless it failed inside Herald, not at the receiver."""
        result = self.result
        return (
            result is not None
            and result.outcome in destination_health.FAILURES
            and not result.failed_inside_herald
        )

    @property
    def touches_health(self) -> bool:
        """Whether the record must also judge the destination (breaker, Retry-After, 410):
        then it is a transaction of its own, not part of a group commit."""
        return self.destination_failed or self.transition.disable_endpoint

    @property
    def retry_in(self) -> float | None:
        if self.finished.state is DeliveryState.ENQUEUED:
            return self.transition.delay_seconds
        return None


@dataclass
class Attempts:
    settings: Settings
    http: aiohttp.ClientSession
    gate: Gate

    def refusal(self, claimed: ClaimedDelivery) -> outcomes.Transition | None:
        """An ending without a request: the endpoint is gone or disabled, or the budget is
        spent by earlier claims that died before recording (crashed workers)."""
        if claimed.endpoint_deleted:
            return outcomes.Transition.dead("endpoint_deleted")
        if not claimed.endpoint_enabled:
            return outcomes.Transition.dead("endpoint_disabled")
        if claimed.attempts_used > self.settings.attempts_limit:
            reason = f"max_attempts_exhausted ({self.settings.attempts_limit})"
            return outcomes.Transition.dead(reason)
        return None

    async def send(
        self, claimed: ClaimedDelivery, progress: sender.SendProgress
    ) -> sender.AttemptResult:
        """Build the request and send it. Whatever is raised on the way ends as a result that
        says how far the attempt got -- nothing escapes to be mistaken for a shutdown, or to
        hand the lease back and fail again at once."""
        ids = {"delivery_id": claimed.id, "endpoint_id": claimed.endpoint_id}
        with tracing.attempting(claimed.traceparent, claimed.id) as trace:
            try:
                body = envelope.request_body(claimed)
                headers = envelope.request_headers(claimed, body, trace)
            except envelope.RequestNotBuilt as exc:
                # Once per delivery (it is dead at once), without a traceback or any value.
                log.warning("delivery.request_not_built", reason=str(exc), **ids)
                return sender.not_built(progress, str(exc))
            except Exception as exc:  # a damaged secret, a bug: the traceback finds it
                return sender.not_built(
                    progress, log_failure(log, "delivery.request_not_built", exc, **ids)
                )
            try:
                return await sender.send(
                    self.http,
                    url=claimed.url,
                    body=body,
                    headers=headers,
                    timeout=self.settings.request_timeout_seconds,
                    allowlist=self.settings.destination_allowlist,
                    progress=progress,
                    retry_after_max=self.settings.retry_after_max_seconds,
                    on_answer=functools.partial(self._answered, claimed.endpoint_id),
                )
            except Exception as exc:
                error = log_failure(log, "delivery.send_failed", exc, **ids)
                return sender.failed_inside(progress, error)

    async def _answered(self, endpoint_id: str, progress: sender.SendProgress) -> None:
        if progress.retry_after_until is not None:
            # Close every worker's gate the moment the receiver's Retry-After is heard, before
            # the body and the record: a request that starts after it would defy it. (Requests
            # already in flight when it came are unaffected, as they must be.)
            await self.gate.pause(endpoint_id, progress.retry_after_until - time.monotonic())

    def decide(self, claimed: ClaimedDelivery, result: sender.AttemptResult) -> outcomes.Transition:
        return outcomes.decide(
            outcome=result.outcome,
            status_code=result.status_code,
            attempts_used=claimed.attempts_used,
            max_attempts=self.settings.attempts_limit,
            schedule=self.settings.retry_schedule,
            retry_after=result.retry_after_left(),
            error=result.error,
        )

    def cut_short(
        self,
        claimed: ClaimedDelivery,
        progress: sender.SendProgress,
        *,
        lease_ends: float,
        error: str | None = None,
    ) -> Ended:
        """A request under way when the worker had to stop -- or, with ``error``, when
        something failed inside Herald around it: it may have reached the receiver, so it is
        recorded `unknown` and retried with the same key. Only a shutdown says "shut down"."""
        result = progress.result(
            Outcome.UNKNOWN,
            error=error or "worker shut down mid-attempt",
            failed_inside_herald=error is not None,
        )
        return Ended(claimed, self.decide(claimed, result), result, lease_ends)


async def record_judging_health(
    sessionmaker: async_sessionmaker[AsyncSession], settings: Settings, ended: Ended
) -> tuple[bool, float]:
    """Record an attempt whose ending judges its destination, in one transaction with that
    judgement: whether it was recorded, and how long the destination must now pause."""
    claimed, result = ended.claimed, ended.result
    failed = ended.destination_failed
    # Counted from the answer (the gate closed then), not from this try: a record retried
    # through a database outage must not push the pause later.
    retry_after = result.retry_after_left() if failed and result is not None else None
    pause = 0.0
    async with sessionmaker() as session, session.begin():
        recorded = await delivery_records.record_in(
            session, claimed.id, token=claimed.token, finished=ended.finished
        )
        if recorded and ended.transition.disable_endpoint:
            await endpoints.disable(session, claimed.endpoint_id, "receiver answered 410 Gone")
        if recorded and failed and result is not None:
            pause = await destination_health.after_failure(
                session, settings, claimed.endpoint_id, result.status_code, retry_after
            )
    return recorded, pause
