"""What a failed attempt says about its destination: backpressure, the circuit breaker,
disabling. (A success's verdict -- the breaker closes -- is part of the record statement itself,
app/engine/repository/delivery_records.py.)

Runs inside the attempt's record transaction, so the attempt and its verdict on the endpoint
commit together. Returns how long the destination must now pause (the caller mirrors that into
Redis, where every worker's gate sees it at once).
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.config import Settings
from app.core.states import Outcome
from app.endpoints.repository import destination_health as health

FAILURES = (Outcome.RETRYABLE, Outcome.UNKNOWN)


def breaker_cooldown(settings: Settings, trips_so_far: int) -> float:
    """Doubles with every trip in a row, up to the cap."""
    grown = settings.breaker_cooldown_seconds * (2 ** min(trips_so_far, 30))
    return float(min(grown, settings.breaker_max_cooldown_seconds))


async def after_failure(
    session: AsyncSession,
    settings: Settings,
    endpoint_id: str,
    status_code: int | None,
    retry_after: float | None,
) -> float:
    """Update the endpoint's health for one attempt whose outcome is in FAILURES (a 4xx or a
    refused address says nothing about the receiver's health); returns seconds to pause."""
    pause = 0.0
    if retry_after:
        # Backpressure: the receiver asked everyone to wait, not just this delivery.
        await health.pause(
            session,
            endpoint_id,
            seconds=retry_after,
            reason=f"receiver answered {status_code} with Retry-After",
        )
        pause = retry_after
    streak = await health.record_failure(session, endpoint_id)
    if streak.failing_for >= settings.disable_after_hours * 3600:
        hours = f"{settings.disable_after_hours:g}"
        await health.disable(session, endpoint_id, f"no successful delivery for {hours} hours")
        return pause
    if streak.consecutive_failures >= settings.breaker_failures and not streak.paused:
        cooldown = breaker_cooldown(settings, streak.breaker_trips)
        await health.pause(
            session,
            endpoint_id,
            seconds=cooldown,
            trip=True,
            reason=f"circuit open after {streak.consecutive_failures} consecutive failures",
        )
        pause = max(pause, cooldown)
    return pause
