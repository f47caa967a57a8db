"""The console's catalogue: a tenant's event types listed, one added, one changed -- with the
API's own models, so a schema, an example and a name are held to the same rules and refused
in the same words; JSON a person typed that is not JSON is said so, where it was typed."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from app.catalogue.schemas import EventTypeCreate, EventTypeUpdate
from app.catalogue.service import event_types
from app.console.routes.deps import FormDep, ViewerDep, render
from app.console.service.form_reading import Unreadable, read_json, validated
from app.console.service.sessions import Viewer
from app.core.errors import HeraldError, NotFound
from app.core.fields import EVENT_TYPE_RULE
from app.runtime.resources import Resources, ResourcesDep

router = APIRouter(prefix="/console/event-types", include_in_schema=False)
PAGE = 200
_JSON_FIELDS = ("schema", "example")


def _fields(form: dict[str, str], names: tuple[str, ...]) -> dict[str, Any]:
    """The form's fields as the API's body would carry them: an empty box is null, and the
    JSON boxes are parsed (a mistake said for the box it is in)."""
    fields: dict[str, Any] = {}
    for name in names:
        text = form.get(name, "").strip()
        if name not in _JSON_FIELDS or not text:
            fields[name] = text or None
            continue
        fields[name] = read_json(name, text)
    return fields


async def _page(
    request: Request,
    resources: Resources,
    viewer: Viewer,
    *,
    error: str | None = None,
    editing: str | None = None,
    typed: dict[str, str] | None = None,
) -> HTMLResponse:
    rows = []
    if viewer.viewing is not None:
        async with resources.sessionmaker() as session, session.begin():
            rows = await event_types.list_types(session, viewer.viewing, limit=PAGE, after=None)
    return render(
        request,
        resources,
        "event_types.html",
        viewer,
        status_code=422 if error else 200,
        nav="event-types",
        rows=rows,
        error=error,
        editing=editing,
        typed=typed or {},
        as_text=lambda value: "" if value is None else json.dumps(value, indent=2),
    )


@router.get("", response_class=HTMLResponse)
async def event_types_page(
    request: Request, resources: ResourcesDep, viewer: ViewerDep
) -> HTMLResponse:
    return await _page(request, resources, viewer)


@router.post("", response_class=HTMLResponse, response_model=None)
async def add_event_type(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, form: FormDep
) -> HTMLResponse | RedirectResponse:
    tenant_id = viewer.chosen_tenant()
    try:
        fields = _fields(form, ("name", "description", "schema", "example"))
        spec = validated(EventTypeCreate, fields)
        async with resources.sessionmaker() as session, session.begin():
            await event_types.create_type(
                session, tenant_id, spec, resources.payload_schemas, by=viewer.actor
            )
    except Unreadable as refused:
        return await _page(request, resources, viewer, error=str(refused), typed=form)
    except HeraldError as exc:
        return await _page(request, resources, viewer, error=exc.detail, typed=form)
    return RedirectResponse("/console/event-types", status_code=303)


@router.post("/{name:path}", response_class=HTMLResponse, response_model=None)
async def change_event_type(
    request: Request, resources: ResourcesDep, viewer: ViewerDep, form: FormDep, name: str
) -> HTMLResponse | RedirectResponse:
    tenant_id = viewer.chosen_tenant()
    if not EVENT_TYPE_RULE.matches(name):
        raise NotFound("no such event type: the path does not hold an event type's name")
    try:
        change = validated(EventTypeUpdate, _fields(form, ("description", "schema", "example")))
        async with resources.sessionmaker() as session, session.begin():
            await event_types.update_type(
                session, tenant_id, name, change, resources.payload_schemas, by=viewer.actor
            )
    except Unreadable as refused:
        return await _page(request, resources, viewer, error=str(refused), editing=name, typed=form)
    except HeraldError as exc:
        if exc.status == 404:
            raise
        return await _page(request, resources, viewer, error=exc.detail, editing=name, typed=form)
    return RedirectResponse("/console/event-types", status_code=303)
