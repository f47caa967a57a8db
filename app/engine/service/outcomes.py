"""Pure decisions about one attempt: its outcome class, the next attempt time, Retry-After.

No I/O here, so every rule is tested exhaustively and cheaply.
"""

from __future__ import annotations

import email.utils
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.core.states import DeliveryState, Outcome

# Besides 5xx: "try again" (408, 425, 429), and what a receiver answers while it is being
# deployed or its credentials changed (401, 403, 404) -- a brief window that must not send
# its events to the dead letters (docs/decisions.md, "What a receiver's answer decides").
RETRYABLE_STATUSES = frozenset({401, 403, 404, 408, 425, 429})
# Only these answers carry a Retry-After that Herald honours (RFC 9110 §10.2.3).
RETRY_AFTER_STATUSES = frozenset({429, 503})
GONE = 410
JITTER = 0.2


def classify_status(status: int) -> Outcome:
    if 200 <= status < 300:
        return Outcome.SUCCESS
    if status in RETRYABLE_STATUSES or 500 <= status < 600:
        return Outcome.RETRYABLE
    # 1xx never reaches here; 3xx is not followed (a redirect could point anywhere); the other
    # 4xx say that the request itself is refused (400, 413, 422...): the same bytes would get
    # the same answer. 410 also disables the endpoint.
    return Outcome.PERMANENT


def parse_retry_after(value: str | None, now: datetime, maximum: float) -> float | None:
    """Seconds to wait from ``now``: delta-seconds or an HTTP-date, clamped to ``maximum``.

    Garbage, negative values and dates in the past mean "no hint" (None).
    """
    if value is None:
        return None
    value = value.strip()
    if value.isascii() and value.isdecimal():
        # A receiver's header is untrusted input: no 5,000-digit integers here.
        seconds = float(value) if len(value) <= 12 else maximum
    else:
        try:
            when = email.utils.parsedate_to_datetime(value)
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - now).total_seconds()
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if seconds <= 0:
            return None
    if not math.isfinite(seconds):
        return None
    return min(seconds, maximum)


def backoff_seconds(
    attempt_number: int, schedule: Sequence[float], rng: random.Random | None = None
) -> float:
    """Delay after the ``attempt_number``-th failed attempt (1-based): the schedule's entry,
    the last one repeated beyond its end, with ±20% jitter so that a destination's failed
    backlog does not come back as a thundering herd."""
    base = schedule[min(attempt_number, len(schedule)) - 1]
    return base * (rng or random).uniform(1 - JITTER, 1 + JITTER)


@dataclass(frozen=True, kw_only=True)
class Transition:
    """What a finished attempt does to its delivery: made by ``succeeded``, ``retry``,
    ``dead`` or ``cancelled``, which say which fields go together."""

    state: DeliveryState
    delay_seconds: float | None = None  # for a retry: seconds from now until the next attempt
    dead_reason: str | None = None
    disable_endpoint: bool = False
    # Why a delivery ended without an attempt when it is not dead (a skip): its last_error.
    note: str | None = None

    @classmethod
    def succeeded(cls) -> Transition:
        return cls(state=DeliveryState.SUCCEEDED)

    @classmethod
    def retry(cls, delay_seconds: float) -> Transition:
        return cls(state=DeliveryState.PENDING, delay_seconds=delay_seconds)

    @classmethod
    def dead(cls, reason: str, *, disable_endpoint: bool = False) -> Transition:
        return cls(state=DeliveryState.DEAD, dead_reason=reason, disable_endpoint=disable_endpoint)

    @classmethod
    def cancelled(cls, note: str) -> Transition:
        """Ended unsent, and not a failure: its endpoint's transformation skipped it."""
        return cls(state=DeliveryState.CANCELLED, note=note)


def decide(
    *,
    outcome: Outcome,
    status_code: int | None,
    attempts_used: int,
    max_attempts: int,
    schedule: Sequence[float],
    retry_after: float | None,
    error: str | None = None,
) -> Transition:
    if outcome is Outcome.SUCCESS:
        return Transition.succeeded()
    if outcome is Outcome.BLOCKED:
        reason = f"destination_blocked: {error}" if error else "destination_blocked"
        return Transition.dead(reason)
    if outcome is Outcome.PERMANENT:
        gone = status_code == GONE
        if status_code:
            reason = f"permanent_failure: HTTP {status_code}"
        else:  # no answer: the error says why (a request Herald could not build)
            reason = f"permanent_failure: {error}" if error else "permanent_failure"
        return Transition.dead(reason, disable_endpoint=gone)
    if attempts_used >= max_attempts:
        return Transition.dead(f"max_attempts_exhausted ({max_attempts})")
    delay = backoff_seconds(attempts_used, schedule)
    if retry_after is not None:
        delay = max(delay, retry_after)  # never sooner than the receiver asked
    return Transition.retry(delay)
