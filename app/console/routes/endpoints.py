"""The endpoints page: how each endpoint fares and what holds it back; enable, disable, rotate
its secret."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.console.routes.deps import FormDep, ViewerDep, render
from app.console.service.endpoint_board import endpoint_board
from app.core.ids import is_id
from app.core.scope import Scope
from app.endpoints.schemas import EndpointUpdate
from app.endpoints.service import endpoints, rotations
from app.flow.service.flow_state import clear_flow_state
from app.runtime.resources import ResourcesDep
from app.streams.service import streams
from app.tenants.service import tenants

router = APIRouter(prefix="/console/endpoints", include_in_schema=False)
PAGE = 50


@router.get("", response_class=HTMLResponse)
async def endpoints_page(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    before: Annotated[str | None, Query()] = None,
    endpoint_id: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    """A page of the tenant's endpoints; with ``endpoint_id``, the one it names."""
    rows = []
    if viewer.viewing is not None:
        async with resources.sessionmaker() as session, session.begin():
            rows = await endpoint_board(
                session,
                resources.redis,
                resources.settings,
                viewer.viewing,
                limit=PAGE + 1,
                before_id=before if before and is_id(before) else None,
                endpoint_id=endpoint_id or None,
            )
    more = len(rows) > PAGE
    return render(
        request,
        resources,
        "endpoints.html",
        viewer,
        nav="endpoints",
        rows=rows[:PAGE],
        overlap_hours=resources.settings.secret_rotation_overlap_hours,
        next_before=rows[PAGE - 1].endpoint.id if more else None,
        one=endpoint_id,
    )


@router.get("/{endpoint_id}/streams", response_class=HTMLResponse)
async def streams_page(
    request: Request,
    resources: ResourcesDep,
    viewer: ViewerDep,
    endpoint_id: str,
    halted: Annotated[bool, Query()] = False,
    after: Annotated[str | None, Query(max_length=255)] = None,
) -> HTMLResponse:
    """An ordered endpoint's streams with work or halted: each one's head, depth and halt."""
    async with resources.sessionmaker() as session, session.begin():
        endpoint = await endpoints.get_endpoint(session, Scope(viewer.chosen_tenant()), endpoint_id)
        rows = await streams.page(
            session, endpoint.id, after=after, halted_only=halted, limit=PAGE + 1
        )
    more = len(rows) > PAGE
    return render(
        request,
        resources,
        "streams.html",
        viewer,
        nav="endpoints",
        endpoint=endpoint,
        rows=rows[:PAGE],
        halted=halted,
        next_after=(rows[PAGE - 1].ordering_key or "") if more else None,
    )


@router.post("/{endpoint_id}/enabled")
async def set_enabled(
    resources: ResourcesDep, viewer: ViewerDep, form: FormDep, endpoint_id: str
) -> RedirectResponse:
    tenant_id, enable = viewer.chosen_tenant(), form.get("enabled") == "true"
    async with resources.sessionmaker() as session, session.begin():
        await endpoints.update_endpoint(
            session,
            Scope(tenant_id),
            endpoint_id,
            EndpointUpdate(enabled=enable),
            resources.settings.destination_allowlist,
            resources.keys,
            by=viewer.actor,
        )
    if enable:  # as PATCH /v1/endpoints does: no leftover pause or probe holds it back
        await clear_flow_state(
            resources.redis, endpoint_id, tenant_id=tenant_id, region=resources.settings.region
        )
    return RedirectResponse("/console/endpoints", status_code=303)


@router.post("/{endpoint_id}/test", response_class=HTMLResponse)
async def send_test_event(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, endpoint_id: str
) -> HTMLResponse:
    """A signed test event through the endpoint's whole path, as POST /v1/endpoints/{id}/test
    sends it; each step shown."""
    tenant_id = viewer.chosen_tenant()
    async with resources.sessionmaker() as session, session.begin():
        endpoint = await endpoints.get_endpoint(session, Scope(tenant_id), endpoint_id)
        source = (await tenants.own(session, tenant_id)).cloudevents_source
    await resources.tester.admit(resources.redis, tenant_id)
    report = await resources.tester.test(endpoint, source)
    return render(
        request, resources, "tested.html", viewer, nav="endpoints", endpoint=endpoint, report=report
    )


@router.post("/{endpoint_id}/rotate", response_class=HTMLResponse)
async def rotate_secret(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, _form: FormDep, endpoint_id: str
) -> HTMLResponse:
    """The new secret is shown once, on this answer (never in a URL): the receiver needs it."""
    async with resources.sessionmaker() as session, session.begin():
        rotated = await rotations.rotate_secret(
            session,
            Scope(viewer.chosen_tenant()),
            endpoint_id,
            resources.settings.secret_rotation_overlap_hours,
            resources.keys,
            by=viewer.actor,
        )
    return render(
        request,
        resources,
        "rotated.html",
        viewer,
        nav="endpoints",
        endpoint=rotated.endpoint,
        secret=rotated.secret,
    )
