"""Reading deliveries page by page: the /v1 listings and the console's pages. Keyset pages on
the time-ordered ids, so a page costs the same at the millionth row as at the first."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from app.core.errors import NotFound
from app.core.scope import Scope
from app.core.states import DeliveryState
from app.delivery.repository import attempts, deliveries, events, idempotency_keys, redrive_jobs
from app.endpoints.service import endpoints
from app.models import Attempt, Delivery, RedriveJob


async def list_deliveries(
    session: AsyncSession,
    scope: Scope,
    *,
    limit: int,
    before_id: str | None = None,
    state: DeliveryState | None = None,
    endpoint_id: str | None = None,
    event_type: str | None = None,
    event_id: str | None = None,
    finished_after: datetime | None = None,
    finished_before: datetime | None = None,
) -> list[Delivery]:
    """Newest first, at most ``limit``: the scope's -- a customer's, those to its endpoints."""
    if endpoint_id is not None and not await endpoints.in_scope(session, scope, endpoint_id):
        # Not the scope's: none of its deliveries go there, and the listing must not walk
        # another tenant's (or customer's) rows to find that out.
        return []
    return await deliveries.list_page(
        session,
        scope.tenant_id,
        limit=limit,
        before_id=before_id,
        state=state,
        endpoint_id=endpoint_id,
        to_endpoints=None if scope.customer_id is None else endpoints.ids_in_scope(scope),
        event_type=event_type,
        event_id=event_id,
        finished_after=finished_after,
        finished_before=finished_before,
    )


async def find_delivery(session: AsyncSession, scope: Scope, delivery_id: str) -> Delivery:
    """The scope's delivery: the tenant's, and -- for a customer -- to one of its endpoints
    (deliveries carry no customer: their endpoint says whose they are)."""
    delivery = await deliveries.get_for_tenant(session, scope.tenant_id, delivery_id)
    if delivery is None or (
        scope.customer_id is not None
        and not await endpoints.in_scope(session, scope, delivery.endpoint_id)
    ):
        raise NotFound(f"delivery {delivery_id} not found")
    return delivery


async def attempts_of(
    session: AsyncSession, delivery_id: str, *, limit: int, after_number: int | None = None
) -> list[Attempt]:
    """The delivery's attempts, oldest first (check the delivery is the caller's first)."""
    return await attempts.list_page(session, delivery_id, limit=limit, after_number=after_number)


async def attempts_page(
    session: AsyncSession, scope: Scope, delivery_id: str, *, limit: int, after_number: int | None
) -> list[Attempt]:
    """The attempts of a delivery in ``scope``, oldest first; NotFound when it is not there."""
    await find_delivery(session, scope, delivery_id)
    return await attempts_of(session, delivery_id, limit=limit, after_number=after_number)


async def redrive_job(session: AsyncSession, tenant_id: str, job_id: str) -> RedriveJob:
    job = await redrive_jobs.get_for_tenant(session, tenant_id, job_id)
    if job is None:
        raise NotFound(f"redrive job {job_id} not found")
    return job


@dataclass(frozen=True)
class Found:
    """What a search found: the deliveries, and in words what the query matched."""

    matched: str
    deliveries: list[Delivery] = field(default_factory=list)
    # The query names another tenant's delivery or event (only looked for on an admin's behalf).
    elsewhere: str | None = None


async def search(
    session: AsyncSession, tenant_id: str, query: str, *, every_tenant: bool = False
) -> Found:
    """A delivery id, an event id (its deliveries) or an idempotency key (what it accepted)."""
    query = query.strip()
    if query.startswith("dlv_"):
        delivery = await deliveries.get_for_tenant(session, tenant_id, query)
        if delivery is not None:
            return Found("delivery id", [delivery])
        owner = await deliveries.owner_of(session, query) if every_tenant else None
        return Found("delivery id", elsewhere=owner)
    if query.startswith("evt_"):
        found = await deliveries.list_for_event(session, tenant_id, query)
        if found:
            return Found("event id", found)
        owner = await events.owner_of(session, query) if every_tenant else None
        return Found("event id", elsewhere=owner)
    resource = await idempotency_keys.resource_of(session, tenant_id, query) if query else None
    if resource is None:
        return Found("idempotency key")
    if resource.startswith("dlv_"):
        delivery = await deliveries.get_for_tenant(session, tenant_id, resource)
        return Found("idempotency key", [delivery] if delivery else [])
    return Found("idempotency key", await deliveries.list_for_event(session, tenant_id, resource))


async def owner_of_delivery(session: AsyncSession, delivery_id: str) -> str | None:
    """The tenant a delivery belongs to, whoever's it is: for an operator's command line."""
    return await deliveries.owner_of(session, delivery_id)
