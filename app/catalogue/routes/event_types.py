"""The event-type catalogue over HTTP: a tenant's own types, each with an optional schema."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from app.api.deps import ActorDep, ReadScopeDep, SessionDep, TenantDep
from app.api.pagination import Cursor, Limit, Page, decode_cursor, page_of
from app.api.problems import problem_responses
from app.catalogue.schemas import EventTypeCreate, EventTypeOut, EventTypeUpdate
from app.catalogue.service import event_types
from app.core.errors import Conflict, Forbidden, NotFound, Unauthorized, UnsupportedMediaType
from app.core.fields import EVENT_TYPE_RULE
from app.runtime.resources import ResourcesDep

router = APIRouter(prefix="/v1/event-types", tags=["event types"])
_AUTH = (Unauthorized, Forbidden)


async def _name(
    # `path`: a type's name may hold a slash (billing/invoice.paid).
    name: Annotated[str, Path(description="The event type's name.")],
) -> str:
    if not EVENT_TYPE_RULE.matches(name):
        raise NotFound("no such event type: the path does not hold an event type's name")
    return name


NamePath = Annotated[str, Depends(_name)]


@router.post(
    "",
    status_code=201,
    response_model=EventTypeOut,
    responses=problem_responses(*_AUTH, Conflict, UnsupportedMediaType),
    summary="Add an event type to your catalogue, with an optional JSON Schema for its payloads",
)
async def create_event_type(
    body: EventTypeCreate,
    tenant_id: TenantDep,
    by: ActorDep,
    session: SessionDep,
    resources: ResourcesDep,
    response: Response,
) -> EventTypeOut:
    async with session.begin():
        created = await event_types.create_type(
            session, tenant_id, body, resources.payload_schemas, by=by
        )
    response.headers["Location"] = f"/v1/event-types/{created.name}"
    return EventTypeOut.model_validate(created)


@router.get(
    "",
    response_model=Page[EventTypeOut],
    responses=problem_responses(*_AUTH),
    summary="Your event types, by name",
)
async def list_event_types(
    scope: ReadScopeDep, session: SessionDep, limit: Limit = 50, cursor: Cursor = None
) -> Page[EventTypeOut]:
    after = decode_cursor(cursor, EVENT_TYPE_RULE.matches)
    async with session.begin():
        rows = await event_types.list_types(session, scope.tenant_id, limit=limit + 1, after=after)
    return page_of(rows, limit, EventTypeOut.model_validate, lambda item: item.name)


@router.get(
    "/{name:path}",
    response_model=EventTypeOut,
    responses=problem_responses(*_AUTH, NotFound),
    summary="One event type, with its schema",
)
async def get_event_type(scope: ReadScopeDep, name: NamePath, session: SessionDep) -> EventTypeOut:
    async with session.begin():
        return EventTypeOut.model_validate(
            await event_types.get_type(session, scope.tenant_id, name)
        )


@router.patch(
    "/{name:path}",
    response_model=EventTypeOut,
    responses=problem_responses(*_AUTH, NotFound, UnsupportedMediaType),
    summary="Change an event type's description or schema (a new schema counts a version)",
)
async def update_event_type(
    body: EventTypeUpdate,
    tenant_id: TenantDep,
    by: ActorDep,
    name: NamePath,
    session: SessionDep,
    resources: ResourcesDep,
) -> EventTypeOut:
    async with session.begin():
        updated = await event_types.update_type(
            session, tenant_id, name, body, resources.payload_schemas, by=by
        )
    return EventTypeOut.model_validate(updated)
