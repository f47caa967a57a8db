"""One HTTP attempt on Herald's own client (http_client.py: an SSRF-vetted connection, pooled),
bounded in time and in bytes read, and told as far as it got."""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import structlog

from app.core.proxies import EgressProxy
from app.core.states import Outcome
from app.engine.service import http_client
from app.engine.service.connections import Disconnected, MalformedAnswer
from app.engine.service.http_client import Exchange, HttpClient
from app.engine.service.outcomes import RETRY_AFTER_STATUSES, classify_status, parse_retry_after

log = structlog.get_logger("herald.sender")

MAX_RESPONSE_BYTES = 64 * 1024
PROXY_AUTHENTICATION_REQUIRED = 407
STORED_RESPONSE_BYTES = 4 * 1024


@dataclass
class AttemptResult:
    started_at: datetime
    duration_ms: int
    outcome: Outcome
    status_code: int | None = None
    error: str | None = None
    response_body: str | None = None
    # When (time.monotonic()) a pause the receiver asked for with Retry-After ends.
    retry_after_until: float | None = None
    # Cut off by an error inside Herald or its HTTP library, not by the receiver: it says
    # nothing about the destination, so the circuit breaker does not count it.
    failed_inside_herald: bool = False
    # The connection ended as a receiver refusing the client certificate ends it: a TLS
    # alert, or a reset or close before any answer -- under TLS 1.3 only once the request was
    # written (docs/decisions.md, on mutual TLS). Never a failure to verify the receiver.
    refused_by_peer: bool = False

    def retry_after_left(self) -> float | None:
        """What is left now of the pause the receiver asked for, if any."""
        if self.retry_after_until is None:
            return None
        left = self.retry_after_until - time.monotonic()
        return left if left > 0 else None


def _stored_body(raw: bytes) -> str:
    # PostgreSQL text cannot hold NUL; 4 KiB is enough to explain a failure.
    return raw[:STORED_RESPONSE_BYTES].decode("utf-8", errors="replace").replace("\x00", "")


@dataclass
class SendProgress:
    """How far one attempt got; the caller holds it, so even a cancelled attempt can tell
    whether the request went out (and must be recorded as ``unknown``, not forgotten)."""

    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    clock: float = field(default_factory=time.monotonic)
    sent: bool = False
    status: int | None = None
    retry_after_until: float | None = None
    # The event loop's time by which the request must be written (the lease's rule for a
    # start, applied again once the connection is made): None, no such limit.
    write_by: float | None = None

    def begin(self) -> None:
        """The attempt begins now: its recorded start, and the clock its duration is counted
        on. Not when it was claimed: a start a rate ceiling schedules later waits for its slot
        first, and that wait is neither the request's start nor part of its duration."""
        self.started_at = datetime.now(UTC)
        self.clock = time.monotonic()

    def start_again(self) -> None:
        """The request before was answered and is over (a 401 to a stale token): the next one
        is tracked from nothing sent. The attempt's start and clock stay."""
        self.sent = False
        self.status = None
        self.retry_after_until = None

    def answered(self, status: int, retry_after: str | None, retry_after_max: float) -> None:
        """The status and headers are in. A Retry-After counts from this moment, once: however
        long the body or the record then take, the pause it asks for ends at the same time."""
        self.status = status
        if status in RETRY_AFTER_STATUSES:
            asked = parse_retry_after(retry_after, datetime.now(UTC), retry_after_max)
            if asked is not None:
                self.retry_after_until = time.monotonic() + asked

    def result(self, outcome: Outcome, **fields: Any) -> AttemptResult:
        duration_ms = int((time.monotonic() - self.clock) * 1000)
        return AttemptResult(self.started_at, duration_ms, outcome, **fields)


# Called when an answer's status and headers are in, before its body is read.
OnAnswer = Callable[[SendProgress], Awaitable[None]]


async def send(
    http: HttpClient,
    *,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    progress: SendProgress,
    retry_after_max: float,
    on_answer: OnAnswer,
    proxy: EgressProxy | None = None,
    tls: ssl.SSLContext | None = None,
) -> AttemptResult:
    """POST once, through ``proxy`` if given, over ``tls`` (the endpoint's TLS material:
    client certificate, CA) if given. Never raises for anything the destination does; the
    result says what happened and whether the request had been sent when it went wrong."""
    exchange: Exchange | None = None
    try:
        # One deadline for the whole attempt: connect, send, and reading even a slow trickle.
        async with asyncio.timeout(timeout):
            exchange = await http.open_request(
                url,
                headers,
                body,
                proxy=proxy,
                tls=tls,
                write_by=progress.write_by,
                cap=MAX_RESPONSE_BYTES,
            )
            progress.sent = True  # written: from here on, its fate may be unknown
            return await _answer(exchange, progress, retry_after_max, on_answer, proxy)
    except http_client.DestinationBlocked as exc:
        return progress.result(Outcome.BLOCKED, error=str(exc))
    except http_client.ResolveFailed as exc:
        return _failed(progress, str(exc))  # retried: a name may resolve again
    except http_client.LeaseEndedBeforeWriting as exc:
        return failed_inside(progress, str(exc))  # the worker's stall, not the receiver's
    except TimeoutError:
        return _failed(progress, f"timed out after {timeout:g} s")
    except http_client.InvalidRequest as exc:
        return not_built(progress, str(exc))
    except http_client.ProxyFailed as exc:
        return _proxy_failed(progress, exc, proxy)
    except (OSError, MalformedAnswer) as exc:
        failed = _failed(progress, f"{type(exc).__name__}: {exc}")
        return dataclasses.replace(
            failed, refused_by_peer=progress.status is None and _refused_by_peer(exc)
        )
    finally:
        if exchange is not None:
            exchange.release()


