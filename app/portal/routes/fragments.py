"""The portal's views, each an HTML fragment its script swaps into the page: the customer's
endpoints, one endpoint with its delivery log, one delivery with its attempts, the
catalogue. Ids in a path that the visitor's scope does not hold answer 404."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from app.api.formatting import when
from app.api.paths import DeliveryIdPath, EndpointIdPath
from app.core.errors import Unprocessable
from app.core.ids import looks_like
from app.portal.routes.deps import VisitorDep, fragment
from app.portal.service import views
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/portal/api", include_in_schema=False)


@router.get("/endpoints", response_class=HTMLResponse)
async def endpoint_list(
    request: Request, resources: ResourcesDep, visitor: VisitorDep
) -> HTMLResponse:
    async with resources.sessionmaker() as session, session.begin():
        rows = await views.endpoint_list(session, visitor, when)
    return fragment(request, "endpoints.html", visitor, endpoints=rows)


@router.get("/endpoints/new", response_class=HTMLResponse)
async def new_endpoint(
    request: Request, resources: ResourcesDep, visitor: VisitorDep
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    async with resources.sessionmaker() as session, session.begin():
        types = await views.catalogue(session, visitor)
    return fragment(request, "endpoint_form.html", visitor, types=types, form={}, errors={})


@router.get("/endpoints/{endpoint_id}", response_class=HTMLResponse)
async def endpoint_page(
    request: Request,
    resources: ResourcesDep,
    visitor: VisitorDep,
    endpoint_id: EndpointIdPath,
    before: Annotated[str | None, Query(max_length=40)] = None,
) -> HTMLResponse:
    if before is not None and not looks_like("dlv", before):
        raise Unprocessable("before must be a delivery id this page listed")
    async with resources.sessionmaker() as session, session.begin():
        view = await views.endpoint_view(session, visitor, endpoint_id, when, before_id=before)
    return fragment(request, "endpoint.html", visitor, view=view)


@router.get("/endpoints/{endpoint_id}/edit", response_class=HTMLResponse)
async def edit_endpoint(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    async with resources.sessionmaker() as session, session.begin():
        view = await views.endpoint_view(session, visitor, endpoint_id, when)
        types = await views.catalogue(session, visitor)
    endpoint = view.endpoint
    form = {
        "url": endpoint.url or "",
        "polled": endpoint.url is None,
        "description": endpoint.description or "",
        "filter": endpoint.filter or "",
        "transformation": endpoint.transformation or "",
        "event_types": endpoint.event_types,
        "payload_format": endpoint.payload_format,
        "signature_schemes": endpoint.signature_schemes,
    }
    return fragment(
        request,
        "endpoint_form.html",
        visitor,
        types=types,
        form=form,
        errors={},
        endpoint_id=endpoint.id,
    )


@router.get("/endpoints/{endpoint_id}/delete", response_class=HTMLResponse)
async def confirm_delete(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    """A second step in the page, not a dialog (a framed page's dialogs may be blocked)."""
    views.require(visitor, "manage_endpoints")
    async with resources.sessionmaker() as session, session.begin():
        view = await views.endpoint_view(session, visitor, endpoint_id, when)
    return fragment(request, "confirm_delete.html", visitor, endpoint=view.endpoint)


@router.get("/deliveries/{delivery_id}", response_class=HTMLResponse)
async def delivery_page(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, delivery_id: DeliveryIdPath
) -> HTMLResponse:
    async with resources.sessionmaker() as session, session.begin():
        view = await views.delivery_view(
            session, visitor, delivery_id, when, max_body_bytes=resources.settings.max_payload_bytes
        )
    return fragment(request, "delivery.html", visitor, view=view)


@router.get("/catalogue", response_class=HTMLResponse)
async def catalogue_page(
    request: Request, resources: ResourcesDep, visitor: VisitorDep
) -> HTMLResponse:
    async with resources.sessionmaker() as session, session.begin():
        types = await views.catalogue(session, visitor)
    return fragment(request, "catalogue.html", visitor, types=types)
