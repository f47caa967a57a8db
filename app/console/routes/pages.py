"""The console's pages: overview, dead letters, one delivery. Each reads through the domain
services, as the tenant in view (an admin's overview is the whole region's)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.api.deps import ResourcesDep
from app.console.routes.deps import ViewerDep, render
from app.delivery.service import browse, explain
from app.endpoints.service.endpoints import troubled_endpoints
from app.ids import is_id
from app.reconcile.service.reconcile import recent_runs
from app.states import DeliveryState
from app.tenants.service.tenants import list_tenants

router = APIRouter(prefix="/console", include_in_schema=False)
PAGE = 50


@router.get("", response_class=HTMLResponse)
async def overview(request: Request, resources: ResourcesDep, viewer: ViewerDep) -> HTMLResponse:
    snapshot = await resources.fleet.snapshot(viewer.tenant_id)
    async with resources.sessionmaker() as session, session.begin():
        runs = await recent_runs(session, limit=5)
        troubled = (
            await troubled_endpoints(session, viewer.viewing, limit=20) if viewer.viewing else []
        )
        tenants = await list_tenants(session, limit=200) if viewer.tenant_id is None else []
    return render(
        request,
        resources,
        "overview.html",
        viewer,
        nav="overview",
        snapshot=snapshot,
        runs=runs,
        troubled=troubled,
        tenants=tenants,
    )


@router.get("/dead", response_class=HTMLResponse)
async def dead_letters(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    endpoint_id: Annotated[str | None, Query()] = None,
    event_type: Annotated[str | None, Query()] = None,
    before: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    rows = []
    if viewer.viewing is not None:
        async with resources.sessionmaker() as session, session.begin():
            rows = await browse.list_deliveries(
                session,
                viewer.viewing,
                limit=PAGE + 1,
                before_id=before if before and is_id(before) else None,
                state=DeliveryState.DEAD,
                endpoint_id=endpoint_id or None,
                event_type=event_type or None,
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
        endpoint_id=endpoint_id or "",
        event_type=event_type or "",
    )


@router.get("/deliveries/{delivery_id}", response_class=HTMLResponse)
async def delivery(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, delivery_id: str
) -> HTMLResponse:
    if viewer.viewing is None:
        return render(request, resources, "pick_tenant.html", viewer, status_code=404)
    async with resources.sessionmaker() as session, session.begin():
        detail = await explain.delivery_detail(
            session, resources.redis, resources.settings, viewer.viewing, delivery_id
        )
        attempts = await browse.attempts_of(session, delivery_id, limit=100)
    return render(request, resources, "delivery.html", viewer, d=detail, attempts=attempts)
