"""A customer's test events: a type picked from the catalogue, sent as a delivery kept in its
log (its attempts, a replay); and the connection check, sent at once and kept nowhere."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError

from app.api.formatting import when
from app.api.paths import EndpointIdPath
from app.core.errors import Unprocessable
from app.delivery.schemas import TestEventRequest
from app.delivery.service import test_events
from app.endpoints.service import endpoints
from app.portal.routes.deps import VisitorDep, fragment
from app.portal.service import views
from app.portal.service.sessions import Visitor
from app.runtime.resources import ResourcesDep
from app.tenants.service import tenants

router = APIRouter(prefix="/portal/api", include_in_schema=False)


async def _form(
    request: Request,
    resources: ResourcesDep,
    visitor: Visitor,
    endpoint_id: str,
    chosen: str = test_events.TEST_EVENT_TYPE,
    error: str | None = None,
) -> HTMLResponse:
    async with resources.sessionmaker() as session, session.begin():
        view = await views.endpoint_view(session, visitor, endpoint_id, when)
        types = await views.catalogue(session, visitor)
    return fragment(
        request,
        "test_event.html",
        visitor,
        status_code=200 if error is None else 422,
        endpoint=view.endpoint,
        types=types,
        chosen=chosen,
        error=error,
        default_type=test_events.TEST_EVENT_TYPE,
    )


@router.get("/endpoints/{endpoint_id}/test-events", response_class=HTMLResponse)
async def test_event_form(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    return await _form(request, resources, visitor, endpoint_id)


@router.post("/endpoints/{endpoint_id}/test-events", response_class=HTMLResponse)
async def send_test_event(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    """Counted against the customer's own minute of tests, and the tenant's accept rate."""
    views.require(visitor, "manage_endpoints")
    chosen = str((await request.form()).get("event_type") or test_events.TEST_EVENT_TYPE)
    scope = visitor.scope
    try:
        wanted = TestEventRequest(event_type=chosen)
    except ValidationError:
        return await _form(request, resources, visitor, endpoint_id, chosen, "Pick an event type.")
    assert scope.customer_id is not None  # a portal session is always a customer's
    await resources.tester.admit(
        resources.redis, scope.tenant_id, "test events", customer=scope.customer_id
    )
    await resources.accept_rates.admit(scope.tenant_id)
    await resources.partitions.ready()
    try:
        async with resources.sessionmaker() as session, session.begin():
            accepted = await test_events.accept_test_event(
                session,
                resources.settings,
                scope,
                endpoint_id,
                wanted,
                resources.payload_schemas,
            )
    except Unprocessable as exc:
        return await _form(request, resources, visitor, endpoint_id, chosen, exc.detail)
    resources.publisher.submit(accepted.publications)  # after the commit, as every accept's
    async with resources.sessionmaker() as session, session.begin():
        view = await views.delivery_view(
            session,
            visitor,
            accepted.deliveries[0].id,
            when,
            max_body_bytes=resources.settings.max_payload_bytes,
        )
    return fragment(request, "delivery.html", visitor, view=view, tested=True)


@router.post("/endpoints/{endpoint_id}/test", response_class=HTMLResponse)
async def check_connection(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    async with resources.sessionmaker() as session, session.begin():
        endpoint = await endpoints.get_endpoint(session, visitor.scope, endpoint_id)
        source = (await tenants.own(session, visitor.scope.tenant_id)).cloudevents_source
    scope = visitor.scope
    assert scope.customer_id is not None
    # Counted per customer: one customer's tests never use up another's minute.
    await resources.tester.admit(resources.redis, scope.tenant_id, customer=scope.customer_id)
    report = await resources.tester.test(
        endpoint, source, customer=scope.customer_id
    )  # no transaction across the send
    return fragment(request, "tested.html", visitor, endpoint=endpoint, report=report)
