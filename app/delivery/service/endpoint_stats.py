"""How an endpoint's recent attempts went, over the windows its stats report.

An endpoint's stats (GET /v1/endpoints/{id}/stats) join the endpoint's own health to its
attempts, and the attempts table is this domain's: they are built here, above the endpoints
service, so that the endpoints service never imports delivery's (which imports it)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.scope import Scope
from app.core.states import OUTCOMES
from app.delivery.repository import attempts
from app.delivery.repository.attempts import WindowCounts as WindowCounts
from app.endpoints.schemas import EndpointStats, WindowStats, current_pause
from app.endpoints.service.endpoints import get_endpoint

WINDOWS = {"last_hour": timedelta(hours=1), "last_day": timedelta(days=1)}


async def recent_windows(session: AsyncSession, endpoint_id: str) -> dict[str, WindowCounts]:
    """Attempts and successes to the endpoint in each of ``WINDOWS``, in one query."""
    return await attempts.counts_since(session, endpoint_id, WINDOWS)


async def endpoint_stats(session: AsyncSession, scope: Scope, endpoint_id: str) -> EndpointStats:
    """The scope's endpoint (NotFound if it has none by that id) with its attempts over each of
    ``WINDOWS`` and its health: successes, breaker, pause, enabled."""
    endpoint = await get_endpoint(session, scope, endpoint_id)
    windows = await recent_windows(session, endpoint.id)
    return EndpointStats(
        endpoint_id=endpoint.id,
        last_hour=_window_stats(windows["last_hour"]),
        last_day=_window_stats(windows["last_day"]),
        last_success_at=endpoint.last_success_at,
        last_failure_at=endpoint.last_failure_at,
        consecutive_failures=endpoint.consecutive_failures,
        circuit="open" if endpoint.breaker_trips > 0 else "closed",
        **current_pause(endpoint),
        enabled=endpoint.enabled,
        disabled_reason=endpoint.disabled_reason,
    )


def _window_stats(counts: WindowCounts) -> WindowStats:
    return WindowStats(
        attempts=counts.attempts,
        successes=counts.successes,
        failures=counts.attempts - counts.successes,
        success_rate=counts.successes / counts.attempts if counts.attempts else None,
        p95_ms=counts.p95_ms,
    )


async def last_hour(session: AsyncSession, endpoint_id: str) -> WindowCounts:
    """The last hour alone: what a page listing many endpoints can afford for each (a day of a
    busy endpoint's attempts is a long index range to count and sort)."""
    hour = {"last_hour": WINDOWS["last_hour"]}
    return (await attempts.counts_since(session, endpoint_id, hour))["last_hour"]


@dataclass(frozen=True)
class MinuteCounts:
    """Attempts by outcome, minute by minute, oldest minute first."""

    minutes: int
    # outcome -> one count a minute; index 0 is ``minutes`` ago, the last the current minute
    by_outcome: dict[str, list[int]]


async def outcomes_per_minute(
    session: AsyncSession, tenant_id: str | None, *, minutes: int = 60
) -> MinuteCounts:
    """The last ``minutes`` of attempts by outcome class: one tenant's, or (None) everyone's."""
    series = {outcome: [0] * minutes for outcome in OUTCOMES}
    for ago, outcome, count in await attempts.per_minute(session, tenant_id, minutes=minutes):
        if 0 <= ago < minutes:
            series[outcome][minutes - 1 - ago] += count
    return MinuteCounts(minutes, series)
