from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import is_id, new_id
from app.models import ReconcileRun


async def insert_run(session: AsyncSession, *, region: str, trigger: str) -> ReconcileRun:
    return (
        await session.execute(
            insert(ReconcileRun)
            .values(id=new_id("run"), region=region, trigger=trigger, status="queued")
            .returning(ReconcileRun)
        )
    ).scalar_one()


async def get(session: AsyncSession, run_id: str) -> ReconcileRun | None:
    if not is_id(run_id):
        return None
    return (
        await session.execute(select(ReconcileRun).where(ReconcileRun.id == run_id))
    ).scalar_one_or_none()


async def list_page(
    session: AsyncSession, *, limit: int, before_id: str | None
) -> list[ReconcileRun]:
    query = select(ReconcileRun)
    if before_id is not None:
        query = query.where(ReconcileRun.id < before_id)
    return list(
        (await session.execute(query.order_by(ReconcileRun.id.desc()).limit(limit))).scalars()
    )


async def update_run(session: AsyncSession, run_id: str, **values: Any) -> None:
    await session.execute(
        update(ReconcileRun)
        .where(ReconcileRun.id == run_id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )


async def mark_finished(
    session: AsyncSession, run_id: str, *, status: str, counts: dict[str, int], error: str | None
) -> None:
    await update_run(
        session, run_id, status=status, counts=counts, error=error, finished_at=func.now()
    )


async def fail_abandoned(session: AsyncSession, *, older_than: timedelta) -> None:
    await session.execute(
        update(ReconcileRun)
        .where(
            ReconcileRun.status.in_(("queued", "running")),
            ReconcileRun.started_at < func.now() - older_than,
        )
        .values(status="failed", error="abandoned: its worker stopped", finished_at=func.now())
        .execution_options(synchronize_session=False)
    )


async def last_success_age(session: AsyncSession, region: str) -> float | None:
    """Seconds since the region's last successful run finished; None if none ever did. The
    newest runs first, along the primary key: it stops at the first success."""
    query = (
        select(func.extract("epoch", func.now() - ReconcileRun.finished_at))
        .where(ReconcileRun.region == region, ReconcileRun.status == "succeeded")
        .order_by(ReconcileRun.id.desc())
        .limit(1)
    )
    age = (await session.execute(query)).scalar_one_or_none()
    return None if age is None else float(age)
