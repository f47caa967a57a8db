"""The console's pages: overview, dead letters, one delivery. Each reads through the domain
services, as the tenant in view (an admin's overview is the whole region's), in one read of its
own: from a replica that keeps up, when there is one (app/core/replicas.py)."""

from __future__ import annotations

from typing import Annotated, NamedTuple

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.formatting import when
from app.console.routes.charts import stacked_bars
from app.console.routes.deps import ViewerDep, render
from app.console.routes.filters import FIELDS, dead_filter
from app.core.errors import Forbidden
from app.core.ids import is_id
from app.core.scope import Scope
from app.core.states import DeliveryState
from app.delivery.schemas import DeliveryDetail
from app.delivery.service import event_detail, listings, status_facts, transformed_views
from app.delivery.service.endpoint_stats import MinuteCounts, outcomes_per_minute
from app.delivery.service.event_detail import PayloadHead
from app.delivery.service.payload_views import PREVIEW_BYTES, payload_view
from app.delivery.service.transformed_views import TransformedView
from app.endpoints.service.endpoints import troubled_endpoints
from app.models import Attempt, Delivery, Endpoint, ReconcileRun, Tenant
from app.reconcile.service.reconcile import recent_runs
from app.runtime.resources import ResourcesDep
from app.tenants.service.tenants import list_tenants

router = APIRouter(prefix="/console", include_in_schema=False)
PAGE = 50


class Overview(NamedTuple):
    per_minute: MinuteCounts
    runs: list[ReconcileRun]
    troubled: list[Endpoint]
    tenants: list[Tenant]


class DeliveryPage(NamedTuple):
    detail: DeliveryDetail
    attempts: list[Attempt]
    sent: PayloadHead
    sent_as: TransformedView | None


@router.get("", response_class=HTMLResponse)
async def overview(request: Request, resources: ResourcesDep, viewer: ViewerDep) -> HTMLResponse:
    snapshot = await resources.fleet.snapshot(viewer.tenant_id)

    async def figures(session: AsyncSession) -> Overview:
        return Overview(
            await outcomes_per_minute(session, viewer.tenant_id),
            # Reconcile runs are the whole region's, admin-only as in the API.
            await recent_runs(session, limit=5) if viewer.is_admin else [],
            await troubled_endpoints(session, Scope(viewer.viewing), limit=20)
            if viewer.viewing
            else [],
            await list_tenants(session, limit=200) if viewer.tenant_id is None else [],
        )

    per_minute, runs, troubled, tenants = (await resources.reads.run(figures)).value
    return render(
        request,
        resources,
        "overview.html",
        viewer,
        nav="overview",
        snapshot=snapshot,
        chart=stacked_bars(per_minute),
        runs=runs,
        stale_after=resources.settings.reconcile_stale_seconds,
        troubled=troubled,
        tenants=tenants,
    )


@router.get("/dead", response_class=HTMLResponse)
async def dead_letters(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    before: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    shown = {k: request.query_params.get(k, "") for k in FIELDS}
    wanted = dead_filter(shown)
    rows = []
    if (tenant_id := viewer.viewing) is not None:
        served = await resources.reads.run(
            lambda session: listings.list_deliveries(
                session,
                Scope(tenant_id),
                limit=PAGE + 1,
                before_id=before if before and is_id(before) else None,
                state=DeliveryState.DEAD,
                endpoint_id=wanted.endpoint_id,
                event_type=wanted.event_type,
                finished_after=wanted.dead_after,
                finished_before=wanted.dead_before,
            )
        )
        rows = served.value
    more = len(rows) > PAGE
    return render(
        request,
        resources,
        "dead.html",
        viewer,
        nav="dead",
        rows=rows[:PAGE],
        next_before=rows[PAGE - 1].id if more else None,
        shown=shown,
        filtered=any(shown.values()),
    )


@router.get("/deliveries/{delivery_id}", response_class=HTMLResponse)
async def delivery(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, delivery_id: str
) -> HTMLResponse:
    if (tenant_id := viewer.viewing) is None:
        return render(request, resources, "pick_tenant.html", viewer, status_code=404)

    async def page(session: AsyncSession) -> DeliveryPage:
        detail = await status_facts.delivery_detail(
            session,
            resources.redis,
            resources.settings,
            Scope(tenant_id),
            delivery_id,
            write_time=when,  # the why's times read as the page's others do
        )
        sent = await event_detail.payload_head(
            session,
            tenant_id,
            detail.event_id,
            most=PREVIEW_BYTES,
            expires_at=detail.payload_expires_at,
        )
        sent_as = await transformed_views.transformed_view(
            session,
            tenant_id,
            detail.id,
            detail.endpoint_id,
            detail.event_type,
            sent.whole,
            max_body_bytes=resources.settings.max_payload_bytes,
        )
        attempts = await listings.attempts_of(session, delivery_id, limit=100)
        return DeliveryPage(detail, attempts, sent, sent_as)

    detail, attempts, sent, sent_as = (await resources.reads.run(page)).value
    return render(
        request,
        resources,
        "delivery.html",
        viewer,
        d=detail,
        attempts=attempts,
        payload=payload_view(sent),
        preview_bytes=PREVIEW_BYTES,
        sent_as=sent_as,
    )


@router.get("/deliveries/{delivery_id}/payload", response_class=HTMLResponse)
async def delivery_payload(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, delivery_id: str
) -> HTMLResponse:
    """All of a payload the delivery page shows only the start of (asked for, never live)."""
    if (tenant_id := viewer.viewing) is None:
        return render(request, resources, "pick_tenant.html", viewer, status_code=404)

    async def whole(session: AsyncSession) -> tuple[Delivery, PayloadHead]:
        delivery = await listings.find_delivery(session, Scope(tenant_id), delivery_id)
        return delivery, await event_detail.payload_head(
            session,
            tenant_id,
            delivery.event_id,
            most=None,
            expires_at=delivery.payload_expires_at,
        )

    delivery, sent = (await resources.reads.run(whole)).value
    return render(
        request,
        resources,
        "payload.html",
        viewer,
        d=delivery,
        payload=payload_view(sent),
    )


@router.get("/search", response_class=HTMLResponse)
async def search(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    q: Annotated[str, Query(max_length=300)] = "",
) -> HTMLResponse:
    found = None
    if q.strip():
        async with resources.sessionmaker() as session, session.begin():
            found = await listings.search(
                session, viewer.viewing or "", q, every_tenant=viewer.tenant_id is None
            )
    return render(request, resources, "search.html", viewer, nav="search", q=q, found=found)


@router.get("/reconcile", response_class=HTMLResponse)
async def reconcile_history(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    before: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    if not viewer.is_admin:
        raise Forbidden("reconcile runs are the whole region's: sign in with an admin key")
    served = await resources.reads.run(
        lambda session: recent_runs(
            session, limit=PAGE + 1, before_id=before if before and is_id(before) else None
        )
    )
    runs = served.value
    more = len(runs) > PAGE
    return render(
        request,
        resources,
        "reconcile.html",
        viewer,
        nav="reconcile",
        runs=runs[:PAGE],
        next_before=runs[PAGE - 1].id if more else None,
    )
