"""The console's endpoint forms: make an endpoint (its secret shown once, on the answer) and
change one, with every option the API has, through the API's own models, services and the
receiver's consent where the webhook handshake asks for it -- so the console refuses what the
API refuses, in the same words."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.console.routes.deps import FormDep, ViewerDep, render
from app.console.service.endpoint_forms import CHOICES, CREDENTIALS, changed_fields, fields_of
from app.console.service.form_reading import Unreadable, validated
from app.console.service.sessions import Viewer
from app.core.errors import HeraldError
from app.core.scope import Scope
from app.endpoints.schemas import EndpointCreate, EndpointUpdate
from app.endpoints.service import endpoints, handshakes
from app.endpoints.service.audit_views import endpoint_view
from app.flow.service.flow_state import clear_flow_state, wake_destination
from app.models import Endpoint
from app.runtime.resources import Resources, ResourcesDep
from app.tenants.service import limits

router = APIRouter(prefix="/console/endpoints", include_in_schema=False)


def _scope(viewer: Viewer) -> Scope:
    return Scope(viewer.chosen_tenant())


def _shown(endpoint: Endpoint) -> dict[str, str]:
    """The form's boxes as the endpoint has them now (its credentials named, never shown)."""
    view = endpoint_view(endpoint)
    return {
        **{name: view[name] or "" for name in ("url", "description", "filter", "transformation")},
        **{name: view[name] for name in CHOICES},
        "event_types": " ".join(view["event_types"] or []),
        "rate_limit_per_second": _number(view["rate_limit_per_second"]),
        "max_in_flight": _number(view["max_in_flight"]),
        "enabled": "on" if view["enabled"] else "",
        "webhook_handshake": "on" if view["webhook_handshake"] else "",
        "final_statuses": ", ".join(str(status) for status in view["final_statuses"]),
        "headers": json.dumps(view["headers"]) if view["headers"] else "",
        **{f"scheme_{s}": "on" for s in view["signature_schemes"]},
        "seen": _version(endpoint),
    }


def _version(endpoint: Endpoint) -> str:
    """Which state of the endpoint a form was filled from: a save from an older one would put
    back what changed since (an endpoint disabled meanwhile, enabled again)."""
    return endpoint.updated_at.isoformat()


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _form(
    request: Request,
    resources: Resources,
    viewer: Viewer,
    *,
    shown: dict[str, str],
    endpoint: Endpoint | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    return render(
        request,
        resources,
        "endpoint_form.html",
        viewer,
        status_code=status_code,
        nav="endpoints",
        shown=shown,
        endpoint=endpoint,
        error=error,
        choices=CHOICES,
    )


@router.get("/new", response_class=HTMLResponse)
async def new_endpoint_form(
    request: Request, resources: ResourcesDep, viewer: ViewerDep
) -> HTMLResponse:
    _scope(viewer)
    defaults = {"enabled": "on", "scheme_v1": "on", **{name: c[0] for name, c in CHOICES.items()}}
    defaults["on_dead"] = "halt"
    return _form(request, resources, viewer, shown=defaults)


@router.post("/new", response_class=HTMLResponse)
async def create_endpoint(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, form: FormDep
) -> HTMLResponse:
    scope = _scope(viewer)
    try:
        spec = validated(EndpointCreate, fields_of(form, creating=True))
        consent = await resources.receiver_consent(scope, handshakes.for_create(spec))
        async with resources.sessionmaker() as session, session.begin():
            created = await endpoints.create_endpoint(
                session,
                scope,
                spec,
                resources.settings.destination_allowlist,
                resources.keys,
                consent,
                defaults=limits.Limits.defaults(resources.settings),
                by=viewer.actor,
            )
    except (Unreadable, HeraldError) as refused:
        return _refused(request, resources, viewer, form, refused)
    return render(
        request,
        resources,
        "endpoint_created.html",
        viewer,
        nav="endpoints",
        endpoint=created.endpoint,
        secret=created.secret,
    )


@router.get("/{endpoint_id}/edit", response_class=HTMLResponse)
async def edit_endpoint_form(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, endpoint_id: str
) -> HTMLResponse:
    async with resources.sessionmaker() as session, session.begin():
        endpoint = await endpoints.get_endpoint(session, _scope(viewer), endpoint_id)
    return _form(request, resources, viewer, shown=_shown(endpoint), endpoint=endpoint)


@router.post("/{endpoint_id}/edit", response_class=HTMLResponse, response_model=None)
async def change_endpoint(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, form: FormDep, endpoint_id: str
) -> HTMLResponse | RedirectResponse:
    scope = _scope(viewer)
    async with resources.sessionmaker() as session, session.begin():
        current = await endpoints.get_endpoint(session, scope, endpoint_id)
        now = endpoint_view(current)
    if form.get("seen") != _version(current):
        said = (
            "the endpoint changed since this form was opened (by someone, or by Herald: a "
            "pause, a 410): here it is as it is now; make your change again"
        )
        shown = _shown(current)
        return _form(
            request, resources, viewer, shown=shown, endpoint=current, error=said, status_code=409
        )
    try:
        fields = changed_fields(fields_of(form, creating=False), now)
        change = validated(EndpointUpdate, fields)
        async with resources.sessionmaker() as session, session.begin():
            target = await handshakes.for_update(
                session, scope, endpoint_id, change, resources.keys
            )
        consent = await resources.receiver_consent(scope, target)
        async with resources.sessionmaker() as session, session.begin():
            await endpoints.update_endpoint(
                session,
                scope,
                endpoint_id,
                change,
                resources.settings.destination_allowlist,
                resources.keys,
                consent,
                by=viewer.actor,
            )
    except (Unreadable, HeraldError) as refused:
        return _refused(request, resources, viewer, form, refused, current)
    await _after_change(resources, scope, endpoint_id, change)
    return RedirectResponse(f"/console/endpoints?endpoint_id={endpoint_id}", status_code=303)


async def _after_change(
    resources: Resources, scope: Scope, endpoint_id: str, change: EndpointUpdate
) -> None:
    """As PATCH /v1/endpoints does: a re-enabled endpoint keeps no leftover pause or probe,
    and what an ordering change made due is looked at now."""
    where: dict[str, Any] = {"tenant_id": scope.tenant_id, "region": resources.settings.region}
    if change.enabled:
        await clear_flow_state(resources.redis, endpoint_id, **where)
    elif change.ordering is not None or change.on_dead is not None:
        await wake_destination(resources.redis, endpoint_id, **where)


def _refused(
    request: Request,
    resources: Resources,
    viewer: Viewer,
    form: dict[str, str],
    refused: Exception,
    endpoint: Endpoint | None = None,
) -> HTMLResponse:
    if isinstance(refused, HeraldError) and refused.status == 404:
        raise refused
    said = refused.detail if isinstance(refused, HeraldError) else str(refused)
    status = refused.status if isinstance(refused, HeraldError) else 422
    # What was typed stays to be mended -- but a credential is never written into a page.
    typed = {name: value for name, value in form.items() if name not in CREDENTIALS}
    return _form(
        request,
        resources,
        viewer,
        shown=typed,
        endpoint=endpoint,
        error=said or "refused",
        status_code=status,
    )
