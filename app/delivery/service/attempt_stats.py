"""How an endpoint's recent attempts went, over the windows its stats report (the endpoints
domain asks; the attempts table is this domain's)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.repository import attempts
from app.delivery.repository.attempts import WindowCounts as WindowCounts
from app.states import OUTCOMES

WINDOWS = {"last_hour": timedelta(hours=1), "last_day": timedelta(days=1)}


async def recent_windows(session: AsyncSession, endpoint_id: str) -> dict[str, WindowCounts]:
    """Attempts and successes to the endpoint in each of ``WINDOWS``, in one query."""
    return await attempts.counts_since(session, endpoint_id, WINDOWS)


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
