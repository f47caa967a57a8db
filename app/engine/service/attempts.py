"""One attempt on a leased delivery, whoever claimed it: refuse it without sending, or send it
and decide what its answer means.

No scheduling here, no lease bookkeeping and no writes: the pump (pump.py) decides when an
attempt starts, the recorder (recorder.py) writes how it ended.
"""

from __future__ import annotations

import dataclasses
import functools
import ssl
import time
from dataclasses import dataclass

import structlog

from app.core import tracing
from app.core.config import Settings
from app.core.faults import error_point
from app.core.logs import log_failure
from app.core.proxies import EgressProxy
from app.core.sealing import OpenedSecrets
from app.core.states import Outcome
from app.endpoints.service import destination_health
from app.engine.repository.delivery_leases import ClaimedDelivery
from app.engine.service import egress, envelope, outcomes, sender, tokens
from app.engine.service.client_tls import ClientContexts
from app.engine.service.http_client import HttpClient
from app.engine.service.tokens import Tokens
from app.flow.service.gate import Gate

log = structlog.get_logger("herald.delivery")
UNAUTHORIZED = 401


@dataclass(frozen=True)
class Ended:
    """How an attempt on a leased delivery ended, waiting to be recorded."""

    claimed: ClaimedDelivery
    transition: outcomes.Transition
    result: sender.AttemptResult | None  # None: refused without sending
    lease_ends: float  # on this process's event-loop clock

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


@dataclass(frozen=True)
class Request:
    """What an attempt sends, built from its claim: the body, the headers, and the TLS
    contexts to connect with (the current material's first)."""

    claimed: ClaimedDelivery
    url: str
    body: bytes
    headers: dict[str, str]
    contexts: list[ssl.SSLContext]
    proxy: EgressProxy | None  # the endpoint's own, else the operator's, else none


def final_as_the_endpoint_says(
    claimed: ClaimedDelivery, result: sender.AttemptResult
) -> sender.AttemptResult:
    """A status the endpoint lists as final ends the delivery, where it would be retried."""
    if result.outcome is Outcome.RETRYABLE and result.status_code in claimed.final_statuses:
        return dataclasses.replace(result, outcome=Outcome.PERMANENT)
    return result


@dataclass
class Attempts:
    settings: Settings
    http: HttpClient
    gate: Gate
    # The endpoints' secrets, opened once per process (app/core/sealing.py), not once per attempt.
    opened: OpenedSecrets
    # OAuth2 access tokens of the endpoints with client credentials, shared by their attempts.
    tokens: Tokens
    # The TLS contexts of endpoints with TLS material, made once per process.
    contexts: ClientContexts
    # HERALD_EGRESS_PROXY: every attempt leaves through it (egress.py), or None.
    proxy: EgressProxy | None = None

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
                if claimed.url is None:  # the claim never leases a polling endpoint's
                    raise envelope.RequestNotBuilt("a polling endpoint's delivery is not sent")
                url = claimed.url
                body = envelope.request_body(claimed)
                headers = envelope.request_headers(
                    claimed, body, trace, self.opened, user_agent=self.settings.user_agent
                )
                contexts = self.contexts.of(claimed)
                proxy = egress.endpoint_proxy(claimed, self.opened) or self.proxy
            except envelope.RequestNotBuilt as exc:
                # Once per delivery (it is dead at once), without a traceback or any value.
                log.warning("delivery.request_not_built", reason=str(exc), **ids)
                return sender.not_built(progress, str(exc))
            except Exception as exc:  # a damaged secret, a bug: the traceback finds it
                return sender.not_built(
                    progress, log_failure(log, "delivery.request_not_built", exc, **ids)
                )
            try:
                request = Request(claimed, url, body, headers, contexts, proxy)
                if claimed.oauth2 is None:
                    result = await self._post(request, progress)
                else:
                    result = await self._post_with_token(request, progress)
                return final_as_the_endpoint_says(claimed, result)
            except Exception as exc:
                error = log_failure(log, "delivery.send_failed", exc, **ids)
                return sender.failed_inside(progress, error)

    async def _post(self, request: Request, progress: sender.SendProgress) -> sender.AttemptResult:
        """Over the endpoint's current TLS material; while replaced material is a fallback, a
        connection the receiver ended as a refused client certificate ends it is sent once
        more with the previous certificate (it may not trust the new yet) -- checked against
        the current CA bundle, never the replaced one. Sending again is harmless (the same
        Idempotency-Key), and the progress is not reset: a first request that may have been
        written keeps the attempt `unknown` should the second fail before writing."""
        contexts: list[ssl.SSLContext | None] = [*request.contexts] or [None]
        first: sender.AttemptResult | None = None
        error_point("worker.error_while_sending", self.settings.fault)
        for tls in contexts:
            result = await sender.send(
                self.http,
                url=request.url,
                body=request.body,
                headers=request.headers,
                timeout=self.settings.request_timeout_seconds,
                progress=progress,
                retry_after_max=self.settings.retry_after_max_seconds,
                on_answer=functools.partial(self._answered, request.claimed.endpoint_id),
                proxy=request.proxy,
                tls=tls,
            )
            if not result.refused_by_peer:
                break
            first = first or result
        if first is not None and result is not first and result.outcome is not Outcome.SUCCESS:
            # What the replacement met is the news: kept beside the fallback's own ending.
            error = f"{result.error}; with the replacement client certificate: {first.error}"
            result = dataclasses.replace(result, error=error)
        return result

    async def _post_with_token(
        self, request: Request, progress: sender.SendProgress
    ) -> sender.AttemptResult:
        """With the endpoint's OAuth2 token. A 401 to a cached token (revoked, or expired
        early) drops it and sends once more with a fresh one: the 401 was an answer, so the
        first request is over and nothing of it was acted on."""
        claimed = request.claimed
        for _ in range(2):
            try:
                token = await self.tokens.bearer(claimed, request.proxy)
            except tokens.TokenFailed as exc:
                return progress.result(Outcome.AUTH_FAILED, error=str(exc))
            headers = {**request.headers, "Authorization": f"Bearer {token.value}"}
            result = await self._post(dataclasses.replace(request, headers=headers), progress)
            if result.status_code != UNAUTHORIZED or token.fresh:
                return result
            self.tokens.forget(claimed, token.value)
            progress.start_again()
        return result

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
