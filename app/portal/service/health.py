"""An endpoint's health as a customer reads it: one word (Healthy, Failing, Paused, Disabled)
and a sentence saying why and since when, with the last hour's delivery rate -- from the
endpoint's own health columns and one count of its attempts; and when a waiting delivery is
tried next, which its endpoint's state may put off."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.service import endpoint_stats
from app.delivery.service.endpoint_stats import WindowCounts
from app.models import Delivery, Endpoint

# How a sentence writes a moment: as the portal's pages write every other time (the routes
# pass app/api/formatting.py's, which a service may not import).
TimeWriter = Callable[[datetime], str]


@dataclass(frozen=True)
class Health:
    summary: str  # Healthy | Failing | Paused | Disabled | No deliveries yet
    tone: str  # ok | bad | warn | off: how the badge is drawn
    detail: str | None  # why, and since when
    last_hour: str | None  # "12 of 12 attempts delivered in the last hour"


async def health_of(session: AsyncSession, endpoint: Endpoint, when: TimeWriter) -> Health:
    return judged(endpoint, await endpoint_stats.last_hour(session, endpoint.id), when)


def judged(
    endpoint: Endpoint, hour: WindowCounts, when: TimeWriter, now: datetime | None = None
) -> Health:
    now = now or datetime.now(UTC)
    rate = None
    if hour.attempts:
        attempts = f"{hour.attempts} attempt{'s' if hour.attempts != 1 else ''}"
        rate = f"{hour.successes} of {attempts} delivered in the last hour"
    if not endpoint.enabled:
        return Health("Disabled", "off", endpoint.disabled_reason, rate)
    if endpoint.paused_until is not None and endpoint.paused_until > now:
        until = when(endpoint.paused_until)
        if endpoint.breaker_trips > 0:
            why = (
                f"{endpoint.consecutive_failures} failed attempts in a row: Herald waits until "
                f"{until}, then tries one delivery before the rest"
            )
        else:
            why = f"your receiver asked Herald to wait (Retry-After) until {until}"
        return Health("Paused", "warn", why, rate)
    if endpoint.consecutive_failures > 0:
        since = f" since {when(endpoint.failing_since)}" if endpoint.failing_since else ""
        n = endpoint.consecutive_failures
        why = f"the last {n} attempt{'s' if n != 1 else ''} failed{since}; retried on schedule"
        return Health("Failing", "bad", why, rate)
    if endpoint.last_success_at is not None:
        return Health("Healthy", "ok", f"last delivered {when(endpoint.last_success_at)}", rate)
    return Health("No deliveries yet", "off", None, rate)


def next_attempt_said(
    delivery: Delivery, endpoint: Endpoint, when: TimeWriter, now: datetime | None = None
) -> str | None:
    """When a waiting delivery is tried next, as a customer reads it: its own time, unless its
    endpoint holds it longer (disabled, or paused past that time). None: it is not waiting."""
    if delivery.state not in ("pending", "enqueued"):
        return None
    if endpoint.deleted_at is not None:
        return "never: the endpoint was deleted"
    if not endpoint.enabled:
        return "when the endpoint is enabled again: it is disabled"
    due = delivery.next_attempt_at
    if due is None:
        return "after the deliveries before it in order"
    now = now or datetime.now(UTC)
    paused = endpoint.paused_until
    if paused is not None and paused > now and paused > due:
        return f"{when(paused)}, when the endpoint's pause ends"
    return when(due)
