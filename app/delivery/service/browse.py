"""Reading deliveries page by page: the /v1 listings and the console's pages. Keyset pages on
the time-ordered ids, so a page costs the same at the millionth row as at the first."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from app.delivery.repository import attempts, deliveries, redrive_jobs
from app.errors import NotFound
from app.models import Attempt, Delivery, RedriveJob
from app.states import DeliveryState


async def list_deliveries(
    session: AsyncSession,
    tenant_id: str,
    *,
    limit: int,
    before_id: str | None = None,
    state: DeliveryState | None = None,
    endpoint_id: str | None = None,
    event_type: str | None = None,
    event_id: str | None = None,
) -> list[Delivery]:
    """Newest first, at most ``limit``."""
    return await deliveries.list_page(
        session,
        tenant_id,
        limit=limit,
        before_id=before_id,
        state=state,
        endpoint_id=endpoint_id,
        event_type=event_type,
        event_id=event_id,
    )


async def find_delivery(session: AsyncSession, tenant_id: str, delivery_id: str) -> Delivery:
    delivery = await deliveries.get_for_tenant(session, tenant_id, delivery_id)
    if delivery is None:
        raise NotFound(f"delivery {delivery_id} not found")
    return delivery


async def attempts_of(
    session: AsyncSession, delivery_id: str, *, limit: int, after_number: int | None = None
) -> list[Attempt]:
    """The delivery's attempts, oldest first (check the delivery is the caller's first)."""
    return await attempts.list_page(session, delivery_id, limit=limit, after_number=after_number)


async def redrive_job(session: AsyncSession, tenant_id: str, job_id: str) -> RedriveJob:
    job = await redrive_jobs.get_for_tenant(session, tenant_id, job_id)
    if job is None:
        raise NotFound(f"redrive job {job_id} not found")
    return job
