"""The catalogue's entries: create, read, change. A change of schema takes effect in this
process at once and in every other within the schema cache's time (payload_schemas.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.audit.service import audit
from app.catalogue.repository import event_types
from app.catalogue.schemas import EventTypeCreate, EventTypeUpdate
from app.catalogue.service.payload_schemas import PayloadSchemas, example_refusal
from app.core.actors import Actor
from app.core.errors import Conflict, NotFound
from app.models import EventTypeDef


def _view(row: EventTypeDef) -> dict[str, Any]:
    """What the audit trail keeps of an entry."""
    return {"description": row.description, "schema": row.schema, "example": row.example}


async def create_type(
    session: AsyncSession,
    tenant_id: str,
    spec: EventTypeCreate,
    payload_schemas: PayloadSchemas,
    *,
    by: Actor,
) -> EventTypeDef:
    created = await event_types.insert_type(
        session,
        tenant_id=tenant_id,
        name=spec.name,
        description=spec.description,
        schema=spec.schema_,
        example=spec.example,
    )
    if created is None:
        raise Conflict(f"event type {spec.name} is already in the catalogue; PATCH it to change it")
    if (refused := example_refusal(created)) is not None:
        raise refused
    payload_schemas.forget(tenant_id, spec.name)
    await audit.record(
        session, tenant_id, by, "event_type.created", spec.name, after=_view(created)
    )
    return created


async def get_type(session: AsyncSession, tenant_id: str, name: str) -> EventTypeDef:
    found = await event_types.get(session, tenant_id, name)
    if found is None:
        raise NotFound(f"event type {name} is not in the catalogue")
    return found


async def find_type(session: AsyncSession, tenant_id: str, name: str) -> EventTypeDef | None:
    return await event_types.get(session, tenant_id, name)


def example_of(row: EventTypeDef) -> dict[str, Any] | None:
    """The entry's example payload: its own, else the first of its schema's ``examples`` (the
    JSON Schema keyword, where schemas written before examples had a field keep them)."""
    if row.example is not None:
        return row.example
    examples = row.schema.get("examples") if isinstance(row.schema, dict) else None
    first = examples[0] if isinstance(examples, list) and examples else None
    return first if isinstance(first, dict) else None


async def list_types(
    session: AsyncSession, tenant_id: str, *, limit: int, after: str | None
) -> list[EventTypeDef]:
    return await event_types.list_page(session, tenant_id, limit=limit, after_name=after)


async def update_type(
    session: AsyncSession,
    tenant_id: str,
    name: str,
    change: EventTypeUpdate,
    payload_schemas: PayloadSchemas,
    *,
    by: Actor,
) -> EventTypeDef:
    values = change.model_dump(exclude_unset=True, by_alias=True)
    current = await get_type(session, tenant_id, name)
    if not values:
        return current
    was = _view(current)  # before the update refreshes the same row
    updated = await event_types.update_type(session, tenant_id, name, values)
    if updated is None:
        raise NotFound(f"event type {name} is not in the catalogue")
    # Checked as changed, in the change's transaction: a new schema its example no longer
    # matches is refused, as is a new example the schema refuses.
    if (refused := example_refusal(updated)) is not None:
        raise refused
    payload_schemas.forget(tenant_id, name)
    await audit.record(
        session, tenant_id, by, "event_type.updated", name, before=was, after=_view(updated)
    )
    return updated
