from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from app.core.ids import is_id, new_id
from app.models import Tenant


async def insert_tenant(session: AsyncSession, name: str) -> Tenant | None:
    """Create a tenant; None when the name is taken."""
    row = (
        await session.execute(
            pg_insert(Tenant)
            .values(id=new_id("ten"), name=name)
            .on_conflict_do_nothing(index_elements=[Tenant.name])
            .returning(Tenant)
        )
    ).scalar_one_or_none()
    return row


async def find_by_name(session: AsyncSession, name: str) -> Tenant | None:
    return (await session.execute(select(Tenant).where(Tenant.name == name))).scalar_one_or_none()


async def get_or_create(session: AsyncSession, name: str) -> Tenant:
    tenant = await find_by_name(session, name)
    if tenant is not None:
        return tenant
    return (
        await session.execute(insert(Tenant).values(id=new_id("ten"), name=name).returning(Tenant))
    ).scalar_one()


async def get(session: AsyncSession, tenant_id: str) -> Tenant | None:
    return await session.get(Tenant, tenant_id) if is_id(tenant_id) else None


async def list_page(session: AsyncSession, *, limit: int, before_id: str | None) -> list[Tenant]:
    """Newest first, keyset-paginated on the time-ordered id."""
    query = select(Tenant)
    if before_id is not None:
        query = query.where(Tenant.id < before_id)
    return list((await session.execute(query.order_by(Tenant.id.desc()).limit(limit))).scalars())


async def locked(session: AsyncSession, tenant_id: str) -> Tenant | None:
    """The tenant's row, locked until the transaction ends: what counts against its limits is
    made one at a time. FOR NO KEY UPDATE: the foreign-key checks of the tenant's accepts take
    KEY SHARE on this row, which this must neither wait for nor block."""
    query = select(Tenant).where(Tenant.id == tenant_id).with_for_update(key_share=True)
    return (await session.execute(query)).scalar_one_or_none() if is_id(tenant_id) else None


async def set_values(
    session: AsyncSession, tenant_id: str, values: Mapping[str, object]
) -> Tenant | None:
    """Columns of the tenant's row set, in one statement (None: the default); the row, or
    None."""
    if not is_id(tenant_id):
        return None
    if not values:
        return await get(session, tenant_id)
    statement = update(Tenant).where(Tenant.id == tenant_id).values(**values).returning(Tenant)
    return (await session.execute(statement)).scalar_one_or_none()
