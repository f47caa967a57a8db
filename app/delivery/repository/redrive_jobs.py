from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import is_id, new_id
from app.models import RedriveJob


async def insert_job(
    session: AsyncSession,
    *,
    tenant_id: str,
    region: str,
    filter: dict[str, Any],
    customer_id: str | None = None,
) -> RedriveJob:
    return (
        await session.execute(
            insert(RedriveJob)
            .values(
                id=new_id("rdv"),
                tenant_id=tenant_id,
                customer_id=customer_id,
                region=region,
                filter=filter,
                status="queued",
            )
            .returning(RedriveJob)
        )
    ).scalar_one()


async def get_for_tenant(session: AsyncSession, tenant_id: str, job_id: str) -> RedriveJob | None:
    if not is_id(job_id):
        return None
    return (
        await session.execute(
            select(RedriveJob).where(RedriveJob.id == job_id, RedriveJob.tenant_id == tenant_id)
        )
    ).scalar_one_or_none()


async def get(session: AsyncSession, job_id: str) -> RedriveJob | None:
    return await session.get(RedriveJob, job_id)


async def update_job(session: AsyncSession, job_id: str, **values: Any) -> None:
    await session.execute(
        update(RedriveJob)
        .where(RedriveJob.id == job_id)
        .values(**values)
        .execution_options(synchronize_session=False)
    )


async def finish(session: AsyncSession, job_id: str, *, status: str, error: str | None) -> None:
    await update_job(session, job_id, status=status, error=error, finished_at=func.now())


async def active(session: AsyncSession, tenant_id: str, *, since: timedelta) -> list[RedriveJob]:
    """The tenant's jobs queued or running, asked for within ``since``."""
    query = select(RedriveJob).where(
        RedriveJob.tenant_id == tenant_id,
        RedriveJob.status.in_(("queued", "running")),
        RedriveJob.created_at > func.now() - since,
    )
    return list((await session.execute(query.order_by(RedriveJob.id))).scalars())