def _proxy_failed(
    progress: SendProgress, exc: http_client.ProxyFailed, proxy: EgressProxy | None
) -> AttemptResult:
    """A proxy that could not be reached or refused the CONNECT."""
    if proxy is not None and not proxy.trusted:
        # The endpoint's own proxy is part of its way to the receiver: its failure is the
        # endpoint's, counted as a receiver's would be.
        return _failed(progress, f"the endpoint's egress proxy: {exc}")
    # The operator's proxy is Herald's infrastructure: its failure says nothing of the
    # receiver, and where it is is the operator's to read (the log), not the tenant's.
    log.warning("egress_proxy.failed", error=str(exc))
    return failed_inside(progress, f"egress proxy: {exc}")


def _refused_by_peer(exc: BaseException) -> bool:
    """Whether the connection ended as a receiver refusing a client certificate ends it: in
    the TLS 1.2 handshake, or (TLS 1.3) an alert, reset or close before any answer."""
    if isinstance(exc, http_client.ConnectFailed):
        exc = exc.cause
        if isinstance(exc, ssl.SSLCertVerificationError):
            return False  # the receiver's certificate failed Herald's check: no fallback
        return isinstance(exc, ssl.SSLError | ConnectionResetError)
    return isinstance(exc, ssl.SSLError | ConnectionResetError | Disconnected)


async def _answer(
    exchange: Exchange,
    progress: SendProgress,
    retry_after_max: float,
    on_answer: OnAnswer,
    proxy: EgressProxy | None,
) -> AttemptResult:
    """The receiver's answer -- or the proxy's, refusing its credentials."""
    answer = await exchange.answer()
    if proxy is not None and answer.status == PROXY_AUTHENTICATION_REQUIRED:
        # Plain http through the proxy: the proxy answered, the receiver never heard of it.
        # The operator's proxy: Herald's configuration, not the receiver's failure; the
        # endpoint's own: the endpoint's.
        error = "egress proxy: 407 Proxy Authentication Required"
        return progress.result(Outcome.RETRYABLE, error=error, failed_inside_herald=proxy.trusted)
    progress.answered(answer.status, answer.retry_after, retry_after_max)
    # Before the body, which may trickle in for the rest of the timeout: a receiver's
    # Retry-After is acted on as soon as it is heard.
    await on_answer(progress)
    raw = await exchange.body()
    return _answered(progress, answer.status, response_body=_stored_body(raw))


def _answered(progress: SendProgress, status: int, **fields: Any) -> AttemptResult:
    return progress.result(
        classify_status(status),
        status_code=status,
        retry_after_until=progress.retry_after_until,
        **fields,
    )


def not_built(progress: SendProgress, why: str) -> AttemptResult:
    """No request could be made of what is stored (the endpoint's URL or headers, the secret):
    nothing was sent, and the same request would fail the same way, so it is permanent -- the
    delivery is dead at once and redriven once the endpoint is corrected. It is not the
    receiver's failure: the breaker does not count a permanent outcome."""
    return progress.result(Outcome.PERMANENT, error=f"request not built: {why}")


def failed_inside(progress: SendProgress, error: str) -> AttemptResult:
    """An attempt cut off by an error that no handler here foresaw, told as far as it got: an
    answer's status still decides, a request that may have gone out is `unknown` (retried
    with its key), one that never left is retryable. Not held against the destination."""
    if progress.status is not None:
        return _failed(progress, error)  # the receiver's answer: it judges the destination
    return dataclasses.replace(_failed(progress, error), failed_inside_herald=True)


def _failed(progress: SendProgress, error: str) -> AttemptResult:
    if progress.status is not None:
        # The receiver answered; only reading its body failed. The status decides.
        return _answered(progress, progress.status, error=f"reading the response: {error}")
    if progress.sent:
        return progress.result(Outcome.UNKNOWN, error=f"after sending: {error}")
    return progress.result(Outcome.RETRYABLE, error=f"before sending: {error}")
