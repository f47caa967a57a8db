"""The console's pages: overview, dead letters, one delivery. Each reads through the domain
services, as the tenant in view (an admin's overview is the whole region's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.api.formatting import when
from app.console.routes.charts import stacked_bars
from app.console.routes.deps import ViewerDep, render
from app.console.routes.filters import FIELDS, dead_filter
from app.console.routes.payloads import PREVIEW_BYTES, payload_view
from app.core.errors import Forbidden
from app.core.ids import is_id
from app.core.scope import Scope
from app.core.states import DeliveryState
from app.delivery.service import event_detail, listings, status_facts
from app.delivery.service.endpoint_stats import outcomes_per_minute
from app.endpoints.service.endpoints import troubled_endpoints
from app.reconcile.service.reconcile import recent_runs
from app.runtime.resources import ResourcesDep
from app.tenants.service.tenants import list_tenants

router = APIRouter(prefix="/console", include_in_schema=False)
PAGE = 50


@router.get("", response_class=HTMLResponse)
async def overview(request: Request, resources: ResourcesDep, viewer: ViewerDep) -> HTMLResponse:
    snapshot = await resources.fleet.snapshot(viewer.tenant_id)
    async with resources.sessionmaker() as session, session.begin():
        per_minute = await outcomes_per_minute(session, viewer.tenant_id)
        # Reconcile runs are the whole region's, admin-only as in the API.
        runs = await recent_runs(session, limit=5) if viewer.is_admin else []
        troubled = (
            await troubled_endpoints(session, Scope(viewer.viewing), limit=20)
            if viewer.viewing
            else []
        )
        tenants = await list_tenants(session, limit=200) if viewer.tenant_id is None else []
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
    if viewer.viewing is not None:
        async with resources.sessionmaker() as session, session.begin():
            rows = await listings.list_deliveries(
                session,
                viewer.viewing,
                limit=PAGE + 1,
                before_id=before if before and is_id(before) else None,
                state=DeliveryState.DEAD,
                endpoint_id=wanted.endpoint_id,
                event_type=wanted.event_type,
                finished_after=wanted.dead_after,
                finished_before=wanted.dead_before,
            )
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
    if viewer.viewing is None:
        return render(request, resources, "pick_tenant.html", viewer, status_code=404)
    async with resources.sessionmaker() as session, session.begin():
        detail = await status_facts.delivery_detail(
            session,
            resources.redis,
            resources.settings,
            viewer.viewing,
            delivery_id,
            write_time=when,  # the why's times read as the page's others do
        )
        attempts = await listings.attempts_of(session, delivery_id, limit=100)
        sent = await event_detail.payload_head(
            session, viewer.viewing, detail.event_id, most=PREVIEW_BYTES
        )
    return render(
        request,
        resources,
        "delivery.html",
        viewer,
        d=detail,
        attempts=attempts,
        payload=payload_view(sent.head, sent.size),
        preview_bytes=PREVIEW_BYTES,
    )


@router.get("/deliveries/{delivery_id}/payload", response_class=HTMLResponse)
async def delivery_payload(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, delivery_id: str
) -> HTMLResponse:
    """All of a payload the delivery page shows only the start of (asked for, never live)."""
    if viewer.viewing is None:
        return render(request, resources, "pick_tenant.html", viewer, status_code=404)
    async with resources.sessionmaker() as session, session.begin():
        delivery = await listings.find_delivery(session, Scope(viewer.viewing), delivery_id)
        sent = await event_detail.payload_head(
            session, viewer.viewing, delivery.event_id, most=None
        )
    return render(
        request,
        resources,
        "payload.html",
        viewer,
        d=delivery,
        payload=payload_view(sent.head, sent.size),
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
    async with resources.sessionmaker() as session, session.begin():
        runs = await recent_runs(
            session, limit=PAGE + 1, before_id=before if before and is_id(before) else None
        )
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
