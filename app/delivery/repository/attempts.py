from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import Attempt, Endpoint


async def list_page(
    session: AsyncSession, delivery_id: str, *, limit: int, after_number: int | None
) -> list[Attempt]:
    """Oldest first: an attempt log reads in the order things happened."""
    query = select(Attempt).where(Attempt.delivery_id == delivery_id)
    if after_number is not None:
        query = query.where(Attempt.attempt_number > after_number)
    return list(
        (await session.execute(query.order_by(Attempt.attempt_number).limit(limit))).scalars()
    )


@dataclass(frozen=True)
class WindowCounts:
    attempts: int
    successes: int
    p95_ms: float | None  # the 95th percentile of the attempts' durations; None without any


async def counts_since(
    session: AsyncSession, endpoint_id: str, windows: dict[str, timedelta]
) -> dict[str, WindowCounts]:
    """Attempts, successes and the 95th percentile of durations of one endpoint within each
    trailing window, in one query over the (endpoint_id, started_at) index."""
    widest = max(windows.values())
    columns = []
    for name, span in windows.items():
        recent = Attempt.started_at > func.now() - span
        columns.append(func.count().filter(recent).label(f"{name}_attempts"))
        columns.append(
            func.count().filter(recent, Attempt.outcome == "success").label(f"{name}_successes")
        )
        columns.append(
            func.percentile_cont(0.95)
            .within_group(Attempt.duration_ms)
            .filter(recent)
            .label(f"{name}_p95")
        )
    row = (
        await session.execute(
            select(*columns).where(
                Attempt.endpoint_id == endpoint_id, Attempt.started_at > func.now() - widest
            )
        )
    ).one()
    return {
        name: WindowCounts(
            row._mapping[f"{name}_attempts"],
            row._mapping[f"{name}_successes"],
            row._mapping[f"{name}_p95"],
        )
        for name in windows
    }


async def per_minute(
    session: AsyncSession, tenant_id: str | None, *, minutes: int
) -> list[tuple[int, str, int]]:
    """(minutes ago, outcome, attempts) over the last ``minutes``: one tenant's (through its
    endpoints and the (endpoint_id, started_at) index) or every tenant's (the BRIN index)."""
    since = func.now() - timedelta(minutes=minutes)
    ago = func.floor(func.extract("epoch", func.now() - Attempt.started_at) / 60).label("ago")
    query = select(ago, Attempt.outcome, func.count()).where(Attempt.started_at > since)
    if tenant_id is not None:
        theirs = select(Endpoint.id).where(Endpoint.tenant_id == tenant_id)
        query = query.where(Attempt.endpoint_id.in_(theirs))
    rows = await session.execute(query.group_by(ago, Attempt.outcome))
    return [(int(row[0]), row[1], row[2]) for row in rows]
