from __future__ import annotations

from collections.abc import Collection
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.models import EventTypeDef


async def insert_type(
    session: AsyncSession,
    *,
    tenant_id: str,
    name: str,
    description: str | None,
    schema: dict[str, Any] | None,
    example: dict[str, Any] | None,
) -> EventTypeDef | None:
    """A new catalogue entry; None when the tenant already has the name."""
    statement = (
        insert(EventTypeDef)
        .values(
            tenant_id=tenant_id, name=name, description=description, schema=schema, example=example
        )
        .on_conflict_do_nothing(index_elements=[EventTypeDef.tenant_id, EventTypeDef.name])
        .returning(EventTypeDef)
    )
    return (await session.execute(statement)).scalar_one_or_none()


async def get(session: AsyncSession, tenant_id: str, name: str) -> EventTypeDef | None:
    return await session.get(EventTypeDef, (tenant_id, name))


async def get_many(
    session: AsyncSession, tenant_id: str, names: Collection[str]
) -> list[EventTypeDef]:
    query = select(EventTypeDef).where(
        EventTypeDef.tenant_id == tenant_id, EventTypeDef.name.in_(list(names))
    )
    return list((await session.execute(query)).scalars())


async def list_page(
    session: AsyncSession, tenant_id: str, *, limit: int, after_name: str | None
) -> list[EventTypeDef]:
    """In name order, keyset-paginated on the name."""
    query = select(EventTypeDef).where(EventTypeDef.tenant_id == tenant_id)
    if after_name is not None:
        query = query.where(EventTypeDef.name > after_name)
    return list((await session.execute(query.order_by(EventTypeDef.name).limit(limit))).scalars())


async def update_type(
    session: AsyncSession, tenant_id: str, name: str, values: dict[str, Any]
) -> EventTypeDef | None:
    """Change the entry; a change of schema counts a new version."""
    if "schema" in values:
        values = {**values, "version": EventTypeDef.version + 1}
    statement = (
        update(EventTypeDef)
        .where(EventTypeDef.tenant_id == tenant_id, EventTypeDef.name == name)
        .values(**values, updated_at=func.now())
        .returning(EventTypeDef)
        .execution_options(synchronize_session=False, populate_existing=True)
    )
    return (await session.execute(statement)).scalar_one_or_none()
