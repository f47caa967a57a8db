"""What a customer does in its portal, each a form its script posts with the session's bearer
header, answered with the fragment to show next. A form that does not hold is answered with
itself again, each mistake beside its field (422)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError
from sqlalchemy.ext.asyncio import AsyncSession

from app.api.formatting import when
from app.api.paths import DeliveryIdPath, EndpointIdPath
from app.core.errors import Conflict, DestinationRefused, Unprocessable
from app.delivery.schemas import RedriveFilter
from app.delivery.service import redrive
from app.endpoints.schemas import EndpointCreate, EndpointUpdate
from app.endpoints.service import credentials, endpoints, rotations
from app.flow.service.flow_state import clear_flow_state
from app.portal.routes.deps import VisitorDep, fragment
from app.portal.service import views
from app.portal.service.sessions import Visitor
from app.runtime.resources import ResourcesDep
from app.tenants.service import limits

router = APIRouter(prefix="/portal/api", include_in_schema=False)


async def _fields(request: Request, visitor: Visitor) -> dict[str, Any]:
    """The form as an endpoint spec: blanks are left out, event types and signatures are the
    boxes ticked, the payload format the one chosen. A transformation is read only from a
    session that may set one (the form shows its box to no other)."""
    form = await request.form()
    fields: dict[str, Any] = {
        name: value.strip()
        for name in ("url", "description", "filter", *_transforming(visitor))
        if isinstance(value := form.get(name), str) and value.strip()
    }
    ticked = [t for t in form.getlist("event_types") if isinstance(t, str)]
    if form.get("subscribe") == "chosen":
        fields["event_types"] = ticked
    if isinstance(chosen := form.get("payload_format"), str) and chosen:
        fields["payload_format"] = chosen
    if form.get("signatures_shown"):  # the boxes were on the form: none ticked is an answer
        fields["signature_schemes"] = [s for s in form.getlist("signature_schemes") if s]
    return fields


def _transforming(visitor: Visitor) -> tuple[str, ...]:
    return ("transformation",) if visitor.may("transform_endpoints") else ()


def _said(exc: Unprocessable) -> dict[str, str]:
    """A refusal beside the box it names: the URL's ("url: ..."), else the transformation's."""
    detail = exc.detail or ""
    return {"url" if detail.startswith("url:") else "transformation": detail}


def _errors(exc: ValidationError) -> dict[str, str]:
    return {str(error["loc"][0]): error["msg"] for error in exc.errors() if error["loc"]}


async def _form_again(
    request: Request,
    resources: ResourcesDep,
    visitor: Visitor,
    form: dict[str, Any],
    errors: dict[str, str],
    endpoint_id: str | None = None,
) -> HTMLResponse:
    async with resources.sessionmaker() as session, session.begin():
        types = await views.catalogue(session, visitor)
    return fragment(
        request,
        "endpoint_form.html",
        visitor,
        status_code=422,
        types=types,
        form=form,
        errors=errors,
        endpoint_id=endpoint_id,
    )


@router.post("/endpoints", response_class=HTMLResponse)
async def create_endpoint(
    request: Request, resources: ResourcesDep, visitor: VisitorDep
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    fields = await _fields(request, visitor)
    try:
        spec = EndpointCreate.model_validate(fields)
        async with resources.sessionmaker() as session, session.begin():
            created = await endpoints.create_endpoint(
                session,
                visitor.scope,
                spec,
                resources.settings.destination_allowlist,
                resources.keys,
                defaults=limits.Limits.defaults(resources.settings),
                by=visitor.actor,
            )
            return await _endpoint(request, session, visitor, created.endpoint.id, 201)
    except ValidationError as exc:
        return await _form_again(request, resources, visitor, fields, _errors(exc))
    except DestinationRefused as exc:
        return await _form_again(request, resources, visitor, fields, {"url": exc.detail or ""})
    except Unprocessable as exc:  # no URL, or a transformation on a CloudEvents endpoint
        return await _form_again(request, resources, visitor, fields, _said(exc))
    except Conflict:  # the endpoints the customer may have, all made
        said = {"form": "You have as many endpoints as you may: delete one to add another."}
        return await _form_again(request, resources, visitor, fields, said)


@router.post("/endpoints/{endpoint_id}", response_class=HTMLResponse)
async def change_endpoint(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    fields = await _fields(request, visitor)
    cleared = dict.fromkeys(("description", "filter", "event_types", *_transforming(visitor)))
    change = {**cleared, **fields}
    try:
        spec = EndpointUpdate.model_validate(change)
        async with resources.sessionmaker() as session, session.begin():
            await endpoints.update_endpoint(
                session,
                visitor.scope,
                endpoint_id,
                spec,
                resources.settings.destination_allowlist,
                resources.keys,
                by=visitor.actor,
            )
            return await _endpoint(request, session, visitor, endpoint_id)
    except ValidationError as exc:
        return await _form_again(request, resources, visitor, fields, _errors(exc), endpoint_id)
    except Unprocessable as exc:  # a transformation on a CloudEvents endpoint
        return await _form_again(request, resources, visitor, fields, _said(exc), endpoint_id)
    except (DestinationRefused, Conflict) as exc:
        # A refused URL, or one whose receiver must consent first (the webhook handshake,
        # which the tenant's API runs): said beside the URL.
        said = {"url": exc.detail or ""}
        return await _form_again(request, resources, visitor, fields, said, endpoint_id)


@router.post("/endpoints/{endpoint_id}/enabled", response_class=HTMLResponse)
async def enable_endpoint(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    enable = (await request.form()).get("enabled") == "true"
    async with resources.sessionmaker() as session, session.begin():
        await endpoints.update_endpoint(
            session,
            visitor.scope,
            endpoint_id,
            EndpointUpdate(enabled=enable),
            resources.settings.destination_allowlist,
            resources.keys,
            by=visitor.actor,
        )
        shown = await _endpoint(request, session, visitor, endpoint_id)
    if enable:  # as the API does: no leftover pause or probe holds it back
        await clear_flow_state(
            resources.redis,
            endpoint_id,
            tenant_id=visitor.scope.tenant_id,
            region=resources.settings.region,
        )
    return shown


@router.post("/endpoints/{endpoint_id}/delete", response_class=HTMLResponse)
async def delete_endpoint(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    async with resources.sessionmaker() as session, session.begin():
        await endpoints.delete_endpoint(session, visitor.scope, endpoint_id, by=visitor.actor)
        rows = await views.endpoint_list(session, visitor, when)
    return fragment(request, "endpoints.html", visitor, endpoints=rows, deleted=endpoint_id)


@router.post("/endpoints/{endpoint_id}/secret", response_class=HTMLResponse)
async def show_secret(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    """Shown on demand, in the answer to a post (never in a URL, never cached)."""
    views.require(visitor, "manage_endpoints")
    async with resources.sessionmaker() as session, session.begin():
        secret = await credentials.signing_secret(
            session, visitor.scope, endpoint_id, resources.keys
        )
    return fragment(request, "secret.html", visitor, endpoint_id=endpoint_id, secret=secret)


@router.post("/endpoints/{endpoint_id}/secret/rotate", response_class=HTMLResponse)
async def rotate_secret(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    views.require(visitor, "manage_endpoints")
    async with resources.sessionmaker() as session, session.begin():
        rotated = await rotations.rotate_secret(
            session,
            visitor.scope,
            endpoint_id,
            resources.settings.secret_rotation_overlap_hours,
            resources.keys,
            by=visitor.actor,
        )
    return fragment(
        request,
        "secret.html",
        visitor,
        endpoint_id=endpoint_id,
        secret=rotated.secret,
        previous_until=rotated.endpoint.previous_secret_expires_at,
    )


@router.post("/endpoints/{endpoint_id}/replay", response_class=HTMLResponse)
async def replay_since(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, endpoint_id: EndpointIdPath
) -> HTMLResponse:
    """Everything the endpoint was sent since a time (dead or delivered), sent again."""
    views.require(visitor, "replay")
    since = _since((await request.form()).get("since"))
    async with resources.sessionmaker() as session, session.begin():
        endpoint = await endpoints.get_endpoint(session, visitor.scope, endpoint_id)
    # Each re-sends what the endpoint was sent: bounded like test events, per customer.
    await resources.tester.admit(
        resources.redis, visitor.scope.tenant_id, "portal replays", customer=_customer(visitor)
    )
    wanted = RedriveFilter(
        endpoint_id=endpoint.id, states=["dead", "succeeded"], dead_after=since
    ).model_dump(mode="json")
    job = await redrive.start_bulk_redrive(
        resources.sessionmaker,
        resources.queue,
        resources.settings,
        tenant_id=visitor.scope.tenant_id,
        wanted=wanted,
        customer_id=_customer(visitor),
    )
    return fragment(request, "replaying.html", visitor, endpoint=endpoint, job=job, since=since)


def _customer(visitor: Visitor) -> str:
    assert visitor.scope.customer_id is not None  # a portal session is always a customer's
    return visitor.scope.customer_id


def _since(value: object) -> datetime:
    """A datetime-local field's value, read as UTC (the form says so): one that names an
    offset of its own is not what the form sends, and is refused rather than misread."""
    try:
        given = datetime.fromisoformat(str(value))
    except ValueError:
        given = None
    if given is None or given.tzinfo is not None:
        raise Unprocessable("give the time to replay from, as a date and time (UTC)")
    since = given.replace(tzinfo=UTC)
    if since > datetime.now(UTC):
        raise Unprocessable("the time to replay from is in the future: nothing was sent since")
    return since


@router.post("/deliveries/{delivery_id}/replay", response_class=HTMLResponse)
async def replay_one(
    request: Request, resources: ResourcesDep, visitor: VisitorDep, delivery_id: DeliveryIdPath
) -> HTMLResponse:
    views.require(visitor, "replay")
    async with resources.sessionmaker() as session, session.begin():
        _, publications = await redrive.redrive_one(
            session, visitor.scope, delivery_id, region=resources.settings.region, replay=True
        )
        view = await views.delivery_view(
            session, visitor, delivery_id, when, max_body_bytes=resources.settings.max_payload_bytes
        )
    resources.publisher.submit(publications)  # after the commit, as every accept's
    return fragment(request, "delivery.html", visitor, view=view, replayed=True)


async def _endpoint(
    request: Request,
    session: AsyncSession,
    visitor: Visitor,
    endpoint_id: str,
    status_code: int = 200,
) -> HTMLResponse:
    """The endpoint's page as the change's own transaction leaves it."""
    view = await views.endpoint_view(session, visitor, endpoint_id, when)
    return fragment(request, "endpoint.html", visitor, view=view, status_code=status_code)
