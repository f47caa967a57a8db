"""An endpoint's health as the workers keep it: the flow limits the gate reads, a failure
streak, a pause, the breaker's trips, disabling -- the ``endpoints`` columns an attempt's
record changes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Endpoint


async def disable(session: AsyncSession, endpoint_id: str, reason: str) -> None:
    """Workers disable an endpoint that told them to go away (410 Gone)."""
    await session.execute(
        update(Endpoint)
        .where(Endpoint.id == endpoint_id, Endpoint.enabled.is_(True))
        .values(enabled=False, disabled_reason=reason, updated_at=func.now())
    )


@dataclass(frozen=True)
class FlowLimits:
    tenant_id: str
    rate_limit_per_second: float | None
    max_in_flight: int | None
    paused_for: float  # seconds left of a pause, by the database clock
    breaker_trips: int
    # The rate the receiver allowed in the webhook handshake, a second: a ceiling beside the
    # endpoint's own or, without one, the default (None: none).
    allowed_rate_per_second: float | None = None
    # A live polling endpoint's receiver reads its deliveries: no worker sends them.
    polled: bool = False

    def rate(self, default: float) -> float:
        """The rate ceiling in force (0: none): the endpoint's own, else the default, and
        never above what the receiver allowed."""
        own = self.rate_limit_per_second or default
        allowed = self.allowed_rate_per_second
        if allowed is None:
            return own
        return min(own, allowed) if own else allowed


async def flow_limits(session: AsyncSession, endpoint_id: str) -> FlowLimits | None:
    remaining = func.greatest(0, func.extract("epoch", Endpoint.paused_until - func.now()))
    row = (
        await session.execute(
            select(
                Endpoint.rate_limit_per_second,
                Endpoint.max_in_flight,
                func.coalesce(remaining, 0),
                Endpoint.breaker_trips,
                Endpoint.webhook_allowed_rate,
                Endpoint.tenant_id,
                Endpoint.delivery,
                Endpoint.deleted_at,
            ).where(Endpoint.id == endpoint_id)
        )
    ).one_or_none()
    if row is None:
        return None
    allowed = None if row[4] is None else row[4] / 60
    return FlowLimits(
        # A deleted polling endpoint's deliveries are the workers' again: they die of it.
        row[5],
        row[0],
        row[1],
        float(row[2]),
        row[3],
        allowed,
        polled=row[6] == "poll" and row[7] is None,
    )


@dataclass(frozen=True)
class FailureStreak:
    consecutive_failures: int
    failing_for: float  # seconds since the streak began
    breaker_trips: int
    paused: bool


async def record_failure(session: AsyncSession, endpoint_id: str) -> FailureStreak:
    row = (
        await session.execute(
            update(Endpoint)
            .where(Endpoint.id == endpoint_id)
            .values(
                consecutive_failures=Endpoint.consecutive_failures + 1,
                failing_since=func.coalesce(Endpoint.failing_since, func.now()),
                last_failure_at=func.now(),
            )
            .returning(
                Endpoint.consecutive_failures,
                func.extract(
                    "epoch", func.now() - func.coalesce(Endpoint.failing_since, func.now())
                ),
                Endpoint.breaker_trips,
                func.coalesce(Endpoint.paused_until > func.now(), False),
            )
        )
    ).one()
    return FailureStreak(row[0], float(row[1]), row[2], bool(row[3]))


async def pause(
    session: AsyncSession, endpoint_id: str, *, seconds: float, reason: str, trip: bool = False
) -> None:
    """Pause the destination (extending, never shortening, a pause in force)."""
    until = func.now() + timedelta(seconds=seconds)
    values: dict[str, Any] = {
        "paused_until": func.greatest(func.coalesce(Endpoint.paused_until, until), until),
        "pause_reason": reason,
        "updated_at": func.now(),
    }
    if trip:
        values["breaker_trips"] = Endpoint.breaker_trips + 1
    await session.execute(update(Endpoint).where(Endpoint.id == endpoint_id).values(**values))
